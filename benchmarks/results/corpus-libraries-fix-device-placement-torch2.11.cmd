# 2026-12-03 14:14-14:32 UTC (run.py's record dates 14:14-14:31), the `run` tool's nvidia-h200 machine, its 16 CPU
# cores (no GPU use), torch 2.11.0, Python 3.12.3; the image's torchvision 0.26.0, torchaudio 2.11.0, torch_geometric
# 2.8.0.post1, transformers 5.17.0, einops 0.8.2, matplotlib 3.11.2; carried wheels: timm 1.0.31 (over the image's
# 1.0.29), diffusers 0.42.1, vit-pytorch 1.26.14, x-transformers 2.31.10, einx 0.4.3, frozendict, loguru,
# torch-einops-utils, importlib_metadata, lazy-importer, zipp 4.1.2 (the image's 4.1.0 is older), libcst 1.9.0,
# typer 0.28.0 (over the image's 0.27.2), rich 15.0.0 and the CLI's deps. torchmend and benchmarks/corpus: a
# `git archive` of HEAD 1ad9e86 (after session 10's compile placement in both modes, 629f0e9; records say torchmend
# null: no .git in the snapshot). fix enabled, aot_eager, 3 steps, 600 s a stage. The same recipe as
# corpus-libraries-fix-device-torch2.11.cmd (before placement), with these differences: the priority list, --timeout
# 600 (was 400), DEADLINE 1140 / --stop-after 1030, and zoo2-watch.sh's final call bounded by its own start (CAP).
# Here (the dev machine):
rm -rf .whl/zoo2-src && mkdir -p .whl/zoo2-src
git -C /work/main archive HEAD torchmend benchmarks/corpus pyproject.toml | tar -x -C /work/main/.whl/zoo2-src
# (.whl/libraries, .whl/libraries-deps: the wheels of the earlier sweep, from `ZOO=libraries bash benchmarks/corpus/wheels.sh`)
# .whl/zoo2-priority.txt: models-libraries.txt by priority: the 7 torchvision detection models, the other 27 that
# broke or recompiled in corpus-libraries-scan-torch2.14.1.jsonl or corpus-libraries-fix-device-torch2.11.jsonl
# (either mode), the 17 scanned in neither, the other 87; laid out for the 16 interleaved shards (model k to shard
# k mod 16): in priority order, each model to the shard with the least estimated work so far (the earlier records'
# seconds per run), so that no breaking model waits behind a detection model. Its header says so; each line names
# its class and shard.
# Device call 1 (carry .whl/libraries .whl/libraries-deps .whl/zoo2-src .whl/zoo2-priority.txt .whl/zoo2-start.sh
# .whl/zoo2-watch.sh; 571.5 s): bash .whl/zoo2-start.sh 570, which copies the snapshot to /tmp/zoo2-src and starts,
# detached (setsid), in it:
OUT=/tmp/zoo2-out NAME=zoo2 JOBS=16 WHEELS="$R/.whl/libraries" DEPS="$R/.whl/libraries-deps" \
  IMPORTS="torch libcst typer rich" DEADLINE=1140 bash benchmarks/corpus/device.sh \
  --zoo libraries --label libraries --models /tmp/zoo2-priority.txt --modes train,eval --use user,vendored \
  --timeout 600 --steps 3 --stop-after 1030
# i.e. run.py --zoo libraries --venv /tmp/corpus-env --torchmend /tmp/zoo2-src --work /tmp/corpus-work --jobs 16
#   --results /tmp/zoo2-out/zoo2.jsonl (16 shards, 1 thread each; set-up 11 s), then watched it to 570 s.
# Device call 2, right after (511.7 s): STOP=1100 CAP=500 FINAL=1 bash /tmp/zoo2-watch.sh 1130: asked the sweep to
# stop 1082 s after the start (CAP: 500 s into the call), device.sh killed it 1082 s in, made its report and the
# logs' tarball; all came back. Then give_back: 1187 s of device time in all (machine start included).
# 400 records of the 552 planned (138 models x 2 modes x 2 uses): 105 models ran, 92 of them in all four (mode, use).
# All 34 breaking models and all 17 never scanned ran, all four each, but two: Mask R-CNN and Keypoint R-CNN have no
# eval/vendored record (their runs were in progress at the kill: Mask R-CNN's fix had written 4 changes, its after-scan
# was killed; Keypoint R-CNN's first scan had not ended: stage logs are written when a stage ends). Of the 87 clean-before models 54 ran (43 in all four); 33 did not
# start (--stop-after): ControlNetModel, EdgeCNN, deit_tiny_patch16_224, SD3Transformer2DModel, convnext_tiny,
# test_vit_relpos, x_transformers:vit, r3d_18, shufflenet_v2_x0_5, continuous, cct.CCT, xcit_nano_12_p16_224,
# swin_tiny_patch4_window7_224, FluxTransformer2DModel, AutoencoderKL, mobilevit_xxs, MLP, xtransformer, max_vit.MaxViT,
# encoder, LINKX, test_coatnet, AutoencoderTiny, decoder_shift_tokens, squeezenet1_1, PMLP,
# simple_vit_with_patch_dropout.SimpleViT, autoregressive, swin_t, vit_tiny_patch16_224, levit.LeViT, PriorTransformer,
# nest.NesT. No timeout, torchmend failure, driver or compile error; 294 clean, 106 ok.
# The report beside this file is made here, from the records (no .png: no matplotlib here):
python3 .whl/zoo2-src/benchmarks/corpus/report.py benchmarks/results/corpus-libraries-fix-device-placement-torch2.11.jsonl

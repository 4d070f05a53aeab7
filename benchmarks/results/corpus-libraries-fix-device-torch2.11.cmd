# 2026-12-03 08:37-08:55 UTC (run.py's record dates), the `run` tool's nvidia-h200 machine, its 16 CPU cores (no GPU
# use), torch 2.11.0, Python 3.12.3; the image's torchvision 0.26.0, torchaudio 2.11.0, torch_geometric 2.8.0.post1,
# transformers 5.17.0, einops 0.8.2; carried wheels: timm 1.0.31 (over the image's 1.0.29), diffusers 0.42.1,
# vit-pytorch 1.26.14, x-transformers 2.31.10, einx 0.4.3, frozendict, loguru, torch-einops-utils, importlib_metadata,
# lazy-importer, zipp 4.1.2 (the image's 4.1.0 is older), libcst 1.9.0, typer 0.28.0, rich 15.0.0 and the CLI's deps.
# torchmend and benchmarks/corpus: a `git archive` of HEAD 8f2f5f3 (records say torchmend null: no .git in the
# snapshot), device.sh replaced by the working tree's (WHEELS/DEPS/IMPORTS/DEADLINE). fix enabled, aot_eager.
# Here (the dev machine):
git -C /work/main archive HEAD torchmend benchmarks/corpus pyproject.toml | tar -x -C /work/main/.whl/zoo2-src
cp benchmarks/corpus/device.sh .whl/zoo2-src/benchmarks/corpus/device.sh
ZOO=libraries bash benchmarks/corpus/wheels.sh         # .whl/libraries, .whl/libraries-deps
# .whl/zoo2-priority.txt: models-libraries.txt reordered: the 27 that broke or recompiled in
# corpus-libraries-scan-torch2.14.1.jsonl (either mode), the 7 torchaudio, the 44 not yet scanned, the other 60.
# Device call 1 (carry .whl/libraries .whl/libraries-deps .whl/zoo2-src .whl/zoo2-priority.txt .whl/zoo2-start.sh
# .whl/zoo2-watch.sh): .whl/zoo2-start.sh copies the snapshot to /tmp/zoo2-src and starts, detached (setsid), in it:
OUT=/tmp/zoo2-out NAME=zoo2 JOBS=16 WHEELS="$R/.whl/libraries" DEPS="$R/.whl/libraries-deps" \
  IMPORTS="torch libcst typer rich" DEADLINE=1300 bash benchmarks/corpus/device.sh \
  --zoo libraries --label libraries --models /tmp/zoo2-priority.txt --modes train,eval --use user,vendored \
  --timeout 400 --steps 3 --stop-after 1030
# i.e. run.py --zoo libraries --venv /tmp/corpus-env --torchmend /tmp/zoo2-src --work /tmp/corpus-work --jobs 16
#   --results /tmp/zoo2-out/zoo2.jsonl (16 shards, 1 thread each), then watched it (call 1, 575 s).
# Device call 2: bash /tmp/zoo2-watch.sh ... (561 s), which copied back zoo2.jsonl and zoo2.log as they stood
# ~1140 s into the sweep: 279 records of the 552 planned (138 models x 2 modes x 2 uses).
# The machine then went back (more than its 30 s idle passed before call 3: an interruption on this side), ending
# the sweep ~1140 s in. By then 10 shards had stopped at --stop-after and 3 (6, 7, 15) had finished their slices;
# 3 had a run in progress that is not in the copy (shard 3 fasterrcnn_mobilenet_v3_large_fpn train vendored,
# shard 5 ssdlite320_mobilenet_v3_large train user, shard 11 GATv2Conv eval vendored). device.sh's own report and
# the stage logs' tarball were never made (the logs are lost); call 3 found a fresh machine and it was given back.
# The report beside this file is made here, from the records (no .png: no matplotlib here):
python3 .whl/zoo2-src/benchmarks/corpus/report.py .whl/zoo2-results/zoo2.jsonl

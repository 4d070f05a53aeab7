# 2026-11-27, the `run` tool's nvidia-h100-x4 (64 CPU cores; torch 2.11.0 there, CPU only), timeout_s 540, carry
# [".whl/corpus"] (the wheels of benchmarks/corpus/wheels.sh and this branch's benchmarks/corpus/, copied into an
# ignored folder of the checkout the tool sends); torchmend a5fbbf8 (the same torchmend/ as this branch). 368 s.
cp -r .whl/corpus/tree/corpus/. benchmarks/corpus/ && JOBS=64 NAME=zoo-baseline-torch2.11-transformers5.23.0 \
  WHEELS=.whl/corpus/wheels bash benchmarks/corpus/device.sh --models benchmarks/corpus/models-zoo.txt --label zoo \
  --modes train,eval --use vendored --scan-only --shuffle 0 --timeout 100 --stop-after 330
# --stop-after 330 ended it at 478 of the 644 runs (251 models in train mode, 227 of them in eval mode too): the
# list is shuffled (seed 0), so the runs done are a random sample of the zoo. Resume with the same command and
# the .jsonl in place (run.py skips what is there).

# 2026-11-27, the `run` tool's nvidia-h100-x4 (64 CPU cores; torch 2.11.0 there, CPU only), timeout_s 580, carry
# [".whl"] (the wheels of benchmarks/corpus/wheels.sh); torchmend at main after the merges of issues 26 and 27's
# branches (f070dbb's torchmend/). 400 s. The 8 models issue 26 keeps for evaluation: never run while developing.
JOBS=32 NAME=eval26-torch2.11 bash benchmarks/corpus/device.sh --models benchmarks/corpus/models-eval-26.txt \
  --evaluation --modes train,eval --use vendored,user --timeout 160 --stop-after 420

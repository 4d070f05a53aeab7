# 2026-11-27, the `run` tool's nvidia-h100-x1 (16 CPU cores; torch 2.11.0 there, CPU only), timeout_s 300, carry
# [".whl/corpus"] (see zoo-baseline-torch2.11-transformers5.23.0.cmd); 120 s. The test call of device.sh.
cp -r .whl/corpus/tree/corpus/. benchmarks/corpus/ && JOBS=16 NAME=devtest WHEELS=.whl/corpus/wheels \
  bash benchmarks/corpus/device.sh --models benchmarks/corpus/models-dev.txt --modes train,eval --use vendored,user \
  --scan-only --timeout 120 --stop-after 150

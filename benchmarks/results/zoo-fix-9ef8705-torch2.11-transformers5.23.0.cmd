# 2026-11-27 10:00, the `run` tool's nvidia-h100-x4 (64 CPU cores; torch 2.11.0 there, CPU only), timeout_s 580,
# carry [".whl"] (benchmarks/corpus/wheels.sh's wheels); torchmend 9ef8705. 418 s. The models: every zoo model that
# broke or recompiled in zoo-baseline-torch2.11 (13) and every zoo model that baseline did not reach (95), less the
# 4 that timed out there: 107 models (.whl/zoo-sweep.txt, made from the baseline's .jsonl and models-zoo.txt).
JOBS=64 NAME=zoo-fix-9ef8705-torch2.11-transformers5.23.0 bash benchmarks/corpus/device.sh \
  --models .whl/zoo-sweep.txt --label zoo --modes train,eval --use vendored --shuffle 0 --timeout 150 --stop-after 400
# --stop-after 400 left 2 of the 214 runs unstarted.

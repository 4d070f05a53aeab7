# 2026-11-27 18:23-18:32, the H100x4 host's 64 CPU cores (torch 2.11.0), torchmend at 55c4db3's working tree (the
# report's "be565be+dirty": see eval26-55c4db3-random-stream-torch2.11-*.cmd), the zoo's 18 breaking models (none kept
# for evaluation), train and eval, end user (library in site-packages), in the same call as the evaluation models (.whl/final6.sh):
CORPUS_VENV=/tmp/env2 CORPUS_WORK=/tmp/work2 JOBS=20 NAME=zoo-user OUT=/tmp/res/user timeout 560 bash benchmarks/corpus/device.sh \
    --models .whl/zoo-breaking.txt --label zoo --modes train,eval --use user --shuffle 0 --timeout 300 --stop-after 400
# 32 of 36 runs reached; 4 fixes hit the stage limit (after = before). .whl/zoo-breaking.txt is
# benchmarks/corpus/models-zoo.txt's models that broke in zoo-baseline-torch2.11-*.

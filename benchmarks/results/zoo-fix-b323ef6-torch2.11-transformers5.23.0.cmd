# 2026-11-27 13:43-13:50, the GPU machine's CPU cores (1 x H200 host, 16 cores, torch 2.11.0+cu130, Python 3.12), torchmend
# b323ef6, beside the eval-26 run (8 + 8 shards), through .whl/final2.sh (ignored): the zoo models that broke or
# recompiled in earlier sweeps (.whl/zoo-breaking.txt: 18 models, as in zoo-fix-a12ac11-*), train and eval, vendored.
# The whole call was cut at 420 s: 24 of the 36 runs finished (the rest are missing, not counted); two fixes timed out
# at the 150 s stage limit (SEWDModel and SwitchTransformersModel, train: after = before).
JOBS=8 NAME=zoo-fix OUT=/tmp/res/zoo timeout 420 bash benchmarks/corpus/device.sh --models .whl/zoo-breaking.txt --label zoo \
    --modes train,eval --use vendored --shuffle 0 --timeout 150 --stop-after 300

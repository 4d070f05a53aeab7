# 2026-11-27 16:25-16:34, the GPU machine's CPU cores (1 x H200 host, 16 cores, torch 2.11.0+cu130), torchmend e21cc58:
# the 18 zoo models that break (.whl/zoo-breaking.txt), train and eval, vendored. 30 of the 36 runs finished within the
# call (stop-after 240 s); SEWDModel and SwitchTransformersModel train timed out at the 300 s stage limit (after = before).
JOBS=16 NAME=zoo-fix OUT=/tmp/res/zoo timeout 540 bash benchmarks/corpus/device.sh --models .whl/zoo-breaking.txt --label zoo \
    --modes train,eval --use vendored --shuffle 0 --timeout 300 --stop-after 240

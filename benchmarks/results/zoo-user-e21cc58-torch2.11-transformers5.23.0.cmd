# 2026-11-27 16:15-16:24, the GPU machine's CPU cores (1 x H200 host, 16 cores, torch 2.11.0+cu130), torchmend e21cc58,
# beside the eval-26 run, through .whl/final3.sh: the 18 zoo models that break (.whl/zoo-breaking.txt, as in
# zoo-fix-*), train and eval, END USER (transformers left in site-packages: fixes only in the script). 23 of the 36
# runs finished within the call's 540 s (stop-after 330 s; two stage timeouts at 250 s).
JOBS=7 NAME=zoo-user OUT=/tmp/res/zoo timeout 540 bash benchmarks/corpus/device.sh --models .whl/zoo-breaking.txt --label zoo \
    --modes train,eval --use user --shuffle 0 --timeout 250 --stop-after 330

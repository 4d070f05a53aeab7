# 2026-11-27 16:15-16:24, the GPU machine's CPU cores (1 x H200 host, 16 cores, torch 2.11.0+cu130, Python 3.12), torchmend
# e21cc58, beside the zoo's end-user run (8 + 7 shards), through .whl/final3.sh (ignored). The call was limited to
# 540 s: 25 of the 32 runs finished (4 train runs not started: stop-after 330 s; UniSpeechSat and Wav2Vec2Conformer
# vendored train timed out at the 250 s stage limit: after = before).
CORPUS_VENV=/tmp/env2 CORPUS_WORK=/tmp/work2 JOBS=8 NAME=eval26 OUT=/tmp/res/eval timeout 540 bash benchmarks/corpus/device.sh \
    --models benchmarks/corpus/models-eval-26.txt --label eval-26 --evaluation --allow-random-stream --modes train,eval \
    --use vendored,user --shuffle 0 --timeout 250 --stop-after 330

# 2026-11-27 13:43-13:50, the GPU machine's CPU cores (1 x H200 host, 16 cores, torch 2.11.0+cu130, Python 3.12), torchmend
# b323ef6, beside the zoo sweep (8 + 8 shards), through .whl/final2.sh (ignored): the 8 evaluation models, train and eval,
# vendored and end user, with the opt-in. Stage limit 150 s: on this shared host three vendored train fixes timed out
# (M2M100Model, UniSpeechSatModel, Wav2Vec2ConformerModel: their after = before), so the vendored train figure is a
# lower bound; the torch 2.13 run (eval26-b323ef6-random-stream-torch2.13.0-*) is the issue's measure.
CORPUS_VENV=/tmp/env2 CORPUS_WORK=/tmp/work2 JOBS=8 NAME=eval26 OUT=/tmp/res/eval timeout 420 bash benchmarks/corpus/device.sh \
    --models benchmarks/corpus/models-eval-26.txt --label eval-26 --evaluation --allow-random-stream --modes train,eval \
    --use vendored,user --shuffle 0 --timeout 150 --stop-after 300

# 2026-11-27 18:23-18:32, the H100x4 host's 64 CPU cores (torch 2.11.0, this workplace's device machine), torchmend at
# 55c4db3's working tree (the report says "be565be+dirty": the device copy carries the session's first git metadata
# with the current files), the eight evaluation models, train and eval, vendored and end user, random-stream opt-in,
# beside the two zoo sweeps (zoo-fix-55c4db3-*, zoo-user-55c4db3-*) in one call: .whl/final6.sh, i.e.
CORPUS_VENV=/tmp/env0 CORPUS_WORK=/tmp/work0 JOBS=24 NAME=eval26 OUT=/tmp/res/eval timeout 560 bash benchmarks/corpus/device.sh \
    --models benchmarks/corpus/models-eval-26.txt --label eval-26 --evaluation --allow-random-stream --modes train,eval \
    --use vendored,user --shuffle 0 --timeout 300 --stop-after 400
# Not reached before the call's limit: 8 of 32 runs (most end-user eval runs); 2 vendored train fixes (UniSpeechSat,
# Wav2Vec2Conformer) hit the 300 s stage limit on the shared host, so their after = before. Report made here with
# benchmarks/corpus/report.py.

# 2026-11-27 11:18, the `run` tool's 2 x H200 host (32 CPU cores, torch 2.11.0, CPU only), beside the zoo sweep and a
# GPU job, timeout_s 560, carry [".whl"]; torchmend a12ac11. Stage limit 170 s: M2M100Model, Wav2Vec2ConformerModel
# and UniSpeechSatModel (train, vendored) timed out in fix, so their rows read before = after.
CORPUS_VENV=/tmp/env2 CORPUS_WORK=/tmp/work2 JOBS=14 NAME=eval26-final OUT=$OUT/eval bash benchmarks/corpus/device.sh \
  --models benchmarks/corpus/models-eval-26.txt --label eval-26 --evaluation --allow-random-stream \
  --modes train,eval --use vendored,user --shuffle 0 --timeout 170 --stop-after 330

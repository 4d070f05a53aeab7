# Issue 29's "behaviour stays" check on the corpus development set, 2026-11-27 14:33-14:42, this 2-core CPU machine
# (torch 2.13.0+cpu), the corpus venv: torchmend before the restructuring (ab866ba) and after it (00303d1), each from a
# `git archive` copy, run side by side (one job each). Train mode, vendored. Both: LongformerModel 4 -> 2,
# SwitchTransformersModel 20 -> 0, Wav2Vec2Model 11 -> 6, IBertModel 32 -> 0 (67 -> 8), every verdict "improved".
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend /tmp/dev$S --models benchmarks/corpus/models-dev.txt \
  --modes train --use vendored --jobs 1 --timeout 480 --work /tmp/devwork-$S --results /tmp/dev-$S.jsonl   # S = b, a

# Issue 42's "behaviour stays" check on the corpus development set, 2026-12-02 15:59-16:17, this 2-core CPU machine
# (torch 2.13.0+cpu), the corpus venv: torchmend before issue 42 (9c3f5b8) and after it (2ed3ae7), each from a
# `git archive` copy, run side by side (one job each). Train mode, vendored. Both, model by model: LongformerModel
# 4 -> 2, SwitchTransformersModel 20 -> 18, Wav2Vec2Model 11 -> 6, IBertModel 32 -> 0, every verdict "no measured
# speed change"; the records are equal (findings before and after, proposals, verdicts, reasons, what was written)
# but for times, dates, paths and one function's address in a dynamo message (Wav2Vec2Model's TM105 reason).
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend /tmp/dev$S --models benchmarks/corpus/models-dev.txt \
  --modes train --use vendored --jobs 1 --timeout 480 --work /tmp/devwork-$S --results /tmp/dev-$S.jsonl   # S = b, a

# 2026-11-27 13:43-13:56, this project's 2-core CPU machine (torch 2.13.0+cpu), the corpus venv; torchmend b323ef6
# (main after this session's merges of issue 26's branches: modules built in forward, LayerDrop's flag form), from a
# `git archive` copy, with the opt-in for changes of the random stream. The 8 models issue 26 keeps for evaluation,
# never run while developing; train and eval mode, vendored.
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend /tmp/evalsrc --models benchmarks/corpus/models-eval-26.txt \
  --evaluation --modes train,eval --use vendored --jobs 2 --timeout 900 --allow-random-stream \
  --work /tmp/eval-b323 --results /tmp/eval26-b323-random-stream.jsonl

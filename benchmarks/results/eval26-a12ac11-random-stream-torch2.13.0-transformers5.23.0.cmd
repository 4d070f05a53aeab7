# 2026-11-27 11:27-11:34, this project's 2-core CPU machine (torch 2.13.0+cpu), the corpus venv; torchmend a12ac11
# (main after every merge of this session), with the opt-in for changes of the random stream. The 8 models issue 26
# keeps for evaluation, never run while developing; train and eval mode, vendored.
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend . --models benchmarks/corpus/models-eval-26.txt \
  --evaluation --modes train,eval --use vendored --jobs 2 --timeout 900 --allow-random-stream \
  --work /tmp/eval-final --results benchmarks/results/eval26-a12ac11-random-stream-torch2.13.0-transformers5.23.0.jsonl

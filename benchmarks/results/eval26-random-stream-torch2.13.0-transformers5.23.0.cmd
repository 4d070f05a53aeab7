# 2026-11-27, this project's 2-core CPU machine (torch 2.13.0+cpu), the corpus venv; torchmend at cac5a89 (main after
# every merge of this session), with the opt-in for changes of the random stream (LayerDrop rewrites, verified over 4
# seeds in distribution). The 8 models issue 26 keeps for evaluation: never run while developing.
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend . --models benchmarks/corpus/models-eval-26.txt \
  --evaluation --modes train --use vendored --jobs 2 --timeout 900 --allow-random-stream

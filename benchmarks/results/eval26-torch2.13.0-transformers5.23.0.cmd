# 2026-11-27, this project's 2-core CPU machine (torch 2.13.0+cpu), the corpus venv; torchmend at f070dbb (main after
# the merges of issue 26's branches). The 8 models issue 26 keeps for evaluation: never run while developing.
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend . --models benchmarks/corpus/models-eval-26.txt \
  --evaluation --modes train,eval --use vendored --jobs 2 --timeout 900

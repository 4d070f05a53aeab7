# 2026-11-27, this project's 2-core CPU machine (torch 2.13.0+cpu), the corpus venv: torchmend as it was before issue
# 26's work (a5fbbf8, a worktree at /work/wt/old), driven by the new harness, for the comparison with the results of
# eval26-torch2.13.0-transformers5.23.0 (same models, modes, machine and harness).
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend /work/wt/old --models benchmarks/corpus/models-eval-26.txt \
  --evaluation --modes train,eval --use vendored --jobs 2 --timeout 900

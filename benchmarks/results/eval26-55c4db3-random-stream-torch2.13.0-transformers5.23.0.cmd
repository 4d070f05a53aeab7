# 2026-11-27 18:21-18:32, this 2-core CPU (torch 2.13.0+cpu), torchmend 55c4db3 (issue 26's fifth round: the first call
# run eagerly for one-time state, Finding.entry, the no-change gate), the eight evaluation models, vendored, train and
# eval, with the random-stream opt-in; never run while developing.
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend /work/wt/meas --work /tmp/eval26-m3 \
    --models benchmarks/corpus/models-eval-26.txt --label eval-26 --evaluation --allow-random-stream --modes train,eval \
    --use vendored --jobs 2 --timeout 500 --results /tmp/eval26-m3.jsonl --report
# /work/wt/meas: a git worktree of 55c4db3, so the measured code stayed fixed while main moved on.

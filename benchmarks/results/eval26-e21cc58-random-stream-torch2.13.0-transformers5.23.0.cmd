# 2026-11-27 16:15-16:33, this 2-core CPU (torch 2.13.0+cpu), torchmend e21cc58 (issue 26's fourth round: nested_graph_breaks
# as a verified last resort with a follow-up round, end-user remedies for library breaks), the eight evaluation models,
# vendored, train and eval, with the random-stream opt-in; never run while developing.
python3 benchmarks/corpus/run.py --venv /work/corpus/venv --torchmend . --work /tmp/lead-eval26 \
    --models benchmarks/corpus/models-eval-26.txt --label eval-26 --evaluation --allow-random-stream --modes train,eval \
    --use vendored --jobs 2 --timeout 500 --results /tmp/lead-eval26-213.jsonl --report

# 2026-12-02 20:49 UTC, the 2-core dev machine (no GPU), torchmend 9247c26 (this branch)
python3 benchmarks/corpus/run.py --zoo libraries --venv /work/zoo2-venv --torchmend . --work /tmp/zoo2/work-fix --models vit_pytorch:cait.CaiT,torch_geometric:GCN --modes train --use vendored,user --jobs 1 --timeout 120 --stop-after 600 --results benchmarks/results/corpus-libraries-fix-torch2.14.1.jsonl
# scan -> fix --yes --unsafe -> scan, train mode, both uses; 20:49-20:56 UTC, 366 s. CaiT's fix stage ran past 120 s
# (in its verification, on the shared 2 cores) in both uses: recorded as timeouts.
python3 benchmarks/corpus/report.py benchmarks/results/corpus-libraries-fix-torch2.14.1.jsonl

# 2026-12-02 20:06-20:48 UTC, the 2-core dev machine (shared with another engineer's measurements, no GPU), torch
# 2.14.1 (+cu130 wheel, run on CPU), torchvision 0.29.1, timm 1.0.31, torch_geometric 2.8.1, diffusers 0.42.1,
# vit-pytorch 1.26.14, x-transformers 2.31.10, no torchaudio; torchmend 3a52b57 (torchmend/ as main), this
# branch's benchmarks/corpus (run.py --zoo libraries). Scan only, end-user mode, one run at a time.
python3 benchmarks/corpus/run.py --zoo libraries --venv /work/zoo2-venv --torchmend . --work /tmp/zoo2/work \
  --models benchmarks/corpus/models-libraries.txt --modes train,eval --use user --scan-only --jobs 1 --timeout 120 \
  --stop-after 3000 --results benchmarks/results/corpus-libraries-scan-torch2.14.1.jsonl
# Stopped with SIGTERM at 20:48 (to leave the machine by 21:05) after 188 of the 276 runs: the first 94 models of the
# list in both modes (the list is interleaved by library, so each library is covered). Resume with the same command.
python3 benchmarks/corpus/report.py benchmarks/results/corpus-libraries-scan-torch2.14.1.jsonl

#!/usr/bin/env bash
# The gate on the GPU machine (the `run` tool: torch 2.11 + CUDA, torchvision, torchaudio, torch_geometric, Python
# 3.12, no libcst, no internet). From the repository root there, carrying .whl/gate (benchmarks/gate/wheels.sh):
#
#   bash benchmarks/gate/device.sh                       # every case; call again until it says nothing is missing
#   bash benchmarks/gate/device.sh --only 'tv_*' --repeat 2
#
# It installs the wheels without an index into /tmp/site (on PYTHONPATH, beside the image's torch), checks the
# imports, then runs run.py (this checkout's torchmend, --jobs 4 fixes at once, the timing one run at a time) with
# a deadline that ends it before the tool's 10-minute limit, writing under $OUT: gate.jsonl (the results), gate.md
# (report.py's table), gate.log (run.py's output) and gate-logs.tar.gz (every fix's and run's log).
# Resuming: when $GATE_RESUME (default benchmarks/results/gate-gpu.jsonl) exists in the checkout, it is copied to
# $OUT/gate.jsonl and continued (--resume): copy $OUT/gate.jsonl there after each call, so the next call's
# working tree carries it. Every argument goes to run.py (before a `--`: fix arguments after it).
# Environment: DEADLINE_S (default 540: seconds from this script's start), JOBS (4), NAME (gate), WHEELS (.whl/gate),
# TM_BENCH_DEVICE (the benchmark scenarios' device: cuda where nvidia-smi sees a GPU, else theirs, cpu).
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/gate-out}
name=${NAME:-gate}
wheels=${WHEELS:-.whl/gate}
site=${GATE_SITE:-/tmp/site}
resume=${GATE_RESUME:-benchmarks/results/gate-gpu.jsonl}
deadline=${DEADLINE_S:-540}
jobs=${JOBS:-4}
start=$(date +%s)
mkdir -p "$out"
cd "$here" || exit 2
if [ ! -d "$site/libcst" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$wheels"/*.whl \
    || { echo "no wheels in $wheels: run benchmarks/gate/wheels.sh here and carry $wheels"; exit 2; }
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TMPDIR=/tmp
python3 - <<'PY' || exit 2
import importlib, importlib.metadata as md, sys
need = ("torch", "libcst", "typer", "rich")
missing = []
for mod in ("torch", "torchvision", "torchaudio", "torch_geometric", "libcst", "typer", "rich"):
    try:
        importlib.import_module(mod)
        name = {"torch_geometric": "torch-geometric"}.get(mod, mod)
        print(f"{mod} {md.version(name)}")
    except Exception as e:
        print(f"{mod}: NOT importable ({type(e).__name__}: {e}); its cases will be recorded as failed to run")
        missing.append(mod)
import torch
print("cuda:", torch.cuda.is_available() and torch.cuda.get_device_name(), "| python", sys.version.split()[0])
sys.exit(1 if set(missing) & set(need) else 0)
PY
# A benchmark scenario runs where TM_BENCH_DEVICE says (its default is cpu): on this machine, on the GPU.
if [ -z "${TM_BENCH_DEVICE:-}" ] && command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  export TM_BENCH_DEVICE=cuda
fi
echo "TM_BENCH_DEVICE=${TM_BENCH_DEVICE:-cpu} (the scenarios' device)"
args=()
if [ -f "$resume" ] && [ ! -f "$out/$name.jsonl" ]; then
  cp "$resume" "$out/$name.jsonl"
fi
[ -f "$out/$name.jsonl" ] && args+=(--resume)
left=$(( deadline - ($(date +%s) - start) ))
echo "setup $(( $(date +%s) - start )) s; $(nproc) cores; run.py deadline ${left} s"
python3 benchmarks/gate/run.py --results "$out/$name.jsonl" --logs /tmp/gate-logs --work /tmp/gate-work \
  --jobs "$jobs" --deadline-s "$left" ${args[@]+"${args[@]}"} "$@" > "$out/$name.log" 2>&1
rc=$?
tail -n 25 "$out/$name.log"
python3 benchmarks/gate/report.py "$out/$name.jsonl" --out "$out/$name.md" > /dev/null && echo "report: $out/$name.md"
tar -czf "$out/$name-logs.tar.gz" -C /tmp gate-logs 2>/dev/null
echo "done in $(( $(date +%s) - start )) s, run.py exit $rc (3: cases still missing, call again)"
exit $rc

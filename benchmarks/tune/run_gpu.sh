#!/usr/bin/env bash
# torchmend tune on the three tune benchmarks, on the GPU machine (each under ~3 minutes on an H100 is the aim).
#
#   bash benchmarks/tune/run_gpu.sh                 # all three, one after the other
#   bash benchmarks/tune/run_gpu.sh overhead        # one of: overhead compute varying
#   REPEAT=1 bash benchmarks/tune/run_gpu.sh varying
#   LIMIT=540 bash benchmarks/tune/run_gpu.sh compute    # seconds per benchmark (default 170)
#
# Each benchmark gets LIMIT seconds: then `timeout` sends SIGTERM, and tune writes the report of the runs that
# finished (marked partial), so a slow compile costs a round, not the results. Five settings with cold caches
# (max-autotune's GEMM search in two of them) may not fit two rounds in 170 s: for complete rounds raise LIMIT and
# run the three as separate commands (the device's per-command limit is 10 minutes).
#
# Run from the repository root with torchmend importable (PYTHONPATH=. is enough: tune needs torch, typer and rich,
# not libcst). Reports: benchmarks/results/tune-<name>-<device>.md, the plot beside each (.svg), and the JSON
# (.json) with every run's step times.
set -u
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
REPEAT=${REPEAT:-2}
LIMIT=${LIMIT:-170}
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
DEVICE=$($PYTHON -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(overhead compute varying)
status=0
for name in "${names[@]}"; do
    case $name in
        overhead) steps=300 ;;   # ~1 ms steps: enough for a steady second half
        compute) steps=60 ;;     # tens of ms a step on an H100
        varying) steps=120 ;;    # twenty rounds of the six batch sizes
        *) echo "unknown benchmark: $name (overhead, compute, varying)" >&2; exit 2 ;;
    esac
    out=benchmarks/results/tune-$name-$DEVICE
    start=$(date +%s)
    timeout -s TERM "$LIMIT" $PYTHON -m torchmend tune "benchmarks/tune/$name.py" --steps "$steps" \
        --repeat "$REPEAT" --report "$out.md" --format json > "$out.json" || status=$?
    echo "tune $name: $(( $(date +%s) - start )) s, exit $status" >&2
done
exit $status

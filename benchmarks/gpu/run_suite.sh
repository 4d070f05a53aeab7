#!/usr/bin/env bash
# One device command of the GPU benchmarks (issue 16): resumable, each call ends on its own in under 9 minutes.
#
#   bash benchmarks/gpu/run_suite.sh SLICE [GPUS]
#
# Call it again with the same SLICE until it prints "SLICE ... complete"; results accumulate in
# benchmarks/results/<stem>.jsonl (one line per finished run) and the Markdown/JSON next to it is rebuilt
# from all of it on every call. SLICE:
#   cudagraph          every rewrite under mode="reduce-overhead" + TM201's compile time (cudagraph_check.py)
#   overhead-ro        the suite, overhead regime, mode reduce-overhead   (8 scenarios x 4 variants x 3 repeats)
#   overhead-default   the suite, overhead regime, mode default
#   compute-ro         the suite, compute regime, mode reduce-overhead
#   compute-default    the suite, compute regime, mode default
#   cost               the tool cost: plain run vs scan (script's backend) vs scan --backend aot_eager, peak RSS
#   all                whatever is missing, in the suite's order
#   report             run nothing: rebuild the suite's Markdown/JSON from the results file
# GPUS (default 1): on a machine with several GPUs, that many shards of the slice at once, one per GPU
# (CUDA_VISIBLE_DEVICES), appending to the same results file.
# JOBS=N (environment, default 1): N shards per GPU at once. Their start-up and first compiles overlap, but from the
# end of its second step to its exit each run holds the GPU's step lock (benchmarks/gpu/steplock/sitecustomize.py),
# so the steady half that every steady-step figure comes from runs alone on the GPU; and each shard is pinned to
# its own share of the CPU cores (taskset), so the others' compiles do not slow the Python and kernel launches of
# an overhead-bound step. (The first full pass, 2026-11-24, ran without the pinning: its A/A control showed
# +-21 % in the overhead regime, +-3 % in the compute regime.) The `cost` slice (wall times of whole runs) always
# runs one at a time; `all` with JOBS > 1 runs the variants only.
# Needs: python with torch (+ typer, rich for `scan` in the cost slice); no libcst (the torchmend-fixed scripts
# were made beforehand by benchmarks/gpu/prepare.py and are committed under benchmarks/gpu/fixed/).
set -u
cd "$(dirname "$0")/../.."
SLICE=${1:?usage: run_suite.sh SLICE [GPUS]}
GPUS=${2:-1}
JOBS=${JOBS:-1}
[ "$SLICE" = cost ] || [ "$SLICE" = cudagraph ] && JOBS=1
PY=${PYTHON:-python}
DEVICE=${DEVICE:-cuda}          # cpu: a try-out of this script where there is no GPU (with EXTRA="--backend aot_eager")
OUTDIR=${OUT_DIR:-benchmarks/results}
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
BUDGET=${BUDGET_S:-430}   # seconds in which runs may start; past BUDGET+70 s SIGTERM, +100 s SIGKILL
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
TAG=$($PY -c 'import torch, re
name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
m = re.search(r"\b([A-Z]\d{2,4}[A-Z]?)\b", name)
v = re.match(r"(\d+\.\d+)", torch.__version__).group(1)
print(f"{(m.group(1) if m else name.split()[-1]).lower()}-torch{v}")')
STEM="suite-$TAG-full"
RESULTS="$OUTDIR/$STEM.jsonl"
COMMON=(--device "$DEVICE" --out "$OUTDIR" --modes default reduce-overhead --regimes overhead compute --repeat 3 --cost-scenarios all
        --fixed-dir benchmarks/gpu/fixed/scenarios --resume "$RESULTS" --stem "$STEM" --no-plot "${EXTRA_ARGS[@]}")
# On the lent device machine, $OUT is what comes back: the results, to put into this checkout's
# benchmarks/results/ before the next call (the next call's working-tree copy then carries them and resumes).
bring_back() {
  if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    cp -f "$OUTDIR/$STEM".* "$OUTDIR/cudagraph-check-$TAG".* "$OUT"/ 2>/dev/null || true
    ls "$OUT" >&2
  fi
}
case "$SLICE" in
  cudagraph)        ;;
  overhead-ro)      SEL=(--parts variants --only '*/overhead/reduce-overhead') ;;
  overhead-default) SEL=(--parts variants --only '*/overhead/default') ;;
  compute-ro)       SEL=(--parts variants --only '*/compute/reduce-overhead') ;;
  compute-default)  SEL=(--parts variants --only '*/compute/default') ;;
  cost)             SEL=(--parts cost) ;;
  all)              SEL=(); [ "$JOBS" -gt 1 ] && SEL=(--parts variants) ;;
  report)
    $PY benchmarks/gpu/cudagraph_check.py --resume "$OUTDIR/cudagraph-check-$TAG.jsonl" --rebuild
    $PY benchmarks/suite.py "${COMMON[@]}" --rebuild
    bring_back
    exit 0 ;;
  *) echo "unknown slice $SLICE" >&2; exit 2 ;;
esac
echo "slice $SLICE on $TAG, $GPUS GPU(s) x $JOBS job(s), budget $BUDGET s; results $RESULTS" >&2
SHARDS=$((GPUS * JOBS))
if [ "$JOBS" -gt 1 ]; then
  export PYTHONPATH="$PWD/benchmarks/gpu/steplock:$PYTHONPATH"
  LOCKDIR=$(mktemp -d)
fi
pids=()
for ((k = 1; k <= SHARDS; k++)); do
  gpu=$(((k - 1) % GPUS))
  wrap=()  # with JOBS > 1: the GPU's step lock and this shard's cores
  if [ "$JOBS" -gt 1 ]; then
    wrap=(env "TM_BENCH_STEP_LOCK=$LOCKDIR/gpu$gpu.lock")
    per=$(($(nproc) / SHARDS))
    if command -v taskset >/dev/null && [ "$per" -ge 1 ]; then
      wrap=(taskset -c "$(((k - 1) * per))-$((k * per - 1))" "${wrap[@]}")
    fi
  fi
  if [ "$SLICE" = cudagraph ]; then
    [ "$k" -gt 1 ] && break  # one process, several runs at once on the one GPU (correctness, not timing)
    cmd=($PY benchmarks/gpu/cudagraph_check.py --resume "$OUTDIR/cudagraph-check-$TAG.jsonl"
         --budget-s "$BUDGET" --jobs 4 --device "$DEVICE" "${EXTRA_ARGS[@]}")
  else
    shard=(); [ "$SHARDS" -gt 1 ] && shard=(--shard "$k/$SHARDS" --concurrent "$JOBS")
    cmd=($PY benchmarks/suite.py "${COMMON[@]}" "${SEL[@]}" "${shard[@]}" --budget-s "$BUDGET")
  fi
  CUDA_VISIBLE_DEVICES=$gpu timeout -s TERM -k 30 $((BUDGET + 70)) "${wrap[@]}" "${cmd[@]}" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
if [ "$SLICE" = cudagraph ]; then
  left=$(grep -c "not run yet" "$OUTDIR/cudagraph-check-$TAG.md" 2>/dev/null || true)
  echo "SLICE cudagraph: $left case(s) not run yet (0: complete; the timing runs are listed in the .md)" >&2
else
  [ "$SHARDS" -gt 1 ] && $PY benchmarks/suite.py "${COMMON[@]}" --rebuild >/dev/null 2>&1
  echo "SLICE $SLICE: see 'still missing' above; exit $rc (130: stopped by the time limit, call again)" >&2
fi
bring_back
exit 0

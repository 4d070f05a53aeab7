#!/usr/bin/env bash
# What the results file's runs did on the GPU machine (issue 32). Run from an unpacked copy of the repository, with
# libcst's wheel in WHL; writes logs and reports to OUT. NPROC: GPUs (2). SCRIPTS: which, in order ("ddp fsdp2").
# PHASE:
#   scan    findings of each script, detected on aot_eager.
#   verify  at once: `fix` with verification of each script (aot_eager, STEPS steps), a scan of ddp_rank_branch.py
#           (a branch on the rank), and tune's memory on one GPU each (the script's own device, and cuda); the
#           fixed scripts go to OUT/fixed-SCRIPT.py. Counts and memory only: the runs share the GPUs. TUNE=0: no tune.
#   plain   plain torchrun (inductor, fresh compile caches), one run at a time: each script as committed, then as
#           fixed (FIXED: the folder holding fixed-SCRIPT.py): wall seconds and the script's own steady step.
set -u
cd "$(dirname "$0")/../.."
NPROC=${NPROC:-2} JOB_LIMIT=${JOB_LIMIT:-380}  # JOB_LIMIT: seconds for each of verify's jobs
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHL"/libcst-*.whl "$WHL"/pyyaml-*.whl
export PYTHONPATH=/tmp/site:$PWD
tm() { python3 -m torchmend "$@"; }
plain() {  # plain torchrun: wall seconds and the script's own steady step, compile caches of its own
  local t0=$(date +%s.%N) c=/tmp/cache-$2
  TORCHINDUCTOR_CACHE_DIR=$c/inductor TRITON_CACHE_DIR=$c/triton timeout "${PLAIN_LIMIT:-400}" \
    torchrun --nproc-per-node "$NPROC" --standalone "$1" > "$OUT/$2.log" 2>&1
  local rc=$?; echo "plain $2 rc=$rc wall $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s; $(grep 'steady step' "$OUT/$2.log"); $(grep -c 'block out' "$OUT/$2.log") lines of the blocks' print"
}
nvidia-smi -L; python3 -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'
case $PHASE in
scan)
  for s in ${SCRIPTS:-ddp fsdp2}; do
    STEPS=20 tm scan --nproc-per-node "$NPROC" benchmarks/distributed/$s.py --backend aot_eager --format json --timeout 240 > "$OUT/scan-$s-$NPROC.json" 2> "$OUT/scan-$s-$NPROC.err"
    echo "scan $s rc=$?"; tail -c 600 "$OUT/scan-$s-$NPROC.err"
  done
  ;;
verify)
  for s in ${SCRIPTS:-ddp fsdp2}; do
    mkdir -p /tmp/fix-$s && cp benchmarks/distributed/$s.py /tmp/fix-$s/
    (cd /tmp/fix-$s && STEPS=${STEPS:-10} timeout "$JOB_LIMIT" python3 -m torchmend fix --nproc-per-node "$NPROC" $s.py --yes --unsafe --backend aot_eager \
      --verify-backend aot_eager --timeout 200 > "$OUT/fix-$s-$NPROC.txt" 2>&1; echo "fix $s rc=$?" >> "$OUT/rc.txt"
      cp $s.py "$OUT/fixed-$s.py") &
  done
  mkdir -p /tmp/div && cp benchmarks/distributed/ddp.py benchmarks/distributed/ddp_rank_branch.py /tmp/div/
  (cd /tmp/div && STEPS=6 timeout "$JOB_LIMIT" python3 -m torchmend scan --nproc-per-node "$NPROC" ddp_rank_branch.py --backend aot_eager --timeout 200 \
    > "$OUT/scan-rank-branch-$NPROC.txt" 2>&1; echo "scan rank-branch rc=$?" >> "$OUT/rc.txt") &
  t=benchmarks/scenarios/varying_batch/broken.py
  [ "${TUNE:-1}" = 1 ] && (CUDA_VISIBLE_DEVICES=0 timeout "$JOB_LIMIT" python3 -m torchmend tune $t --steps 40 --repeat 2 --settings default,reduce-overhead \
    --report "$OUT/tune-own-device.md" > "$OUT/tune-own-device.txt" 2>&1; echo "tune own rc=$?" >> "$OUT/rc.txt") &
  [ "${TUNE:-1}" = 1 ] && (CUDA_VISIBLE_DEVICES=1 TM_BENCH_DEVICE=cuda timeout "$JOB_LIMIT" python3 -m torchmend tune $t --steps 40 --repeat 2 --settings default,reduce-overhead \
    --report "$OUT/tune-cuda.md" > "$OUT/tune-cuda.txt" 2>&1; echo "tune cuda rc=$?" >> "$OUT/rc.txt") &
  wait
  cat "$OUT/rc.txt"
  for s in ${SCRIPTS:-ddp fsdp2}; do tail -45 "$OUT/fix-$s-$NPROC.txt"; done
  tail -8 "$OUT/scan-rank-branch-$NPROC.txt"
  ;;
plain)
  for s in ${SCRIPTS:-ddp fsdp2}; do
    plain benchmarks/distributed/$s.py "before-$s-$NPROC"
    cp "$FIXED/fixed-$s.py" /tmp/$s.py && plain /tmp/$s.py "after-$s-$NPROC"
  done
  ;;
esac

#!/usr/bin/env bash
# What the results file's runs did on the GPU machine (issue 32). Run from an unpacked copy of the repository, with
# libcst's wheel in WHL; writes logs and reports to OUT. PHASE: "scan" (findings, detected on aot_eager), "fix"
# (plain torchrun before, fix and verify, plain torchrun after). NPROC: GPUs (2). SCRIPTS: which, in order ("ddp fsdp2").
set -u
cd "$(dirname "$0")/../.."
NPROC=${NPROC:-2}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHL"/libcst-*.whl "$WHL"/pyyaml-*.whl
export PYTHONPATH=/tmp/site:$PWD
tm() { python3 -m torchmend "$@"; }
plain() {  # plain torchrun: wall seconds and the script's own steady step
  local t0=$(date +%s.%N)
  torchrun --nproc-per-node "$NPROC" --standalone "$1" > "$OUT/$2.log" 2>&1
  local rc=$?; echo "plain $2 rc=$rc wall $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s; $(grep 'steady step' "$OUT/$2.log")"
}
nvidia-smi -L; python3 -c 'import torch; print(torch.__version__)'
case $PHASE in
scan)
  for s in ${SCRIPTS:-ddp fsdp2}; do
    STEPS=20 tm scan --nproc-per-node "$NPROC" benchmarks/distributed/$s.py --backend aot_eager --format json --timeout 240 > "$OUT/scan-$s-$NPROC.json" 2> "$OUT/scan-$s-$NPROC.err"
    echo "scan $s rc=$?"; tail -c 600 "$OUT/scan-$s-$NPROC.err"
  done
  ;;
fix)
  for s in ${SCRIPTS:-ddp fsdp2}; do
    plain benchmarks/distributed/$s.py "before-$s-$NPROC"
    cp benchmarks/distributed/$s.py /tmp/$s.py
    (cd /tmp && tm fix --nproc-per-node "$NPROC" $s.py --yes --unsafe --timeout 300 > "$OUT/fix-$s-$NPROC.txt" 2>&1; echo "fix $s rc=$?")
    tail -40 "$OUT/fix-$s-$NPROC.txt"
    plain /tmp/$s.py "after-$s-$NPROC"
    cp /tmp/$s.py "$OUT/fixed-$s.py"
  done
  ;;
esac

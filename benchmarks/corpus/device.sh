#!/usr/bin/env bash
# The corpus sweep on the GPU machine's CPU cores (the `run` tool of this workplace: torch 2.11, Python 3.12, no
# libcst, no transformers, no internet). From the repository root there:
#
#   JOBS=16 NAME=zoo-baseline bash benchmarks/corpus/device.sh --models benchmarks/corpus/models-zoo.txt \
#       --modes train,eval --scan-only --stop-after 400 --timeout 90
#
# carrying `.whl` (ignored; fill it here with benchmarks/corpus/wheels.sh: cp312 manylinux wheels of libcst,
# transformers 5.23.0 and the pure dependencies the machine's Python lacks). It makes a venv with
# --system-site-packages (the machine's torch), installs the wheels into it without an index, and runs run.py with
# --jobs $JOBS (default: the CPU count) shards, this checkout's torchmend, writing $OUT/$NAME.jsonl, its report
# ($NAME.md, $NAME.png) and the shards' logs ($NAME-logs.tar.gz) under $OUT. Every other argument goes to run.py.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/corpus-out}
name=${NAME:-corpus}
jobs=${JOBS:-$(nproc)}
venv=/tmp/corpus-venv
work=/tmp/corpus-work
mkdir -p "$out"
cd "$here" || exit 2
start=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv --system-site-packages "$venv" || exit 2
  "$venv/bin/python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl || exit 2
fi
"$venv/bin/python" -c 'import torch, transformers, libcst, typer, rich; print("torch", torch.__version__, "transformers", transformers.__version__, "libcst", libcst.__version__)' || exit 2
echo "setup $(( $(date +%s) - start )) s; $(nproc) cores, $jobs jobs"
export PYTHONUNBUFFERED=1 TMPDIR=/tmp
"$venv/bin/python" benchmarks/corpus/run.py --venv "$venv" --torchmend "$here" --work "$work" --jobs "$jobs" \
  --results "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1
rc=$?
tail -n 5 "$out/$name.log"
grep -c . "$out/$name.jsonl" 2>/dev/null | sed 's/^/records: /'
"$venv/bin/python" benchmarks/corpus/report.py "$out/$name.jsonl"
tar -czf "$out/$name-logs.tar.gz" -C "$work" --exclude='project*' --exclude='*.key' . 2>/dev/null
echo "done in $(( $(date +%s) - start )) s, run.py exit $rc"
exit $rc

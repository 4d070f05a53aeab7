#!/usr/bin/env bash
# The corpus sweep on the GPU machine's CPU cores (the `run` tool of this workplace: torch 2.11, Python 3.12, no
# libcst, no transformers, no internet). From the repository root there:
#
#   JOBS=16 NAME=zoo-baseline bash benchmarks/corpus/device.sh --models benchmarks/corpus/models-zoo.txt \
#       --modes train,eval --scan-only --stop-after 400 --timeout 90
#
# carrying `.whl` (ignored; fill it here with benchmarks/corpus/wheels.sh: cp312 manylinux wheels of libcst,
# transformers 5.23.0 and the pure dependencies the machine's Python lacks; WHEELS=DIR names another folder). The
# tool sends the checkout its session started in, not a helper's worktree: from a worktree, copy this folder and
# the wheels into an ignored folder of that checkout, carry it, and copy the folder back over benchmarks/corpus
# there first (the README shows the command). It installs the wheels
# without an index beside the machine's torch (below), and runs run.py with
# --jobs $JOBS (default: the CPU count) shards, this checkout's torchmend, writing $OUT/$NAME.jsonl, its report
# ($NAME.md, $NAME.png) and the shards' logs ($NAME-logs.tar.gz) under $OUT. Every other argument goes to run.py.
# CORPUS_VENV and CORPUS_WORK name other folders, so two sweeps can run side by side.
#
# The second zoo (--zoo libraries) runs on the machine's own torchvision, torchaudio, torch_geometric and
# transformers: WHEELS takes several folders (all installed), DEPS folders whose wheels go in only where the image
# lacks the distribution or holds an older one (so its numpy, huggingface_hub, einops... are not shadowed), and
# IMPORTS names what must import before the sweep. DEADLINE=S kills the sweep's whole process tree S seconds
# after this script starts (--stop-after only stops new runs, and a run in progress has --timeout per stage), or sooner
# once a file $OUT/stop exists, so the report and logs still come in time; $OUT/$NAME.rc is written last, for a
# caller that started this detached (setsid) to wait on.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/corpus-out}
name=${NAME:-corpus}
jobs=${JOBS:-$(nproc)}
wheels=${WHEELS:-.whl}
deps=${DEPS:-}
imports=${IMPORTS:-torch transformers libcst typer rich}
venv=${CORPUS_VENV:-/tmp/corpus-env}
work=${CORPUS_WORK:-/tmp/corpus-work}
mkdir -p "$out"
cd "$here" || exit 2
start=$(date +%s)
# The machine's python3 is itself a venv (/opt/torch/.venv): a venv made from it with --system-site-packages would
# see the base interpreter's packages, not its torch. So the wheels go to a folder on PYTHONPATH (ahead of the
# image's own transformers) and the "venv" run.py is given is a wrapper around that python3.
if [ ! -e "$venv/.installed" ]; then
  want=$(for d in $wheels; do ls "$d"/*.whl; done)
  for w in $(for d in $deps; do ls "$d"/*.whl; done); do  # name-version-...whl: the image's copy serves if not older
    python3 -c 'import sys, importlib.metadata as m; from packaging.version import Version as V
n, v = sys.argv[1].split("/")[-1].split("-")[:2]
try: sys.exit(V(m.version(n)) < V(v))
except m.PackageNotFoundError: sys.exit(1)' "$w" && echo "image's own: $(basename "$w")" || want="$want $w"
  done
  # shellcheck disable=SC2086  # one word per wheel
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$venv/site" $want || exit 2
  mkdir -p "$venv/bin"
  printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > "$venv/bin/python"
  chmod +x "$venv/bin/python"
  touch "$venv/.installed"
fi
export PYTHONPATH="$venv/site${PYTHONPATH:+:$PYTHONPATH}"
# shellcheck disable=SC2086  # one word per module
"$venv/bin/python" -c 'import importlib, importlib.metadata as m, sys
d = m.packages_distributions()
for n in sys.argv[1:]: importlib.import_module(n); print(n, *(m.version(x) for x in d.get(n, [])[:1]))' $imports || exit 2
echo "setup $(( $(date +%s) - start )) s; $(nproc) cores, $jobs jobs"
export PYTHONUNBUFFERED=1 TMPDIR=/tmp
"$venv/bin/python" benchmarks/corpus/run.py --venv "$venv" --torchmend "$here" --work "$work" --jobs "$jobs" \
  --results "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1 &
sweep=$!
while [ -n "${DEADLINE:-}" ] && kill -0 "$sweep" 2>/dev/null; do
  if [ $(( $(date +%s) - start )) -ge "$DEADLINE" ] || [ -e "$out/stop" ]; then
    echo "deadline: killing the sweep (pid $sweep) and its stages $(( $(date +%s) - start )) s in"
    "$venv/bin/python" -c 'import sys; sys.path.insert(0, "benchmarks/corpus"); from run import kill_tree
kill_tree(int(sys.argv[1]))' "$sweep"
    break
  fi
  sleep 5
done
wait "$sweep"
rc=$?
tail -n 5 "$out/$name.log"
grep -c . "$out/$name.jsonl" 2>/dev/null | sed 's/^/records: /'
"$venv/bin/python" benchmarks/corpus/report.py "$out/$name.jsonl"
tar -czf "$out/$name-logs.tar.gz" -C "$work" --exclude='project*' --exclude='*.key' . 2>/dev/null
echo "done in $(( $(date +%s) - start )) s, run.py exit $rc"
echo "$rc" > "$out/$name.rc"
exit $rc

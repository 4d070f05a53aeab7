#!/usr/bin/env bash
# Steady step of each model's written fix, side by side: `torchmend verify --patch` with 3 interleaved runs per
# arm on the corpus scratch project, from the patches run.py kept.
#   benchmarks/corpus/steady_step.sh WORK VENV MODEL...   (WORK: run.py's --work; VENV: its --venv)
set -u
work=${1:?run.py --work folder}; venv=${2:?benchmark venv}; shift 2
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$work/project" || exit 2
for m in "$@"; do
  git reset -q --hard && git clean -qfdx
  echo "== $m"
  patch=$work/patches/$m.train.vendored.patch  # run.py names patches MODEL.MODE.USE (MODEL.patch before issue 26)
  [ -f "$patch" ] || patch=$work/patches/$m.patch
  PYTHONPATH=$here "$venv/bin/python" -m torchmend verify --patch "$patch" --repeat 3 --steps 8 \
    --backend aot_eager train_model.py -- "$m" 2>&1 | grep -E "steady step|graph breaks|recompiles  |numerics|verdict"
done

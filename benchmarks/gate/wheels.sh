#!/usr/bin/env bash
# The wheels device.sh installs on the GPU machine (Python 3.12, x86-64, no index there), into .whl/gate (ignored,
# as all of /.whl/ is; WHEELS=DIR names another folder): libcst and torchmend's CLI dependencies (typer, rich and
# theirs), which the machine's image lacks. torch, torchvision, torchaudio and torch_geometric are the image's.
# About 5 MB; carry the folder (`carry: [".whl/gate"]`).
set -eu
cd "$(dirname "$0")/../.."
dest=${WHEELS:-.whl/gate}
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$dest" \
  libcst==1.9.0 typer==0.28.0 rich==15.0.0 click shellingham annotated-doc markdown-it-py mdurl pygments pyyaml
ls -la "$dest"

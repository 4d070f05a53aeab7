#!/usr/bin/env bash
# The wheels device.sh installs on the GPU machine (Python 3.12, x86-64, no index there), into .whl (ignored) at the
# repository root: transformers 5.23.0, libcst, torchmend's CLI dependencies and transformers' pure dependencies
# that the machine's image lacks or holds too old (its huggingface_hub, tokenizers, safetensors, numpy, tqdm,
# filelock, fsspec, packaging serve). About 19 MB: `carry` takes at most 64 MiB.
set -eu
cd "$(dirname "$0")/../.."
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  transformers==5.23.0 libcst==1.9.0 typer==0.28.0 rich==15.0.0 click shellingham annotated-doc markdown-it-py \
  mdurl pygments regex==2026.11.19 pyyaml

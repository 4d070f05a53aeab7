#!/usr/bin/env bash
# The wheels device.sh installs on the GPU machine (Python 3.12, x86-64, no index there), into .whl (ignored) at the
# repository root: transformers 5.23.0, libcst, torchmend's CLI dependencies and transformers' pure dependencies
# that the machine's image lacks or holds too old (its huggingface_hub, tokenizers, safetensors, numpy, tqdm,
# filelock, fsspec, packaging serve). About 19 MB: `carry` takes at most 64 MiB.
#
# ZOO=libraries: the second zoo's instead, no transformers (the image's serves): libcst, the CLI's wheels and the
# zoo's libraries at zoos.py's pins into .whl/libraries (device.sh's WHEELS: always installed), their pure
# dependencies into .whl/libraries-deps (DEPS: installed only where the image lacks them or holds older ones; it
# has einops and zipp). About 14 MB. The image's torchvision, torchaudio and torch_geometric serve.
set -eu
cd "$(dirname "$0")/../.."
get() {
  dir=$1; shift
  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$dir" "$@"
}
cli="libcst==1.9.0 typer==0.28.0 rich==15.0.0 click shellingham annotated-doc markdown-it-py mdurl pygments pyyaml"
if [ "${ZOO:-transformers}" = libraries ]; then
  # shellcheck disable=SC2086  # one word per requirement
  get .whl/libraries $cli timm==1.0.31 diffusers==0.42.1 vit-pytorch==1.26.14 x-transformers==2.31.10
  get .whl/libraries-deps einops==0.8.2 einx==0.4.3 frozendict==2.5.1 loguru==0.7.3 torch-einops-utils==0.2.0 \
    importlib_metadata==10.2.0 lazy-importer==0.1.0 zipp==4.1.2
  exit
fi
# shellcheck disable=SC2086
get .whl transformers==5.23.0 $cli regex==2026.11.19

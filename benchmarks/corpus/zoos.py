"""The corpus benchmark's zoos: which generic script run.py copies into the scratch project, which packages the
vendored use copies beside it, what the benchmark venv is made of, and how a model name says its library.

Two zoos today: `transformers` (train_model.py; model names are transformers classes) and `libraries` (issue 40:
train_library_model.py; names are `LIBRARY:NAME`, LIBRARY an import name). run.py and report.py read only this
table, so a third zoo is one more entry here, a script and a list.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Zoo:
    name: str
    script: str  # the generic training script, a file beside this one
    vendor: tuple[str, ...]  # import names of the packages copied into the vendored project (those installed)
    dists: dict[str, str]  # import name -> distribution name, whose versions the records keep
    pins: tuple[str, ...]  # what run.py installs when it creates the benchmark venv (torch's pin apart)
    torch_pin: str
    default_list: str  # the list file run.py's --models names in the README's first example

    def library_of(self, model: str) -> str | None:
        """The import name of the library a model comes from (None: the zoo's one library, always installed)."""
        if self.name == "transformers":
            return None
        library, sep, _ = model.partition(":")
        return library if sep else None

    def result_stem(self, versions: dict[str, str | None], torch_version: str | None) -> str:
        """The results file's name without extension (benchmarks/results/<stem>.jsonl)."""
        torch_v = (torch_version or "unknown").split("+")[0]
        if self.name == "transformers":
            return f"corpus-torch{torch_v}-transformers{versions.get('transformers') or 'unknown'}"
        return f"corpus-{self.name}-torch{torch_v}"


TRANSFORMERS = Zoo(
    name="transformers",
    script="train_model.py",
    vendor=("transformers",),
    dists={"transformers": "transformers"},
    pins=("transformers==5.23.0",),
    torch_pin="torch==2.13.0",
    default_list="models-dev.txt",
)

# torchaudio last: it is not installable beside torch 2.14.1 (its models are listed, and recorded as "library not
# installed" where it is missing). torchvision's pin is the one built for the torch pin.
LIBRARIES = Zoo(
    name="libraries",
    script="train_library_model.py",
    vendor=("torchvision", "timm", "torch_geometric", "diffusers", "vit_pytorch", "x_transformers", "torchaudio"),
    dists={
        "torchvision": "torchvision",
        "timm": "timm",
        "torch_geometric": "torch-geometric",
        "diffusers": "diffusers",
        "vit_pytorch": "vit-pytorch",
        "x_transformers": "x-transformers",
        "torchaudio": "torchaudio",
    },
    pins=(
        "torchvision==0.29.1",
        "timm==1.0.31",
        "torch-geometric==2.8.1",
        "diffusers==0.42.1",
        "vit-pytorch==1.26.14",
        "x-transformers==2.31.10",
    ),
    torch_pin="torch==2.14.1",
    default_list="models-libraries.txt",
)

ZOOS = {z.name: z for z in (TRANSFORMERS, LIBRARIES)}


def parse_model(spec: str) -> tuple[str, str]:
    """`LIBRARY:NAME` -> (LIBRARY, NAME); a name without a library is refused (the libraries zoo's list format)."""
    library, sep, name = spec.strip().partition(":")
    if not sep or not library or not name:
        raise ValueError(f"{spec!r}: expected LIBRARY:NAME (e.g. torchvision:resnet18)")
    return library, name

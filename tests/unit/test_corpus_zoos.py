"""The corpus benchmark's zoos (benchmarks/corpus/zoos.py) and the second zoo's list: names parse as
LIBRARY:NAME, each library is one the zoo and its script know, and run.py records a model whose library is not
installed as `not_installed` without running anything (no model is built here)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

CORPUS = ROOT / "benchmarks" / "corpus"
sys.path.insert(0, str(CORPUS))
import zoos  # noqa: E402

sys.path.remove(str(CORPUS))


def listed(name: str) -> list[str]:
    lines = (CORPUS / name).read_text().splitlines()
    return [n for n in (line.split("#", 1)[0].strip() for line in lines) if n]


def test_parse_model() -> None:
    assert zoos.parse_model("torchvision:resnet18") == ("torchvision", "resnet18")
    assert zoos.parse_model(" vit_pytorch:cait.CaiT ") == ("vit_pytorch", "cait.CaiT")
    for bad in ("resnet18", ":resnet18", "timm:"):
        with pytest.raises(ValueError, match="LIBRARY:NAME"):
            zoos.parse_model(bad)


def test_the_libraries_list_parses_and_names_known_libraries() -> None:
    names = listed("models-libraries.txt")
    assert len(names) == len(set(names)), "a model listed twice"
    libraries = {zoos.parse_model(n)[0] for n in names}
    assert libraries <= set(zoos.LIBRARIES.dists)
    assert len(libraries - {"torchaudio"}) >= 5 and len(names) >= 80  # issue 40's size of the second zoo
    # the script has a builder for every library of the zoo (read as text: importing it imports torch)
    script = (CORPUS / zoos.LIBRARIES.script).read_text()
    assert all(f'"{lib}": {lib}_case' in script for lib in zoos.LIBRARIES.dists)


def test_zoos_registry() -> None:
    assert set(zoos.ZOOS) == {"transformers", "libraries"}
    for zoo in zoos.ZOOS.values():
        assert (CORPUS / zoo.script).is_file() and (CORPUS / zoo.default_list).is_file()
        assert zoo.torch_pin.startswith("torch==")  # an exact pin: pip would pull a CUDA build otherwise
    assert zoos.TRANSFORMERS.library_of("BertModel") is None
    assert zoos.LIBRARIES.library_of("timm:test_vit") == "timm"
    assert zoos.TRANSFORMERS.result_stem({"transformers": "5.23.0"}, "2.13.0+cpu") == (
        "corpus-torch2.13.0-transformers5.23.0"
    )
    assert zoos.LIBRARIES.result_stem({}, "2.14.1") == "corpus-libraries-torch2.14.1"


def test_not_installed_is_recorded_without_running(tmp_path: Path) -> None:
    missing = [lib for lib in zoos.LIBRARIES.dists if importlib.util.find_spec(lib) is None]
    if not missing:
        pytest.skip("every library of the zoo is installed here")
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (venv / "python").chmod(0o755)
    results = tmp_path / "r.jsonl"
    cmd = [sys.executable, str(CORPUS / "run.py"), "--zoo", "libraries", "--models", f"{missing[0]}:Anything",
           "--venv", str(tmp_path / "venv"), "--use", "user", "--work", str(tmp_path / "work"), "--results",
           str(results), "--modes", "train,eval"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(r["status"], r["mode"], r["library"]) for r in recs] == [
        ("not_installed", "train", missing[0]),
        ("not_installed", "eval", missing[0]),
    ]
    assert not recs[0]["stages"] and not list((tmp_path / "work" / "logs").glob("*"))  # nothing ran
    bad = subprocess.run(cmd[:4] + ["--models", "resnet18"] + cmd[6:], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "LIBRARY:NAME" in bad.stderr

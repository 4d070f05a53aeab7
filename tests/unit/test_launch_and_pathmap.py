"""Pure parts of the multi-rank and trace modes: torchrun command lines, path maps, trace-file parsing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchmend.profiler import pathmap
from torchmend.profiler.launch import LaunchError, resolve
from torchmend.profiler.tracedir import TraceError, read_trace
from torchmend.values import Root


@pytest.mark.parametrize(
    "program, args, nproc, script, script_args, launcher",
    [
        ("train.py", ["--lr", "3"], None, "train.py", ("--lr", "3"), ()),
        ("train.py", [], 2, "train.py", (), ("--nproc-per-node", "2", "--standalone")),
        (
            "torchrun",
            ["--nproc-per-node", "2", "train.py", "--lr", "3"],
            None,
            "train.py",
            ("--lr", "3"),
            ("--nproc-per-node", "2", "--standalone"),
        ),
        (
            "/usr/bin/torchrun",
            ["--nproc_per_node=4", "--master-port", "29600", "t.py", "-x"],
            None,
            "t.py",
            ("-x",),
            ("--nproc_per_node=4", "--master-port", "29600"),
        ),  # a rendezvous given: no --standalone added
        (
            "python3",
            ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "t.py"],
            None,
            "t.py",
            (),
            ("--standalone", "--nproc-per-node", "2"),
        ),
        (
            "torchrun",
            ["--nnodes", "1", "--", "t.py", "--flag"],
            None,
            "t.py",
            ("--flag",),
            ("--nnodes", "1", "--standalone"),
        ),
    ],
)
def test_resolve(program, args, nproc, script, script_args, launcher) -> None:
    launch = resolve(program, args, nproc)
    assert (launch.script, launch.args, launch.launcher) == (script, script_args, launcher)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--nnodes=2", "t.py"], "--nnodes 2"),
        (["--module", "pkg"], "runs a module"),
        (["--no-python", "bash"], "non-Python"),
        (["--nproc-per-node"], "needs a value"),
        (["--standalone"], "names no training script"),
    ],
)
def test_resolve_refuses(args, message) -> None:
    with pytest.raises(LaunchError, match=message):
        resolve("torchrun", args, None)


def test_guess_maps_the_longest_tail_found_under_the_root(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "model.py").write_text("")
    (tmp_path / "train.py").write_text("")
    recorded = [
        "/home/alice/proj/src/pkg/model.py",
        "/home/alice/proj/train.py",
        "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py",
        "/opt/conda/lib/python3.10/contextlib.py",
        "/home/alice/proj/gone.py",
        "<eval_with_key>.3",
    ]
    maps = pathmap.guess(recorded, Root(tmp_path))
    assert [(m.old, m.new, m.files) for m in maps] == [("/home/alice/proj", str(tmp_path), 2)]
    assert pathmap.unmapped(recorded, maps) == ["/home/alice/proj/gone.py"]
    explicit = pathmap.parse([f"/home/alice/proj={tmp_path}"])
    assert pathmap.guess(recorded, Root(tmp_path), explicit) == []  # what --path-map covers is not guessed


def test_apply_rewrites_prefixes_in_texts_once_and_only_at_a_path_boundary(tmp_path: Path) -> None:
    maps = [pathmap.Mapping("/home/alice/proj", "/work/co"), pathmap.Mapping("/home/alice/proj/vendored", "/v")]
    text = 'File "/home/alice/proj/train.py", line 3\n  at /home/alice/proj/vendored/x.py:4 /home/alice/project2/y.py'
    assert pathmap.apply({"t": [text]}, maps) == {
        "t": ['File "/work/co/train.py", line 3\n  at /v/x.py:4 /home/alice/project2/y.py']
    }


@pytest.mark.parametrize("item", ["nothing", "=new", "old="])
def test_parse_refuses(item: str) -> None:
    with pytest.raises(pathmap.PathMapError):
        pathmap.parse([item])


def _record(md: dict, payload: str | None = None, rank: int | None = None) -> str:
    if rank is not None:
        md = {**md, "rank": rank}
    line = f"V1122 17:12:43.144000 4242 torch/_dynamo/x.py:1] {json.dumps(md)}\n"
    return line + "".join(f"\t{p}\n" for p in payload.split("\n")) if payload else line


def test_trace_files_newest_per_rank_and_records(tmp_path: Path) -> None:
    body = (
        _record({"str": ["/home/alice/proj/train.py", 0]})
        + _record({"artifact": {"name": "torch_version", "encoding": "json"}}, '{"pytorch_version": "2.11.0"}')
        + _record({"chromium_event": {}}, '{\n"ignored": 1\n}')
        + _record(
            {
                "dynamo_start": {"stack": [{"line": 9, "name": "forward", "filename": 0}]},
                "frame_id": 0,
                "frame_compile_id": 0,
            }
        )
        + _record(
            {
                "artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"},
                "frame_id": 0,
                "frame_compile_id": 0,
            },
            "Graph Break Reason: x\nsecond line",
        )
    )
    old = tmp_path / "dedicated_log_torch_trace_rank_1_aaa.log"
    old.write_text(_record({"str": ["/x.py", 0]}, rank=1))
    import os

    os.utime(old, (1, 1))
    (tmp_path / "dedicated_log_torch_trace_rank_1_bbb.log").write_text(body.replace("] {", "] {", 1))
    (tmp_path / "dedicated_log_torch_trace_rank_0_ccc.log").write_text(body)
    (tmp_path / "unrelated.log").write_text("not a trace")
    trace = read_trace(tmp_path)
    assert trace.ranks == [0, 1]
    assert [p.name for p in trace.ignored] == [old.name]
    assert trace.torch_version == "2.11.0"
    events = [e for e in trace.events() if e["rank"] == 0]
    assert [e["ev"] for e in events] == ["start", "compile_start", "graph_break"]
    assert events[1]["stack"] == [["/home/alice/proj/train.py", 9, "forward"]]
    assert events[2]["text"] == "Graph Break Reason: x\nsecond line" and events[2]["compile_id"] == "0/0"
    assert events[0]["pid"] == 4242


def test_trace_without_compilation_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dedicated_log_torch_trace_x.log").write_text(_record({"chromium_event": {}}))
    with pytest.raises(TraceError, match="record no compilation"):
        read_trace(tmp_path)

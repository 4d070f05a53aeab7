"""The suite's accumulating results file: one JSON record per finished run, appended at once (JSONL).

A device session that ends (a 10-minute command limit, a lost machine) loses at most the run in progress;
the next session passes the same file to `--resume` and runs only what is missing. Also here: choosing a
slice of the plan (`--only`, `--shard`), the time budget, and a child process's peak RSS. Imports neither
torch nor torchmend: the unit tests drive it on fake records.
"""

from __future__ import annotations

import fcntl
import fnmatch
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

SCHEMA = "torchmend.bench-suite-run/1"
# The fields that name a measurement: a record with the same key is the same run, done already.
RUN_KEY = ("kind", "device", "torch", "backend", "steps", "scenario", "regime", "mode", "variant", "repeat")


def key_of(rec: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(rec.get(k) for k in RUN_KEY)


def append(path: Path, rec: dict[str, Any]) -> None:
    """Add one record as one line, flushed to disk before returning (a killed suite keeps it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"schema": SCHEMA, **rec}, separators=(",", ":"))
    with open(path, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # shards on several GPUs may share one file: one whole line at a time
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
        fcntl.flock(f, fcntl.LOCK_UN)


def load(path: Path) -> list[dict[str, Any]]:
    """Every complete record in `path` (none if it does not exist); a torn last line is skipped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line a killed process was writing
        if isinstance(rec, dict) and rec.get("schema") == SCHEMA:
            out.append(rec)
    return out


def done_keys(records: Iterable[dict[str, Any]]) -> set[tuple[Any, ...]]:
    return {key_of(r) for r in records}


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """'2/5' -> (2, 5): the second of five slices (1-based)."""
    if not text:
        return None
    k, _, n = text.partition("/")
    i, total = int(k), int(n)
    if not 1 <= i <= total:
        raise ValueError(f"shard {text!r}: want K/N with 1 <= K <= N")
    return i, total


def select(groups: Sequence[str], only: Sequence[str] | None, shard: tuple[int, int] | None) -> list[str]:
    """The groups ('scenario/regime/mode' names) this invocation runs: matching an `--only` pattern (fnmatch;
    any of them), then every N-th of those from the K-th on (a shard keeps the plan's order and interleaving)."""
    picked = [g for g in groups if not only or any(fnmatch.fnmatchcase(g, pat) for pat in only)]
    if shard:
        k, n = shard
        picked = picked[k - 1 :: n]
    return picked


class Budget:
    """Stop before a deadline: a run starts only if the slowest run so far (before any, `first_guess`) still fits."""

    def __init__(self, seconds: float | None, first_guess: float = 60.0, clock: Any = time.monotonic) -> None:
        self.seconds, self.first_guess, self.clock = seconds, first_guess, clock
        self.start = clock()
        self.longest: float | None = None

    def took(self, seconds: float) -> None:
        self.longest = seconds if self.longest is None else max(self.longest, seconds)

    def allows(self) -> bool:
        if self.seconds is None:
            return True
        need = self.first_guess if self.longest is None else self.longest
        return self.clock() - self.start + need <= self.seconds


def run_tree(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[float, int, str, str, int | None]:
    """Run `cmd`: (wall seconds, exit code, stdout, stderr, peak RSS in KiB of it and of the children it
    waited for: os.wait4 gives the kernel's figure, which folds reaped descendants in). Past `timeout` the
    command is killed: exit code -9, stderr 'timeout'."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    texts: dict[str, str] = {}
    readers = [
        threading.Thread(target=lambda n=n, f=f: texts.__setitem__(n, f.read()), daemon=True)
        for n, f in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for r in readers:
        r.start()
    rss: int | None
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            rc, rss = os.waitstatus_to_exitcode(status), int(usage.ru_maxrss)  # ru_maxrss: KiB on Linux
            break
        if time.monotonic() - t0 > timeout:
            proc.kill()
            os.wait4(proc.pid, 0)
            rc, rss = -9, None
            break
        time.sleep(0.05)
    proc.returncode = rc  # reaped here: keep Popen from waiting on it again
    for r in readers:
        r.join(timeout=5)
    err = texts.get("err", "") + ("\ntimeout" if rc == -9 and rss is None else "")
    return time.monotonic() - t0, rc, texts.get("out", ""), err, rss

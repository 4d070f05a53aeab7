"""Check the graph-break id table (torchmend/profiler/gbids.py) against a torch wheel's registry, or rewrite the
table's registry block from registries.

    python scripts/gb_ids.py --check                   # the installed torch's registry (tests/unit/test_gbids.py)
    python scripts/gb_ids.py --check --registry PATH   # any registry (torch/_dynamo/graph_break_registry.json)
    python scripts/gb_ids.py --write R1.json R2.json   # the block of ids per release, oldest registry first
    python scripts/gb_ids.py --diff OLD.json NEW.json  # what changed between two registries (docs/graph-break-ids.md)

The release of a registry is read from the torch/version.py beside it. The installed torch is found without
importing it. `--check` fails (exit 1, one line per problem) when:
- the table's ids for that release differ from the registry's (a release the table read), or the registry has ids
  the table does not know (a newer release: read it with --write);
- an entry of the table names an id the registry lacks, or a type the registry does not give that id, or says it
  was first read from a later release than this registry, which has the id with that type already;
- the registry has an id whose texts the text classifier puts under a rule, and the table has no entry for it
  (the id would be classified TM199 where its texts say otherwise).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # check this checkout's torchmend, whatever the interpreter has installed

from torchmend.model import Where  # noqa: E402
from torchmend.profiler import gbids  # noqa: E402
from torchmend.profiler.classify import text_rule  # noqa: E402
from torchmend.profiler.hotspots import parse_version  # noqa: E402
from torchmend.profiler.traceparse import GraphBreak  # noqa: E402

MODULE = ROOT / "torchmend" / "profiler" / "gbids.py"
START, END = "# generated:registries", "# generated:end"
Registry = dict[str, list[dict[str, object]]]


def installed_registry() -> Path | None:
    spec = importlib.util.find_spec("torch")  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "_dynamo" / "graph_break_registry.json"
    return path if path.exists() else None


def release_of(registry: Path) -> tuple[int, ...]:
    """(2, 15) for the registry of torch 2.15.0, from torch/version.py beside it."""
    text = (registry.parent.parent / "version.py").read_text()
    m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    version = parse_version(m[1] if m else None)
    if version is None:
        raise SystemExit(f"no torch version beside {registry}")
    return version[:2]


def load(path: Path) -> Registry:
    data: Registry = json.loads(path.read_text())
    return data


def types_of(entries: list[dict[str, object]]) -> set[str]:
    return {str(e.get("Gb_type", "")) for e in entries}


def check(path: Path) -> list[str]:
    registry, release = load(path), release_of(path)
    problems = []
    ids = set(registry)
    known = gbids.known_ids(release)
    if release in gbids.REGISTRIES:
        if ids != known:
            problems.append(
                f"torch {release}: the table's ids differ from the registry's: missing {gbids.compress(ids - known)}"
                f", not in the registry {gbids.compress(known - ids)}"
            )
    elif release > gbids.READ[-1] and ids - known:
        problems.append(f"torch {release} is newer than the table and has ids it does not know: rerun --write")
    for e in gbids.ID_RULES:
        if release < e.since and e.gb_id in ids and e.gb_type in types_of(registry[e.gb_id]):
            problems.append(f"torch {release} has {e.gb_id} ({e.gb_type!r}) already: its entry says since {e.since}")
        if not e.applies(release) or (release < gbids.READ[0] and e.gb_id not in ids):
            continue
        if e.gb_id not in ids:
            problems.append(f"torch {release}: {e.gb_id} ({e.rule}) is not in the registry")
        elif e.gb_type not in types_of(registry[e.gb_id]):
            problems.append(f"torch {release}: {e.gb_id} is {sorted(types_of(registry[e.gb_id]))}, not {e.gb_type!r}")
    for gb_id, entries in sorted(registry.items()):
        for entry in entries:
            gb = GraphBreak("", 0, str(entry.get("Gb_type", "")), str(entry.get("Explanation", "")), None, None)
            for where in (Where.PROJECT, Where.LIBRARY):
                by_text = text_rule(gb, where)
                if by_text != "TM199" and not any(r.gb_id == gb_id for r in gbids.ID_RULES):
                    problems.append(f"torch {release}: {gb_id} ({gb.gb_type!r}) reads as {by_text} and has no entry")
    return sorted(set(problems))


def block(paths: list[Path]) -> str:
    regs = sorted((release_of(p), set(load(p))) for p in paths)
    (first, first_ids), rest = regs[0], regs[1:]
    lines = [f"{START} (python scripts/gb_ids.py --write REGISTRY.json ...)"]
    lines.append(f"REGISTRY_FIRST: tuple[Version, str] = (\n    {first},\n{_wrapped(gbids.compress(first_ids))},\n)")
    lines.append("REGISTRY_CHANGES: dict[Version, tuple[str, str]] = {  # release -> (ids added, ids removed)")
    prev = first_ids
    for release, ids in rest:
        added, removed = gbids.compress(ids - prev), gbids.compress(prev - ids)
        lines.append(f"    {release}: (\n{_wrapped(added, 8)},\n{_wrapped(removed, 8)},\n    ),")
        prev = ids
    lines.append("}")
    lines.append(END)
    return "\n".join(lines)


def _wrapped(ids: str, indent: int = 4, width: int = 118) -> str:
    """A string literal of space-separated ids, split over lines within the line length."""
    pad, chunks, line = " " * indent, [], ""
    for part in ids.split():
        if line and len(pad) + len(line) + len(part) + 4 > width:
            chunks.append(line + " ")
            line = ""
        line = f"{line} {part}" if line else part
    chunks.append(line)
    return "\n".join(f'{pad}"{c}"' for c in chunks)


def write(paths: list[Path]) -> None:
    text = MODULE.read_text()
    start, end = text.index(START), text.index(END) + len(END)
    MODULE.write_text(text[:start] + block(paths) + text[end:])


def diff(old: Path, new: Path) -> None:
    a, b = load(old), load(new)
    print(f"{release_of(old)} -> {release_of(new)}: {len(a)} -> {len(b)} ids")
    print("removed:", gbids.compress(set(a) - set(b)) or "none")
    print("added:", gbids.compress(set(b) - set(a)) or "none")
    same = sorted(set(a) & set(b))
    for what in ("Gb_type", "Explanation", "Hints", "Context"):
        changed = [i for i in same if [e.get(what) for e in a[i]] != [e.get(what) for e in b[i]]]
        print(f"{what} edited under the same id ({len(changed)}):", " ".join(changed) or "none")
    print("ids that gained or lost a call site:", " ".join(i for i in same if len(a[i]) != len(b[i])) or "none")
    moved = [(i, j) for j in sorted(set(b) - set(a)) for i in same if types_of(b[j]) & types_of(a[i])]
    print("a type that moved to a new id:", moved or "none")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--registry", type=Path, action="append", default=[])
    ap.add_argument("--write", type=Path, nargs="+")
    ap.add_argument("--diff", type=Path, nargs=2)
    args = ap.parse_args()
    if args.write:
        write(args.write)
        return 0
    if args.diff:
        diff(*args.diff)
        return 0
    paths = args.registry or [p for p in [installed_registry()] if p]
    if not paths:
        print("no torch installed here, and no --registry given")
        return 1
    problems = [p for path in paths for p in check(path)]
    for p in problems:
        print(p)
    if not problems:
        print("ok:", ", ".join(f"torch {'.'.join(map(str, release_of(p)))} ({len(load(p))} ids)" for p in paths))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

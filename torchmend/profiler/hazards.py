"""Known PyTorch hazards, by version: forms of code that a torch release compiles wrongly, so a rewrite into them
verifies as "numerics differ" however right it is in eager mode.

Beside the library hot spots (hotspots.py), in the same style: each entry names the releases it was reproduced
on (here, with the fixture its test names) and the first release that fixes it (None: none yet). A codemod
names the form of each edit it proposes (`Proposal.shape`); when verification finds that a change computes
the same as the original in eager mode but not compiled, the entry for its shape and the run's torch release
is the explanation the verdict gives, with the upstream reference. Pure: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchmend.profiler.hotspots import parse_version


@dataclass(frozen=True)
class Hazard:
    name: str
    library: str  # the distribution whose release decides it
    since: tuple[int, ...]  # the first release it was reproduced on (older ones: not tried)
    until: tuple[int, ...] | None  # the first release that fixes it (None: none yet)
    reproduced: tuple[str, ...]  # releases it was reproduced on, with tests/unit/test_hazards.py's fixture
    shapes: tuple[str, ...]  # the `Proposal.shape`s that trip it
    what: str  # what goes wrong, in one sentence
    upstream: str  # the issue or pull request that tracks it

    def affects(self, version: str | None) -> bool:
        v = parse_version(version)
        return v is not None and v >= self.since and (self.until is None or v < self.until)

    def describe(self) -> str:
        fixed = "no release fixes it yet" if self.until is None else f"fixed in {'.'.join(map(str, self.until))}"
        return f"{self.what} ({self.upstream}; reproduced on torch {', '.join(self.reproduced)}; {fixed})"


HAZARDS: tuple[Hazard, ...] = (
    # An int counter turned buffer (`self.calls.add_(1)`) read in a scale factor (`h * (1.0 / (1 + self.calls % 3))`):
    # the min-cut partitioner (aot_eager and inductor alike) recomputes the factor in the backward from the buffer,
    # which the forward's epilogue has already incremented, so the gradients use the next call's factor.
    Hazard(
        name="recomputed-read-of-mutated-buffer",
        library="torch",
        since=(2, 13),
        until=None,
        reproduced=("2.13.0", "2.14.1", "2.15.0"),
        shapes=("buffer-in-place",),
        what=(
            "AOTAutograd's partitioner recomputes a read of a module buffer in the backward after the forward "
            "updated the buffer in place, so the gradients see the updated value (silently wrong gradients)"
        ),
        upstream="pytorch PR #197039, open: https://github.com/pytorch/pytorch/pull/197039",
    ),
)


def hazards_for(shape: str, versions: dict[str, str]) -> list[Hazard]:
    """The known hazards of an edit of this shape on these releases ({distribution: version})."""
    return [h for h in HAZARDS if shape and shape in h.shapes and h.affects(versions.get(h.library))]

"""Corpus family "zoo": the style zoo graded in the sandbox (issue 49 item 8).

Kernels written as students write them (tests/corpus/zoo_kernels.py), several to a submission:
the correct ones in styles the notebook allows (grid-stride loops, 2-D blocks with row loops,
views, swizzled and padded tiles, syncwarp in one-warp blocks, two tiles in one statement,
register blocking, device functions, warp shuffles, divmod, constants rebound, parameters
renamed) keep every point; each wrong one (a race hidden by thread order, a missing barrier,
uninitialised shared reads, decoy tiles, `.T` views hiding strided reads, store conflicts,
out-of-bounds reads that return the right value, sums in global memory, naive edge tiles, an
early return under a full shuffle mask) loses exactly its `loses` tests and nothing else. Graded
as root here and as an ordinary user in the corpus's second pass.
"""

from __future__ import annotations

import re

from build import BROKEN, Case, Ctx, Expect, Rule, write_fork
from memory_kernels import Variant, with_variants
from zoo_kernels import CORRECT, MAY_PASS, WRONG

GF = "gpu_fundamentals"


def _submission(group: tuple[Variant, ...]):
    def build(dest, ctx: Ctx) -> None:
        write_fork(dest, {GF: with_variants(group, ctx.solutions[GF])}, ctx=ctx)

    return build


def _rules(group: tuple[Variant, ...]) -> list[Rule]:
    """One rule per lost test: failed or error (its feedback is the kernel's own); first, the
    draws a wrong kernel may pass (`MAY_PASS`: rules match in order)."""
    lost = sorted({name for v in group for name in v.loses})
    maybe = [
        Rule(rf"(^|/){re.escape(name)}$", ("passed", *BROKEN), required=False)
        for v in group
        if v.loses
        for name in MAY_PASS.get(v.kernel, ())
    ]
    return maybe + [Rule(rf"(^|/){name}(\[|$)", BROKEN) for name in lost]


def _named(group: tuple[Variant, ...]) -> str:
    return "; ".join(f"{v.kernel}: {v.name}" for v in group)


CASES: list[Case] = [
    *(
        Case(
            f"zoo_correct_{n}",
            f"correct kernels in students' styles, full marks: {_named(group)}",
            _submission(group),
            Expect(GF, [], max_s=90),
            slow=True,
        )
        for n, group in enumerate(CORRECT, 1)
    ),
    *(
        Case(
            f"zoo_wrong_{n}",
            f"wrong kernels that look right, each losing exactly its lesson: {_named(group)}",
            _submission(group),
            Expect(GF, _rules(group), max_s=90),
            slow=True,
        )
        for n, group in enumerate(WRONG, 1)
    ),
]

"""How a kernel used memory, laid out like Nsight Compute's memory workload section.

One table per profiled launch (`grader.simt.memmodel.LaunchProfile`): a row per access site
(the student's line, the array, global or shared, load, store or atomic) with its warp requests,
sectors per request against the ideal, the efficiency, the worst bank conflict (loads and stores
alike) and the atomic lanes serialised behind another lane at the same address; then the
launch's totals: every element access of global memory (the budget the memory lessons grade)
and the bytes moved between the SMs and global memory, the lower bound on the time that traffic
takes at the course GPU's bandwidth, shared-memory wavefronts beyond the ideal per operation,
serialised atomics and the barriers. `summary` is the one line `grader check` prints per
kernel. Terminal text (`table`, `profile_report`) and markdown (`markdown`) say the same; student
text (array names come from the student's source) goes through `grader.reports.escape` like any
other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from grader.core.results import KernelMemory
from grader.core.tables import format_table
from grader.reports.escape import html_text, md_inline, visible
from grader.simt.memmodel import (
    ATOMIC,
    GLOBAL,
    LOAD,
    SECTOR_BYTES,
    SHARED,
    STORE,
    LaunchProfile,
    Site,
)

if TYPE_CHECKING:  # the grading half (numpy, the suites) loads only for `grader profile`
    from grader.grading.profile import KernelProfile, Profiled

HEADERS = [
    "line",
    "array",
    "memory",
    "op",
    "requests",
    "sectors/req",
    "ideal",
    "efficiency",
    "bank ways",
    "serialised",
]


def _row(s: Site) -> list[str]:
    if s.space == GLOBAL:
        per, ideal = f"{s.sectors_per_request:.1f}", f"{s.ideal_sectors / s.requests:.1f}"
        ways = ""
    else:
        per, ideal, ways = "", "", f"{s.max_ways}"
    op = s.op if s.parts == 1 else f"{s.op} ({s.parts} x {s.itemsize} B)"  # Numba's halves
    return [
        s.where or f"line {s.line}",
        s.array,
        s.space,
        op,
        f"{s.requests:,}",
        per,
        ideal,
        f"{100 * s.efficiency:.0f}%",
        ways,
        f"{s.serialised:,}" if s.op == ATOMIC else "",
    ]


def totals(p: LaunchProfile, bandwidth_gbs: float | None = None, gpu: str = "") -> list[str]:
    """The launch's totals, one sentence each."""
    moved = {op: SECTOR_BYTES * p.total("sectors", GLOBAL, op) for op in (LOAD, STORE)}
    ideal = {op: SECTOR_BYTES * p.total("ideal_sectors", GLOBAL, op) for op in (LOAD, STORE)}
    lines = [
        f"global memory: {p.global_accesses:,} element accesses in {p.global_requests:,} "
        f"requests (loads, stores and atomics of every array); {p.global_bytes:,} B moved "
        f"({moved[LOAD]:,} B loaded for {ideal[LOAD]:,} B asked, {moved[STORE]:,} B stored for "
        f"{ideal[STORE]:,} B asked)"
    ]
    if bandwidth_gbs:
        lower = p.global_bytes / (bandwidth_gbs * 1e9) * 1e6
        lines.append(
            f"lower bound on the {gpu or 'course GPU'}: {lower:.3f} us at {bandwidth_gbs:g} GB/s "
            "(bytes moved / bandwidth; the launch itself costs a few us more)"
        )
    shared = p.where(SHARED)
    if shared:
        each = ", ".join(
            f"{p.bank_conflicts(op):,} in {verb} (worst {p.max_ways(op)}-way)"
            for op, verb in ((LOAD, "loads"), (STORE, "stores"), (ATOMIC, "atomics"))
            if p.where(SHARED, op)
        )
        lines.append(
            f"shared memory: {p.total('requests', SHARED):,} requests, "
            f"{p.total('wavefronts', SHARED):,} wavefronts ({p.bank_conflicts():,} beyond the "
            f"ideal, bank conflicts: {each})"
        )
    if p.where(op=ATOMIC):
        lines.append(
            f"atomics: {p.total('lanes', op=ATOMIC):,} lanes, {p.serialised:,} of them "
            "serialised behind another lane of their request at the same address "
            f"({sum(s.transactions for s in p.where(op=ATOMIC)):,} transactions for "
            f"{p.total('requests', op=ATOMIC):,} requests)"
        )
    per_block = f", at least {p.min_block_barriers} in every block" if p.barriers else ""
    lines.append(f"barriers: {p.barriers:,} over {p.blocks:,} blocks{per_block}")
    divergent = p.total("divergent")
    if divergent:
        lines.append(f"divergent requests (some lanes idle): {divergent:,}")
    return lines


def table(p: LaunchProfile) -> str:
    """The access sites of one launch as a terminal table."""
    rows = [[visible(c) for c in _row(s)] for s in p.sites]
    return format_table(HEADERS, rows) if rows else "(no global or shared memory accesses)"


def summary(k: KernelProfile) -> str:
    """One line per kernel: global efficiency of loads and stores, bank conflicts, barriers."""
    if k.profile is None:
        first = (k.error or "no profile").splitlines()[0]
        return f"{k.kernel}: not profiled: {visible(first)[:160]}"
    p = k.profile
    parts = []
    for op, verb in ((LOAD, "loads"), (STORE, "stores")):
        sectors = p.total("sectors", GLOBAL, op)
        if sectors:
            parts.append(f"{verb} {100 * p.total('ideal_sectors', GLOBAL, op) / sectors:.0f}%")
    if p.where(SHARED):
        parts.append(
            f"shared bank conflicts {p.bank_conflicts(LOAD):,} wavefronts in loads, "
            f"{p.bank_conflicts(STORE):,} in stores"
        )
    if p.serialised:
        parts.append(f"{p.serialised:,} atomic lanes serialised")
    parts.append(f"{p.global_accesses:,} global accesses, {p.global_bytes:,} B moved")
    if p.barriers:
        parts.append(f"{p.barriers} barriers")
    return f"{k.kernel} ({k.label}): global {', '.join(parts)}"


def launch_lines(k: KernelProfile, gpu: str) -> list[str]:
    """The compiled kernel's resources and its occupancy, as `grader profile` shows them."""
    lines = []
    r = k.resources
    if r is not None:
        spills = f"{r.spill_stores:,} B spilled" if r.spill_stores else "no spills"
        lines.append(
            f"compiled for the {gpu or 'course GPU'}: {r.registers} registers per thread, "
            f"{r.shared_bytes:,} B of shared memory per block, {r.local_bytes:,} B of local "
            f"memory per thread, {spills}"
        )
    o = k.occupancy
    if o is not None:
        share = 100 * float(o["occupancy"])
        lines.append(
            f"occupancy on the {gpu or 'course GPU'} by your occupancy(): {o['blocks_per_sm']} "
            f"blocks, {o.get('warps_per_sm', '?')} warps per SM ({share:.0f}%), "
            f"limited by {o['limited_by']}"
        )
    return [visible(line) for line in lines]


def profile_report(profiled: Profiled, bandwidth_gbs: float, gpu: str) -> str:
    """`grader profile`'s output: each launch's table and totals, then the notes."""
    out = [f"{profiled.assignment} (profiled {visible(profiled.notebook)})"]
    for k in profiled.kernels:
        out.append(f"\n{k.kernel}: {k.label} {k.launch}")
        if k.profile is None:
            out.append(f"  not profiled: {visible(k.error or '')}")
            continue
        out.append(table(k.profile))
        out += [f"  {line}" for line in totals(k.profile, bandwidth_gbs, gpu)]
        out += [f"  {line}" for line in launch_lines(k, gpu)]
    # why launch statistics are missing: the same reason (no nvJitLink here) said once
    missing = dict.fromkeys(k.launch_note for k in profiled.kernels if k.launch_note)
    out += [f"\nnote: {n}" for n in (*profiled.notes, *missing)]
    return "\n".join(out)


CELL_CHARS = 200
INTRO = (
    "the grader's memory model: each launch run once in the simulator with every global and "
    "shared access recorded and grouped into warp requests, as Nsight Compute's memory workload "
    "analysis counts them on a GPU (docs/MEMORY_MODEL.md)"
)


def markdown(memory: Sequence[KernelMemory], bandwidth_gbs: float | None, gpu: str) -> str:
    """The report's section: each profiled launch's table and totals, folded, in markdown."""
    if not memory:
        return ""
    out = [f"<details><summary>Memory profile of {len(memory)} launches</summary>", "", INTRO, ""]
    for m in memory:
        p = LaunchProfile.from_plain(m.profile)
        out.append(f"`{md_inline(m.kernel, CELL_CHARS)}` {md_inline(m.launch, CELL_CHARS)}")
        out.append("")
        out.append("| " + " | ".join(HEADERS) + " |")
        out.append("|" + "---|" * len(HEADERS))
        out += [
            "| " + " | ".join(md_inline(c, CELL_CHARS) for c in _row(s)) + " |" for s in p.sites
        ]
        out.append("")
        out += [f"- {md_inline(line, 400)}" for line in totals(p, bandwidth_gbs, gpu)]
        out.append("")
    out.append("</details>")
    return "\n".join(out)


def html(memory: Sequence[KernelMemory], bandwidth_gbs: float | None, gpu: str) -> list[str]:
    """The HTML page's section, as its parts: a table and the totals per launch."""
    if not memory:
        return []
    parts = [f"<h3>Memory profile</h3><p>{html_text(INTRO)}</p>"]
    for m in memory:
        p = LaunchProfile.from_plain(m.profile)
        parts.append(f"<p><code>{html_text(m.kernel)}</code> {html_text(m.launch)}</p><table>")
        parts.append("<tr>" + "".join(f"<th>{html_text(h)}</th>" for h in HEADERS) + "</tr>")
        parts += [
            "<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in _row(s)) + "</tr>" for s in p.sites
        ]
        parts.append("</table><ul>")
        parts += [f"<li>{html_text(line)}</li>" for line in totals(p, bandwidth_gbs, gpu)]
        parts.append("</ul>")
    return parts

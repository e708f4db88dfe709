"""grader.reports.memory: the profile table and totals say store conflicts, serialised atomics,
Numba's split items and the global budget (a profile built from accesses, no simulator)."""

from __future__ import annotations

from grader.core.results import KernelMemory
from grader.reports import memory
from grader.simt import memmodel
from grader.simt.memmodel import ATOMIC, GLOBAL, LOAD, SHARED, STORE


def _profile() -> memmodel.LaunchProfile:
    keys = [
        memmodel.SiteKey(3, "x", GLOBAL, LOAD, 8, 16),  # a complex128 read: two 8-byte halves
        memmodel.SiteKey(4, "shared@5", SHARED, STORE, 4),  # a column of an unpadded tile
        memmodel.SiteKey(6, "hist", GLOBAL, ATOMIC, 4),  # every lane at one address
    ]
    accesses = []
    for lane in range(32):
        accesses += [(0, lane, 0, 16 * lane, 1), (0, lane, 0, 16 * lane + 8, 1)]
        accesses.append((0, lane, 1, 128 * lane, 2))
        accesses.append((0, lane, 2, 0, 3))
    arrays = {"x": (GLOBAL, 16, 32), "shared@5": (SHARED, 4, 1024), "hist": (GLOBAL, 4, 1)}
    return memmodel.summarise((1, 1, 1), (32, 1, 1), keys, accesses, arrays, {0: 1})


def test_the_totals_say_the_budget_store_conflicts_and_serialised_atomics():
    p = _profile()
    assert (p.global_accesses, p.bank_conflicts(STORE), p.serialised) == (64, 31, 31)
    text = "\n".join(memory.totals(p))
    assert "64 element accesses in 3 requests" in text
    assert "31 in stores (worst 32-way)" in text
    assert "32 lanes, 31 of them serialised" in text and "(32 transactions for 1 requests)" in text
    table = memory.table(p)
    assert "load (2 x 8 B)" in table and "serialised" in table


def test_the_markdown_section_renders_a_version_two_profile():
    md = memory.markdown(
        [KernelMemory(kernel="k", launch="[1, 32]", profile=_profile().to_plain())], 320.0, "T4"
    )
    assert "| serialised |" in md and "31 in stores" in md

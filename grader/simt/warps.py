"""Warps in the simulator: every warp-level primitive of Numba's CUDA target, with CUDA's meaning.

Numba's own simulator has none of them (numba issue 8433), so a kernel that uses ``syncwarp``
or a shuffle could not run without a GPU. Here 32 consecutive linear thread ids of a block form
a warp (lane = linear id % 32, as ``cuda.laneid`` says), and a warp primitive is a *gathering*:
the lanes its mask names meet there (the scheduler of `grader.simt.simulator` runs each lane
until it arrives, as at a barrier of those lanes only), then exchange values, each lane getting
what the CUDA programming guide and the PTX ISA say it gets:

- ``shfl_sync(mask, value, src_lane)``: the value of lane ``src_lane % 32``;
  ``shfl_up_sync(mask, value, delta)``: of lane ``lane - delta``, the caller's own value when
  that is below lane 0; ``shfl_down_sync(mask, value, delta)``: of ``lane + delta``, the own
  value past lane 31; ``shfl_xor_sync(mask, value, lane_mask)``: of ``lane ^ lane_mask``.
  Numba's shuffles take no ``width`` (its intrinsics fix the PTX clamp at a whole warp), and
  ``delta`` and ``lane_mask`` count modulo 32 as the hardware reads them (``b[4:0]``). A source
  lane that is not in the gathering holds no defined value (the guide: "undefined"): the caller
  gets the simulator's unset value (NaN, or -1 for an integer, as fresh memory), so a kernel
  that uses it is wrong on every run, while one that ignores it (lanes past the end of a
  reduction) keeps its result.
- ``ballot_sync`` (an ``int32``: lane 31 is its sign), ``any_sync``, ``all_sync``, ``eq_sync``
  (booleans) over the predicates of the lanes in the mask; ``match_any_sync`` (the lanes of the
  mask whose value equals the caller's) and ``match_all_sync`` (``(mask, True)`` when every lane
  of the mask has one value, else ``(0, False)``); ``syncwarp(mask=0xFFFFFFFF)``: the meeting
  alone, which also orders the lanes' memory accesses (the sanitizer reads that).
- ``activemask()``: the lanes of the caller's warp that are at the same call at the same time
  (the scheduler resolves it once no thread of the block can run on: lanes that ended, or wait
  elsewhere, are not active); ``lanemask_lt()``: the lanes below the caller's.

A mask is the student's promise that the lanes it names will arrive. When one cannot (it has
returned, it is not in the block, the caller itself is not in the mask) or does not (it waits
at another barrier, or at a gathering of another mask that overlaps), the launch stops with a
`WarpError` naming the kernel line, the warp, and the lanes: never a hang.

This module holds the rules (what meets, what each lane gets, what is an error); the scheduler
holds the threads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from grader.core.errors import SubmissionError

WARP = 32
FULL = 0xFFFFFFFF

SHUFFLES = ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync")
VOTES = ("ballot_sync", "any_sync", "all_sync", "eq_sync")
MATCHES = ("match_any_sync", "match_all_sync")
GATHERINGS = ("syncwarp", *SHUFFLES, *VOTES, *MATCHES)


class WarpError(SubmissionError):
    """A warp primitive used in a way CUDA leaves undefined (the kernel's error, said plainly):
    the primitive, its kernel line, and two threads of the block (linear ids): one that came
    and one its mask named that cannot (the same one when the caller is not in its own mask).
    The sanitizer reports it as synccheck's finding."""

    def __init__(self, message: str, op: str = "", line: int = 0, threads: tuple = ()) -> None:
        super().__init__(message)
        self.op, self.line, self.threads = op, line, threads


def int32(bits: int) -> int:
    """`bits` (a 32-bit pattern) read as Numba's ``int32``, the type of a ballot or match."""
    bits &= FULL
    return bits - (1 << 32) if bits & 0x80000000 else bits


def lanes_of(mask: int) -> list[int]:
    """The lanes a mask names, in order."""
    return [lane for lane in range(WARP) if mask >> lane & 1]


def said(lanes: list[int]) -> str:
    """Lanes as a reader counts them: ``lanes 0-15, 20``."""
    if not lanes:
        return "no lanes"
    runs: list[str] = []
    start = prev = lanes[0]
    for lane in [*lanes[1:], None]:
        if lane is not None and lane == prev + 1:
            prev = lane
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if lane is not None:
            start = prev = lane
    return ("lane " if len(lanes) == 1 else "lanes ") + ", ".join(runs)


@dataclass
class Gathering:
    """The lanes of one warp meeting at one primitive with one mask."""

    op: str
    mask: int
    line: int
    values: dict[int, Any] = field(default_factory=dict)  # lane -> what it brought
    threads: dict[int, Any] = field(default_factory=dict)  # lane -> its simulated thread

    def complete(self) -> bool:
        return len(self.values) == bin(self.mask).count("1")

    def missing(self) -> list[int]:
        return [lane for lane in lanes_of(self.mask) if lane not in self.values]


def _unset(value: Any) -> Any:
    """What a lane reads from a lane that holds no defined value: NaN, or -1 for an integer."""
    kind = type(value)
    if (
        isinstance(value, float)
        or getattr(value, "dtype", None) is not None
        and (value.dtype.kind == "f")
    ):
        return kind(math.nan)
    try:
        return kind(-1)
    except (TypeError, ValueError):
        return value


def _source(op: str, lane: int, b: int) -> int:
    """The lane a shuffle reads for `lane` (the PTX ISA's ``shfl.sync`` with a whole-warp clamp)."""
    b = int(b) & (WARP - 1)
    if op == "shfl_sync":
        return b
    if op == "shfl_up_sync":
        return lane - b if lane - b >= 0 else lane
    if op == "shfl_down_sync":
        return lane + b if lane + b < WARP else lane
    return lane ^ b


def _same(a: Any, b: Any) -> bool:
    """Equal as the hardware compares bits (NaN equals itself)."""
    return bool(a == b) or (a != a and b != b)


def results(gathering: Gathering) -> dict[int, Any]:
    """What each lane of a complete gathering gets back."""
    op, values = gathering.op, gathering.values
    if op == "syncwarp":
        return dict.fromkeys(values)
    if op in SHUFFLES:
        out = {}
        for lane, (value, b) in values.items():
            source = _source(op, lane, b)
            out[lane] = values[source][0] if source in values else _unset(value)
        return out
    if op in VOTES:
        truths = {lane: bool(p) for lane, p in values.items()}
        answer: Any = {
            "ballot_sync": int32(sum(1 << lane for lane, p in truths.items() if p)),
            "any_sync": any(truths.values()),
            "all_sync": all(truths.values()),
            "eq_sync": len(set(truths.values())) == 1,
        }[op]
        return dict.fromkeys(values, answer)
    if op == "match_any_sync":
        return {
            lane: int32(sum(1 << other for other, w in values.items() if _same(v, w)))
            for lane, v in values.items()
        }
    first = next(iter(values.values()))
    whole = all(_same(first, v) for v in values.values())
    answer = (int32(gathering.mask), True) if whole else (0, False)
    return dict.fromkeys(values, answer)


class WarpRoom:
    """The gatherings of one block's warps: who waits where, and when a mask cannot be met."""

    def __init__(self, threads: int) -> None:
        self._threads = threads
        self.pending: dict[int, list[Gathering]] = {}  # warp -> gatherings not yet complete
        self.ended: set[int] = set()  # linear ids of threads that returned
        self._ended_bits: dict[int, int] = {}  # warp -> its lanes that returned

    def end(self, linear: int) -> None:
        """Thread `linear` returned: it arrives nowhere again."""
        self.ended.add(linear)
        warp, lane = divmod(linear, WARP)
        self._ended_bits[warp] = self._ended_bits.get(warp, 0) | 1 << lane

    def arrive(
        self, linear: int, thread: Any, op: str, mask: int, value: Any, line: int
    ) -> Gathering | None:
        """`thread` (linear id `linear`) arrives at `op` with `mask`: the gathering once complete
        (taken out of the room), else None (the thread waits). A `WarpError` when the mask can
        never be met."""
        mask = int(mask) & FULL
        warp, lane = divmod(linear, WARP)
        where = f"line {line}: cuda.{op} in warp {warp}"
        self._refuse_unmeetable(linear, op, mask, line, where)
        waiting = self.pending.setdefault(warp, [])
        gathering = next((g for g in waiting if g.mask == mask), None)
        if gathering is None:
            for other in waiting:
                if other.mask & mask:
                    raise WarpError(
                        f"{where}: lane {lane} arrives with mask {mask:#010x} while "
                        f"{said(sorted(other.values))} wait at cuda.{other.op} (line "
                        f"{other.line}) with mask {other.mask:#010x}: lanes that share a "
                        "gathering must pass the same mask",
                        op,
                        line,
                        (linear, warp * WARP + min(other.values)),
                    )
            gathering = Gathering(op, mask, line)
            waiting.append(gathering)
        elif gathering.op != op:
            raise WarpError(
                f"{where}: lane {lane} arrives while {said(sorted(gathering.values))} wait at "
                f"cuda.{gathering.op} (line {gathering.line}) with the same mask: every lane "
                "of a mask must reach the same warp primitive",
                op,
                line,
                (linear, warp * WARP + min(gathering.values)),
            )
        gathering.values[lane] = value
        gathering.threads[lane] = thread
        if not gathering.complete():
            return None
        waiting.remove(gathering)
        if not waiting:
            del self.pending[warp]
        return gathering

    def _refuse_unmeetable(self, linear: int, op: str, mask: int, line: int, where: str) -> None:
        """A `WarpError` for a mask that can never be met, whatever the other lanes do: it
        leaves out the caller, or names lanes the block lacks or that have returned."""
        warp, lane = divmod(linear, WARP)
        exist = (1 << max(0, min(WARP, self._threads - warp * WARP))) - 1
        if mask >> lane & 1 and not mask & ~exist and not mask & self._ended_bits.get(warp, 0):
            return  # the common case, in three integer tests
        if not mask >> lane & 1:
            raise WarpError(
                f"{where}: lane {lane} calls it with mask {mask:#010x}, which does not name "
                f"lane {lane} itself (CUDA leaves that undefined: a mask names the calling lane)",
                op,
                line,
                (linear, linear),
            )
        absent = [ln for ln in lanes_of(mask) if warp * WARP + ln >= self._threads]
        if absent:
            raise WarpError(
                f"{where}: mask {mask:#010x} names {said(absent)}, which this block of "
                f"{self._threads} threads does not have: a mask names only lanes that exist",
                op,
                line,
                (linear, warp * WARP + absent[0]),
            )
        gone = [ln for ln in lanes_of(mask) if warp * WARP + ln in self.ended]
        if gone:
            raise WarpError(
                f"{where}: mask {mask:#010x} names {said(gone)}, which had already returned "
                "and can never arrive: a mask names only lanes that reach this call",
                op,
                line,
                (linear, warp * WARP + gone[0]),
            )

    def stuck(self) -> WarpError | None:
        """When no thread can run on: why a gathering waits for ever (None when none waits)."""
        for warp, waiting in sorted(self.pending.items()):
            for g in waiting:
                missing = g.missing()
                gone = [ln for ln in missing if warp * WARP + ln in self.ended]
                why = (
                    f"({said(gone)} had returned; the others wait elsewhere, at a barrier or "
                    "another warp primitive)"
                    if gone
                    else "(they wait elsewhere, at a barrier or another warp primitive)"
                )
                return WarpError(
                    f"line {g.line}: cuda.{g.op} in warp {warp} with mask {g.mask:#010x}: "
                    f"{said(sorted(g.values))} arrived, {said(missing)} never did {why}: a "
                    "mask names only lanes that reach this call",
                    g.op,
                    g.line,
                    (warp * WARP + min(g.values), warp * WARP + missing[0]),
                )
        return None

    def waiting_threads(self) -> list[Any]:
        """Every thread that waits at a gathering (to be unwound when the launch aborts)."""
        return [t for gs in self.pending.values() for g in gs for t in g.threads.values()]


def active_masks(arrivals: list[tuple[int, Any, Any]]) -> dict[int, int]:
    """``activemask()``: `arrivals` (linear id, thread, call site) of the threads that wait
    there once nothing else can run; each linear id's mask: the lanes of its warp at its site."""
    groups: dict[tuple[int, Any], int] = {}
    for linear, _, site in arrivals:
        key = (linear // WARP, site)
        groups[key] = groups.get(key, 0) | 1 << (linear % WARP)
    return {linear: groups[(linear // WARP, site)] for linear, _, site in arrivals}


def lanemask_lt(linear: int) -> int:
    """The lanes below the caller's (inactive ones included), as Numba's ``uint32``."""
    return (1 << (linear % WARP)) - 1

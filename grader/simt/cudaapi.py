"""Every device function ``numba.cuda`` offers a kernel, and what the simulator does with it.

A kernel in the simulator reads ``cuda.X`` from Numba's ``FakeCUDAModule``: a name it lacks
used to fail with ``'FakeCUDAModule' object has no attribute 'X'``, which tells a student
nothing. `SUPPORT` is the closed list (docs/SIMULATOR.md shows it; a unit test walks it against
the installed numba-cuda, so it cannot drift): each name either runs, as on a GPU, or is refused
by name with the reason (`SimulatorRefusal`). `install` adds what Numba's simulator lacks and
runs (``nanosleep``, the cache-hinted loads and stores, ``literal_unroll``; the warp primitives
come from `grader.simt.warps`), the refusals, and bit intrinsics that read negative numbers as
the GPU does (two's complement, not Python's sign).
"""

from __future__ import annotations

import threading
from typing import Any

from grader.core.errors import SubmissionError

RUNS, REFUSED = "runs", "refused"

# every ``cuda.atomic`` function: the tracer and the sanitizer each see one as one access
ATOMICS = (
    "add",
    "sub",
    "and_",
    "or_",
    "xor",
    "inc",
    "dec",
    "exch",
    "max",
    "min",
    "nanmax",
    "nanmin",
    "cas",
)

# name -> (what the simulator does, why or how)
SUPPORT: dict[str, tuple[str, str]] = {
    "threadIdx": (RUNS, "the simulated thread's index"),
    "blockIdx": (RUNS, "the block's index"),
    "blockDim": (RUNS, "the launch's block shape"),
    "gridDim": (RUNS, "the launch's grid shape"),
    "laneid": (RUNS, "linear thread id % 32"),
    "warpsize": (RUNS, "32"),
    "grid": (RUNS, "absolute thread position, 1-3 dimensions"),
    "gridsize": (RUNS, "threads in the grid, 1-3 dimensions"),
    "syncthreads": (RUNS, "a barrier of the block's live threads (synccheck: one call site)"),
    "syncthreads_count": (RUNS, "a barrier counting the predicate over live threads"),
    "syncthreads_and": (RUNS, "a barrier: the predicate true for every live thread"),
    "syncthreads_or": (RUNS, "a barrier: the predicate true for some live thread"),
    "syncwarp": (RUNS, "a gathering of the mask's lanes; orders their memory (racecheck)"),
    "shfl_sync": (RUNS, "value of lane src_lane % 32"),
    "shfl_up_sync": (RUNS, "value of lane - delta, own value below lane 0"),
    "shfl_down_sync": (RUNS, "value of lane + delta, own value past lane 31"),
    "shfl_xor_sync": (RUNS, "value of lane ^ lane_mask"),
    "ballot_sync": (RUNS, "int32 of the mask's lanes whose predicate holds"),
    "any_sync": (RUNS, "predicate true in some lane of the mask"),
    "all_sync": (RUNS, "predicate true in every lane of the mask"),
    "eq_sync": (RUNS, "predicate the same in every lane of the mask"),
    "match_any_sync": (RUNS, "the mask's lanes holding the caller's value"),
    "match_all_sync": (RUNS, "(mask, True) when every lane of the mask holds one value"),
    "activemask": (RUNS, "the warp's lanes at the same call at the same time"),
    "lanemask_lt": (RUNS, "the lanes below the caller's"),
    "shared": (RUNS, "shared.array: one per declaration, fresh 0xFF per block; size 0: dynamic"),
    "local": (RUNS, "local.array: fresh 0xFF per thread, indices bounded (memcheck)"),
    "const": (RUNS, "const.array_like: the array itself, read-only by convention"),
    "atomic": (RUNS, "every cuda.atomic function, one indivisible access (not a race)"),
    "threadfence": (RUNS, "no-op: the simulator's memory is sequentially consistent"),
    "threadfence_block": (RUNS, "no-op, as threadfence"),
    "threadfence_system": (RUNS, "no-op, as threadfence"),
    "nanosleep": (RUNS, "no-op: simulated threads have no clock"),
    "popc": (RUNS, "set bits, negatives as two's complement"),
    "brev": (RUNS, "bit reversal of 32 (or 64) bits"),
    "clz": (RUNS, "leading zeros of 32 (or 64) bits"),
    "ffs": (RUNS, "position of the lowest set bit, 1-based, 0 for none"),
    "fma": (RUNS, "a * b + c (rounded twice, where a GPU rounds once)"),
    "cbrt": (RUNS, "cube root"),
    "selp": (RUNS, "b if a else c"),
    "fp16": (RUNS, "Numba's simulator's half-precision functions (hadd, hmul, ...)"),
    "cg": (RUNS, "this_grid().sync(): a barrier, for a grid of one block only"),
    "literal_unroll": (RUNS, "the tuple itself: the loop runs as written"),
    "ldca": (RUNS, "a plain load (cache hints mean nothing here)"),
    "ldcg": (RUNS, "a plain load"),
    "ldcs": (RUNS, "a plain load"),
    "ldlu": (RUNS, "a plain load"),
    "ldcv": (RUNS, "a plain load"),
    "stcg": (RUNS, "a plain store"),
    "stcs": (RUNS, "a plain store"),
    "stwb": (RUNS, "a plain store"),
    "stwt": (RUNS, "a plain store"),
    "bf16": (REFUSED, "bfloat16 arithmetic has no simulated type (Numba's simulator lacks it)"),
    "fp8": (REFUSED, "8-bit floats have no simulated type (Numba's simulator lacks them)"),
}


class SimulatorRefusal(SubmissionError, AttributeError):
    """A ``numba.cuda`` name the simulator does not run, refused by name with the reason (an
    AttributeError underneath, so ``hasattr`` still answers)."""


def _bits(val: Any) -> tuple[int, int]:
    """An integer as the GPU holds it: its unsigned bits and their width (32, or 64 when the
    value or its NumPy type needs it)."""
    width = int(getattr(getattr(val, "dtype", None), "itemsize", 0)) * 8
    val = int(val)
    if width not in (32, 64):
        width = 32 if -(1 << 31) <= val < (1 << 32) else 64
    return val & ((1 << width) - 1), width


def _popc(self: Any, val: Any) -> int:
    return bin(_bits(val)[0]).count("1")


def _brev(self: Any, val: Any) -> int:
    bits, width = _bits(val)
    return int(format(bits, f"0{width}b")[::-1], 2)


def _clz(self: Any, val: Any) -> int:
    bits, width = _bits(val)
    return width - bits.bit_length()


def _ffs(self: Any, val: Any) -> int:
    bits, _ = _bits(val)
    return (bits & -bits).bit_length()


def install(module_class: Any, kernelapi: Any) -> None:
    """Make the simulator's ``cuda`` answer every name of `SUPPORT` as the table says."""
    if getattr(module_class, "answers_all", False):
        return

    def nanosleep(self: Any, ns: Any) -> None:
        return None

    def literal_unroll(self: Any, container: Any) -> Any:
        return container

    def load(self: Any, array: Any, i: Any) -> Any:
        return array[i]

    def store(self: Any, array: Any, i: Any, value: Any) -> None:
        array[i] = value

    added: dict[str, Any] = {
        "nanosleep": nanosleep,
        "literal_unroll": literal_unroll,
        "popc": _popc,
        "brev": _brev,
        "clz": _clz,
        "ffs": _ffs,
    }
    added.update(dict.fromkeys(("ldca", "ldcg", "ldcs", "ldlu", "ldcv"), load))
    added.update(dict.fromkeys(("stcg", "stcs", "stwb", "stwt"), store))
    for name, function in added.items():
        setattr(module_class, name, function)

    def refuse(self: Any, name: str) -> Any:
        what, why = SUPPORT.get(name, (None, ""))
        if what == REFUSED:
            raise SimulatorRefusal(f"cuda.{name} does not run in the CUDA simulator: {why}")
        raise SimulatorRefusal(
            f"cuda.{name} is not a device function of numba.cuda (see docs/SIMULATOR.md for "
            "every one the simulator runs)"
        )

    module_class.__getattr__ = refuse
    _one_block_grid_sync(kernelapi)
    module_class.answers_all = True


def _one_block_grid_sync(kernelapi: Any) -> None:
    """``cg.this_grid().sync()`` is a block's barrier in the simulator, right only when the grid
    is one block: a bigger grid is refused, not silently run without grid-wide ordering."""
    grid_group = kernelapi.GridGroup

    def sync(self: Any) -> None:
        from numba.cuda.simulator.kernel import _get_kernel_context  # lazy: simulator only

        context = _get_kernel_context()
        if context is not None:
            g = context.gridDim
            if g.x * g.y * g.z > 1:
                raise SimulatorRefusal(
                    "cuda.cg.this_grid().sync() does not run in the CUDA simulator for a grid "
                    f"of {g.x * g.y * g.z} blocks: it runs blocks one after another, so a "
                    "grid-wide barrier is only simulated for a grid of one block"
                )
        carrier: Any = threading.current_thread()
        carrier.syncthreads()

    grid_group.sync = sync

"""The trusted replay of a host wrapper's recorded launches, on the test's own data.

A wrapper's launch record (`grader.sandbox.harness`) names, for each launch, the kernel, its
dimensions and each argument: a scalar, or an array *slot* (the same object is the same slot)
with its shape and dtype, and for a slot whose contents were one of the call's own array
arguments, which one (``input``: a position or a keyword). The record carries no array data:
everything the student's process chose is replaced here by what the trusted side knows.

`Replay` launches every recorded launch, in order, with the kernel compiled from the source, on
the test's own input arrays (reshaped and cast as the record says, a safe cast only) and, for
every other slot, a fresh buffer filled with `poison` (NaN, or the byte pattern 0xA5). A slot
keeps its state from one launch to the next. The wrapper's returned value must follow from the
final state of a slot the kernels wrote (`Replay.produced`, by a `Relation`): an array equal to
it, a number that is its one element, or what the suite states the value follows from (a
reduction's host adding the partial sums its kernel wrote); an output filled on the host before
the launch, or a result computed with numpy beside an empty kernel, is not. A record that names
anything else (an input that is not an array of the test, a slot that changes shape, buffers
beyond `MAX_REPLAY_BYTES`) earns nothing and says so (`RecordRefused`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.core.errors import SubmissionError

MAX_SLOTS = 64  # distinct arrays one call's launches may name
MAX_REPLAY_BYTES = 64 << 20  # fresh buffers and inputs the trusted side builds for one call
POISON_BYTE = 0xA5
_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


class RecordRefused(SubmissionError):
    """The launch record names something that is not the test's input or a fresh output."""


def poison(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A fresh buffer no correct kernel leaves as it is: NaN for floats, 0xA5 bytes otherwise."""
    if dtype.kind in "fc":
        return np.full(shape, np.nan, dtype=dtype)
    if dtype.kind == "b":
        return np.ones(shape, dtype=dtype)
    count = math.prod(shape) * dtype.itemsize
    return np.frombuffer(bytes([POISON_BYTE]) * count, dtype=dtype).reshape(shape).copy()


@dataclass
class Slot:
    """One array of the replay: where it came from and its state after the launches so far."""

    desc: dict
    initial: np.ndarray
    state: np.ndarray

    @property
    def fresh(self) -> bool:
        return "input" not in self.desc

    @property
    def written(self) -> bool:
        return self.fresh or not np.array_equal(
            self.initial, self.state, equal_nan=self.state.dtype.kind in "fc"
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


@dataclass(frozen=True)
class Relation:
    """How a wrapper's returned value must follow from one array its kernels wrote.

    Without `returns`: an array must be that array (same dtype and elements, NaN equal to NaN,
    any shape of the same size), a number must be its one element (a kernel that accumulates
    into a one-element output). With `returns` (the suite's statement, trusted code): the value
    must equal `returns(array)`, a number or an array, within `rtol` and `atol`; `returns` may
    answer None for an array the value cannot come from. Nothing else is accepted: a value
    computed on the host beside the launch does not follow from what the kernels wrote.
    """

    returns: Callable[[np.ndarray], Any] | None = None
    rtol: float = 0.0
    atol: float = 0.0

    def expected(self, state: np.ndarray) -> Any:
        """What the wrapper should return if `state` is the array its result comes from."""
        if self.returns is not None:
            return self.returns(state.copy())
        return state.reshape(-1)[0] if state.size == 1 else state

    def holds(self, value: Any, state: np.ndarray) -> bool:
        if self.returns is None and isinstance(value, np.ndarray):
            return (
                state.size == value.size
                and state.dtype == value.dtype
                and bool(
                    np.array_equal(
                        state.reshape(-1), value.reshape(-1), equal_nan=value.dtype.kind in "fc"
                    )
                )
            )
        want = self.expected(state)
        if want is None:
            return False
        if isinstance(value, np.ndarray) or isinstance(want, np.ndarray):
            got, exp = np.asarray(value), np.asarray(want)
            return (
                got.shape == exp.shape
                and got.dtype.kind in "biufc"
                and exp.dtype.kind in "biufc"
                and bool(np.allclose(got, exp, rtol=self.rtol, atol=self.atol, equal_nan=True))
            )
        if not (_is_number(value) and _is_number(want)):
            return False
        return math.isclose(float(value), float(want), rel_tol=self.rtol, abs_tol=self.atol)


class Replay:
    """The replay of one wrapper call (`args`, `kwargs`: what the test passed)."""

    def __init__(self, wrapper: str, args: tuple, kwargs: dict):
        self.wrapper = wrapper
        self.args, self.kwargs = args, kwargs
        self.slots: dict[int, Slot] = {}
        self.bytes = 0

    def arguments(self, entry: dict, n: int) -> list:
        """The trusted arguments of recorded launch `n` (1-based), from the test's own data."""
        descs = entry.get("args")
        if not isinstance(descs, list):
            raise RecordRefused(f"launch {n} lists no arguments")
        return [self._argument(d, n, j) for j, d in enumerate(descs)]

    def launched(self, entry: dict, n: int, launch: Callable[[list], list]) -> None:
        """Run recorded launch `n` with `launch` (the trusted kernel launch) and keep the state."""
        args = self.arguments(entry, n)
        got = launch(args)
        for desc, out in zip(entry["args"], got, strict=True):
            if "slot" in desc:
                self.slots[desc["slot"]].state = out

    def produced(self, value: Any, relation: Relation | None = None) -> bool:
        """Whether `value` follows from an array the replayed kernels wrote (`Relation`)."""
        relation = relation or Relation()
        return any(
            relation.holds(value, slot.state) for slot in self.slots.values() if slot.written
        )

    def closest(self, value: Any, relation: Relation | None = None) -> str:
        """How `value` differs from what the written arrays give, for feedback."""
        relation = relation or Relation()
        written = [slot.state for slot in self.slots.values() if slot.written]
        if not isinstance(value, np.ndarray):
            if not _is_number(value):
                return f"it returned a {type(value).__name__}, not an array or a number"
            given = [g for g in (relation.expected(w) for w in written) if _is_number(g)]
            if not given:
                return f"it returned {value!r}, and no array the kernels wrote gives a number"
            return f"it returned {value!r}; what the kernels wrote gives {float(given[0])!r}"
        for state in written:
            if state.size == value.size:
                want = state.reshape(-1).astype(value.dtype, copy=False)
                got = value.reshape(-1)
                same = (got == want) | (
                    np.isnan(got) & np.isnan(want)
                    if got.dtype.kind in "fc"
                    else np.zeros(got.shape, bool)
                )
                bad = int(np.count_nonzero(~same))
                return f"{bad} of {value.size} elements differ"
        return "no array the kernels wrote has its size"

    # ---- one argument

    def _argument(self, desc: Any, n: int, j: int) -> Any:
        where = f"launch {n}, argument {j}"
        if isinstance(desc, dict) and set(desc) == {"scalar"}:
            value = desc["scalar"]
            if not isinstance(value, _SCALARS):
                raise RecordRefused(f"{where} is a {type(value).__name__}, not a number")
            return value
        if not (
            isinstance(desc, dict)
            and {"slot", "shape", "dtype"} <= set(desc) <= {"slot", "shape", "dtype", "input"}
        ):
            raise RecordRefused(f"{where} is neither a number nor an array slot")
        slot = desc["slot"]
        if type(slot) is not int or not 0 <= slot < MAX_SLOTS:
            raise RecordRefused(f"{where} names slot {slot!r}")
        if slot in self.slots:
            if self.slots[slot].desc != desc:
                raise RecordRefused(f"{where} changes what slot {slot} is")
            return self.slots[slot].state
        shape, dtype = self._shape_dtype(desc, where)
        start = self._initial(desc, shape, dtype, where)
        self.bytes += start.nbytes
        if self.bytes > MAX_REPLAY_BYTES:
            raise RecordRefused(
                f"{where}: the launches name more than {MAX_REPLAY_BYTES >> 20} MiB of arrays"
            )
        self.slots[slot] = Slot(dict(desc), start.copy(), start)
        return start

    def _shape_dtype(self, desc: dict, where: str) -> tuple[tuple[int, ...], np.dtype]:
        shape = desc["shape"]
        if not (
            isinstance(shape, list)
            and 1 <= len(shape) <= 3
            and all(type(d) is int and 0 <= d for d in shape)
        ):
            raise RecordRefused(f"{where} has the shape {shape!r}")
        try:
            dtype = np.dtype(desc["dtype"])
        except (TypeError, ValueError):
            raise RecordRefused(f"{where} has the dtype {desc['dtype']!r}") from None
        if dtype.kind not in "biufc" or dtype.fields is not None:
            raise RecordRefused(f"{where} has the dtype {dtype}")
        if math.prod(shape) * dtype.itemsize > MAX_REPLAY_BYTES:
            raise RecordRefused(f"{where} is larger than {MAX_REPLAY_BYTES >> 20} MiB")
        return tuple(shape), dtype

    def _initial(self, desc: dict, shape: tuple, dtype: np.dtype, where: str) -> np.ndarray:
        if "input" not in desc:
            return poison(shape, dtype)
        key = desc["input"]
        if type(key) is int and 0 <= key < len(self.args):
            given, name = self.args[key], f"positional argument {key}"
        elif type(key) is str and key in self.kwargs:
            given, name = self.kwargs[key], f"argument {key}="
        else:
            raise RecordRefused(f"{where} claims to be the input {key!r}, not one the test passed")
        if not isinstance(given, np.ndarray):
            raise RecordRefused(f"{where} claims to be {name}, which is not an array")
        if given.size != math.prod(shape) or not np.can_cast(given.dtype, dtype, "safe"):
            raise RecordRefused(
                f"{where} claims to be {name} ({given.dtype}, {given.size} elements) as "
                f"{dtype} of shape {shape}"
            )
        return np.ascontiguousarray(given).reshape(shape).astype(dtype)

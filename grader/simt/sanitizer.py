"""compute-sanitizer's four checks on every simulated launch: memcheck, racecheck, initcheck and
synccheck, as NVIDIA's compute-sanitizer defines them, run on CPU.

Why: the simulator runs a block's threads one after another, so a kernel that is wrong on a GPU
can compute the right answer here: thread t reading from shared memory, without a barrier, what
thread t-1 staged there reads it because thread t-1 already ran. Output checks cannot see that;
the sanitizer does, from the accesses themselves, whatever order the threads happened to run in.
A launch with a finding earns no correctness points, and the finding is the feedback.

The checks (definitions after compute-sanitizer's documentation):

- **memcheck**: an access outside the array it indexes, in global, shared or local memory, on
  any axis; a negative index is out of bounds, as on a GPU (NumPy would wrap it round). The
  access stops the launch. (Misaligned accesses cannot be written in Numba's Python kernels:
  every access is one whole element of its array.)
- **racecheck**: two threads access one element, at least one of them writing (not by an
  atomic), with nothing ordering them: in shared memory, two threads of a block between the same
  two barriers, unless a ``syncwarp`` both took part in lies between them (one warp); in global
  memory, the same, and any two threads of different blocks. Reported as the hazard
  compute-sanitizer names: read-after-write, write-after-read, write-after-write.
- **initcheck**: a read of shared memory that no thread of the block wrote before it (fresh
  shared memory is uninitialised on a GPU, in every block), and a read of a global array the
  launch was given uninitialised (``cuda.device_array``) that no thread wrote first.
- **synccheck**: the threads a barrier releases waited at different ``syncthreads()`` calls (a
  barrier in divergent code); a warp primitive whose mask lanes cannot all meet is refused by
  `grader.simt.warps` as the launch runs.

Each finding names the kernel line, the array, the element and the threads (`Finding`); it is
plain data (`Finding.as_plain`, `Finding.from_plain` checks one that crossed the sandbox) and
the trusted side says it with the student's own line numbers (`Finding.said`).

How, and at what cost: the simulator's in-kernel array (``FakeWithinKernelCUDAArray``) and each
shared array (`_Shared`) check every element index and append one tuple per access (address,
thread, barrier and ``syncwarp`` epoch, load or store, line); at the end of the launch NumPy
sorts the record once, and only groups of accesses that several threads made to one address,
one of them a write, are looked at one by one (a correct kernel has almost none).
"""

from __future__ import annotations

import operator
import sys
from dataclasses import dataclass
from sys import _getframe as _line  # the caller's frame, read on every access
from typing import Any

from grader.core.errors import SubmissionError
from grader.simt import cudaapi, simulator, warps

LOAD, STORE, ATOMIC = 0, 1, 2
CHECKS = ("memcheck", "racecheck", "initcheck", "synccheck")
MAX_FINDINGS = 8  # a launch reports this many at most (the first is what a student reads first)
# The checks cover each launch's first accesses, at least one barrier interval of its first
# block: past this many, at the next barrier or block, the launch runs on unchecked (the
# grading's CPU budget: a check costs about a microsecond an access, a plain access a tenth).
RECORD_LIMIT = 20_000
_SYNCWARP_BITS = 24  # an epoch: barriers released << 24 | syncwarps met


class SanitizerStop(SubmissionError, IndexError):
    """memcheck stopped the launch (an IndexError, as the access would raise in NumPy)."""


class FindingError(SubmissionError):
    """A finding that crossed the sandbox does not have the shape of one."""


@dataclass(frozen=True)
class Finding:
    """One finding: the check, what it saw, the kernel line (of the graded kernel's text), the
    array and element, and the threads as ``(tx, ty, tz, bx, by, bz)``; `other_line` is the
    second thread's line (racecheck, synccheck)."""

    check: str
    kind: str
    line: int
    array: str
    element: tuple[int, ...]
    threads: tuple[tuple[int, ...], ...]
    other_line: int = 0

    def as_plain(self) -> dict:
        return {
            "check": self.check,
            "kind": self.kind,
            "line": self.line,
            "array": self.array,
            "element": list(self.element),
            "threads": [list(t) for t in self.threads],
            "other_line": self.other_line,
        }

    @classmethod
    def from_plain(cls, data: Any) -> Finding:
        """A finding from the worker, checked: a finding is data, never trusted to be well
        formed (`FindingError`)."""
        keys = {"check", "kind", "line", "array", "element", "threads", "other_line"}
        if not isinstance(data, dict) or set(data) != keys:
            raise FindingError("a finding without its fields")
        if data["check"] not in CHECKS or data["kind"] not in _KINDS:
            raise FindingError("a finding of no known check")
        ints = (
            [data["line"], data["other_line"], *data["element"]]
            if isinstance(data["element"], list)
            else None
        )
        threads = data["threads"]
        if (
            ints is None
            or not all(type(i) is int for i in ints)
            or not isinstance(data["array"], str)
            or len(data["array"]) > 200
            or len(data["element"]) > 3
            or not isinstance(threads, list)
            or not 1 <= len(threads) <= 2
            or not all(
                isinstance(t, list) and len(t) == 6 and all(type(i) is int for i in t)
                for t in threads
            )
        ):
            raise FindingError("a finding whose fields are not what they say")
        return cls(
            data["check"],
            data["kind"],
            data["line"],
            data["array"],
            tuple(data["element"]),
            tuple(tuple(t) for t in threads),
            data["other_line"],
        )

    def said(self, where: Any = None, names: dict[str, str] | None = None) -> str:
        """The finding as the student reads it: `where` says a kernel line as theirs
        (``line N of <file>``), `names` a shared array's variable (``shared@12``: ``tile``)."""
        place = where or (lambda n: f"line {n}")
        array = self.array if self.kind == "warp_mask" else self._array_said(names or {}, place)
        element = "[" + ", ".join(str(i) for i in self.element) + "]"
        first, second = (_thread_said(t) for t in (self.threads[0], self.threads[-1]))
        if len(self.threads) == 2 and self.threads[0][3:] == self.threads[1][3:]:
            later = "second" if self.kind in ("divergent_barrier", "warp_mask") else "first"
            t = self.threads[1 if later == "second" else 0]
            same = f"thread ({t[0]}, {t[1]}, {t[2]}) of the same block"
            first, second = (first, same) if later == "second" else (same, second)
        text = _KINDS[self.kind].format(
            line=place(self.line),
            other=place(self.other_line),
            array=array,
            element=element,
            first=first,
            second=second,
        )
        return f"{self.check}: {text}"

    def _array_said(self, names: dict[str, str], place: Any) -> str:
        if self.array.startswith("local@"):
            line = self.array[len("local@") :]
            return (
                f"the local array declared at {place(int(line))}"
                if line.isdigit()
                else ("a local array")
            )
        if self.array.startswith("shared@"):
            name = names.get(self.array)
            if name:
                return f"shared array `{name}`"
            line, _, nth = self.array[len("shared@") :].partition(".")
            which = f"shared array number {int(nth) + 1}" if nth else "the shared array"
            return f"{which} declared at {place(int(line))}" if line.isdigit() else "shared memory"
        return f"`{self.array}`" if self.array else "an array"


def _thread_said(t: tuple[int, ...]) -> str:
    return f"thread ({t[0]}, {t[1]}, {t[2]}) of block ({t[3]}, {t[4]}, {t[5]})"


_KINDS = {
    "out_of_bounds": (
        "{line} indexes {array} at {element} in {first}: out of bounds (a GPU has no "
        "wrap-around for negative indices; guard the access)"
    ),
    "read_after_write": (
        "{line} reads {array} element {element} in {second}, which {first} wrote at {other} "
        "with no barrier between them: a read-after-write race (on a GPU the read may come "
        "first; the right result here is luck). Put cuda.syncthreads() between the write and "
        "the read"
    ),
    "write_after_read": (
        "{line} writes {array} element {element} in {second}, which {first} read at {other} "
        "with no barrier between them: a write-after-read race (on a GPU the write may come "
        "first). Put cuda.syncthreads() between the read and the write"
    ),
    "write_after_write": (
        "{line} writes {array} element {element} in {second}, which {first} also wrote at "
        "{other} with nothing ordering them: a write-after-write race (which value remains is "
        "up to the GPU)"
    ),
    "uninitialized": (
        "{line} reads {array} element {element} in {first} before any thread wrote it: "
        "uninitialised memory (fresh shared memory, and cuda.device_array, hold no values)"
    ),
    "warp_mask": (
        "{first} calls cuda.{array} at {line} with a mask that names {second}, which cannot "
        "meet it there (it returned, waits at another barrier or warp primitive, is not in the "
        "block, or the mask leaves out the calling lane itself): every lane a mask names must "
        "reach the same call"
    ),
    "divergent_barrier": (
        "{first} waits at the barrier of {line} while {second} waits at the barrier of "
        "{other}: every live thread of a block must reach the same cuda.syncthreads() (a "
        "barrier in code only some threads run is a divergent barrier)"
    ),
}


# ---- recording (in the process that launches the kernel)


class _Sanitizer(simulator.Observer):
    """The record of the launch in progress, and its findings once it ends."""

    def __init__(self) -> None:
        self.active = False
        self.preparing = False
        self.findings: list[Finding] = []
        self._reset((1, 1, 1), (1, 1, 1), ())

    def _reset(self, grid: tuple, block: tuple, params: tuple) -> None:
        self.grid, self.block_dim, self.params = grid, block, params
        self.threads = block[0] * block[1] * block[2]
        self.base = 0  # the first global thread number of the block that runs
        self.gid = 0  # the running thread's global number (set by the scheduler on every switch)
        self.block_linear = 0
        self.epoch = 0  # barriers released << _SYNCWARP_BITS | syncwarps met
        # one access: five ints (address, thread, epoch, operation, line), flat for NumPy
        self.glog: list[int] = []
        self.slog: list[int] = []
        self.pending: list[Any] = []  # the launch's array arguments, as the simulator wraps them
        self.globals: list[tuple[int, int, str, tuple, tuple, int]] = []
        self.shared: list[tuple[int, int, str, tuple, tuple, int, int]] = []  # + block
        self.warp_syncs: list[tuple[int, frozenset[int]]] = [(-1, frozenset())]
        # arguments from cuda.device_array: (start, end, itemsize, elements written, array)
        self.unset: list[tuple[int, int, int, Any, Any]] = []
        self.stopped: list[Finding] = []

    # ---- a launch

    def begin(self, kernel: Any, args: tuple) -> None:
        from numba.cuda.simulator.kernel import normalize_kernel_dimensions  # lazy: simulator

        grid, block = normalize_kernel_dimensions(kernel.grid_dim, kernel.block_dim)
        code = kernel.fn.__code__
        self._reset(tuple(grid), tuple(block), code.co_varnames[: code.co_argcount])
        self.args = args
        self.findings = []
        self.active = self.preparing = True

    def end(self) -> None:
        self.active = self.preparing = False
        found = list(self.stopped)
        found += self._analyse()
        distinct: dict[tuple, Finding] = {}  # one per check, kind and lines: the first seen
        for f in found:
            distinct.setdefault((f.check, f.kind, f.line, f.other_line, f.array), f)
        self.findings = list(distinct.values())[:MAX_FINDINGS]
        self.glog, self.slog, self.args = [], [], ()

    # ---- what the scheduler tells

    def block(self, block: tuple[int, int, int], threads: int) -> None:
        if self.preparing:
            self.preparing = False
            self._name_arguments()
        gx, gy, _ = self.grid
        self.block_linear = block[0] + gx * (block[1] + gy * block[2])
        self.base = self.gid = self.block_linear * threads
        self._enough()

    def _enough(self) -> None:
        """Past `RECORD_LIMIT`, the rest of the launch runs unchecked."""
        if len(self.glog) + len(self.slog) > 5 * RECORD_LIMIT:
            self.active = False

    def barrier(self, block: tuple[int, int, int]) -> None:
        self.epoch += 1 << _SYNCWARP_BITS
        self._enough()

    def warp_synced(self, block: tuple[int, int, int], threads: tuple[int, ...]) -> None:
        self.epoch += 1
        self.warp_syncs.append((self.block_linear, frozenset(self.base + t for t in threads)))

    def barrier_sites(
        self, block: tuple[int, int, int], threads: list[int], sites: list[Any]
    ) -> None:
        first = sites[0]
        if sites.count(first) == len(sites):  # one call site: the common case, at C speed
            return
        for t, site in zip(threads, sites, strict=True):
            if site is not None and first is not None and site[:2] != first[:2]:
                self.stopped.append(
                    Finding(
                        "synccheck",
                        "divergent_barrier",
                        first[2],
                        "",
                        (),
                        (self._thread(self.base + threads[0]), self._thread(self.base + t)),
                        site[2],
                    )
                )
                return

    def shared_array(self, array: Any, key: tuple[str, int, int]) -> Any:
        if not self.active:  # past the launch's limit: unchecked
            return array
        raw = getattr(array, "_ary", array)
        start = raw.__array_interface__["data"][0]
        name = simulator.shared_name(key)
        self.shared.append(
            (
                start,
                start + raw.nbytes,
                name,
                raw.shape,
                raw.strides,
                raw.itemsize,
                self.block_linear,
            )
        )
        return _Shared(array, raw, name)

    def local_array(self, array: Any, line: int) -> Any:
        """A thread's new local array: its indices bounded (memcheck), nothing recorded."""
        return _Local(array, f"local@{line}") if self.active else array

    # ---- one access

    def access(self, meta: tuple, index: Any, op: int, log: list, depth: int = 2) -> None:
        """Check and record one thread's access of `index` of the array `meta` describes."""
        offset = _offset(meta, index)
        if offset is None:
            return
        if offset < 0:
            self.out_of_bounds(meta, index, _line(depth).f_lineno)
        log.extend((offset, self.gid, self.epoch, op, _line(depth).f_lineno))

    def out_of_bounds(self, meta: tuple, index: Any, line: int) -> None:
        parts = index if type(index) is tuple else (index,)
        element = tuple(int(operator.index(p)) for p in parts if not isinstance(p, slice))
        finding = Finding(
            "memcheck",
            "out_of_bounds",
            line,
            meta[4] or self._name_at(meta[0]),
            element,
            (self._thread(self.gid),),
        )
        self.stopped.append(finding)
        raise SanitizerStop(f"{finding.said()} (shape {meta[1]})")

    # ---- names and places

    def _name_arguments(self) -> None:
        arrays = [n for n, a in zip(self.params, self.args, strict=False) if _array_like(a)]
        for name, item in zip(arrays, self.pending, strict=False):
            raw = item._ary
            start = raw.__array_interface__["data"][0]
            self.globals.append(
                (start, start + raw.nbytes, name, raw.shape, raw.strides, raw.itemsize)
            )
            written = getattr(item, "__dict__", {}).get(_WRITTEN)
            if written is not None and raw.flags.c_contiguous:
                self.unset.append((start, start + raw.nbytes, raw.itemsize, written, item))
        self.pending = []

    def _name_at(self, address: int) -> str:
        for start, end, name, *_ in self.globals:
            if start <= address < end:
                return name
        return ""

    def _thread(self, gid: int) -> tuple[int, ...]:
        b, t = divmod(gid, self.threads)
        bx, by, _ = self.block_dim
        gx, gy, _ = self.grid
        return (t % bx, t // bx % by, t // (bx * by), b % gx, b // gx % gy, b // (gx * gy))

    def _where(self, address: int, block: int | None) -> tuple[str, tuple[int, ...]]:
        """The array and element at `address` (in `block`'s shared memory, or global)."""
        table = (
            [s[:6] for s in reversed(self.shared) if s[6] == block]
            if block is not None
            else self.globals
        )
        for start, end, name, _shape, strides, _item in table:
            if start <= address < end:
                return name, _element(address - start, strides)
        return "", ()

    # ---- the end of a launch

    def _analyse(self) -> list[Finding]:
        import numpy as np  # lazy: numba already imported it

        found: list[Finding] = []
        for log, shared in ((self.slog, True), (self.glog, False)):
            if log:
                a = np.array(log, dtype=np.int64).reshape(-1, 5)
                found += self._races(a, shared)
                if shared:
                    found += self._uninitialised(a)
                elif self.unset:
                    found += self._unset_globals(a)
        return found

    def _unset_globals(self, a: Any) -> list[Finding]:
        """initcheck of the arguments made by ``cuda.device_array``: a read of an element that
        no launch (nor a copy from the host) wrote before; what this launch writes is
        remembered for the next."""
        import numpy as np  # lazy: numba already imported it

        found: list[Finding] = []
        for start, end, itemsize, written, item in self.unset:
            rows = a[(a[:, 0] >= start) & (a[:, 0] < end)]
            if not len(rows):
                continue
            flat = (rows[:, 0] - start) // itemsize
            _, first = np.unique(flat, return_index=True)  # each element's first access
            bad = first[(rows[first, 3] != STORE) & ~written[flat[first]]]
            for k in bad[:MAX_FINDINGS].tolist():
                addr, gid, _, _, line = rows[k].tolist()
                name, element = self._where(addr, None)
                found.append(
                    Finding("initcheck", "uninitialized", line, name, element, (self._thread(gid),))
                )
            written[flat[rows[:, 3] != LOAD]] = True
            if written.all():
                item.__dict__.pop(_WRITTEN, None)
        return found

    def _races(self, a: Any, shared: bool) -> list[Finding]:
        import numpy as np  # lazy: numba already imported it

        seq = np.arange(len(a))
        block = a[:, 1] // self.threads
        keys: tuple[Any, ...] = (
            (seq, a[:, 2] >> _SYNCWARP_BITS, block, a[:, 0]) if shared else (seq, a[:, 0])
        )
        order = np.lexsort(keys)
        s = a[order]
        group = np.ones(len(s), dtype=bool)
        for k in keys[1:]:
            ks = k[order]
            group[1:] &= ks[1:] == ks[:-1]
        starts = np.flatnonzero(~group)
        starts = np.concatenate(([0], starts)) if len(starts) == 0 or starts[0] != 0 else starts
        low = np.minimum.reduceat(s[:, 1], starts)
        high = np.maximum.reduceat(s[:, 1], starts)
        writes = np.maximum.reduceat((s[:, 3] == STORE).astype(np.int8), starts)
        found: list[Finding] = []
        ends = [*starts[1:].tolist(), len(s)]
        for g in np.flatnonzero((low != high) & (writes > 0)).tolist():
            hazard = self._hazard(s[starts[g] : ends[g]].tolist(), shared)
            if hazard is not None:
                found.append(hazard)
                if len(found) >= MAX_FINDINGS:
                    break
        return found

    def _hazard(self, rows: list[list[int]], shared: bool) -> Finding | None:
        """The first pair of accesses in `rows` (one address, in the order they ran) by two
        threads, one a plain write, that nothing orders."""
        for j, (_, t2, e2, op2, line2) in enumerate(rows[:512]):
            for addr1, t1, e1, op1, line1 in rows[:j]:
                if t1 == t2 or STORE not in (op1, op2) or self._ordered(t1, e1, t2, e2):
                    continue
                kind = (
                    "write_after_write"
                    if op1 == STORE and op2 == STORE
                    else "read_after_write"
                    if op1 == STORE
                    else "write_after_read"
                )
                block = t1 // self.threads if shared else None
                name, element = self._where(addr1, block)
                return Finding(
                    "racecheck",
                    kind,
                    line2,
                    name,
                    element,
                    (self._thread(t1), self._thread(t2)),
                    line1,
                )
        return None

    def _ordered(self, t1: int, e1: int, t2: int, e2: int) -> bool:
        """Whether a barrier of their block, or a syncwarp both met, lies between two accesses
        (`e1` the earlier's epoch)."""
        if t1 // self.threads != t2 // self.threads:
            return False
        if e1 >> _SYNCWARP_BITS != e2 >> _SYNCWARP_BITS:
            return True
        mask = (1 << _SYNCWARP_BITS) - 1
        for k in range((e1 & mask) + 1, (e2 & mask) + 1):
            members = self.warp_syncs[k][1] if k < len(self.warp_syncs) else frozenset()
            if t1 in members and t2 in members:
                return True
        return False

    def _uninitialised(self, a: Any) -> list[Finding]:
        import numpy as np  # lazy: numba already imported it

        block = a[:, 1] // self.threads
        order = np.lexsort((np.arange(len(a)), block, a[:, 0]))
        s = a[order]
        b = block[order]
        first = np.ones(len(s), dtype=bool)
        first[1:] = (s[1:, 0] != s[:-1, 0]) | (b[1:] != b[:-1])
        found: list[Finding] = []
        for row in s[first & (s[:, 3] != STORE)][:MAX_FINDINGS].tolist():
            addr, gid, _, _, line = row
            name, element = self._where(addr, gid // self.threads)
            found.append(
                Finding("initcheck", "uninitialized", line, name, element, (self._thread(gid),))
            )
        return found


def _array_like(value: Any) -> bool:
    """Whether the simulator hands the kernel this argument as an array."""
    import numpy as np  # lazy: numba already imported it

    if isinstance(value, np.ndarray):
        return value.ndim > 0
    return isinstance(value, np.void) or hasattr(value, "_ary") or hasattr(value, "to_device")


def _meta(raw: Any, name: str = "") -> tuple:
    """What an access needs of an array: address, shape, strides, dimensions, name."""
    return (raw.__array_interface__["data"][0], raw.shape, raw.strides, raw.ndim, name)


def _offset(meta: tuple, index: Any) -> int | None:
    """The address of element `index`, None for an index that makes a view (a row, a
    slice), -1 for one out of bounds (negative ones included)."""
    address, shape, strides, ndim, _ = meta
    if type(index) is int:
        if 0 <= index < shape[0] if ndim else False:
            return address + index * strides[0] if ndim == 1 else None
        return -1
    parts = index if type(index) is tuple else (index,)
    view = len(parts) < ndim
    for axis, p in enumerate(parts):
        if axis >= ndim:
            return -1
        if type(p) is not int:
            if isinstance(p, slice):
                view = True
                continue
            try:
                p = operator.index(p)
            except TypeError:
                return None  # not an index the sanitizer reads (NumPy says what it is)
        if not 0 <= p < shape[axis]:
            return -1
        address += p * strides[axis]
    return None if view else address


def _fast(meta: tuple) -> tuple:
    """What `_quick` reads of a 1-D or 2-D array: address, extents and strides, dimensions."""
    address, shape, strides, ndim, _ = meta
    if ndim == 1:
        return (address, shape[0], strides[0], 0, 0, 1)
    if ndim == 2:
        return (address, shape[0], strides[0], shape[1], strides[1], 2)
    return (0, 0, 0, 0, 0, 0)


def _quick(f: tuple, index: Any) -> int:
    """The address of element `index` when it is the common case (an int of a 1-D array, two
    ints of a 2-D one, in bounds), else -1 (the full check decides)."""
    if type(index) is int:
        if f[5] == 1 and 0 <= index < f[1]:
            return f[0] + index * f[2]
    elif type(index) is tuple and f[5] == 2 and len(index) == 2:
        i, j = index
        if type(i) is int and type(j) is int and 0 <= i < f[1] and 0 <= j < f[3]:
            return f[0] + i * f[2] + j * f[4]
    return -1


def _element(offset: int, strides: tuple) -> tuple[int, ...]:
    """The index of the element `offset` bytes into an array with `strides` (non-negative)."""
    out = [0] * len(strides)
    for axis in sorted(range(len(strides)), key=lambda k: -abs(strides[k])):
        s = strides[axis]
        if s > 0:
            out[axis], offset = divmod(offset, s)
    return tuple(out)


class _Elements:
    """Iterating an array in a kernel (``for v in row``, ``zip(a[y], b.T[x])``): its elements in
    order up to its length, each read checked and recorded at the kernel's own line. Without
    it Python's old iteration protocol reads one element past the end until IndexError, which
    memcheck would rightly call out of bounds."""

    __slots__ = ("_array", "_i", "_load", "_n")

    def __init__(self, array: Any, load: Any) -> None:
        self._array, self._load, self._i, self._n = array, load, 0, len(array)

    def __iter__(self) -> _Elements:
        return self

    def __next__(self) -> Any:
        i = self._i
        if i >= self._n:
            raise StopIteration
        self._i = i + 1
        return self._load(self._array, i)  # the access is said at the kernel's line (depth 3)


class _Shared:
    """A block's shared array as the kernel holds it: every element access checked and
    recorded, the rest of the array as it was (``shape``, ``size``, ``dtype``, views)."""

    def __init__(self, inner: Any, raw: Any, name: str) -> None:
        self._item = inner  # what `grader.simt.memtrace` unwraps, and what is indexed
        self._meta = meta = _meta(raw, name)
        self._fast = _fast(meta)

    def __getitem__(self, index: Any) -> Any:
        san = _SANITIZER
        if san.active:
            f = self._fast
            if type(index) is tuple and f[5] == 2 and len(index) == 2:  # a 2-D element, inline
                i, j = index
                if type(i) is int and type(j) is int and 0 <= i < f[1] and 0 <= j < f[3]:
                    san.slog.extend(
                        (f[0] + i * f[2] + j * f[4], san.gid, san.epoch, LOAD, _line(1).f_lineno)
                    )
                    return self._item[index]
            elif type(index) is int and f[5] == 1 and 0 <= index < f[1]:  # a 1-D element
                san.slog.extend((f[0] + index * f[2], san.gid, san.epoch, LOAD, _line(1).f_lineno))
                return self._item[index]
            offset = _offset(self._meta, index)
            if offset is None:
                view = self._item[index]
                raw = getattr(view, "_ary", view)
                if hasattr(raw, "__array_interface__"):
                    return _Shared(view, raw, self._meta[4])
                return view
            san.access(self._meta, index, LOAD, san.slog)
        return self._item[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        san = _SANITIZER
        if san.active:
            address = _quick(self._fast, index)
            if address >= 0:
                san.slog.extend((address, san.gid, san.epoch, STORE, _line(1).f_lineno))
            else:
                san.access(self._meta, index, STORE, san.slog)
        self._item[index] = value

    def __len__(self) -> int:
        return len(self._item)

    def __iter__(self) -> _Elements:
        return _Elements(self, _Shared._element)

    def _element(self, i: int) -> Any:
        san = _SANITIZER
        if san.active:
            san.access(self._meta, i, LOAD, san.slog, depth=3)
        return self._item[i]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_item"], name)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        import numpy as np  # lazy: numba already imported it

        return np.asarray(getattr(self._item, "_ary", self._item), *args, **kwargs)


class _Local:
    """A thread's local array: every element index bounded, negative ones included (memcheck);
    nothing recorded (no other thread sees it)."""

    def __init__(self, array: Any, name: str) -> None:
        self._item = array
        self._meta = _meta(array, name)
        self._n = array.shape[0] if array.ndim == 1 else -1

    def __getitem__(self, index: Any) -> Any:
        if not (type(index) is int and 0 <= index < self._n):
            self._check(index)
        return self._item[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        if not (type(index) is int and 0 <= index < self._n):
            self._check(index)
        self._item[index] = value

    def _check(self, index: Any) -> None:
        if _SANITIZER.active and _offset(self._meta, index) == -1:
            _SANITIZER.out_of_bounds(self._meta, index, _line(2).f_lineno)

    def __len__(self) -> int:
        return len(self._item)

    def __iter__(self) -> Any:
        return iter(self._item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_item"], name)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        import numpy as np  # lazy: numba already imported it

        return np.asarray(self._item, *args, **kwargs)


_SANITIZER = _Sanitizer()


def clear() -> None:
    """Forget the last launch's findings (before a launch whose findings are read after)."""
    _SANITIZER.findings = []


def findings() -> list[Finding]:
    """The findings of the last simulated launch in this process (empty: none, or no
    sanitizer)."""
    return list(_SANITIZER.findings)


def attach() -> None:
    """Run the four checks on every later simulated launch of this process (called by
    `grader.simt.simulator.install`, once its scheduler is in place)."""
    if simulator._sanitizer is _SANITIZER:
        return
    from numba.cuda.simulator import kernel, kernelapi  # lazy: after the simulator switch
    from numba.cuda.simulator.cudadrv import devicearray

    _patch_arrays(devicearray.FakeWithinKernelCUDAArray, devicearray.FakeCUDAArray)
    _patch_atomics(kernelapi.FakeCUDAAtomic)
    _patch_launch(kernel.FakeCUDAKernel)
    _patch_device_arrays(devicearray)
    simulator._sanitizer = _SANITIZER


_FIXED = frozenset({"shape", "size", "ndim", "dtype", "strides", "itemsize", "nbytes"})


def _cache_shapes(wrapper: Any) -> None:
    """An array's shape, size, dtype... never change: the wrapper keeps the first read, so the
    next (``c.size`` in every thread) finds it without the simulator's two calls."""
    looked_up = wrapper.__getattr__

    def getattr_(self: Any, name: str) -> Any:
        value = looked_up(self, name)
        if name in _FIXED:
            self.__dict__[name] = value
        return value

    wrapper.__getattr__ = getattr_


def _patch_arrays(wrapper: Any, plain: Any) -> None:
    """The simulator's in-kernel array (every global array a kernel gets): checked and recorded.
    An element of a plain device array is read from its NumPy array directly (what the
    simulator's two wrappers do, two calls fewer); a traced one (`grader.simt.memtrace`) goes
    through its own class. Long because its four methods share one set of closures (the
    simulator's own methods, the cached array metadata), which keeps each access, the hot path of
    every simulated launch, to one Python call."""
    import numpy as np  # lazy: numba already imported it

    get, put, init = wrapper.__getitem__, wrapper.__setitem__, wrapper.__init__
    san = _SANITIZER
    views = (np.ndarray, np.void)

    def meta_of(d: dict) -> tuple:
        item = d["_item"]
        raw = item._ary
        meta = _meta(raw)
        d["_san"] = found = (meta, _fast(meta), raw if type(item) is plain else None)
        return found

    def getitem(self: Any, index: Any) -> Any:
        d = self.__dict__
        if san.active:
            meta, fast, raw = d.get("_san") or meta_of(d)
            address = _quick(fast, index)
            if address >= 0:
                san.glog.extend((address, san.gid, san.epoch, LOAD, _line(1).f_lineno))
            else:
                san.access(meta, index, LOAD, san.glog)
        else:
            item: Any = d["_item"]
            raw = item._ary if type(item) is plain else None
        if raw is not None:
            value = raw[index]
            if type(value) not in views:
                return value
        return get(self, index)

    def setitem(self: Any, index: Any, value: Any) -> None:
        if not san.active:
            return put(self, index, value)
        d = self.__dict__
        meta, fast, raw = d.get("_san") or meta_of(d)
        address = _quick(fast, index)
        if address >= 0:
            san.glog.extend((address, san.gid, san.epoch, STORE, _line(1).f_lineno))
        else:
            san.access(meta, index, STORE, san.glog)
        if raw is not None:
            raw[index] = value
        else:
            put(self, index, value)
        return None

    _cache_shapes(wrapper)

    def new(self: Any, item: Any) -> None:
        init(self, item)
        if san.preparing:
            san.pending.append(item)

    def element(self: Any, i: int) -> Any:
        d = self.__dict__
        if san.active:
            meta, _, raw = d.get("_san") or meta_of(d)
            san.access(meta, i, LOAD, san.glog, depth=3)
        else:
            raw = d["_item"]._ary if type(d["_item"]) is plain else None
        if raw is not None:
            value = raw[i]
            if type(value) not in views:
                return value
        return get(self, i)

    def iterate(self: Any) -> _Elements:
        return _Elements(self, element)

    wrapper.__getitem__, wrapper.__setitem__, wrapper.__init__ = getitem, setitem, new
    wrapper.__iter__ = iterate


def _patch_atomics(atomic: Any) -> None:
    """``cuda.atomic.*``: one atomic access, not the load and store the simulator makes."""
    san = _SANITIZER
    for name in cudaapi.ATOMICS:
        original = getattr(atomic, name, None)
        if original is None:
            continue

        def checked(self: Any, array: Any, index: Any, *rest: Any, _f: Any = original) -> Any:
            if not san.active:
                return _f(self, array, index, *rest)
            inner = array.__dict__.get("_item", array) if hasattr(array, "__dict__") else array
            raw = getattr(inner, "_ary", inner)
            shared = isinstance(array, _Shared) or any(
                s[0] <= raw.__array_interface__["data"][0] < s[1] for s in san.shared[-8:]
            )
            meta = array._meta if isinstance(array, _Shared) else _meta(raw)
            san.access(meta, index, ATOMIC, san.slog if shared else san.glog)
            return _f(self, raw, index, *rest)

        setattr(atomic, name, checked)


_WRITTEN = "_sanitizer_written"  # on a cuda.device_array: which elements hold a value


def _patch_device_arrays(devicearray: Any) -> None:
    """``cuda.device_array`` (and ``_like``) memory holds nothing until written: initcheck
    follows which elements a launch, or a copy from the host, wrote."""
    import numpy as np  # lazy: numba already imported it

    made, plain = devicearray.device_array, devicearray.FakeCUDAArray
    copy, put = plain.copy_to_device, plain.__setitem__

    def device_array(*args: Any, **kwargs: Any) -> Any:
        array = made(*args, **kwargs)
        array.__dict__[_WRITTEN] = np.zeros(array._ary.size, dtype=bool)
        return array

    def copy_to_device(self: Any, ary: Any, stream: Any = 0) -> Any:
        self.__dict__.pop(_WRITTEN, None)
        return copy(self, ary, stream)

    def setitem(self: Any, index: Any, value: Any) -> Any:
        if not _SANITIZER.active:  # the host's write: the array holds values from here on
            self.__dict__.pop(_WRITTEN, None)
        return put(self, index, value)

    devicearray.device_array = device_array
    plain.copy_to_device, plain.__setitem__ = copy_to_device, setitem
    cuda: Any = sys.modules.get("numba.cuda")
    if cuda is not None and getattr(cuda, "device_array", None) is made:
        cuda.device_array = device_array


def _patch_launch(kernel_class: Any) -> None:
    """Every launch begins and ends a record; device-function calls pass through."""
    launch = kernel_class.__call__
    san = _SANITIZER

    def call(self: Any, *args: Any) -> Any:
        if self._device or san.active:
            return launch(self, *args)
        san.begin(self, args)
        try:
            return launch(self, *args)
        except warps.WarpError as exc:  # synccheck: a warp mask that cannot be met
            if exc.threads:
                pair = tuple(san._thread(san.base + t) for t in exc.threads)
                san.stopped.append(Finding("synccheck", "warp_mask", exc.line, exc.op, (), pair))
            raise
        finally:
            san.end()

    kernel_class.__call__ = call

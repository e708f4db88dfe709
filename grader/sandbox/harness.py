"""Code the grader runs inside a sandboxed worker: untrusted like everything in that process.

`Harness` serves the notebook worker: it runs the graded cells one by one (those the trusted
side read and sent in the load request, so this process neither imports jupytext nor parses the
file again), as nbgrader does with errors allowed (a cell that fails costs what depends on it,
not the notebook), and answers ``call``, ``has`` and ``cells`` (the cells that failed) with
plain-data replies (``{"ok": value}`` or ``{"error": {"type", "message", "traceback"}}``); a
``call`` with ``record`` also logs the launches a host wrapper made. Every line number in a
traceback is the student's own: the .py's line, or an .ipynb cell's.
`KernelHost` serves the kernel workers, which load no notebook: it builds a kernel from the
source the trusted side extracted (`grader.core.kernel_source`) and compiles it to PTX,
launches it, or launches it many times for the trusted side's clock.

Student cells can import and patch this module in their own process, so nothing it says is a
verdict: the trusted side checks every reply (`grader.suites.student`, `grader.sandbox.backend`).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import linecache
import os
import sys
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from grader.core import cubin, device, timing
from grader.core.errors import SubmissionError
from grader.core.kernel_source import ALLOWED_BUILTINS
from grader.core.notebook import GradedCell, read_graded_cells
from grader.sandbox import protocol, wire
from grader.sandbox.protocol import (
    MAX_BATCH_CALLS,
    MAX_FINDINGS,
    MAX_RECORDED_LAUNCHES,
    NOTEBOOK_FAILED,
    PROTOCOL_ERROR,
    TRACEBACK_CHARS,
)
from grader.simt import memtrace, sanitizer, simulator

MODULE_PREFIX = "submission_"


def _student_frames(exc: BaseException, filename: str) -> str:
    """The traceback limited to frames in the student's notebook, trimmed for feedback.

    `filename` is the notebook's path: frames of its .py, or of its .ipynb's cells (named
    ``<path> cell N``), are the student's; the folder is left out of what the student reads.
    """
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if f.filename == filename or f.filename.startswith(filename + " cell ")
    ]
    text = "".join(traceback.format_list(frames)) if frames else ""
    text += "".join(traceback.format_exception_only(type(exc), exc))
    return text.replace(str(Path(filename).parent) + os.sep, "")[-TRACEBACK_CHARS:]


def error_reply(exc: BaseException, filename: str = "") -> dict:
    try:
        message = str(exc)
    except Exception:  # a student exception whose __str__ itself raises
        message = "<message unavailable>"
    return protocol.error(
        type(exc).__name__,
        message[:TRACEBACK_CHARS],
        _student_frames(exc, filename) if filename else "",
    )


def cell_filename(path: Path | str, cell: GradedCell) -> str:
    """The file name tracebacks show for a cell: the .py itself (its lines are the file's), or
    ``<path> cell N`` for an .ipynb's cell (registered in linecache with the cell's lines)."""
    return str(path) if cell.in_file else f"{path} cell {cell.index + 1}"


class CellFailure(SubmissionError):
    """A graded cell that did not compile or raised while the notebook loaded."""

    def __init__(self, cell: GradedCell, where: str, error: dict, names: tuple[str, ...]):
        super().__init__(f"{where}: {error['type']}: {error['message']}")
        self.cell, self.where, self.error, self.names = cell, where, error, names

    def as_data(self) -> dict:
        return {
            "where": self.where,
            "graded": bool(self.cell.grade_id),
            "type": self.error["type"],
            "message": self.error["message"],
            "traceback": self.error["traceback"],
            "names": list(self.names),
        }


def load_cells(
    path: Path, name: str, cells: Sequence[GradedCell] | None = None
) -> tuple[types.ModuleType, list[CellFailure], str]:
    """Execute the graded cells of a notebook one by one as a fresh module registered as `name`;
    a cell that fails is recorded (with its place in the student's file) and the rest still run.
    Returns the module, the failures and the graded cells' source (what `_preload` reads).
    `cells`: the notebook's graded cells as the trusted side read them; None: read them here.

    A .py's cells compile with their own line numbers in the file and the file's text in
    linecache; an .ipynb's cells each under ``<path> cell N``.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.suffix != ".ipynb" else None
    if cells is None:
        cells = read_graded_cells(path)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    if text is not None:
        linecache.cache[str(path)] = (len(text), None, text.splitlines(True), str(path))
    failures = []
    for cell in cells:
        filename = cell_filename(path, cell)
        if not cell.in_file:
            lines = cell.source.splitlines(True)
            linecache.cache[filename] = (len(cell.source), None, lines, filename)
        try:
            tree = ast.parse(cell.source, filename)
            ast.increment_lineno(tree, cell.line - 1)
            code = compile(tree, filename, "exec")
        except SyntaxError as exc:
            own = cell.source.splitlines()
            if exc.lineno is not None and 1 <= exc.lineno <= len(own):
                exc.text = own[exc.lineno - 1] + "\n"  # the cell's line, not the file's
            if exc.lineno is not None and cell.in_file:
                exc.lineno += cell.line - 1
                if exc.end_lineno is not None:
                    exc.end_lineno += cell.line - 1
            failures.append(_failure(cell, path, exc, _names_in(cell.source)))
            continue
        try:
            exec(code, module.__dict__)  # noqa: S102 - the student's code, in the student process
        except BaseException as exc:  # noqa: BLE001 - a failing cell is data; the rest still runs
            failures.append(_failure(cell, path, exc, _names_in(cell.source, tree)))
    return module, failures, "\n".join(cell.source for cell in cells)


def _failure(
    cell: GradedCell, path: Path, exc: BaseException, names: tuple[str, ...]
) -> CellFailure:
    error = error_reply(exc, str(path))["error"]
    line = exc.lineno if isinstance(exc, SyntaxError) else _last_line(exc, str(path), cell)
    where = cell.where(path.name)
    if line and cell.in_file and line != cell.line:
        where = f"{path.name} line {line}, in {where.removeprefix(path.name + ' ')}"
    elif line and not cell.in_file:
        where = f"{where}, line {line} of the cell"
    return CellFailure(cell, where, error, names)


def _last_line(exc: BaseException, filename: str, cell: GradedCell) -> int | None:
    own = cell_filename(filename, cell)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == own]
    return frames[-1].lineno if frames else None


def _names_in(source: str, tree: ast.Module | None = None) -> tuple[str, ...]:
    """The top-level names a cell defines (its functions, classes and assignments); for a cell
    that does not parse, the ``def``/``class`` lines found by their first word."""
    if tree is None:
        names = []
        for ln in source.splitlines():
            words = ln.replace("(", " ").replace(":", " ").split()
            if len(words) >= 2 and words[0] in ("def", "class") and words[1].isidentifier():
                names.append(words[1])
        return tuple(names)
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return tuple(found)


def device_cell(source: str) -> bool:
    """Whether a cell is device code: it imports numba or names ``cuda`` (a kernel, a host
    wrapper that launches one, the cell that imports numba). Source that does not parse is
    not device code (its failure is reported as ever)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "numba" for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numba":
            return True
        if isinstance(node, ast.Name) and node.id == "cuda":
            return True
    return False


def load_module(path: Path, name: str) -> types.ModuleType:
    """Execute the graded cells of a trusted notebook (the reference) but its device cells
    (`device_cell`): every cell must run, so the first failure is raised.

    The suites compare with the reference's host functions only: kernels run in the sandbox,
    never in the trusted process, which so never imports numba (about 0.45 s of CPU per
    grading). A name of a device cell is an AttributeError that says so."""
    kept: list[GradedCell] = []
    left_out: set[str] = set()
    for cell in read_graded_cells(path):
        if device_cell(cell.source):
            left_out.update(_names_in(cell.source))
        else:
            kept.append(cell)
    module, failures, _ = load_cells(path, name, kept)
    if failures:
        raise failures[0]

    def __getattr__(attr: str) -> Any:
        if attr in left_out:
            raise AttributeError(
                f"{attr} is defined in a device cell of {Path(path).name} (it imports numba or "
                "uses cuda), which the trusted process does not run: compare a kernel's output "
                "with numpy in the suite, or move host code out of that cell"
            )
        raise AttributeError(f"module {name!r} has no attribute {attr!r}")

    module.__dict__["__getattr__"] = __getattr__  # PEP 562: asked only for a missing name
    return module


def _launch_dims(value: Any, what: str) -> int | tuple[int, ...]:
    dims = value if isinstance(value, tuple) else (value,)
    if not dims or len(dims) > 3 or not all(type(d) is int and d >= 1 for d in dims):
        raise ValueError(f"{what} must be a positive int or a tuple of up to 3, got {value!r}")
    return value


PRELOAD = ("torch",)


def _preload(graded: str) -> None:
    """Import heavy libraries the graded cells import lazily, while the worker is warming up.

    The load runs while the trusted process is still starting pytest, so the second it takes
    to import torch is off the critical path instead of inside the first test that needs it.
    Only the graded cells count: an import in a demo cell (which the grader never runs) would
    cost a grading the CPU time of importing torch for nothing.
    """
    for name in PRELOAD:
        if f"import {name}" in graded and name not in sys.modules:
            try:
                __import__(name)
            except Exception:  # noqa: BLE001 - the notebook's own import will report it
                pass


class Harness:
    """Holds one loaded submission module and serves requests against it."""

    def __init__(self, path: Path | str, assignment_id: str):
        self.path = Path(path)
        self.assignment_id = assignment_id
        self.module: types.ModuleType | None = None
        self.load_error: dict | None = None
        self.failures: list[CellFailure] = []

    def load(self, request: dict | None = None) -> dict:
        """Run the notebook: the cells the load request carries (`protocol.load_request`), else
        those this process reads from the file."""
        device.prepare_numba()
        try:
            sent = protocol.request_cells(request or {})
            cells = None if sent is None else [GradedCell(*c) for c in sent]
            name = MODULE_PREFIX + self.assignment_id
            self.module, self.failures, graded = load_cells(self.path, name, cells)
            _preload(graded)
            if "numba" in sys.modules:  # the notebook's own launches, when it imported numba
                simulator.install()
            return protocol.ok(None)
        except BaseException as exc:  # noqa: BLE001 - any failure of student code is data
            self.load_error = error_reply(exc, str(self.path))
            return self.load_error

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        try:
            if op == "load":
                return self.load(request)
            if self.module is None:
                if self.load_error is None:
                    self.load()
                if self.module is None:
                    assert self.load_error is not None  # load() sets one or the other
                    err = self.load_error["error"]
                    message = f"the notebook failed to run: {err['type']}: {err['message']}"
                    return protocol.error(NOTEBOOK_FAILED, message, err["traceback"])
            if op == "has":
                return protocol.ok(
                    hasattr(self.module, request["name"]) and not self._failed(request["name"])
                )
            if op == "cells":
                return protocol.ok([f.as_data() for f in self.failures])
            if op == "call":
                return protocol.ok(self._call(request))
            if op == "call_many":
                calls = request.get("calls")
                if not isinstance(calls, list) or len(calls) > MAX_BATCH_CALLS:
                    message = f"call_many takes a list of at most {MAX_BATCH_CALLS} calls"
                    return protocol.error(PROTOCOL_ERROR, message)
                return protocol.ok([self._one(request["name"], c) for c in calls])
            return protocol.error(PROTOCOL_ERROR, f"unknown op {op!r}")
        except CellFailed as exc:
            return protocol.error(NOTEBOOK_FAILED, exc.args[0][:TRACEBACK_CHARS], exc.args[1])
        except BaseException as exc:  # noqa: BLE001 - student failures travel as data
            return error_reply(exc, str(self.path))

    def _one(self, name: str, call: dict) -> dict:
        """One entry of a ``call_many``: what a ``call`` of `name` with the entry's ``args``
        and ``kwargs`` would have answered; a failure costs only this entry."""
        try:
            request = {"name": name, "args": call["args"], "kwargs": call["kwargs"]}
            reply = protocol.ok(self._call(request))
            wire.encode(reply)  # the batch's frame carries only plain data
            return reply
        except wire.NotPlainData as exc:
            return protocol.not_plain(exc, name)
        except CellFailed as exc:
            return protocol.error(NOTEBOOK_FAILED, exc.args[0][:TRACEBACK_CHARS], exc.args[1])
        except BaseException as exc:  # noqa: BLE001 - student failures travel as data
            return error_reply(exc, str(self.path))

    def _failed(self, name: str) -> CellFailure | None:
        """The failed cell that defines (or was meant to define) `name`, if any."""
        return next((f for f in self.failures if name in f.names), None)

    def _get(self, name: str) -> Any:
        failed = self._failed(name)
        if failed is not None:
            raise CellFailed(
                f"{name} is defined in a cell that failed to run: {failed}. Fix that cell; the "
                "rest of the notebook was graded",
                failed.error["traceback"],
            )
        if not hasattr(self.module, name):
            broken = [f for f in self.failures if f.cell.grade_id]
            hint = f"; a cell that failed to run may have defined it: {broken[0]}" if broken else ""
            raise MissingName(
                f"{name} is not defined in {self.path.name}; keep the name and "
                f"signature from the release{hint}"
            )
        return getattr(self.module, name)

    def _call(self, request: dict) -> Any:
        """Call a function; with ``record``, also return the launches of those kernels it made.

        The record is evidence, not a verdict: the trusted side replays every recorded launch
        with the kernel it compiled from the source, on the test's own inputs and on fresh
        poisoned outputs (`grader.suites.replay`). With ``timing`` the record keeps the first
        launches and counts the rest, and the timed loop is left alone (no copy, no sync).
        """
        fn = self._get(request["name"])
        args, kwargs = request.get("args", []), request.get("kwargs", {})
        record = request.get("record")
        if record is None:
            return fn(*args, **kwargs)
        log: list[dict] = []
        slots = _Slots(args, kwargs)
        timing = bool(request.get("timing"))
        names = [str(k) for k in record]
        saved = {k: self.module.__dict__.get(k) for k in names}
        for k in names:
            self.module.__dict__[k] = _Recorder(saved[k], k, log, slots, timing)
        try:
            value = fn(*args, **kwargs)
        finally:
            self.module.__dict__.update(saved)
        return {"value": value, "launches": log}


def _host_copy(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.copy()
    if hasattr(value, "copy_to_host"):
        return value.copy_to_host()
    return value


class _Slots:
    """Names each array a wrapper launches with: the same object is the same slot, and a slot
    whose contents equal one of the call's own array arguments says which (``input``)."""

    def __init__(self, args: list, kwargs: dict):
        self._inputs = [(i, a) for i, a in enumerate(args) if isinstance(a, np.ndarray)]
        self._inputs += [(k, a) for k, a in kwargs.items() if isinstance(a, np.ndarray)]
        self._seen: dict[int, tuple[Any, dict]] = {}  # the object is kept: ids stay unique

    def describe(self, value: Any) -> dict:
        if not (isinstance(value, np.ndarray) or _is_array(value)):
            return {"scalar": value}
        if id(value) in self._seen:
            return self._seen[id(value)][1]
        shape, dtype = tuple(int(d) for d in value.shape), np.dtype(value.dtype)
        desc: dict = {"slot": len(self._seen), "shape": list(shape), "dtype": dtype.str}
        source = self._source(value, shape, dtype)
        if source is not None:
            desc["input"] = source
        self._seen[id(value)] = (value, desc)
        return desc

    def _source(self, value: Any, shape: tuple, dtype: np.dtype) -> int | str | None:
        size = int(np.prod(shape))
        found = [
            (i, a)
            for i, a in self._inputs
            if a.size == size and np.can_cast(a.dtype, dtype, "safe")
        ]
        if not found:
            return None
        host = np.asarray(_host_copy(value)).reshape(-1)
        for i, a in found:
            if np.array_equal(host, a.reshape(-1).astype(dtype), equal_nan=dtype.kind in "fc"):
                return i
        return None


class _Recorder:
    """Stands for a kernel while a host wrapper runs: launches it and logs what it launched
    (the kernel, the dimensions, and each argument as a slot or a scalar, never its data)."""

    def __init__(self, kernel: Any, name: str, log: list[dict], slots: _Slots, timing: bool):
        self._kernel, self._name, self._log = kernel, name, log
        self._slots, self._timing = slots, timing

    def __getitem__(self, dims: Any) -> Callable[..., None]:
        if not (isinstance(dims, tuple) and len(dims) == 2):
            raise TypeError(f"launch {self._name} as {self._name}[blocks, threads](...)")

        def launch(*args: Any) -> None:
            full = len(self._log) >= MAX_RECORDED_LAUNCHES
            if full and not self._timing:
                raise RuntimeError(
                    f"{self._name} was launched more than {MAX_RECORDED_LAUNCHES} times in one call"
                )
            described = None if full else [self._slots.describe(a) for a in args]
            self._kernel[dims](*args)
            if described is not None:
                self._log.append(
                    {"kernel": self._name, "grid": dims[0], "block": dims[1], "args": described}
                )

        return launch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)


class KernelCompileError(SubmissionError):
    """Numba's CUDA compiler rejected the kernel (its message says why)."""


class CellFailed(SubmissionError):
    """A graded name whose cell failed to run (message, the cell's traceback)."""


class MissingName(SubmissionError, AttributeError):
    """The notebook does not define a graded name."""


FLUSH_MIN_BYTES = 256 << 20  # at least 2x the L2 of every course GPU (H100, H200: 50 MiB)
MAX_STAGED = 4  # kernels staged at once (a test times up to three, in turn)
_FLUSH: list = []  # the one flush buffer, shared by every staged kernel


class _Staged:
    """A timed kernel on the device: its input variants, its output copies, and the L2 flush
    buffer. Only the grader's code runs here, yet nothing it says is trusted: the trusted side
    (`grader.suites.timing`) times each `run` on its own clock and checks what was written."""

    def __init__(self, kernel: Any, grid: Any, block: Any, variants: list[list], out: list):
        self.kernel, self.grid, self.block, self.variants = kernel, grid, block, variants
        self.outputs, self.copies = out[0], out[1]
        self.l2_bytes = _l2_bytes()
        if not _FLUSH:
            _FLUSH.append(_device_bytes(max(FLUSH_MIN_BYTES, 2 * self.l2_bytes)))
        self.flush = _FLUSH[0]

    def describe(self) -> dict:
        return {"l2_bytes": self.l2_bytes, "flush_bytes": int(self.flush.size)}

    def args(self, sample: int, launch: int) -> list:
        args = list(self.variants[timing.variant(sample, launch)])
        for slot, i in enumerate(self.outputs):
            args[i] = self.copies[timing.copy(launch)][slot]
        return args

    def serve(self, op: str, request: dict) -> Any:
        if op == "kernel_prepare":  # untimed: outputs NaN (0xFF bytes), the L2 flushed
            for arrays in self.copies:
                for a in arrays:
                    _fill(a, 0xFF)
            _fill(self.flush, 0)
            _synchronize()
            return None
        if op == "kernel_run":  # timed by the trusted side around this one request
            sample = int(request.get("sample", 0))
            for j in range(max(0, int(request.get("repeat", 1)))):
                self.kernel[self.grid, self.block](*self.args(sample, j))
            _synchronize()
            return None
        # kernel_sample: element ranges of every copy and input; kernel_fetch: one range of one
        ranges = request["ranges"]
        if op == "kernel_fetch":
            part, i, k = str(request["part"]), int(request["arg"]), int(request["which"])
            slot = self.outputs.index(i) if part == "outputs" else -1
            array = self.copies[k][slot] if part == "outputs" else self.variants[k][i]
            return _read(array, ranges)
        return {
            "outputs": {
                str(i): {str(k): _read(c[slot], ranges[str(i)]) for k, c in enumerate(self.copies)}
                for slot, i in enumerate(self.outputs)
            },
            "inputs": {
                str(i): {str(k): _read(v[i], ranges[str(i)]) for k, v in enumerate(self.variants)}
                for i in range(len(self.variants[0]))
                if _is_array(self.variants[0][i])
            },
        }


def _read(array: Any, ranges: list) -> np.ndarray:
    """The flat elements [start, stop) of each range, copied from the device slice by slice."""
    flat = array.reshape(array.size)
    return np.concatenate([flat[int(a) : int(b)].copy_to_host() for a, b in ranges])


def _l2_bytes() -> int:
    """The device's L2 size (0 in the simulator, which has none)."""
    cuda = KernelHost._cuda()
    if device.simulator_active():
        return 0
    return int(cuda.get_current_device().L2_CACHE_SIZE)


def _device_bytes(n: int) -> Any:
    cuda = KernelHost._cuda()
    # the simulator has no cache to flush: a token buffer keeps its memory small
    return cuda.device_array(1 << 12 if device.simulator_active() else n, dtype=np.uint8)


def _fill(array: Any, byte: int) -> None:
    """Every byte of a device array set to `byte`, on the device (a memset, through the L2)."""
    if device.simulator_active():
        array.copy_to_device(
            np.frombuffer(bytes([byte]) * array.nbytes, dtype=array.dtype).reshape(array.shape)
        )
        return
    from numba.cuda.cudadrv import driver  # lazy: the real target only

    driver.device_memset(array, byte, array.nbytes)


class KernelHost:
    """Serves ``kernel_*`` requests from source the trusted side extracted; loads no notebook.

    The source (`grader.core.kernel_source`) defines only imports, literal constants and plain
    functions, so building it runs no student code; the grader's own ``cuda.jit`` turns them
    into device functions and the kernel. In the simulator a kernel body runs as Python, which is
    why the trusted side launches here only what its compile worker compiled for the GPU first.
    """

    def __init__(self) -> None:
        self._built: dict[tuple[str, str, tuple[str, ...]], Any] = {}
        self._staged: dict[str, _Staged] = {}  # by slot: the kernels one test times

    def handle(self, request: dict) -> dict:
        try:
            op = request.get("op")
            if op == "kernel_compile":
                return protocol.ok(self._compile(request))
            if op == "kernel_resources":  # what the compiled kernel holds per thread and block
                cc = request.get("cc", (7, 5))
                found = cubin.resources(self._compile(request), (int(cc[0]), int(cc[1])))
                if len(found) != 1:
                    raise RuntimeError(f"{len(found)} kernels in one compiled source")
                return protocol.ok(dataclasses.asdict(next(iter(found.values()))))
            if op == "kernel_launch":
                kernel, grid, block, dev = self._prepare(request)
                with _sanitized() as findings:
                    kernel[grid, block](*dev)
                    _synchronize()
                if findings:
                    return protocol.ok({"findings": findings})
                return protocol.ok([_host_copy(d) if _is_array(d) else None for d in dev])
            if op == "kernel_profile":
                return protocol.ok(self._profile(request))
            if op == "kernel_stage":
                slot = str(request.get("slot", ""))
                self._staged.pop(slot, None)
                if len(self._staged) >= MAX_STAGED:
                    raise RuntimeError(f"more than {MAX_STAGED} kernels staged at once")
                self._staged[slot] = _Staged(*self._prepare_variants(request))
                return protocol.ok(self._staged[slot].describe())
            if op in ("kernel_prepare", "kernel_run", "kernel_sample", "kernel_fetch"):
                staged = self._staged.get(str(request.get("slot", "")))
                if staged is None:
                    raise RuntimeError(f"{op} before kernel_stage")
                return protocol.ok(staged.serve(op, request))
            if op == "kernel_unstage":  # frees its device memory
                self._staged.pop(str(request.get("slot", "")), None)
                return protocol.ok(None)
            return protocol.error(PROTOCOL_ERROR, f"unknown op {op!r}")
        except BaseException as exc:  # noqa: BLE001 - a kernel's failure is data
            return error_reply(exc)

    @staticmethod
    def warm() -> None:
        """Import numba (and, in the simulator, install its scheduler) before the first request
        asks: the worker does it while the grading starts up. Only the grader's code runs here;
        a failure is left for the first request, which imports again and reports it."""
        try:
            KernelHost._cuda()
        except Exception:  # noqa: BLE001,S110  # reported by the request that needs numba
            pass

    @staticmethod
    def _cuda() -> Any:
        device.prepare_numba()
        from numba import cuda  # lazy: after prepare_numba (the simulator switch is read once)

        simulator.install()
        return cuda

    def _namespace(self, request: dict) -> tuple[dict, Any]:
        cuda = self._cuda()
        source, name = str(request["source"]), str(request["name"])
        devices = tuple(str(d) for d in request.get("devices", []))
        key = (source, name, devices)
        if key not in self._built:
            tree = ast.parse(source)
            ns: dict[str, Any] = {"__name__": "graded_kernel"}
            imports: list[ast.stmt] = [
                n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
            ]
            rest = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
            exec(compile(ast.Module(imports, []), "<graded kernel>", "exec"), ns)  # noqa: S102
            # Functions capture their builtins when defined: give them numba's few only.
            ns["__builtins__"] = {
                k: getattr(builtins, k) for k in ALLOWED_BUILTINS if hasattr(builtins, k)
            }
            exec(compile(ast.Module(rest, []), "<graded kernel>", "exec"), ns)  # noqa: S102
            for d in devices:
                ns[d] = cuda.jit(device=True)(ns[d])
            self._built[key] = (ns, cuda.jit(ns[name]))
        return self._built[key]

    def _compile(self, request: dict) -> str:
        from numba import cuda  # lazy: numba reads NUMBA_ENABLE_CUDASIM when first imported
        from numba.core.errors import NumbaError

        if device.simulator_active():
            raise RuntimeError("PTX requested from a process running the CUDA simulator")

        ns, _ = self._namespace(request)
        fn = ns[str(request["name"])]
        cc = request.get("cc", (7, 5))
        cc = (int(cc[0]), int(cc[1]))
        try:
            with _course_device(cc):
                ptx, _ = cuda.compile_ptx(fn, str(request["signature"]), cc=cc)
        except NumbaError as exc:
            raise KernelCompileError(str(exc)) from None
        except Exception as exc:
            if type(exc).__name__ != "CudaSupportError":
                raise
            # numba-cuda reaches for a driver when the kernel calls something it cannot type on
            # its own (str(), float() of a non-number...): name the cause, not the driver.
            raise KernelCompileError(
                f"{request['name']} uses something Numba cannot compile for a GPU (it tried to "
                "consult a CUDA driver to type it, e.g. str() or float() of a non-number); "
                "keep kernels to numbers, array indexing and math"
            ) from None
        return ptx

    def _profile(self, request: dict) -> dict:
        """One launch in the simulator with its memory accesses recorded: the outputs and the
        launch's memory profile (`grader.simt.memtrace`, `grader.simt.memmodel`), as data."""
        if not device.simulator_active():
            raise RuntimeError("a memory profile was asked of a process not running the simulator")
        kernel, grid, block, dev = self._prepare(request)
        ns, _ = self._namespace(request)
        code = ns[str(request["name"])].__code__
        names = code.co_varnames[: code.co_argcount]
        grid3, block3 = _three(grid), _three(block)
        with memtrace.Recorder() as recorder:
            recorder.launching(grid3)
            traced = [
                recorder.argument(d, n) if _is_array(d) else d
                for d, n in zip(dev, names, strict=False)
            ]
            with _sanitized() as found:
                kernel[grid, block](*traced)
                _synchronize()
        if found:
            return {"findings": found}
        return {
            "outputs": [_host_copy(d) if _is_array(d) else None for d in dev],
            "profile": recorder.profile(grid3, block3).to_plain(),
        }

    def _prepare_variants(self, request: dict) -> tuple[Any, Any, Any, list[list], list]:
        """A timed kernel's staging: every input variant on the device, and each output
        argument (`outputs`: their indices) as `timing.K_OUT` copies."""
        _, kernel = self._namespace(request)
        cuda = self._cuda()  # after prepare_numba: numba reads the simulator switch once
        grid = _launch_dims(request["grid"], "grid (blocks)")
        block = _launch_dims(request["block"], "block (threads per block)")
        specs = {int(i): spec for i, spec in dict(request["outputs"]).items()}
        outputs = sorted(specs)
        variants = request["variants"]
        if len(variants) != timing.K_IN or any(len(v) != len(variants[0]) for v in variants):
            raise ValueError(f"a timed kernel takes {timing.K_IN} argument lists of one length")
        staged = [
            [
                cuda.to_device(a) if isinstance(a, np.ndarray) and i not in outputs else a
                for i, a in enumerate(args)
            ]
            for args in variants
        ]
        copies = [
            [cuda.device_array(tuple(specs[i][0]), np.dtype(str(specs[i][1]))) for i in outputs]
            for _ in range(timing.K_OUT)
        ]
        return kernel, grid, block, staged, [outputs, copies]

    def _prepare(self, request: dict) -> tuple[Any, Any, Any, list]:
        from numba import cuda  # lazy: numba reads NUMBA_ENABLE_CUDASIM when first imported

        _, kernel = self._namespace(request)
        grid = _launch_dims(request["grid"], "grid (blocks)")
        block = _launch_dims(request["block"], "block (threads per block)")
        dev = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in request["args"]]
        return kernel, grid, block, dev


@contextlib.contextmanager
def _course_device(cc: tuple[int, int]) -> Iterator[None]:
    """Device functions called from a kernel compile for the *current* device's compute
    capability (numba-cuda asks the driver), which fails without a GPU and is the wrong target
    on a GPU that is not the course's: during a compile, that device is the course GPU."""
    from numba.cuda import dispatcher  # lazy: numba reads NUMBA_ENABLE_CUDASIM when imported

    current = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc)
    try:
        yield
    finally:
        dispatcher.get_current_device = current


@contextlib.contextmanager
def _sanitized() -> Iterator[list[dict]]:
    """Around one launch: its compute-sanitizer findings (`grader.simt.sanitizer`), as plain
    data, in the list it yields (empty on a GPU, where the hardware runs the kernel). A launch
    that memcheck stopped is a finding, not an error: the finding says where and why."""
    found: list[dict] = []
    sanitizer.clear()
    try:
        yield found
    except Exception:
        found += [f.as_plain() for f in sanitizer.findings()[:MAX_FINDINGS]]
        if not found:
            raise
        return
    found += [f.as_plain() for f in sanitizer.findings()[:MAX_FINDINGS]]


def _three(dims: Any) -> tuple[int, int, int]:
    """Launch dimensions as (x, y, z)."""
    items = (*(dims if isinstance(dims, tuple) else (dims,)), 1, 1)
    return (int(items[0]), int(items[1]), int(items[2]))


def _is_array(value: Any) -> bool:
    return hasattr(value, "copy_to_host")


def _synchronize() -> None:
    from numba import cuda  # lazy: numba reads NUMBA_ENABLE_CUDASIM when first imported

    cuda.synchronize()

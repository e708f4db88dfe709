"""Code the grader runs inside a sandboxed worker: untrusted like everything in that process.

`Harness` serves the notebook worker: it loads the graded cells and answers ``call`` and
``has`` with plain-data replies (``{"ok": value}`` or ``{"error": {"type", "message",
"traceback"}}``); a ``call`` with ``record`` also logs the launches a host wrapper made.
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
import linecache
import sys
import traceback
import types
from pathlib import Path
from typing import Any

import numpy as np

from grader.core import device
from grader.core.kernel_source import ALLOWED_BUILTINS
from grader.core.notebook import graded_source, read_notebook
from grader.sandbox import protocol
from grader.sandbox.protocol import (
    MAX_RECORDED_LAUNCHES,
    NOTEBOOK_FAILED,
    PROTOCOL_ERROR,
    TRACEBACK_CHARS,
)

MODULE_PREFIX = "submission_"


def _student_frames(exc: BaseException, filename: str) -> str:
    """The traceback limited to frames in the student's notebook, trimmed for feedback."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    text = "".join(traceback.format_list(frames)) if frames else ""
    text += "".join(traceback.format_exception_only(type(exc), exc))
    return text.replace(filename, Path(filename).name)[-TRACEBACK_CHARS:]


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


def graded_filename(path: Path | str) -> str:
    """The file name tracebacks show for a notebook's graded cells (registered in linecache)."""
    return f"{path} [graded cells]"


def load_module(path: Path, name: str) -> types.ModuleType:
    """Execute the graded cells of a notebook as a fresh module registered as `name`.

    The joined cells are registered in linecache under `graded_filename(path)`, so a traceback
    quotes the line that actually ran rather than whatever sits at that line number in the file.
    """
    nb = read_notebook(path)
    source = graded_source(nb)
    filename = graded_filename(path)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    code = compile(source, filename, "exec")
    exec(code, module.__dict__)  # noqa: S102 - this is the student's code, in the student process
    return module


def _launch_dims(value: Any, what: str) -> int | tuple[int, ...]:
    dims = value if isinstance(value, tuple) else (value,)
    if not dims or len(dims) > 3 or not all(type(d) is int and d >= 1 for d in dims):
        raise ValueError(f"{what} must be a positive int or a tuple of up to 3, got {value!r}")
    return value


PRELOAD = ("torch",)


def _preload(module: types.ModuleType) -> None:
    """Import heavy libraries the notebook imports lazily, while the worker is warming up.

    The load runs while the trusted process is still starting pytest, so the second it takes
    to import torch is off the critical path instead of inside the first test that needs it.
    """
    source = "".join(linecache.getlines(graded_filename(module.__file__)))
    for name in PRELOAD:
        if f"import {name}" in source and name not in sys.modules:
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

    def load(self) -> dict:
        device.prepare_numba()
        try:
            self.module = load_module(self.path, MODULE_PREFIX + self.assignment_id)
            _preload(self.module)
            return protocol.ok(None)
        except BaseException as exc:  # noqa: BLE001 - any failure of student code is data
            self.load_error = error_reply(exc, graded_filename(self.path))
            return self.load_error

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        try:
            if op == "load":
                return self.load()
            if self.module is None:
                if self.load_error is None:
                    self.load()
                if self.module is None:
                    err = self.load_error["error"]
                    message = f"the notebook failed to run: {err['type']}: {err['message']}"
                    return protocol.error(NOTEBOOK_FAILED, message, err["traceback"])
            if op == "has":
                return protocol.ok(hasattr(self.module, request["name"]))
            if op == "call":
                return protocol.ok(self._call(request))
            return protocol.error(PROTOCOL_ERROR, f"unknown op {op!r}")
        except BaseException as exc:  # noqa: BLE001 - student failures travel as data
            return error_reply(exc, graded_filename(self.path))

    def _get(self, name: str) -> Any:
        if not hasattr(self.module, name):
            raise MissingName(
                f"{name} is not defined in {self.path.name}; keep the name and "
                "signature from the release"
            )
        return getattr(self.module, name)

    def _call(self, request: dict) -> Any:
        """Call a function; with ``record``, also return the launches of those kernels it made.

        The record is evidence, not a verdict: the trusted side replays every recorded launch
        with the kernel it compiled from the source and compares the outputs.
        """
        fn = self._get(request["name"])
        args, kwargs = request.get("args", []), request.get("kwargs", {})
        record = request.get("record")
        if record is None:
            return fn(*args, **kwargs)
        log: list[dict] = []
        names = [str(k) for k in record]
        saved = {k: self.module.__dict__.get(k) for k in names}
        for k in names:
            self.module.__dict__[k] = _Recorder(saved[k], k, log)
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


class _Recorder:
    """Stands for a kernel while a host wrapper runs: launches it and logs inputs and outputs."""

    def __init__(self, kernel: Any, name: str, log: list[dict]):
        self._kernel, self._name, self._log = kernel, name, log

    def __getitem__(self, dims: Any):
        from numba import cuda  # lazy: numba reads NUMBA_ENABLE_CUDASIM when first imported

        if not (isinstance(dims, tuple) and len(dims) == 2):
            raise TypeError(f"launch {self._name} as {self._name}[blocks, threads](...)")

        def launch(*args: Any) -> None:
            if len(self._log) >= MAX_RECORDED_LAUNCHES:
                raise RuntimeError(
                    f"{self._name} was launched more than {MAX_RECORDED_LAUNCHES} times in one call"
                )
            inputs = [_host_copy(a) for a in args]
            self._kernel[dims](*args)
            cuda.synchronize()
            self._log.append(
                {
                    "kernel": self._name,
                    "grid": dims[0],
                    "block": dims[1],
                    "inputs": inputs,
                    "outputs": [_host_copy(a) for a in args],
                }
            )

        return launch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)


class KernelCompileError(Exception):
    """Numba's CUDA compiler rejected the kernel (its message says why)."""


class MissingName(AttributeError):
    """The notebook does not define a graded name."""


class KernelHost:
    """Serves ``kernel_*`` requests from source the trusted side extracted; loads no notebook.

    The source (`grader.core.kernel_source`) defines only imports, literal constants and plain
    functions, so building it runs no student code; the grader's own ``cuda.jit`` turns them
    into device functions and the kernel. In the simulator a kernel body runs as Python, which is
    why the trusted side launches here only what its compile worker compiled for the GPU first.
    """

    def __init__(self) -> None:
        self._built: dict[tuple[str, str, tuple[str, ...]], Any] = {}
        self._staged: tuple[Any, Any, Any, list] | None = None

    def handle(self, request: dict) -> dict:
        try:
            op = request.get("op")
            if op == "kernel_compile":
                return protocol.ok(self._compile(request))
            if op == "kernel_launch":
                kernel, grid, block, dev = self._prepare(request)
                kernel[grid, block](*dev)
                _synchronize()
                return protocol.ok([_host_copy(d) if _is_array(d) else None for d in dev])
            if op == "kernel_stage":
                self._staged = None
                kernel, grid, block, dev = self._prepare(request)
                kernel[grid, block](*dev)  # warm-up: the first launch compiles
                _synchronize()
                self._staged = (kernel, grid, block, dev)
                return protocol.ok(None)
            if op == "kernel_run":
                if self._staged is None:
                    raise RuntimeError("kernel_run before kernel_stage")
                kernel, grid, block, dev = self._staged
                for _ in range(max(1, int(request.get("repeat", 1)))):
                    kernel[grid, block](*dev)
                _synchronize()
                return protocol.ok(None)
            if op == "kernel_fetch":
                if self._staged is None:
                    raise RuntimeError("kernel_fetch before kernel_stage")
                return protocol.ok(
                    [_host_copy(d) if _is_array(d) else None for d in self._staged[3]]
                )
            return protocol.error(PROTOCOL_ERROR, f"unknown op {op!r}")
        except BaseException as exc:  # noqa: BLE001 - a kernel's failure is data
            return error_reply(exc)

    def _namespace(self, request: dict) -> tuple[dict, Any]:
        device.prepare_numba()
        from numba import cuda  # lazy: after prepare_numba (the simulator switch is read once)

        source, name = str(request["source"]), str(request["name"])
        devices = tuple(str(d) for d in request.get("devices", []))
        key = (source, name, devices)
        if key not in self._built:
            tree = ast.parse(source)
            ns: dict[str, Any] = {"__name__": "graded_kernel"}
            imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
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

    def _prepare(self, request: dict) -> tuple[Any, Any, Any, list]:
        from numba import cuda  # lazy: numba reads NUMBA_ENABLE_CUDASIM when first imported

        _, kernel = self._namespace(request)
        grid = _launch_dims(request["grid"], "grid (blocks)")
        block = _launch_dims(request["block"], "block (threads per block)")
        dev = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in request["args"]]
        return kernel, grid, block, dev


@contextlib.contextmanager
def _course_device(cc: tuple[int, int]):
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


def _is_array(value: Any) -> bool:
    return hasattr(value, "copy_to_host")


def _synchronize() -> None:
    from numba import cuda  # lazy: numba reads NUMBA_ENABLE_CUDASIM when first imported

    cuda.synchronize()

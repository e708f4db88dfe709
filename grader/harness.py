"""Trusted code that runs inside the process holding student code.

It answers requests (plain dicts from `grader.wire`) with replies of the same kind:
``{"ok": value}`` or ``{"error": {"type", "message", "traceback"}}``. The in-process backend
and the sandboxed worker both use it, so a test behaves the same in both. Nothing here trusts
the student's module: every value it returns goes through `wire.encode`, which refuses
anything that is not plain data.
"""

from __future__ import annotations

import linecache
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any

from grader.core import device

MODULE_PREFIX = "submission_"
TRACEBACK_CHARS = 4000


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
    return {
        "error": {
            "type": type(exc).__name__,
            "message": message[:TRACEBACK_CHARS],
            "traceback": _student_frames(exc, filename) if filename else "",
        }
    }


def graded_filename(path: Path | str) -> str:
    """The file name tracebacks show for a notebook's graded cells (registered in linecache)."""
    return f"{path} [graded cells]"


def load_module(path: Path, name: str) -> types.ModuleType:
    """Execute the graded cells of a notebook as a fresh module registered as `name`.

    The joined cells are registered in linecache under `graded_filename(path)`, so a traceback
    quotes the line that actually ran rather than whatever sits at that line number in the file.
    """
    from grader.notebook import graded_source, read_notebook

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


def is_kernel(obj: Any) -> bool:
    """A Numba CUDA kernel (real dispatcher or simulator FakeCUDAKernel)."""
    cls = type(obj)
    return cls.__name__ in ("CUDADispatcher", "FakeCUDAKernel") and cls.__module__.startswith(
        "numba"
    )


def python_function(kernel: Any):
    return getattr(kernel, "py_func", None) or getattr(kernel, "fn", None)


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
            return {"ok": None}
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
                    err = dict(self.load_error["error"])
                    err["message"] = f"the notebook failed to run: {err['type']}: {err['message']}"
                    err["type"] = "NotebookFailed"
                    return {"error": err}
            if op == "has":
                return {"ok": hasattr(self.module, request["name"])}
            if op == "call":
                fn = self._get(request["name"])
                return {"ok": fn(*request.get("args", []), **request.get("kwargs", {}))}
            if op == "launch":
                return {"ok": self._launch(request)}
            if op == "time":
                return {"ok": self._time(request)}
            if op == "ptx":
                return {"ok": self._ptx(request)}
            if op == "read_text":
                return {"ok": _read_text(request["path"])}
            if op == "list_dir":
                return {"ok": sorted(p.name for p in Path(request.get("path", ".")).iterdir())}
            return {
                "error": {"type": "ProtocolError", "message": f"unknown op {op!r}", "traceback": ""}
            }
        except BaseException as exc:  # noqa: BLE001 - student failures travel as data
            return error_reply(exc, graded_filename(self.path))

    def _get(self, name: str) -> Any:
        if not hasattr(self.module, name):
            raise MissingName(
                f"{name} is not defined in {self.path.name}; keep the name and "
                "signature from the release"
            )
        return getattr(self.module, name)

    def _kernel(self, name: str) -> Any:
        kernel = self._get(name)
        if not is_kernel(kernel):
            raise TypeError(f"{name} is not a @cuda.jit kernel (got {type(kernel).__name__})")
        return kernel

    def _launch(self, request: dict) -> list:
        import numpy as np
        from numba import cuda

        kernel = self._kernel(request["name"])
        grid = _launch_dims(request["grid"], "grid (blocks)")
        block = _launch_dims(request["block"], "block (threads per block)")
        args = request.get("args", [])
        dev = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
        kernel[grid, block](*dev)
        cuda.synchronize()
        return [d.copy_to_host() if hasattr(d, "copy_to_host") else None for d in dev]

    def _ptx(self, request: dict) -> str:
        """PTX of a kernel; only meaningful in a process started with GRADER_PTX_ONLY=1."""
        from numba import cuda

        kernel = self._kernel(request["name"])
        if type(kernel).__name__ == "FakeCUDAKernel":
            raise RuntimeError("PTX requested from a process running the CUDA simulator")
        fn = python_function(kernel)
        cc = request.get("cc", (7, 5))
        try:
            ptx, _ = cuda.compile_ptx(fn, request["signature"], cc=(int(cc[0]), int(cc[1])))
        except Exception as exc:
            if type(exc).__name__ != "CudaSupportError":
                raise
            # numba-cuda reaches for a driver when the kernel calls something it cannot type on
            # its own (str(), float() of a non-number...): name the cause, not the driver.
            raise TypeError(
                f"{request['name']} uses something Numba cannot compile for a GPU (it tried to "
                "consult a CUDA driver to type it, e.g. str() or float() of a non-number); "
                "keep kernels to numbers, array indexing and math"
            ) from None
        return ptx

    def _time(self, request: dict) -> float:
        """Milliseconds per launch: CUDA events on a GPU, perf_counter in the simulator."""
        import numpy as np
        from numba import cuda

        kernel = self._kernel(request["name"])
        grid = _launch_dims(request["grid"], "grid (blocks)")
        block = _launch_dims(request["block"], "block (threads per block)")
        repeat = max(1, int(request.get("repeat", 10)))
        dev = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in request["args"]]
        kernel[grid, block](*dev)  # warm-up: compiles on first launch
        cuda.synchronize()
        if device.simulator_active():
            t0 = time.perf_counter()
            for _ in range(repeat):
                kernel[grid, block](*dev)
            return (time.perf_counter() - t0) * 1e3 / repeat
        start, end = cuda.event(), cuda.event()
        start.record()
        for _ in range(repeat):
            kernel[grid, block](*dev)
        end.record()
        end.synchronize()
        return cuda.event_elapsed_time(start, end) / repeat


READ_MAX_BYTES = 1 << 20


def _read_text(path: str) -> str | None:
    """A small text file the student's code wrote (None when absent), for tests to check."""
    p = Path(path)
    if p.is_absolute() or ".." in p.parts:
        raise ValueError(f"{path}: only relative paths inside the working directory")
    if not p.is_file():
        return None
    with p.open("rb") as f:
        data = f.read(READ_MAX_BYTES + 1)
    if len(data) > READ_MAX_BYTES:
        raise ValueError(f"{path} is larger than {READ_MAX_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


class MissingName(AttributeError):
    """The notebook does not define a graded name."""


def compile_ptx(
    path: Path | str, assignment_id: str, name: str, signature: str, cc: tuple[int, int]
) -> dict:
    """Compile a kernel of the notebook to PTX with the real CUDA target (no simulator).

    Run in a process of its own: numba.cuda is imported before the student's cells execute, so
    a notebook that asks for the simulator cannot switch this process to it.
    """
    import os

    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    from numba import cuda

    try:
        module = load_module(Path(path), MODULE_PREFIX + assignment_id)
    except BaseException as exc:  # noqa: BLE001
        return error_reply(exc, graded_filename(path))
    try:
        kernel = getattr(module, name, None)
        if kernel is None:
            raise MissingName(f"{name} is not defined in {Path(path).name}")
        fn = python_function(kernel) if is_kernel(kernel) else None
        if fn is None:
            raise TypeError(f"{name} is not a @cuda.jit kernel")
        ptx, _ = cuda.compile_ptx(fn, signature, cc=tuple(cc))
        return {"ok": ptx}
    except BaseException as exc:  # noqa: BLE001
        reply = error_reply(exc, graded_filename(path))
        reply["error"]["message"] = reply["error"]["message"][-1500:]
        return reply


def _ptx_main(argv: list[str]) -> int:
    """`python -m grader.harness ptx PATH ID NAME SIGNATURE MAJOR MINOR`: reply on stdout."""
    import os

    from grader import wire

    _, path, assignment_id, name, signature, major, minor = argv
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # whatever the notebook prints goes to stderr, not into the reply
    reply = compile_ptx(path, assignment_id, name, signature, (int(major), int(minor)))
    try:
        data = wire.encode(reply)
    except wire.NotPlainData as exc:
        data = wire.encode(error_reply(exc))
    sys.stdout.flush()
    with os.fdopen(reply_fd, "wb") as out:
        out.write(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(_ptx_main(sys.argv[1:]))

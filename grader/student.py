"""The `student` object that tests call, and the backends that reach student code.

Tests read naturally (``student.ridge_point(...)``, ``student.vector_add[blocks, tpb](a, b, c)``)
and never import the submission. Every argument and result goes through `grader.wire` in every
backend, so a test passes or fails the same way in-process (a student's own `grader check`) and
in the sandboxed worker (`grader.sandbox`).
"""

from __future__ import annotations

import builtins
import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from grader import wire
from grader.harness import Harness


class StudentError(Exception):
    """Student code failed; carries the exception type name, message and trimmed traceback."""

    def __init__(self, exc_type: str, message: str, traceback: str = "", function: str = ""):
        super().__init__(f"{exc_type}: {message}" if message else exc_type)
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback
        self.function = function

    def feedback(self) -> str:
        if self.exc_type in (
            "MissingName",
            "NotebookFailed",
            "NotPlainData",
            "WorkerTimeout",
            "WorkerCrashed",
        ):
            return self.message
        where = f"{self.function} raised " if self.function else ""
        return f"{where}{self.exc_type}: {self.message}".strip()


class MissingFunction(StudentError, AttributeError):
    """The notebook does not define a graded name."""


class NotebookFailed(StudentError):
    """The notebook's graded cells raised while being executed (syntax error, bad import...)."""


class NotPlainResult(StudentError):
    """Student code returned something that is not plain data (refused, never trusted)."""


class WorkerTimeout(StudentError):
    """A call ran past its time limit; the worker was killed and restarted."""


class WorkerCrashed(StudentError):
    """The worker died (exit code, signal, memory); it was restarted."""


_SPECIAL: dict[str, type[StudentError]] = {
    "MissingName": MissingFunction,
    "NotebookFailed": NotebookFailed,
    "NotPlainData": NotPlainResult,
    "WorkerTimeout": WorkerTimeout,
    "WorkerCrashed": WorkerCrashed,
}

# Builtin exceptions a test may expect with pytest.raises; AssertionError is deliberately absent so
# a student cannot turn their own failure into a test's expected outcome.
_MAPPED = (
    "ValueError",
    "TypeError",
    "IndexError",
    "KeyError",
    "LookupError",
    "ZeroDivisionError",
    "ArithmeticError",
    "OverflowError",
    "NotImplementedError",
    "RuntimeError",
    "AttributeError",
    "FileNotFoundError",
    "OSError",
    "RecursionError",
    "MemoryError",
    "UnicodeError",
)


@functools.cache
def _mapped_class(name: str) -> type[StudentError]:
    base = getattr(builtins, name)
    return type(f"Student{name}", (StudentError, base), {"__module__": __name__})


def make_error(err: dict, function: str = "") -> StudentError:
    """Turn an error reply into the exception a test sees."""
    exc_type = str(err.get("type", "Error"))
    message = str(err.get("message", ""))
    trace = str(err.get("traceback", ""))
    if exc_type in _SPECIAL:
        cls: type[StudentError] = _SPECIAL[exc_type]
    elif exc_type in _MAPPED:
        cls = _mapped_class(exc_type)
    else:
        cls = StudentError
    error = cls(exc_type, message, trace, function)
    if exc_type in _MAPPED:
        error.args = (message,)
    return error


class Backend(Protocol):
    """Where student code runs. `request` returns a decoded reply dict."""

    def request(self, req: dict, timeout: float) -> dict: ...

    def ptx(
        self, assignment: str, name: str, signature: str, cc: tuple[int, int], timeout: float
    ) -> dict: ...

    def close(self) -> None: ...


def encode_reply(reply: dict, function: str = "") -> bytes:
    """Encode a harness reply, turning a non-plain result into an error reply."""
    try:
        return wire.encode(reply)
    except wire.NotPlainData as exc:
        what = f"{function} returned" if function else "the result was"
        return wire.encode(
            {
                "error": {
                    "type": "NotPlainData",
                    "message": f"{what} something that is not plain data ({exc}); return numbers, "
                    "strings, lists, tuples, dicts or numpy arrays",
                    "traceback": "",
                }
            }
        )


def ptx_in_subprocess(
    path: Path,
    assignment_id: str,
    name: str,
    signature: str,
    cc: tuple[int, int],
    timeout: float,
    env: dict | None = None,
    cwd: Path | None = None,
    preexec_fn=None,
) -> dict:
    """Compile a kernel to PTX in a fresh process without the simulator; returns a reply."""
    env = dict(os.environ if env is None else env)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    cmd = [
        sys.executable,
        "-m",
        "grader.harness",
        "ptx",
        str(path),
        assignment_id,
        name,
        signature,
        str(cc[0]),
        str(cc[1]),
    ]
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            timeout=timeout,
            env=env,
            cwd=cwd,
            preexec_fn=preexec_fn,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {
            "error": {
                "type": "WorkerTimeout",
                "traceback": "",
                "message": f"compiling {name} to PTX took longer than {timeout:g} s",
            }
        }
    try:
        return wire.decode(proc.stdout)
    except wire.NotPlainData:
        tail = proc.stderr.decode(errors="replace")[-800:]
        return {
            "error": {
                "type": "WorkerCrashed",
                "traceback": "",
                "message": f"the PTX compiler process exited with code {proc.returncode}: {tail}",
            }
        }


class InProcessBackend:
    """Runs notebooks in this process: for a student's own `grader check` and fast tests.

    `notebooks` maps assignment id to the notebook file; each is executed on first use.
    """

    isolation: tuple[str, ...] = ()

    def __init__(self, notebooks: dict[str, Path]):
        self.notebooks = {k: Path(v) for k, v in notebooks.items()}
        self.harnesses: dict[str, Harness] = {}

    def request(self, req: dict, timeout: float) -> dict:
        assignment = req["assignment"]
        if assignment not in self.harnesses:
            self.harnesses[assignment] = Harness(self.notebooks[assignment], assignment)
        reply = self.harnesses[assignment].handle(wire.roundtrip(req))
        return wire.decode(encode_reply(reply, str(req.get("name", ""))))

    def ptx(
        self, assignment: str, name: str, signature: str, cc: tuple[int, int], timeout: float
    ) -> dict:
        path = self.notebooks[assignment].resolve()
        return ptx_in_subprocess(path, assignment, name, signature, cc, timeout)

    def close(self) -> None:
        for assignment in self.harnesses:
            sys.modules.pop(f"submission_{assignment}", None)
        self.harnesses.clear()


class Student:
    """What tests call. Attribute access names a function or kernel of the notebook."""

    def __init__(
        self,
        backend: Backend,
        assignment_id: str,
        call_timeout: float = 30.0,
        kernel_timeout: float = 60.0,
        cc: tuple[int, int] = (7, 5),
    ):
        self._backend = backend
        self._assignment_id = assignment_id
        self._call_timeout = call_timeout
        self._kernel_timeout = kernel_timeout
        self._cc = cc

    def __getattr__(self, name: str) -> Function:
        if name.startswith("_"):
            raise AttributeError(name)
        return Function(self, name)

    def has(self, name: str) -> bool:
        return bool(self._ask({"op": "has", "name": name}, self._call_timeout, name))

    def read_file(self, path: str) -> str | None:
        """Text of a file the student's code wrote, relative to its working directory."""
        out = self._ask({"op": "read_text", "path": path}, self._call_timeout, "read_file")
        return out if isinstance(out, str) else None

    def list_dir(self, path: str = ".") -> list[str]:
        """Names in a directory of the student's working directory."""
        out = self._ask({"op": "list_dir", "path": path}, self._call_timeout, "list_dir")
        return [x for x in out if isinstance(x, str)] if isinstance(out, list) else []

    def _ask(self, req: dict, timeout: float, name: str) -> Any:
        reply = self._backend.request({"assignment": self._assignment_id, **req}, timeout)
        if "error" in reply:
            raise make_error(reply["error"], name)
        return reply["ok"]


class Function:
    """A named function or kernel of the submission."""

    def __init__(self, student: Student, name: str):
        self._student = student
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        s = self._student
        req = {"op": "call", "name": self.name, "args": list(args), "kwargs": kwargs}
        return s._ask(req, s._call_timeout, self.name)

    def __getitem__(self, dims: Any) -> Launch:
        if not (isinstance(dims, tuple) and len(dims) == 2):
            raise TypeError("launch a kernel as student.kernel[blocks, threads_per_block](...)")
        return Launch(self, dims[0], dims[1])

    def ptx(self, signature: str, cc: tuple[int, int] | None = None) -> str:
        """PTX text for `signature` on the course GPU (raises StudentError if it won't compile)."""
        s = self._student
        reply = s._backend.ptx(
            s._assignment_id, self.name, signature, cc or s._cc, s._kernel_timeout
        )
        if "error" in reply:
            raise make_error(reply["error"], self.name)
        return reply["ok"]


class Launch:
    """``student.kernel[grid, block]``: call it to launch; arrays are copied back in place."""

    def __init__(self, function: Function, grid: Any, block: Any):
        self.function, self.grid, self.block = function, grid, block

    def _req(self, op: str, args: tuple, **extra: Any) -> dict:
        return {
            "op": op,
            "name": self.function.name,
            "grid": self.grid,
            "block": self.block,
            "args": list(args),
            **extra,
        }

    def __call__(self, *args: Any) -> None:
        s = self.function._student
        out = s._ask(self._req("launch", args), s._kernel_timeout, self.function.name)
        if not isinstance(out, list) or len(out) != len(args):
            raise make_error({"type": "ProtocolError", "message": "bad launch reply"})
        for original, result in zip(args, out, strict=True):
            if isinstance(original, np.ndarray):
                if (
                    not isinstance(result, np.ndarray)
                    or result.shape != original.shape
                    or result.dtype != original.dtype
                ):
                    raise make_error(
                        {"type": "ProtocolError", "message": "kernel output changed shape or dtype"}
                    )
                np.copyto(original, result)

    def time(self, *args: Any, repeat: int = 10) -> float:
        """Milliseconds per launch measured in the student process."""
        s = self.function._student
        return float(
            s._ask(
                self._req("time", args, repeat=repeat), s._kernel_timeout * 2, self.function.name
            )
        )

"""The `student` object that tests call, and the backends that reach student code.

Tests read naturally (``student.ridge_point(...)``, ``student.vector_add[blocks, tpb](a, b, c)``)
and never import the submission. Every argument and result goes through `grader.sandbox.wire` in every
backend, so a test passes or fails the same way in-process (a student's own `grader check`) and
in the sandboxed worker (`grader.sandbox`).

Nothing the student's process says is a verdict. Kernels are taken from the notebook's source
(`grader.core.kernel_source`), compiled for the course GPU by a process that runs nothing of the
notebook, and launched, timed and read back by kernel workers that load no notebook; a host
wrapper's launches are replayed with that kernel. Infrastructure outcomes (timeout, crash,
malformed reply) come only from errors the trusted side made (``origin: grader``).
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

from grader.sandbox import wire
from grader.core import kernel_source
from grader.core.feedback import excerpt
from grader.sandbox.harness import Harness, KernelHost


class StudentError(Exception):
    """Student code failed; carries the exception type name, message and trimmed traceback.

    `grader` is True when the trusted side decided this outcome (a timeout, a crash, a
    malformed reply, a kernel refused or not compiling); otherwise it is what the student's
    process reported, whatever its type is called.
    """

    def __init__(
        self,
        exc_type: str,
        message: str,
        traceback: str = "",
        function: str = "",
        grader: bool = False,
    ):
        super().__init__(f"{exc_type}: {message}" if message else exc_type)
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback
        self.function = function
        self.grader = grader

    def feedback(self) -> str:
        if self.grader or type(self) in (MissingFunction, NotebookFailed, NotPlainResult):
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
    """The worker died (exit code, signal, memory) or sent a malformed reply; restarted."""


class KernelRefused(StudentError):
    """The graded kernel cannot be taken from the source, or does not compile for the GPU."""


# Reported by the harness in the student's process: a student can forge these, which only
# changes how their own failure reads.
_SPECIAL: dict[str, type[StudentError]] = {
    "MissingName": MissingFunction,
    "NotebookFailed": NotebookFailed,
    "NotPlainData": NotPlainResult,
}
# Decided by the trusted side only: honoured only on an error with ``origin: grader``.
_INFRASTRUCTURE: dict[str, type[StudentError]] = {
    "WorkerTimeout": WorkerTimeout,
    "WorkerCrashed": WorkerCrashed,
    "ProtocolError": WorkerCrashed,
    "KernelSourceError": KernelRefused,
    "KernelRefused": KernelRefused,
    "NotebookFailed": NotebookFailed,
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
    grader = err.get("origin") == "grader"
    if grader and exc_type in _INFRASTRUCTURE:
        cls: type[StudentError] = _INFRASTRUCTURE[exc_type]
    elif exc_type in _SPECIAL:
        cls = _SPECIAL[exc_type]
    elif exc_type in _MAPPED and not grader:
        cls = _mapped_class(exc_type)
    else:
        cls = StudentError
    error = cls(exc_type, message, trace, function, grader=grader)
    if exc_type in _MAPPED and not grader:
        error.args = (message,)
    return error


def grader_error(kind: str, message: str, function: str = "") -> StudentError:
    """An outcome the trusted side decided (never mapped to a builtin a test may expect)."""
    return make_error({"type": kind, "message": message, "origin": "grader"}, function)


def malformed(what: str, function: str = "") -> StudentError:
    return grader_error("WorkerCrashed", f"the worker sent a malformed reply ({what})", function)


class Backend(Protocol):
    """Where student code runs. Every method returns a decoded reply dict or data."""

    def request(self, req: dict, timeout: float) -> dict: ...

    def kernel(self, req: dict, timeout: float, target: str = "run") -> dict: ...

    def graded_source(self, assignment: str) -> str: ...

    def read_back(self, path: str, max_bytes: int) -> bytes | None: ...

    def list_back(self, path: str) -> list[str]: ...

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


def compile_in_subprocess(req: dict, timeout: float) -> dict:
    """A ``kernel_compile`` request answered by a fresh process with the real CUDA target."""
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "grader.sandbox.harness"],
            input=wire.encode(req),
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {
            "error": {
                "type": "WorkerTimeout",
                "traceback": "",
                "origin": "grader",
                "message": f"compiling {req.get('name')} took longer than {timeout:g} s",
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
                "origin": "grader",
                "message": f"the compiler process exited with code {proc.returncode}: {tail}",
            }
        }


class InProcessBackend:
    """Runs notebooks in this process: for a student's own `grader check` and fast tests.

    `notebooks` maps assignment id to the notebook file; each is executed on first use. Kernels
    take the same path as in the sandbox (extracted source, compiled in a fresh process), but
    this process is the student's own: nothing here is authoritative.
    """

    isolation: tuple[str, ...] = ()

    def __init__(self, notebooks: dict[str, Path]):
        self.notebooks = {k: Path(v) for k, v in notebooks.items()}
        self.harnesses: dict[str, Harness] = {}
        self.host = KernelHost()

    def request(self, req: dict, timeout: float) -> dict:
        assignment = req["assignment"]
        if assignment not in self.harnesses:
            self.harnesses[assignment] = Harness(self.notebooks[assignment], assignment)
        reply = self.harnesses[assignment].handle(wire.roundtrip(req))
        return _untagged(wire.decode(encode_reply(reply, str(req.get("name", "")))))

    def kernel(self, req: dict, timeout: float, target: str = "run") -> dict:
        if target == "compile":
            return compile_in_subprocess(req, timeout)
        import time

        t0 = time.monotonic()
        reply = _untagged(wire.decode(encode_reply(self.host.handle(wire.roundtrip(req)))))
        if "ok" in reply and req.get("op") == "kernel_run":
            reply["wall_s"] = time.monotonic() - t0
        return reply

    def graded_source(self, assignment: str) -> str:
        from grader.core.notebook import graded_source, read_notebook

        return graded_source(read_notebook(self.notebooks[assignment]))

    def read_back(self, path: str, max_bytes: int) -> bytes | None:
        from grader.core.readback import read_file

        return read_file(Path.cwd(), path, max_bytes)

    def list_back(self, path: str) -> list[str]:
        from grader.core.readback import list_dir

        return list_dir(Path.cwd(), path)

    def close(self) -> None:
        for assignment in self.harnesses:
            sys.modules.pop(f"submission_{assignment}", None)
        self.harnesses.clear()


def _untagged(reply: Any) -> Any:
    """A reply from code in the student's process never carries the trusted side's mark."""
    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
        reply["error"].pop("origin", None)
    return reply


TIME_TARGET_S = 0.25  # a timed request lasts at least this long: it swamps the round trip
MAX_TIMED_LAUNCHES = 100_000
READ_MAX_BYTES = 1 << 20


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
        self._sources: dict[str, kernel_source.KernelSource | StudentError] = {}
        self._compiled: dict[tuple[str, str], str | StudentError] = {}

    def __getattr__(self, name: str) -> Function:
        if name.startswith("_"):
            raise AttributeError(name)
        return Function(self, name)

    def has(self, name: str) -> bool:
        return bool(self._ask({"op": "has", "name": name}, self._call_timeout, name))

    def read_file(self, path: str) -> str | None:
        """Text of a file the student's code wrote, relative to its working directory, read by
        the trusted process (size-capped, no links followed, regular files only)."""
        from grader.core.readback import ReadBackError

        try:
            data = self._backend.read_back(path, READ_MAX_BYTES)
        except ReadBackError as exc:
            raise grader_error("ReadBack", str(exc), "read_file") from None
        return None if data is None else data.decode("utf-8", errors="replace")

    def list_dir(self, path: str = ".") -> list[str]:
        """Names in a directory of the student's working directory, listed by the trusted side."""
        from grader.core.readback import ReadBackError

        try:
            return self._backend.list_back(path)
        except ReadBackError as exc:
            raise grader_error("ReadBack", str(exc), "list_dir") from None

    def _ask(self, req: dict, timeout: float, name: str) -> Any:
        reply = self._backend.request({"assignment": self._assignment_id, **req}, timeout)
        if "error" in reply:
            raise make_error(reply["error"], name)
        return reply["ok"]

    # ---- kernels, from the source

    def _source(self, name: str) -> kernel_source.KernelSource:
        if name not in self._sources:
            try:
                text = self._backend.graded_source(self._assignment_id)
                self._sources[name] = kernel_source.extract(text, name, self._assignment_id)
            except kernel_source.KernelSourceError as exc:
                self._sources[name] = grader_error("KernelRefused", str(exc), name)
            except Exception as exc:  # noqa: BLE001 - an unreadable notebook is the student's
                self._sources[name] = grader_error(
                    "NotebookFailed", f"the notebook cannot be read for {name}: {exc}", name
                )
        found = self._sources[name]
        if isinstance(found, StudentError):
            raise found
        return found

    def _kernel_req(self, op: str, name: str, **extra: Any) -> dict:
        ks = self._source(name)
        return {
            "op": op,
            "source": ks.text,
            "name": name,
            "devices": list(ks.device_functions),
            **extra,
        }

    def _ptx(self, name: str, signature: str, cc: tuple[int, int]) -> str:
        """PTX for the course GPU, compiled once per signature; a failure is cached too."""
        key = (name, f"{signature}@{cc[0]}.{cc[1]}")
        if key not in self._compiled:
            req = self._kernel_req("kernel_compile", name, signature=signature, cc=list(cc))
            reply = self._backend.kernel(req, self._kernel_timeout, "compile")
            if "ok" in reply and isinstance(reply["ok"], str):
                self._compiled[key] = reply["ok"]
            elif "ok" in reply:
                self._compiled[key] = malformed("PTX that is not text", name)
            elif reply["error"].get("origin") == "grader":
                self._compiled[key] = make_error(reply["error"], name)
            elif reply["error"].get("type") != "KernelCompileError":
                err = reply["error"]
                self._compiled[key] = grader_error(
                    "WorkerCrashed",
                    f"the grader's kernel compiler failed on {name} ({err.get('type')}: "
                    f"{str(err.get('message', ''))[-800:]}); this is the grader's fault, not "
                    "yours: tell the course staff",
                    name,
                )
            else:
                err = reply["error"]
                self._compiled[key] = grader_error(
                    "KernelRefused",
                    f"{name} does not compile for the course GPU (compute capability "
                    f"{cc[0]}.{cc[1]}, {signature}): "
                    f"{excerpt(str(err.get('message', '')))}. A GPU accepts only what Numba "
                    "compiles (numbers and arrays, no lists, dicts, strings or numpy calls "
                    "inside a kernel), so the kernel earns none of its points",
                    name,
                )
        found = self._compiled[key]
        if isinstance(found, StudentError):
            raise found
        return found

    def _launch(self, name: str, grid: Any, block: Any, args: list) -> list:
        """Launch the kernel compiled from the source on the trusted side's kernel worker; the
        outputs (arrays copied back, None for scalars), checked against the arguments."""
        grid, block = _dims(grid, "grid"), _dims(block, "block")
        self._ptx(name, _signature(args, name), self._cc)  # the GPU compiler goes first
        req = self._kernel_req("kernel_launch", name, grid=grid, block=block, args=list(args))
        reply = self._backend.kernel(req, self._kernel_timeout, "run")
        if "error" in reply:
            raise make_error(reply["error"], name)
        return _outputs(reply["ok"], args, name)


def _signature(args: list, name: str) -> str:
    try:
        return kernel_source.signature(args)
    except kernel_source.KernelSourceError as exc:
        raise grader_error("KernelRefused", f"launching {name}: {exc}", name) from None


def _dims(value: Any, what: str) -> int | tuple[int, ...]:
    """A launch dimension as plain ints (numpy integers accepted), checked."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    ok = 1 <= len(items) <= 3 and all(
        isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) and d >= 1
        for d in items
    )
    if not ok:
        raise grader_error(
            "KernelRefused",
            f"the launch {what} must be a positive int or a tuple of up to 3, got {value!r}",
        )
    dims = tuple(int(d) for d in items)
    return dims if isinstance(value, (tuple, list)) else dims[0]


def _outputs(out: Any, args: list | tuple, name: str) -> list:
    if not isinstance(out, list) or len(out) != len(args):
        raise malformed("a launch reply that does not match the arguments", name)
    for original, result in zip(args, out, strict=True):
        if isinstance(original, np.ndarray) and (
            not isinstance(result, np.ndarray)
            or result.shape != original.shape
            or result.dtype != original.dtype
        ):
            raise malformed("kernel output changed shape or dtype", name)
    return out


def same_array(got: Any, want: Any) -> bool:
    """Equal shape, dtype and values (NaN equals NaN)."""
    if not (isinstance(got, np.ndarray) and isinstance(want, np.ndarray)):
        return False
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    return bool(np.array_equal(got, want, equal_nan=got.dtype.kind in "fc"))


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
        return s._ptx(self.name, signature, tuple(cc or s._cc))

    def launching(self, *kernels: str):
        """This host wrapper, credited only for launching the student's own `kernels`.

        The wrapper must launch them in its own body (``kernel[grid, block](...)``, checked in
        the source) and does so at least once: while it runs, each kernel name resolves to a
        recorder that logs the launch's inputs and outputs, and every logged launch is replayed
        here with the kernel compiled from the source; the outputs must agree exactly.
        """
        s = self._student

        def call(*args: Any, **kwargs: Any) -> Any:
            for k in kernels:
                s._source(k)  # refused kernels and unreadable notebooks raise here
            text = s._backend.graded_source(s._assignment_id)
            for k in kernels:
                if not kernel_source.launches(text, self.name, k):
                    raise grader_error(
                        "KernelRefused",
                        f"{self.name} does not launch {k} in its own body ({k}[blocks, "
                        f"threads](...)); a host wrapper earns its points by launching {k}",
                        self.name,
                    )
            req = {
                "op": "call",
                "name": self.name,
                "args": list(args),
                "kwargs": kwargs,
                "record": list(kernels),
            }
            out = s._ask(req, s._call_timeout, self.name)
            if not (
                isinstance(out, dict)
                and set(out) == {"value", "launches"}
                and isinstance(out["launches"], list)
            ):
                raise malformed("a wrapper reply without its launch record", self.name)
            if not out["launches"]:
                raise grader_error(
                    "KernelRefused",
                    f"{self.name} returned without launching {' or '.join(kernels)}; compute "
                    "the result on the device with the kernel, not on the host",
                    self.name,
                )
            for n, entry in enumerate(out["launches"], 1):
                self._replay(entry, kernels, n)
            return out["value"]

        return call

    def _replay(self, entry: Any, kernels: tuple[str, ...], n: int) -> None:
        s = self._student
        keys = {"kernel", "grid", "block", "inputs", "outputs"}
        if not (
            isinstance(entry, dict)
            and set(entry) == keys
            and entry["kernel"] in kernels
            and isinstance(entry["inputs"], list)
            and isinstance(entry["outputs"], list)
            and len(entry["inputs"]) == len(entry["outputs"])
        ):
            raise malformed("a launch record of the wrong shape", self.name)
        k = entry["kernel"]
        where = f"launch {n} ({k}[{entry['grid']!r}, {entry['block']!r}]) made by {self.name}"
        try:
            got = s._launch(k, entry["grid"], entry["block"], entry["inputs"])
        except KernelRefused:
            raise
        except StudentError as exc:
            raise grader_error(
                "KernelRefused", f"replaying {where} failed: {exc.feedback()}", self.name
            ) from None
        for i, (want, have) in enumerate(zip(entry["outputs"], got, strict=True)):
            if have is not None and not same_array(want, have):
                raise grader_error(
                    "KernelRefused",
                    f"{where}: argument {i} after the launch is not what {k} produces when the "
                    "grader launches it on the same inputs; the result must come from the "
                    "kernel launch itself",
                    self.name,
                )


class Launch:
    """``student.kernel[grid, block]``: call it to launch; arrays are copied back in place."""

    def __init__(self, function: Function, grid: Any, block: Any):
        self.function, self.grid, self.block = function, grid, block

    def __call__(self, *args: Any) -> None:
        s, name = self.function._student, self.function.name
        out = s._launch(name, self.grid, self.block, list(args))
        for original, result in zip(args, out, strict=True):
            if isinstance(original, np.ndarray):
                np.copyto(original, result)

    def time(self, *args: Any, repeat: int = 10) -> float:
        """Milliseconds per launch on the trusted side's clock.

        The arguments are staged on the kernel worker once; one request then launches the
        kernel R times and synchronizes, and the wall time around that request, measured in
        this process, divided by R is the answer. R (at least `repeat`) is chosen so that the
        request lasts about TIME_TARGET_S, which swamps the round trip. The timed launches'
        outputs must equal those of a single launch on the same inputs.
        """
        import time as _time

        s, name = self.function._student, self.function.name
        grid, block = _dims(self.grid, "grid"), _dims(self.block, "block")
        single = s._launch(name, grid, block, list(args))  # compiled and checked first
        started = _time.monotonic()

        def ask(req: dict) -> dict:
            left = s._kernel_timeout - (_time.monotonic() - started)
            reply = s._backend.kernel(req, max(1.0, left), "run")
            if "error" in reply:
                raise make_error(reply["error"], name)
            return reply

        ask(s._kernel_req("kernel_stage", name, grid=grid, block=block, args=list(args)))
        repeat = max(1, int(repeat))
        wall = ask({"op": "kernel_run", "repeat": repeat}).get("wall_s")
        if not isinstance(wall, float):
            raise malformed("a timed run without the trusted clock", name)
        if wall < TIME_TARGET_S:
            scaled = int(repeat * TIME_TARGET_S / max(wall, 1e-6)) + 1
            repeat = min(MAX_TIMED_LAUNCHES, max(repeat, scaled))
            wall = ask({"op": "kernel_run", "repeat": repeat})["wall_s"]
        timed = _outputs(ask({"op": "kernel_fetch"})["ok"], args, name)
        for i, (want, got) in enumerate(zip(single, timed, strict=True)):
            if want is not None and not same_array(got, want):
                raise grader_error(
                    "KernelRefused",
                    f"after {repeat} timed launches argument {i} of {name} differs from a single "
                    "launch on the same inputs; a timed kernel must compute the same result",
                    name,
                )
        return wall * 1e3 / repeat

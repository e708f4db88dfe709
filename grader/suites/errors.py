"""The exceptions a test sees when student code fails, and who may decide which one it is.

`make_error` turns an error reply into a `StudentError`. What the student's process reports is
never an infrastructure outcome: `WorkerTimeout`, `WorkerCrashed`, `KernelRefused` (and a
grader-decided `NotebookFailed`) come only from an error the trusted side made
(``origin: grader``, `grader.sandbox.protocol.trusted_error`). A student's exception of a
builtin type maps to a subclass of that builtin, so ``pytest.raises(ValueError)`` works, except
AssertionError, which would let a student turn their failure into a test's expected outcome.
"""

from __future__ import annotations

import builtins
import functools

from grader.core.stubs import still_stub, stub_function
from grader.sandbox import protocol
from grader.sandbox.protocol import (
    KERNEL_REFUSED,
    KERNEL_SOURCE_ERROR,
    MISSING_NAME,
    NOT_PLAIN_DATA,
    NOTEBOOK_FAILED,
    PROTOCOL_ERROR,
    SANITIZER_FINDING,
    WORKER_CRASHED,
    WORKER_TIMEOUT,
)


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

    @property
    def stub(self) -> str:
        """The function whose untouched release stub raised this, or ''."""
        if self.exc_type != "NotImplementedError" or self.grader:
            return ""
        return stub_function(self.message)

    def feedback(self) -> str:
        if self.stub:
            return still_stub(self.stub)  # and nothing else: no traceback of code not written
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


class SanitizerFinding(StudentError):
    """A launch had a compute-sanitizer finding (a race, an uninitialised read, an index out
    of bounds, a divergent barrier): no correctness points, whatever its output."""


# Reported by the harness in the student's process: a student can forge these, which only
# changes how their own failure reads.
_SPECIAL: dict[str, type[StudentError]] = {
    MISSING_NAME: MissingFunction,
    NOTEBOOK_FAILED: NotebookFailed,
    NOT_PLAIN_DATA: NotPlainResult,
}
# Decided by the trusted side only: honoured only on an error with ``origin: grader``.
_INFRASTRUCTURE: dict[str, type[StudentError]] = {
    WORKER_TIMEOUT: WorkerTimeout,
    WORKER_CRASHED: WorkerCrashed,
    PROTOCOL_ERROR: WorkerCrashed,
    KERNEL_SOURCE_ERROR: KernelRefused,
    KERNEL_REFUSED: KernelRefused,
    NOTEBOOK_FAILED: NotebookFailed,
    SANITIZER_FINDING: SanitizerFinding,
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
    grader = err.get("origin") == protocol.ORIGIN
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
    return make_error(protocol.trusted_error(kind, message)["error"], function)


def malformed(what: str, function: str = "") -> StudentError:
    return grader_error(WORKER_CRASHED, f"the worker sent a malformed reply ({what})", function)

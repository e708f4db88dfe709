"""The boundary protocol: what a reply is, who may say what, how messages are framed and bounded.

Both sides of the trust boundary speak it: the untrusted worker (`grader.sandbox.worker`,
`grader.sandbox.harness`) builds its replies here, and the trusted side (`grader.sandbox.backend`,
`grader.suites`) checks them here. A message itself is `grader.sandbox.wire`'s format.

* A reply is a dict with exactly one key: ``{"ok": value}`` or ``{"error": {"type", "message",
  "traceback"}}`` (`ok`, `error`). The error's ``type`` is the student's exception name or one
  of the kinds below.
* An error the trusted process decided carries ``"origin": "grader"`` (`trusted_error`). Only
  such an error can be an infrastructure outcome (`INFRASTRUCTURE`): a worker's reply that
  carries ``origin`` is malformed (`valid_reply`), and an in-process reply loses it (`untagged`).
* Framing: an 8-byte big-endian length, then one message (`frame`, `read_frame`, `write_frame`).
* Limits: every bound on a message is named here, the codec's own (`wire`) included.

Kept light: the worker imports this module before its first reply, so it imports nothing that
`wire` does not already need.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from grader.core.errors import SubmissionError
from grader.sandbox import wire
from grader.sandbox.wire import MAX_DEPTH, MAX_HEADER_BYTES, MAX_MESSAGE_BYTES, MAX_VALUES

if TYPE_CHECKING:
    from grader.core.kernel_source import KernelSource
    from grader.core.notebook import GradedCell

__all__ = [
    "FRAME",
    "INFRASTRUCTURE",
    "MAX_DEPTH",
    "MAX_HEADER_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_BATCH_CALLS",
    "MAX_RECORDED_LAUNCHES",
    "MAX_REPLY_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_VALUES",
    "OUTPUT_TAIL_BYTES",
    "STARTUP_ALLOWANCE_S",
    "TRACEBACK_CHARS",
    "FrameTooLarge",
    "compile_request",
    "encode_reply",
    "error",
    "frame",
    "frame_length",
    "kernel_request",
    "load_request",
    "not_plain",
    "ok",
    "timeout_message",
    "read_frame",
    "request_cells",
    "trusted_error",
    "untagged",
    "valid_reply",
    "write_frame",
]

# ---- the limits (the codec's four, MAX_*_BYTES/VALUES/DEPTH above, are enforced by `wire`)

FRAME = struct.Struct(">Q")
MAX_REQUEST_BYTES = MAX_MESSAGE_BYTES  # a request frame the worker accepts
MAX_REPLY_BYTES = 256 << 20  # a reply frame the trusted side accepts
TRACEBACK_CHARS = 4000  # an error reply's message and traceback, each
MAX_RECORDED_LAUNCHES = 8  # launches one host-wrapper call may log for the replay
MAX_BATCH_CALLS = 1024  # calls of one ``call_many`` request (a property test's draws, one trip)
OUTPUT_TAIL_BYTES = 64 << 10  # what the trusted side keeps of a worker's stdout and stderr
STARTUP_ALLOWANCE_S = 30.0  # interpreter start-up (a ping), before import_timeout_s starts

# ---- the error kinds

ORIGIN = "grader"  # the trusted side's mark on an error it decided
PROTOCOL_ERROR = "ProtocolError"  # a request the worker cannot serve (or, trusted: a bad reply)
NOT_PLAIN_DATA = "NotPlainData"  # student code returned something that is not plain data
MISSING_NAME = "MissingName"  # the notebook does not define a graded name
NOTEBOOK_FAILED = "NotebookFailed"  # the notebook's graded cells raised
KERNEL_COMPILE_ERROR = "KernelCompileError"  # Numba's CUDA compiler rejected the kernel
WORKER_TIMEOUT = "WorkerTimeout"
WORKER_CRASHED = "WorkerCrashed"
KERNEL_SOURCE_ERROR = "KernelSourceError"
KERNEL_REFUSED = "KernelRefused"
# a launch with a compute-sanitizer finding (`grader.simt.sanitizer`), said by the trusted side
SANITIZER_FINDING = "SanitizerFinding"
MAX_FINDINGS = 8  # findings one launch's reply may carry
# Outcomes honoured only on an error with ``origin: grader``: a worker saying them is ignored.
INFRASTRUCTURE = frozenset(
    {
        WORKER_TIMEOUT,
        WORKER_CRASHED,
        PROTOCOL_ERROR,
        KERNEL_SOURCE_ERROR,
        KERNEL_REFUSED,
        NOTEBOOK_FAILED,
        SANITIZER_FINDING,
    }
)
_ERROR_KEYS = frozenset({"type", "message", "traceback"})


# ---- replies


def ok(value: Any) -> dict:
    return {"ok": value}


def error(kind: str, message: str, traceback: str = "") -> dict:
    """An error reply as the worker sends it (never trusted for what it says)."""
    return {"error": {"type": kind, "message": message, "traceback": traceback}}


def timeout_message(what: str, timeout: float) -> str:
    """What a per-call timeout says, in grading and in a student's own check alike."""
    return (
        f"{what} took longer than {timeout:g} s; the worker was stopped and "
        "will be restarted (look for an infinite loop or a too-large input)"
    )


def trusted_error(kind: str, message: str, limit: str | None = None) -> dict:
    """An error decided in the trusted process: the only kind that may name an infrastructure
    outcome (a worker's reply cannot carry ``origin``; see `valid_reply`). `limit`: the
    `[limits]` key of course.toml that the trusted side stopped the work for (a load's
    ``import_timeout_s``, the budget's ``submission_timeout_s``, a memory kill's ``memory_mb``),
    which `grader.suites.limit_hits` names in the feedback."""
    error = {"type": kind, "message": message, "traceback": "", "origin": ORIGIN}
    if limit is not None:
        error["limit"] = limit
    return {"error": error}


def encode_reply(reply: dict, function: str = "") -> bytes:
    """Encode a harness reply, turning a result that cannot travel into an error reply.

    Every bound the trusted side checks on a reply (the header's, and the frame's
    MAX_REPLY_BYTES) is checked here first, so an honest worker never sends a reply the trusted
    side refuses: a refused reply means the harness was tampered with (see
    `grader.sandbox.backend`, which then stops calling that function). Calls ``wire.encode``
    through the module at each call, as everything in the worker does: student code can patch
    it there, and the trusted side's checks are what bound the result.
    """
    try:
        data = wire.encode(reply)
    except wire.NotPlainData as exc:
        return wire.encode(not_plain(exc, function))
    if len(data) > MAX_REPLY_BYTES:
        return wire.encode(
            not_plain(
                wire.OverTheLimit(
                    f"a reply of {len(data) / 1e6:.0f} MB, over the {MAX_REPLY_BYTES >> 20} MiB a "
                    "reply may carry"
                ),
                function,
            )
        )
    return data


def not_plain(exc: Exception, function: str = "") -> dict:
    """The error reply for a result that `wire` cannot carry."""
    what = f"{function} returned" if function else "the result was"
    if isinstance(exc, wire.OverTheLimit):
        return error(NOT_PLAIN_DATA, f"{what} more than the grader carries back: {exc}")
    return error(
        NOT_PLAIN_DATA,
        f"{what} something that is not plain data ({exc}); return numbers, "
        "strings, lists, tuples, dicts or numpy arrays",
    )


def valid_reply(reply: object) -> bool:
    """A decoded worker reply has the protocol's shape (and no ``origin``: see `trusted_error`)."""
    if not isinstance(reply, dict) or len(reply) != 1:
        return False
    if "ok" in reply:
        return True
    err = reply.get("error")
    return (
        isinstance(err, dict)
        and set(err) <= _ERROR_KEYS
        and all(isinstance(v, str) for v in err.values())
        and "type" in err
    )


def untagged(reply: Any) -> Any:
    """A reply from code in the student's process never carries the trusted side's mark."""
    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
        reply["error"].pop("origin", None)
    return reply


# ---- kernel requests (built from extracted source, never from a live object)


def kernel_request(op: str, ks: KernelSource, **extra: Any) -> dict:
    """A ``kernel_*`` request for the kernel `ks` (`grader.core.kernel_source.extract`)."""
    return {
        "op": op,
        "source": ks.text,
        "name": ks.name,
        "devices": list(ks.device_functions),
        **extra,
    }


def compile_request(ks: KernelSource, signature: str, cc: Sequence[int]) -> dict:
    """The one PTX request: `ks` compiled for `signature` on compute capability `cc`."""
    return kernel_request("kernel_compile", ks, signature=signature, cc=list(cc))


# ---- the notebook's load request


def load_request(assignment: str, cells: Sequence[GradedCell] | None) -> dict:
    """Run the notebook of `assignment`: the graded cells as the trusted side read them (each
    ``[index, source, grade_id, line, in_file]``), so the worker neither imports jupytext nor
    parses the file again; None leaves the reading to the worker (`harness.load_cells`)."""
    req: dict[str, Any] = {"assignment": assignment, "op": "load"}
    if cells is not None:
        req["cells"] = [[c.index, c.source, c.grade_id, c.line, c.in_file] for c in cells]
    return req


def request_cells(req: dict) -> list[tuple[int, str, str, int, bool]] | None:
    """The cells of a `load_request` (None when it carries none); ValueError if malformed."""
    cells = req.get("cells")
    if cells is None:
        return None
    kinds = (int, str, str, int, bool)

    def valid(c: Any) -> bool:
        return isinstance(c, list) and len(c) == 5 and all(map(isinstance, c, kinds))

    if not isinstance(cells, list) or not all(valid(c) for c in cells):
        raise ValueError("a load request's cells must be [index, source, grade_id, line, in_file]")
    return [tuple(c) for c in cells]


# ---- framing


class FrameTooLarge(SubmissionError):
    """A frame announced more bytes than its side accepts."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"a frame of {size} bytes, over the {limit >> 20} MiB limit")
        self.size, self.limit = size, limit


def frame(data: bytes) -> bytes:
    return FRAME.pack(len(data)) + data


def frame_length(head: bytes | bytearray, limit: int) -> int:
    """The length a frame's head announces; FrameTooLarge above `limit`."""
    (size,) = FRAME.unpack(head)
    if size > limit:
        raise FrameTooLarge(size, limit)
    return size


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, limit: int) -> bytes | None:
    """One frame's message from a blocking descriptor; None at end of file."""
    head = _read_exact(fd, FRAME.size)
    if head is None:
        return None
    return _read_exact(fd, frame_length(head, limit))


def write_frame(fd: int, data: bytes) -> None:
    view = memoryview(frame(data))
    while view:
        view = view[os.write(fd, view) :]

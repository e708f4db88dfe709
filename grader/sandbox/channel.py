"""One request and its reply with a worker process, from the trusted side: bounded in time and size.

`exchange` writes one framed request to the worker's stdin and reads its framed reply from its
stdout before a deadline. The reply frame's length is checked against
`protocol.MAX_REPLY_BYTES` before its body is read, the body is decoded by `wire` within the
same deadline (any exception while decoding is a malformed reply, never a value of the
student's), and the decoded reply must have the protocol's shape (`protocol.valid_reply`).
Anything else raises `Failure` (the caller kills the worker); the deadline raises TimeoutError.
Nothing the worker sends is interpreted here beyond that.
"""

from __future__ import annotations

import os
import select
import subprocess
import time

from grader.core.errors import SubmissionError
from grader.sandbox import protocol, wire


class Failure(SubmissionError):
    """The worker broke the protocol or went away: `kind` is the error the caller reports."""

    def __init__(self, kind: str, message: str, exited: bool = False):
        super().__init__(message)
        self.kind, self.message, self.exited = kind, message, exited


def crashed(message: str, exited: bool = False) -> Failure:
    return Failure(protocol.WORKER_CRASHED, message, exited)


def exchange(proc: subprocess.Popen, req: dict, deadline: float) -> dict:
    """Send `req`, return the worker's reply (a valid protocol reply) before `deadline`."""
    _send(proc, protocol.frame(wire.encode(req)), deadline)
    try:
        size = protocol.frame_length(
            _recv(proc, protocol.FRAME.size, deadline), protocol.MAX_REPLY_BYTES
        )
    except protocol.FrameTooLarge as exc:
        raise crashed(
            f"the worker sent a reply of {exc.size} bytes, over the {exc.limit >> 20} MiB limit"
        ) from None
    payload = _recv(proc, size, deadline)
    try:
        reply = wire.decode(payload, deadline)  # bounded in values and in this request's time
    except TimeoutError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to decode is the worker's, never the student's answer
        raise crashed(f"the worker sent a malformed reply ({exc})") from None
    if not protocol.valid_reply(reply):
        raise crashed("the worker sent a reply of the wrong shape")
    return reply


def _gone(proc: subprocess.Popen) -> Failure:
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        return crashed("the worker closed its reply channel")
    return crashed("the worker exited", exited=True)


def _send(proc: subprocess.Popen, data: bytes, deadline: float) -> None:
    fd = proc.stdin.fileno()
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        _, writable, _ = select.select([], [fd], [], min(left, 0.1))
        if not writable:
            if proc.poll() is not None:
                raise _gone(proc)
            continue
        try:
            view = view[os.write(fd, view[: 1 << 20]) :]
        except BlockingIOError:
            continue
        except (BrokenPipeError, OSError) as exc:
            raise _gone(proc) from exc


def _recv(proc: subprocess.Popen, n: int, deadline: float) -> bytearray:
    """Exactly n bytes before `deadline`; returned without a copy (replies can be 256 MiB)."""
    fd = proc.stdout.fileno()
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        readable, _, _ = select.select([fd], [], [], min(left, 0.1))
        if not readable:
            if proc.poll() is not None:
                raise _gone(proc)
            continue
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise _gone(proc)
        buf += chunk
    return buf

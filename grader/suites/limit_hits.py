"""Which of course.toml's `[limits]` a failure hit, said in the failure's own feedback.

A grading that runs out of a resource must say which limit stopped it and where it is set, not
leave a bare ``RuntimeError: can't start new thread`` for a student (or an instructor whose
reference fails in `grader verify`) to decode. `explained` rewrites an error reply's message:

* a trusted stop (``origin: grader``): a timeout names the key the trusted side marked
  (``import_timeout_s`` for a notebook's load, ``submission_timeout_s`` for the budget; see
  `grader.sandbox.protocol.trusted_error`), else the key of the request (``call_timeout_s`` for
  a call, ``kernel_timeout_s`` for a launch); a memory kill names ``memory_mb``;
* an error the student's process reported that only a sandbox limit raises: a thread or process
  that cannot start (``processes``, the process rlimit: the CUDA simulator's threads count
  against it), ``MemoryError`` (``memory_mb``), a file too large (``file_size_mb``), too many
  open files (``open_files``), a full scratch directory (``scratch_mb``). Such a reply comes
  from untrusted code, so it only changes how that failure reads, never its outcome.

The words name the limit's value, where course.toml sets it (`Course.limit_source`: the
assignment's own `[assignments.limits]` or the course's `[limits]`) and the assignment.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from grader.core.course import Limits
from grader.sandbox import protocol
from grader.sandbox.protocol import WORKER_CRASHED, WORKER_TIMEOUT

# (error type, pattern in its message) -> the [limits] key an untrusted error reveals
_UNTRUSTED: tuple[tuple[frozenset[str], re.Pattern[str] | None, str], ...] = (
    (
        frozenset({"RuntimeError", "OSError", "BlockingIOError"}),
        re.compile(r"can't start new thread|Resource temporarily unavailable|\[Errno 11\]"),
        "processes",
    ),
    (frozenset({"MemoryError"}), None, "memory_mb"),
    (frozenset({"OSError"}), re.compile(r"File too large|\[Errno 27\]"), "file_size_mb"),
    (frozenset({"OSError"}), re.compile(r"Too many open files|\[Errno 24\]"), "open_files"),
    (frozenset({"OSError"}), re.compile(r"No space left on device|\[Errno 28\]"), "scratch_mb"),
)
_WHAT = {
    "call_timeout_s": "the time limit of one call",
    "kernel_timeout_s": "the time limit of one kernel launch",
    "import_timeout_s": "the time limit for running the notebook's graded cells",
    "submission_timeout_s": "the time budget of the whole grading",
    "memory_mb": "the memory limit",
    "processes": "the limit on processes and threads",
    "file_size_mb": "the largest file the code may write",
    "open_files": "the limit on open files",
    "scratch_mb": "the size of the scratch directory",
}
_HINT = {
    "processes": "every thread counts, the CUDA simulator's too: start fewer threads or "
    "processes (an instructor whose reference needs more raises the key)",
}
_UNITS = {"memory_mb": " MB", "file_size_mb": " MB", "scratch_mb": " MB"}


def limit_hit(error: dict, request_limit: str) -> str | None:
    """The `[limits]` key `error` (an error reply's ``error``) says was hit, or None.

    `request_limit`: the timeout key of the request it answers (``call_timeout_s`` or
    ``kernel_timeout_s``), for a trusted timeout the backend did not mark otherwise."""
    kind = str(error.get("type", ""))
    message = str(error.get("message", ""))
    if error.get("origin") == protocol.ORIGIN:
        marked = error.get("limit")
        if isinstance(marked, str) and marked in _WHAT:
            return marked
        return request_limit if kind == WORKER_TIMEOUT else None
    for kinds, pattern, key in _UNTRUSTED:
        if kind in kinds and (pattern is None or pattern.search(message)):
            return key
    return None


def explained(
    error: dict,
    assignment: str,
    limits: Limits | None,
    source: Callable[[str], str],
    request_limit: str,
) -> dict:
    """`error` with its message naming the limit it hit (a copy), or `error` itself."""
    key = limit_hit(error, request_limit)
    if key is None or error.get("type") == WORKER_CRASHED and key != "memory_mb":
        return error
    value = f" = {getattr(limits, key):g}{_UNITS.get(key, '')}" if limits is not None else ""
    said = (
        f"{str(error.get('message', '')).rstrip('. ')}. This is {_WHAT[key]}: "
        f"{key}{value} ({source(key)}, assignment {assignment!r})"
    )
    if key in _HINT:
        said += f"; {_HINT[key]}"
    return {**error, "message": said}

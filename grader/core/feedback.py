"""The one feedback cap: how much of a message a result stores and a report shows.

A test's feedback is stored in result.json at most `FEEDBACK_CHARS` characters long (`clip`
keeps its head, where the assertion or the exception says what went wrong, and says it was cut)
and the PR comment shows that whole stored text. Where the grader quotes a long tool output
inside a sentence of its own (pytest's log when a suite cannot run, Numba's error when a kernel
does not compile for the GPU), it quotes the tail (`excerpt`), where such tools put the cause,
and at most `EXCERPT_CHARS`, so that its own sentence around the quote still fits under the cap.
"""

from __future__ import annotations

FEEDBACK_CHARS = 2_000  # one test's feedback, stored and shown in the markdown report
EXCERPT_CHARS = 1_500  # the tail of a tool's output quoted inside one message
TRUNCATED = "\n... (truncated)"
_ROOM = 20  # kept free at the end of a clipped text for TRUNCATED


def clip(text: str, limit: int = FEEDBACK_CHARS) -> str:
    """`text`, or its head and a note that it was cut when longer than `limit` characters."""
    return text if len(text) <= limit else text[: limit - _ROOM] + TRUNCATED


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The last `limit` characters of a tool's output (its cause is at the end)."""
    return text[-limit:]

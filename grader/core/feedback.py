"""The one feedback cap: how much of a message a result stores and a report shows.

A test's feedback is stored in result.json at most `FEEDBACK_CHARS` characters long (`clip`
keeps its head, where the assertion or the exception says what went wrong, and says how much was
cut) and the PR comment shows that whole stored text. Where the grader quotes a long tool output
inside a sentence of its own (pytest's log when a suite cannot run, Numba's error when a kernel
does not compile for the GPU), it quotes the tail (`excerpt`), where such tools put the cause,
and at most `EXCERPT_CHARS`, so that its own sentence around the quote still fits under the cap.
The reports clip names, warnings and messages with the same `clip`, so a text cut once (when
stored) is never cut again, and every cut says so the same way.
"""

from __future__ import annotations

FEEDBACK_CHARS = 2_000  # one test's feedback, stored and shown in the markdown report
EXCERPT_CHARS = 1_500  # the tail of a tool's output quoted inside one message


def _note(cut: int) -> str:
    return f"\n… [truncated: {cut:,} more characters]"


def clip(text: str, limit: int = FEEDBACK_CHARS) -> str:
    """`text`, or when longer than `limit` characters its head and a note of how many characters
    were cut, `limit` characters in all (a limit too small for the note gets the bare head)."""
    text = str(text)
    if len(text) <= limit:
        return text
    room = len(_note(len(text)))  # the longest note this text can need
    if limit <= room:
        return text[:limit]
    head = text[: limit - room]
    return head + _note(len(text) - len(head))


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The last `limit` characters of a tool's output (its cause is at the end)."""
    return text[-limit:]

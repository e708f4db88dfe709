"""The release's stub: the one text every cleared solution region becomes, and how it is told.

Release writes it (grader.release.build); intake counts it to tell which file of a pair a student
worked in when there is no separate release to compare with (a student's own clone). Feedback
recognises it, so that an untouched stub reads `still_stub(name)` and nothing else: on day one a
student should not be told about kernel rules, launches or tracebacks of code they never wrote.
"""

from __future__ import annotations

import ast
import re

STUB_MESSAGE = "{function}: implement this (see the docstring)"
STUB_TAIL = STUB_MESSAGE.format(function="")  # ": implement this (see the docstring)"
_STUB_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)" + re.escape(STUB_TAIL))


def count_stubs(source: str) -> int:
    """How many release stubs are still in a graded source."""
    return source.count(STUB_TAIL)


def is_stub_feedback(feedback: str) -> bool:
    """Whether a failing test's feedback says the graded function is still the release's stub."""
    return STUB_TAIL in (feedback or "") or "is still the stub" in (feedback or "")


def still_stub(function: str) -> str:
    """What feedback says, alone, about a function whose body is still the release's stub."""
    return f"{function} is still the stub: fill in its body"


def stub_function(message: str) -> str:
    """The function whose stub raised `message` (a NotImplementedError's text), or ''."""
    m = _STUB_RE.fullmatch(message.strip())
    return m.group(1) if m else ""


def is_stub_body(fn: ast.FunctionDef) -> bool:
    """Whether a def's body (its docstring aside) is only the release's ``raise`` for it."""
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return False
    exc = body[0].exc
    return (
        isinstance(exc, ast.Call)
        and isinstance(exc.func, ast.Name)
        and exc.func.id == "NotImplementedError"
        and len(exc.args) == 1
        and isinstance(exc.args[0], ast.Constant)
        and exc.args[0].value == STUB_MESSAGE.format(function=fn.name)
    )

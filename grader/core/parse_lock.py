"""One `ast.parse` at a time in this process, where CPython needs it (3.11).

The trusted process parses Python in several threads at once: the grading's main thread (the
suites' seeds, kernel extraction, pytest, hypothesis) and the warm-up's (the reference's cells,
the submission's graded cells). CPython 3.11 keeps the recursion count of `ast.parse`'s
conversion to Python objects in state that every thread shares (CPython gh-106905; 3.12 is not
affected): when a garbage collection inside one parse runs Python code and another thread parses
meanwhile, the first parse raises `SystemError: AST constructor recursion depth mismatch`. In a
grading that is a suite that could not be collected, or a kernel test failed, for nothing the
student did. `install` wraps `ast.parse` in one lock, so every caller that goes through it (ours,
pytest's, hypothesis's) parses alone; on an unaffected CPython it changes nothing.
"""

from __future__ import annotations

import ast
import functools
import sys
import threading
from typing import Any

AFFECTED = sys.version_info < (3, 12)
_LOCK = threading.RLock()  # re-entrant: a parse whose garbage collection parses again


def installed() -> bool:
    """Whether `ast.parse` takes the lock in this process."""
    return getattr(ast.parse, "_parse_lock", False)


def install() -> None:
    """Wrap `ast.parse` in the process's lock (once; only where CPython is affected)."""
    if not AFFECTED or installed():
        return
    unlocked = ast.parse

    @functools.wraps(unlocked)
    def parse(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return unlocked(*args, **kwargs)

    parse._parse_lock = True  # type: ignore[attr-defined]
    ast.parse = parse

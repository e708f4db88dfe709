"""The trusted process's parse of a submission's source: bounded before it runs, done once.

Kernel extraction and the wrapper check (`grader.core.kernel_source`) read the graded cells with
`ast` in the trusted process. Python's parser cannot be interrupted and costs about 1 kB of
memory and 4 us per node, so a notebook under the intake's size bound (a 1.05 MB list literal in
one extra cell: 350,000 nodes, 350 MB, 1.4 s per parse) could cost the grader far more than the
grading itself. So, before the parser runs: at most `MAX_CHARS` characters and `MAX_TOKENS`
tokens (counted by one regular expression, in C, over-counting rather than under); after it, at
most `MAX_NODES` nodes; a source nested past the parser's or the interpreter's recursion limit
is refused too. The outcome is kept per source text (`parse` is an LRU of `CACHE_SIZE`), so a
grading parses its notebook once however many kernels and wrappers it checks.

A source over a bound raises `SourceTooLarge` (its message names the bound and what to change),
which the caller turns into that test's failure; a SyntaxError stays a SyntaxError.
"""

from __future__ import annotations

import ast
import functools
import re
from typing import cast

from grader.core.errors import SubmissionError

MAX_CHARS = 1_000_000
MAX_TOKENS = 100_000  # the course's reference notebooks: about 5,000 each
MAX_NODES = 200_000
CACHE_SIZE = 4
# a name or number, or any other single non-space character: at least one per real token
_TOKEN = re.compile(r"[A-Za-z_0-9]+|\S")
_ADVICE = (
    "keep large data out of the graded cells (build it with code, or read it from a file), "
    "or tag such a cell `demo`"
)


class SourceTooLarge(SubmissionError):
    """The source is over one of this module's bounds; the message says which and what to do."""


def parse(source: str, filename: str = "the notebook") -> ast.Module:
    """`source` parsed, within the bounds; raises SourceTooLarge or SyntaxError.

    The tree is shared between callers: they must not change it (copy a node first)."""
    kind, value = _parse(source)
    if kind == "tree":
        return cast(ast.Module, value)
    if kind == "syntax":  # a fresh error each time, naming the caller's file
        e = cast(SyntaxError, value)
        raise SyntaxError(e.msg, (filename, e.lineno, e.offset, e.text, e.end_lineno, e.end_offset))
    raise SourceTooLarge(f"{filename}: {value}; {_ADVICE}")


def compiles(source: str) -> bool | None:
    """Whether one cell parses: True or False, or None when it is over the bounds (not parsed:
    the whole text's `parse` then names the bound). Not kept: a cell is parsed once per read."""
    if _over(source):
        return None
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    except (RecursionError, MemoryError, ValueError):
        return None
    return True


def _over(source: str) -> str:
    """Why `source` is over the character or token bound ("" when it is not)."""
    if len(source) > MAX_CHARS:
        return (
            f"the graded cells hold {len(source):,} characters, over the {MAX_CHARS:,} the grader "
            "reads kernels from"
        )
    tokens = _TOKEN.subn("", source)[1]
    if tokens > MAX_TOKENS:
        return (
            f"the graded cells hold about {tokens:,} tokens, over the {MAX_TOKENS:,} the grader "
            "reads kernels from"
        )
    return ""


@functools.lru_cache(maxsize=CACHE_SIZE)
def _parse(source: str) -> tuple[str, object]:
    over = _over(source)
    if over:
        return "bounds", over
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return "syntax", exc
    except (RecursionError, MemoryError):
        return "bounds", "the graded cells are nested too deeply for the grader to read"
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_NODES:
        return "bounds", (
            f"the graded cells parse to {nodes:,} syntax nodes, over the {MAX_NODES:,} the "
            "grader reads kernels from"
        )
    return "tree", tree

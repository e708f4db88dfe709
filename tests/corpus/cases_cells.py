"""Corpus family "cells": one broken cell costs only what depends on it (issue 21).

The worker runs the graded cells one by one, as nbgrader does with errors allowed. A cell that
does not compile or raises is recorded with its place in the student's own file (the .py's
line, or the .ipynb's cell index and the line in that cell), the rest still loads, and a test
whose function the failing cell defined says so. A failing scratch cell (untagged) is a warning.
"""

from __future__ import annotations

import re
from pathlib import Path

from build import (
    BROKEN,
    CASCADE_KV,
    KV,
    M9,
    SERVING_INVALID,
    Case,
    Ctx,
    Expect,
    Rule,
    _cell_bounds,
    _fn,
    insert_cell_before,
    replace_cell,
    to_ipynb,
    write_fork,
)

BROKEN_DEF = "def save_metric(path, key, value:"  # the ':' and ')' of a typo


def _syntax_error(source: str) -> str:
    return source.replace("def save_metric(path, key, value):", BROKEN_DEF, 1)


def _line_of(source: str, needle: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if ln.startswith(needle))


def _names_student_line(result, ctx: Ctx) -> None:
    """The feedback and the warning give the line of the student's .py, not of joined cells."""
    line = _line_of(_syntax_error(ctx.solutions[M9]), BROKEN_DEF)
    (a,) = result.assignments
    lost = [t for t in a.tests if t.outcome != "passed" and "save_metric" in t.feedback]
    assert lost, [t.name for t in a.tests if t.outcome != "passed"]
    for t in lost:
        assert f"m9_roofline.py line {line}" in t.feedback, t.feedback
    assert any(f"m9_roofline.py line {line}" in w and "SyntaxError" in w for w in result.warnings)
    assert a.score > 0.8 * a.max_score, f"{a.score} / {a.max_score}: more than the cell was lost"


def _ipynb_syntax_error(dest: Path, ctx: Ctx) -> None:
    write_fork(dest, ipynb={M9: to_ipynb(_syntax_error(ctx.solutions[M9]))}, ctx=ctx)


def _names_cell_index(result, ctx: Ctx) -> None:
    import jupytext

    nb = jupytext.reads(_syntax_error(ctx.solutions[M9]), fmt="py:percent")
    code = [c for c in nb.cells if c.cell_type == "code"]  # Jupyter numbers no cells
    index = next(i for i, c in enumerate(code) if BROKEN_DEF in c.source)
    where = f"m9_roofline.ipynb code cell {index + 1} (under "
    assert any(where in w and "line 1 of the cell" in w for w in result.warnings), result.warnings
    (a,) = result.assignments
    assert any(where in t.feedback for t in a.tests if t.outcome != "passed")


def _colab(source: str, ctx: Ctx) -> str:
    return insert_cell_before(
        source, "validate_config", "from google.colab import drive\ndrive.mount('/content/drive')\n"
    )


def _cell_missing(dest: Path, ctx: Ctx) -> None:
    lines = ctx.solutions[M9].splitlines()
    head, end = _cell_bounds(lines, "save_metric")
    write_fork(dest, {M9: "\n".join(lines[:head] + lines[end:]) + "\n"}, ctx=ctx)


def _runtime_line(result, ctx: Ctx) -> None:
    """A traceback from a call quotes the student's .py line of the raise."""
    source = replace_cell(ctx.solutions[M9], "kv_bytes_per_token", _RAISES)
    line = _line_of(source, "    raise RuntimeError")
    (a,) = result.assignments
    quoted = re.findall(
        r"line (\d+), in kv_bytes_per_token", "\n".join(t.feedback for t in a.tests)
    )
    assert quoted and set(quoted) == {str(line)}, (quoted, line)


_RAISES = """\
def kv_bytes_per_token(cfg, dtype_bytes=2):
    validate_config(cfg)
    raise RuntimeError("the student's own mistake")
"""

CASES: list[Case] = [
    Case(
        "cells_syntax_error_py_line",
        "a missing ':' in one graded cell of the .py (save_metric): only that cell's tests lose",
        lambda dest, ctx: write_fork(dest, {M9: _syntax_error(ctx.solutions[M9])}, ctx=ctx),
        Expect(
            M9,
            [Rule(_fn("save_metric"), BROKEN, ("failed to run", "SyntaxError"))],
            warnings=("SyntaxError",),
            check=_names_student_line,
        ),
    ),
    Case(
        "cells_syntax_error_ipynb_cell",
        "the same typo in an .ipynb: the cell's index and line are named",
        _ipynb_syntax_error,
        Expect(
            M9,
            [Rule(_fn("save_metric"), BROKEN, ("failed to run", "SyntaxError"))],
            warnings=("SyntaxError",),
            check=_names_cell_index,
        ),
    ),
    Case(
        "cells_scratch_colab",
        "a scratch cell `from google.colab import drive` (untagged): a warning, nothing lost",
        lambda dest, ctx: write_fork(dest, {M9: _colab(ctx.solutions[M9], ctx)}, ctx=ctx),
        Expect(M9, [], warnings=("google", "costs nothing")),
    ),
    Case(
        "cells_missing_cell",
        "the whole save_metric cell deleted: its tests say it is not defined, the rest passes",
        _cell_missing,
        Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("save_metric is not defined",))]),
    ),
    Case(
        "cells_runtime_error_line",
        "kv_bytes_per_token raises: the traceback quotes the student's .py line",
        lambda dest, ctx: write_fork(
            dest, {M9: replace_cell(ctx.solutions[M9], "kv_bytes_per_token", _RAISES)}, ctx=ctx
        ),
        Expect(
            M9,
            [
                # validate_config still runs first: its ValueError cases still pass
                Rule(f"{KV}|{CASCADE_KV}", ("passed", *BROKEN), ()),
                # its precision cases reach kv_bytes_per_token, which raises here
                SERVING_INVALID,
            ],
            check=_runtime_line,
        ),
    ),
]

"""Reading a submission's notebook and turning it into the code the grader executes.

The graded module is every code cell in order except demos (tag ``demo``), nbgrader test cells
(the inline self-checks) and IPython magics or shell lines, so grading neither re-runs plots and
full-size timings nor stops at a self-check the student has not made pass yet.
"""

from __future__ import annotations

import sys
from pathlib import Path

DEMO_TAG = "demo"


class NotebookError(ValueError):
    """A notebook that cannot be read; the message names the file and what to fix."""


def _jupytext():
    """jupytext, imported without its Jupyter contents managers.

    jupytext's ``__init__`` imports them (jupyter_server, tornado, prometheus_client: 0.2-0.5 s
    in every process that reads a notebook: the grader, each sandbox worker, the PTX worker) and
    tolerates their absence; reading and writing never use them. Blocked only for this import,
    so an explicit ``import jupytext.sync_contentsmanager`` later still works.
    """
    if "jupytext" in sys.modules:
        return sys.modules["jupytext"]
    blocked = [m for m in _CONTENTS_MANAGERS if m not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # import raises ImportError, which jupytext catches
    try:
        import jupytext
    finally:
        for name in blocked:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return jupytext


_CONTENTS_MANAGERS = ("jupytext.sync_contentsmanager", "jupytext.async_contentsmanager")


def read_notebook(path: Path | str):
    """Read a percent-format .py or an .ipynb with jupytext; NotebookError if unreadable."""
    jupytext = _jupytext()

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise NotebookError(f"{p}: file not found") from exc
    except UnicodeDecodeError as exc:
        raise NotebookError(f"{p}: not UTF-8 text ({exc.reason}); save it as UTF-8") from exc
    fmt = "ipynb" if p.suffix == ".ipynb" else "py:percent"
    try:
        return jupytext.reads(text, fmt=fmt)
    except Exception as exc:  # jupytext/nbformat raise many types for a broken file
        raise NotebookError(
            f"{p}: not a readable notebook ({type(exc).__name__}: {str(exc)[:200]}); "
            "restore it from the release or re-download it from Colab"
        ) from exc


def is_demo(cell) -> bool:
    return DEMO_TAG in cell.get("metadata", {}).get("tags", [])


def is_test_cell(cell) -> bool:
    nbg = cell.get("metadata", {}).get("nbgrader", {})
    return bool(nbg.get("grade")) and not nbg.get("solution")


def _strip_magics(source: str) -> str:
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            lines.append(line[: len(line) - len(stripped)] + "pass  # magic dropped by the grader")
        else:
            lines.append(line)
    return "\n".join(lines)


def graded_source(nb) -> str:
    """The Python source the grader executes for a notebook (cells separated by blank lines)."""
    parts = []
    for cell in nb.cells:
        if cell.cell_type != "code" or is_demo(cell) or is_test_cell(cell):
            continue
        parts.append(_strip_magics(cell.source))
    return "\n\n".join(parts) + "\n"


def notebook_paths(folder: Path, assignment_id: str) -> tuple[Path, Path]:
    """The pair of files of an assignment in a submission folder (either may be missing)."""
    base = Path(folder) / assignment_id
    return base / f"{assignment_id}.py", base / f"{assignment_id}.ipynb"


def choose_notebook(folder: Path, assignment_id: str) -> Path:
    """The file to run by hand: the .py if present, else the .ipynb (grading: grader.intake)."""
    py, ipynb = notebook_paths(folder, assignment_id)
    if py.is_file():
        return py
    if ipynb.is_file():
        return ipynb
    raise NotebookError(
        f"{py.parent}: neither {py.name} nor {ipynb.name} found; "
        "restore the assignment folder from the release"
    )

"""One broken cell costs only what depends on it, and every line number is the student's own.

The harness runs the graded cells one by one (`grader.sandbox.harness.load_cells`); these tests
drive it directly on small notebooks (.py and .ipynb), check the line map on the course's own
notebooks, and grade the corpus family `cells` in this process (the corpus itself grades them
in the sandbox, which needs bubblewrap).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest
from factories import ROOT

from grader.core.kernel_source import extract
from grader.core.notebook import graded_cells, graded_text, read_notebook
from grader.sandbox.harness import Harness, device_cell, load_module

NOTEBOOK = """\
# %% [markdown]
# Two functions, each in its own graded cell, and a scratch cell.

# %% nbgrader={"grade": false, "grade_id": "first", "locked": false, "schema_version": 3, "solution": true, "task": false}
def first(x):
    return x + 1

# %%
from google.colab import drive

# %% nbgrader={"grade": false, "grade_id": "second", "locked": false, "schema_version": 3, "solution": true, "task": false}
def second(x):
    return x * 2

# %% nbgrader={"grade": false, "grade_id": "third", "locked": false, "schema_version": 3, "solution": true, "task": false}
def third(x):
    return x


raise RuntimeError("third is broken")
"""  # noqa: E501


def _line(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def harness(tmp_path: Path, text: str, suffix: str = ".py") -> Harness:
    path = tmp_path / "nb" / f"nb{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".ipynb":
        text = jupytext.writes(jupytext.reads(text, fmt="py:percent"), fmt="ipynb")
    path.write_text(text)
    h = Harness(path, f"cells_{tmp_path.name}")
    assert h.handle({"op": "load"}) == {"ok": None}
    return h


def test_a_syntax_error_costs_only_its_cell_and_names_the_file_line(tmp_path):
    text = NOTEBOOK.replace("def second(x):", "def second(x)")
    h = harness(tmp_path, text)
    assert h.handle({"op": "call", "name": "first", "args": [1]}) == {"ok": 2}
    reply = h.handle({"op": "call", "name": "second", "args": [1]})
    message = reply["error"]["message"]
    assert reply["error"]["type"] == "NotebookFailed" and "failed to run" in message
    assert f"nb.py line {_line(text, 'def second(x)')}" in message and "SyntaxError" in message
    cells = h.handle({"op": "cells"})["ok"]
    assert [(c["graded"], c["type"]) for c in cells] == [
        (False, "ModuleNotFoundError"),
        (True, "SyntaxError"),
        (True, "RuntimeError"),
    ]
    assert cells[1]["names"] == ["second"]
    assert f'"nb.py", line {_line(text, "def second(x)")}' in cells[1]["traceback"]
    assert "def second(x)" in cells[1]["traceback"]  # the student's line quoted, not another


def test_a_failing_scratch_cell_is_recorded_but_costs_nothing(tmp_path):
    h = harness(tmp_path, NOTEBOOK)
    assert h.handle({"op": "call", "name": "second", "args": [3]}) == {"ok": 6}
    (scratch,) = [c for c in h.handle({"op": "cells"})["ok"] if not c["graded"]]
    assert scratch["where"].startswith(f"nb.py line {_line(NOTEBOOK, 'google.colab')}")
    assert "untagged" in scratch["where"] and scratch["names"] == []


def test_a_cell_that_raises_names_its_line_and_its_functions_say_so(tmp_path):
    h = harness(tmp_path, NOTEBOOK)
    (third,) = [c for c in h.handle({"op": "cells"})["ok"] if c["type"] == "RuntimeError"]
    line = _line(NOTEBOOK, 'raise RuntimeError("third')
    assert third["where"].startswith(f"nb.py line {line}, in ")
    assert f'"nb.py", line {line}, in <module>' in third["traceback"]
    reply = h.handle({"op": "call", "name": "third", "args": [1]})
    assert "third is defined in a cell that failed to run" in reply["error"]["message"]
    assert h.handle({"op": "has", "name": "third"}) == {"ok": False}


def test_tracebacks_of_calls_quote_the_files_own_lines(tmp_path):
    text = NOTEBOOK.replace("    return x * 2", "    return x * undefined_name")
    h = harness(tmp_path, text)
    reply = h.handle({"op": "call", "name": "second", "args": [1]})
    line = _line(text, "undefined_name")
    assert f'"nb.py", line {line}, in second' in reply["error"]["traceback"]
    assert "x * undefined_name" in reply["error"]["traceback"]
    assert str(tmp_path) not in reply["error"]["traceback"]  # no folder of the grader's


def test_an_ipynb_names_the_cell_as_jupyter_shows_it_and_the_line_in_it(tmp_path):
    """Jupyter numbers no cells: a cell is its position among the code cells (markdown cells
    not counted) and the last markdown heading above it."""
    text = NOTEBOOK.replace("def second(x):", "def second(x)").replace(
        "# Two functions,", "# ## 2. Doubling\n#\n# Two functions,"
    )
    h = harness(tmp_path, text, ".ipynb")
    assert h.handle({"op": "call", "name": "first", "args": [1]}) == {"ok": 2}
    cells = h.handle({"op": "cells"})["ok"]
    # the markdown cell is not counted: first is code cell 1, the scratch cell 2, second 3
    assert cells[1]["where"].startswith(
        "nb.ipynb code cell 3 (under \"## 2. Doubling\"; cell 'second', starting `def second"
    )
    assert "line 1 of the cell" in cells[1]["where"]
    assert "counting markdown" not in cells[1]["where"]
    reply = h.handle({"op": "call", "name": "third", "args": [1]})
    assert "nb.ipynb code cell 4" in reply["error"]["message"]


def test_missing_function_says_which_failed_cell_may_have_defined_it(tmp_path):
    text = NOTEBOOK.replace("def second(x):\n    return x * 2", "se cond = (")
    h = harness(tmp_path, text)
    reply = h.handle({"op": "call", "name": "second", "args": [1]})
    message = reply["error"]["message"]
    assert "second is not defined" in message and "may have defined it" in message
    assert "cell 'second'" in message


def test_the_reference_still_loads_strictly(tmp_path):
    path = tmp_path / "ref.py"
    path.write_text(NOTEBOOK)
    with pytest.raises(Exception, match="google"):
        load_module(path, "cells_strict_reference")
    sys.modules.pop("cells_strict_reference", None)


@pytest.mark.parametrize(
    ("source", "device"),
    [
        ("import numba", True),
        ("import os, numba.cuda as c", True),
        ("from numba import cuda", True),
        ("from numba.cuda import jit", True),
        ("@cuda.jit\ndef k(a):\n    a[0] = 1", True),
        ("def wrapper(a):\n    k[1, 32](cuda.to_device(a))", True),
        ("import numpy as np\ndef f(x):\n    return np.sum(x)", False),
        ("numbas = 1\ncuda_count = 2\nnote = 'from numba import cuda'", False),
        ("def broken(:", False),
    ],
)
def test_a_device_cell_imports_numba_or_names_cuda(source, device):
    assert device_cell(source) is device


def test_the_reference_loads_without_numba_and_names_what_it_left_out():
    # in a fresh interpreter: this one has imported numba already
    solution = ROOT / "solutions" / "gpu_fundamentals" / "gpu_fundamentals.py"
    script = (
        "import sys\n"
        "from grader.sandbox.harness import load_module\n"
        f"ref = load_module({str(solution)!r}, 'r')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numba'))\n"
        "print(ref.ridge_point(1e12, 5e11), ref.sectors_per_warp(2))\n"
        "for name in ('vector_add', 'gpu_vector_add', 'no_such_name'):\n"
        "    try:\n"
        "        getattr(ref, name)\n"
        "    except AttributeError as exc:\n"
        "        print(exc)\n"
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()[-5:]
    assert lines[0] == "[]", lines  # no numba module at all
    assert lines[1] == "2.0 8", lines
    for name in ("vector_add", "gpu_vector_add"):
        assert any(
            ln.startswith(f"{name} is defined in a device cell of gpu_fundamentals.py")
            for ln in lines
        )
    assert lines[-1] == "module 'r' has no attribute 'no_such_name'"


@pytest.mark.parametrize(
    "rel",
    ["solutions/m9_roofline/m9_roofline.py", "solutions/gpu_fundamentals/gpu_fundamentals.py"],
)
def test_every_cell_line_is_the_files_line(rel):
    path = ROOT / rel
    text = path.read_text()
    lines = text.splitlines()
    cells = graded_cells(read_notebook(path), text)
    assert len(cells) > 5
    for cell in cells:
        for k, own in enumerate(cell.source.splitlines()):
            if "magic dropped" not in own:
                assert lines[cell.line - 1 + k] in (own, "# " + own), (cell.grade_id, k)


def test_graded_text_keeps_the_files_lines_and_skips_a_broken_cell(tmp_path):
    src = (ROOT / "solutions" / "gpu_fundamentals" / "gpu_fundamentals.py").read_text()
    broken = src.replace("def ridge_point(", "def ridge_point((", 1)
    path = tmp_path / "gpu_fundamentals.py"
    path.write_text(broken)
    text = graded_text(path)
    want = _line(broken, "def vector_add(")
    assert text.splitlines()[want - 1].startswith("def vector_add(")
    assert "def ridge_point((" not in text
    extract(text, "vector_add", path.name)  # one broken cell leaves the kernels gradable


@pytest.mark.slow
def test_corpus_cells_family_in_process(tmp_path):
    """The corpus family `cells` (and the two older cases it changed) graded in this process
    and checked with the corpus's own rules."""
    import build as corpus  # tests/corpus, on the path by pyproject.toml's pythonpath
    import test_corpus  # this folder's, on the path as every test module's folder is

    from grader.core.course import load_course
    from grader.grading.grade import grade_submission

    root = corpus.make_corpus_root(ROOT, tmp_path / "root")
    ctx = corpus.make_ctx(root, ROOT, 1)
    course = load_course(root)
    names = [c.name for c in corpus.CASES if c.name.startswith("cells_")]
    names += ["syntax_error_one_cell", "import_missing_module"]
    for case in (c for c in corpus.CASES if c.name in names):
        case.build(tmp_path / case.name, ctx)
        result = grade_submission(
            tmp_path / case.name,
            student=case.name,
            assignments=[case.expect.assignment],
            course=course,
            sandbox=False,
        )
        test_corpus.check(case, result, ctx)


def test_only_the_graded_cells_imports_are_preloaded(tmp_path, monkeypatch):
    """A heavy import in a demo cell (never run by the grader) is not preloaded; one inside a
    graded function is, while the worker warms up."""
    from grader.sandbox import harness

    (tmp_path / "heavy_in_demo.py").write_text("")
    (tmp_path / "heavy_in_graded.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(harness, "PRELOAD", ("heavy_in_demo", "heavy_in_graded"))
    nb = tmp_path / "p.py"
    nb.write_text(
        "# %%\n"
        "def uses():\n"
        "    import heavy_in_graded\n"
        "    return heavy_in_graded\n\n"
        '# %% tags=["demo"]\n'
        "import heavy_in_demo\n"
    )
    for name in ("heavy_in_demo", "heavy_in_graded"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert Harness(nb, "p").load() == {"ok": None}
    assert "heavy_in_graded" in sys.modules and "heavy_in_demo" not in sys.modules


SENT_CELLS_DRIVER = """
import json, sys
from grader.sandbox.harness import Harness
path, cells = sys.argv[1], json.loads(sys.argv[2])
h = Harness(path, "sent")
load = h.handle({"assignment": "sent", "op": "load", "cells": cells})
call = h.handle({"op": "call", "name": "first", "args": [1]})
print(json.dumps([load, call, "jupytext" in sys.modules, "nbformat" in sys.modules]))
"""


def test_the_worker_runs_the_cells_its_load_request_carries_without_reading_the_file(tmp_path):
    """The trusted side sends the graded cells it read (`protocol.load_request`): the worker
    runs those, at the lines they carry, and never imports jupytext to parse the file again."""
    import json
    import subprocess

    from grader.core.notebook import read_graded_cells
    from grader.sandbox import protocol

    path = tmp_path / "nb.py"
    path.write_text(NOTEBOOK)
    cells = read_graded_cells(path)
    req = protocol.load_request("sent", cells)
    c = cells[0]
    assert req["cells"][0] == [c.index, c.source, "first", c.line, True, c.code, c.heading]
    # what the worker is sent is what runs: first() is changed in the request, not in the file
    req["cells"][0][1] = req["cells"][0][1].replace("x + 1", "x + 100")
    out = subprocess.run(
        [sys.executable, "-c", SENT_CELLS_DRIVER, str(path), json.dumps(req["cells"])],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    load, call, jupytext_loaded, nbformat_loaded = json.loads(out.stdout)
    assert load == {"ok": None}
    assert call == {"ok": 101}
    assert not jupytext_loaded and not nbformat_loaded


@pytest.mark.parametrize(
    "cells",
    [
        "not a list",
        [[0, "x = 1", "id", 1]],  # four fields
        [[0, "x = 1", "id", 1, "yes"]],  # in_file not a bool
        [["0", "x = 1", "id", 1, True]],  # index not an int
    ],
)
def test_a_malformed_cells_list_fails_the_load_with_a_message(tmp_path, cells):
    path = tmp_path / "nb.py"
    path.write_text(NOTEBOOK)
    h = Harness(path, f"bad_{tmp_path.name}")
    reply = h.handle({"op": "load", "cells": cells})
    assert reply["error"]["type"] == "ValueError"
    assert "index, source, grade_id, line, in_file" in reply["error"]["message"]
    assert h.module is None

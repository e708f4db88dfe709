"""`grader.core.notebook.read_notebook` parses a .py's bytes once: a copy to each caller.

One grading reads each .py notebook several times (pairing, the kernels' source, the worker);
jupytext's percent reader takes about 1.3 s on a 1.2 MB cell, which tests/unit/grading/
test_bounds_cost.py holds within 2x of a normal grading.
"""

from __future__ import annotations

import jupytext

from grader.core import notebook

PY = "# %%\ndef f(x):\n    return x\n\n# %%\ny = 2\n"


def _counting(monkeypatch) -> list[str]:
    calls: list[str] = []
    reads = jupytext.reads

    def counted(text, fmt=None, **kw):
        calls.append(fmt)
        return reads(text, fmt=fmt, **kw)

    monkeypatch.setattr(jupytext, "reads", counted)
    monkeypatch.setattr(notebook, "_PARSED", {})
    return calls


def test_the_same_bytes_are_parsed_once_and_each_caller_gets_its_own_copy(tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(PY)
    b.write_text(PY)  # another file, the same bytes
    first = notebook.read_notebook(a)
    first.cells[0].source = "changed by one caller"
    second = notebook.read_notebook(b)
    assert calls == ["py:percent"]
    assert second.cells[0].source.startswith("def f(x)")
    assert second is not first
    a.write_text(PY + "z = 3\n")  # new bytes: parsed again
    assert notebook.read_notebook(a).cells[-1].source == "y = 2\nz = 3" and len(calls) == 2


def test_only_the_last_few_are_kept_and_never_an_ipynb(tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    for i in range(notebook.PARSED_KEPT + 2):
        p = tmp_path / f"n{i}.py"
        p.write_text(PY + f"v = {i}\n")
        notebook.read_notebook(p)
    assert len(notebook._PARSED) == notebook.PARSED_KEPT
    ipynb = tmp_path / "n.ipynb"
    ipynb.write_text(jupytext.writes(jupytext.reads(PY, fmt="py:percent"), fmt="ipynb"))
    calls.clear()
    notebook.read_notebook(ipynb)
    notebook.read_notebook(ipynb)
    assert calls == ["ipynb", "ipynb"]

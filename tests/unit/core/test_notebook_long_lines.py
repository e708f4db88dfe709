"""A long line jupytext has nothing to find in reaches it as a short stand-in, and the notebook
read is the one jupytext reads from the file itself (`notebook._stand_ins`).

jupytext's percent reader scans each character of each line in Python, several times: a 1 MB
list literal in a cell cost the trusted process 1.0 s of the whole grading's 2.3 s.
"""

from __future__ import annotations

import jupytext
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.core import notebook

BIG = "data = [" + ", ".join(str(i) for i in range(150_000)) + "]"  # 1.1 MB, nothing to find
HEADER = (
    "# ---\n# jupyter:\n#   jupytext:\n#     text_representation:\n"
    "#       format_name: percent\n# ---\n"
)


def _cells(nb):
    return [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells]


def _read(tmp_path, text):
    path = tmp_path / "n.py"
    path.write_text(text, encoding="utf-8")
    notebook._PARSED.clear()
    return notebook.read_notebook(path)


def test_a_big_literal_is_read_as_jupytext_reads_it_but_jupytext_never_scans_it(
    tmp_path, monkeypatch
):
    text = HEADER + f"# %%\nimport numpy as np\n{BIG}\n\n# %% [markdown]\n# Words\n\n# %%\nx = 1\n"
    expected = _cells(jupytext.reads(text, fmt="py:percent"))
    seen: list[str] = []
    reads = jupytext.reads

    def spy(text: str, *args, **kwargs):
        seen.append(text)
        return reads(text, *args, **kwargs)

    monkeypatch.setattr(jupytext, "reads", spy)
    got = _read(tmp_path, text)
    assert _cells(got) == expected
    assert BIG in got.cells[0].source
    # what jupytext scanned: the stand-in (about 1 s of CPU saved on this line)
    (scanned,) = seen
    assert max(map(len, scanned.splitlines())) < 200


# Lines of every kind that matters to jupytext's reader, and long lines in between: inert ones
# (stood in) and ones that are not (a quote, a comment, a magic, a backslash, non-ASCII)
LONG = "v = [" + "1, " * 3000 + "2]"
PIECES = [
    "# %%",
    "# %% [markdown]",
    "# Some *text*",
    "",
    "def f(x):",
    "    return x",
    "class A:",
    "    pass",
    '"""',
    "'''",
    "s = 'a'",
    "# %timeit f(1)",
    "%time f(2)",
    "!ls",
    LONG,
    "def g(): return " + LONG,
    "    " + LONG,
    LONG + "  # a comment",
    LONG + " 'q'",
    LONG.replace("1,", "é,", 1),
    LONG + " \\",
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=14))
def test_any_mix_of_lines_is_read_as_jupytext_reads_it(tmp_path_factory, lines):
    text = HEADER + "\n".join(lines) + "\n"
    got = _read(tmp_path_factory.mktemp("nb"), text)
    assert _cells(got) == _cells(jupytext.reads(text, fmt="py:percent"))


def test_only_inert_long_lines_are_stood_in():
    text = "\n".join(PIECES) + "\n"
    _, stood_in = notebook._stand_ins(text, "0" * 64)
    assert sorted(stood_in.values()) == sorted([LONG, "def g(): return " + LONG, "    " + LONG])
    assert all(len(s) < 200 for s in stood_in)

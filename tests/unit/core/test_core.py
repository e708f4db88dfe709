"""grader.core: the points format, the feedback cap, atomic 0644 writes, kernels over IPC."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.core.feedback import EXCERPT_CHARS, FEEDBACK_CHARS, clip, excerpt
from grader.core.files import atomic_path, atomic_write
from grader.core.points import fraction, rounded, shown, stored
from grader.core.tables import points

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (35.999999999999986, "36"),
        (12.5, "12.5"),
        (4 / 3, "1.33"),
        (0.1 + 0.2, "0.3"),
        (-0.0, "0"),
        (123456.78, "123456.78"),
    ],
)
def test_one_points_format(value, text):
    assert shown(value) == text
    assert rounded(value) == float(text)


def test_stored_keeps_splits_exact_enough():
    third = stored(4 / 3)
    assert third == 1.333333 and abs(3 * third - 4) < 1e-5
    assert stored(35.999999999999986) == 36.0
    assert fraction(35.999999999999986, 40) == points(35.999999999999986, 40) == "36 / 40"


def test_atomic_write_is_world_readable(tmp_path):
    old = os.umask(0o022)
    try:
        path = atomic_write(tmp_path / "report.md", "hello\n")
    finally:
        os.umask(old)
    assert path.read_text() == "hello\n"
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]  # no temporary left


def test_atomic_path_keeps_the_old_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "gradebook.db"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the library failed")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == [target.name]
    with atomic_path(target, sync_dir=True) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_one_feedback_cap():
    assert clip("short") == "short" and clip("x" * FEEDBACK_CHARS) == "x" * FEEDBACK_CHARS
    cut = clip("x" * 5000)
    assert len(cut) <= FEEDBACK_CHARS and cut.endswith("(truncated)")
    assert excerpt("a" * 10 + "b" * EXCERPT_CHARS) == "b" * EXCERPT_CHARS  # the tail: the cause


RUN = textwrap.dedent(
    """
    import sys
    import nbformat
    from nbclient import NotebookClient
    from grader.core.kernels import ipc_kernel_config
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    if sys.argv[1] == "ipc":
        with ipc_kernel_config() as cfg:
            NotebookClient(nb, kernel_name="python3", config=cfg).execute()
    else:
        NotebookClient(nb, kernel_name="python3").execute()
    print("OUT", nb.cells[0].outputs[0]["text"].strip())
    """
)


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_kernels_start_over_ipc_without_the_transport_warning(tmp_path, transport):
    res = subprocess.run(
        [sys.executable, "-c", RUN, transport],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "OUT 42" in res.stdout, res.stderr
    warned = "without encryption" in res.stderr
    assert warned is (transport == "tcp")  # the tcp run proves the check can see the warning

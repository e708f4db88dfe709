"""grader.core: points in eighths, the feedback cap, atomic 0644 writes, kernels over IPC."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from factories import ROOT

from grader.core.feedback import EXCERPT_CHARS, FEEDBACK_CHARS, clip, excerpt
from grader.core.files import atomic_path, atomic_write
from grader.core.points import after_penalty, fraction, shown, split, stored, total, uneven
from grader.core.tables import points


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (35.999999999999986, "36"),
        (12.5, "12.5"),
        (4 / 3, "1.375"),  # the nearest eighth
        (0.1 + 0.2, "0.25"),
        (-0.0, "0"),
        (123456.875, "123456.875"),
    ],
)
def test_one_points_format(value, text):
    assert shown(value) == text
    assert stored(value) == float(text)


def test_splits_add_up_exactly():
    assert split(1, 3) == [0.375, 0.375, 0.25]
    assert split(3, 20) == [0.25] * 4 + [0.125] * 16
    for pts, n in [(1, 3), (2, 7), (3, 22), (1, 8), (4, 5), (0.5, 3)]:
        shares = split(pts, n)
        assert len(shares) == n and sum(shares) == pts and total(shares) == pts
        assert max(shares) - min(shares) <= 1 / 8
    with pytest.raises(ValueError, match="at least 1/8 point"):
        split(1, 9)
    assert stored(35.999999999999986) == 36.0
    assert fraction(35.999999999999986, 40) == points(35.999999999999986, 40) == "36 / 40"


def test_an_uneven_split_is_said_with_the_test_and_its_weights():
    """1 point over 6 cases: two cases weigh double; the warning names the test, the weights
    and the totals that would split evenly (`grader verify` prints it as a note)."""
    said = uneven("hidden/test_crossover", split(1, 6))
    assert said == (
        "hidden/test_crossover: 1 point over 6 cases in whole eighths: the first 2 weigh 0.25, "
        "the other 4 0.125 each; 0.75 or 1.5 points would split evenly"
    )
    assert uneven("hidden/test_even", split(3, 6)) is None
    assert uneven("public/test_one", split(2, 1)) is None


def test_late_penalty_keeps_score_plus_penalty_equal_to_raw():
    assert after_penalty(45.875, 0.1) == (41.25, 4.625)
    assert after_penalty(10, 0.0) == (10.0, 0.0) and after_penalty(10, 1.0) == (0.0, 10.0)
    for raw in [0.125 * k for k in range(0, 500, 7)]:
        for frac in (0.1, 0.2, 0.3, 0.5, 1 / 3):
            score, penalty = after_penalty(raw, frac)
            assert score + penalty == raw and score == stored(score)
            assert abs(score - raw * (1 - frac)) <= 1 / 16 + 1e-9  # the nearest eighth
    with pytest.raises(ValueError):
        after_penalty(10, 1.5)


def test_float_sums_of_points_are_exact():
    """What nbgrader's SQL SUM and a spreadsheet do: plain float addition, in any order."""
    shares = [s for pts, n in [(3, 22), (2, 7), (1, 3), (4, 5)] for s in split(pts, n)]
    assert sum(shares) == 10.0 and sum(reversed(shares)) == 10.0
    assert str(sum(shares) - after_penalty(10, 0.3)[1]) == "7.0"


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
    assert len(cut) <= FEEDBACK_CHARS and cut.startswith("x" * 1900)
    kept = cut.index("\n")
    assert cut.endswith(f"[truncated: {5000 - kept:,} more characters]")  # says what was cut
    assert clip(cut) == cut  # a stored (clipped) text is never clipped again by a report
    assert clip("abcdefghij", 5) == "abcde"  # no room for the note: the bare head, still capped
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

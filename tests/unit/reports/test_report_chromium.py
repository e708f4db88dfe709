"""The HTML feedback page in a real browser (headless Chromium): the feedback column is readable.

Chromium lays the page out at a desktop and a laptop width; a probe script (added to a copy of the
page: the report itself has no scripts) measures the feedback column and every feedback block,
and `--dump-dom` brings the numbers back. A screenshot of the page is saved beside them (its path
is printed). Skips with a reason when Chromium is not installed; CI installs Debian's chromium
(.ci/run), so there it runs. The browser is isolated: an empty profile, no network services.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from factories import ROOT

from grader.core.course import load_course
from grader.core.results import AssignmentResult, Environment, GradeResult
from grader.core.results import TestResult as Row
from grader.reports.html import html

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="chromium is not installed (CI installs it: apt-get install chromium)"
)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)
SHORT = "expected 295.2 FLOP/byte, got 0.0: ridge_point should divide peak FLOP/s by bandwidth"
PROBE = """<script>
const table = document.querySelector("table.tests");
const fb = [...table.rows].map(r => r.cells[4]).filter(c => c && c.tagName === "TD");
const out = {table: table.getBoundingClientRect().width,
             feedback: Math.min(...fb.map(c => c.getBoundingClientRect().width)),
             pres: [...document.querySelectorAll("table.tests pre")].map(p => ({
               chars: p.textContent.length, lines: p.textContent.split("\\n").length,
               vscroll: p.scrollHeight > p.clientHeight + 1,
               hscroll: p.scrollWidth > p.clientWidth + 1}))};
document.body.insertAdjacentHTML("beforeend",
  "<pre id=probe>" + JSON.stringify(out) + "</pre>");
</script>"""


def _page() -> str:
    long_name = "test_transpose_tiled_any_shape[" + "x".join(["1025"] * 12) + "]"
    tests = [
        Row("test_ridge_point", 0, 4, "failed", SHORT, suite="public"),
        Row(long_name, 0, 2, "failed", "IndexError: index 1025 is out of bounds", suite="hidden"),
        Row("test_launch_config", 0, 3, "timeout", "took longer than 5 s", suite="hidden"),
        Row("test_trace", 0, 3, "error", "\n".join(f"  line {i}: frame" for i in range(200))),
        Row("test_ok", 4, 4, "passed", suite="public"),
    ]
    a = AssignmentResult("gpu_fundamentals", 4, 16, raw_score=4, tests=tests)
    r = GradeResult("alice", 4, 16, Environment("CPU (CUDA simulator)", True, ["rlimits"]), [a])
    return html(r, load_course(ROOT))


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BROWSER, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("width", [1280, 900])
def test_feedback_column_is_readable(tmp_path, width):
    page = _page()
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    profile = tmp_path / "profile"
    profile.mkdir()
    run = _chromium([f"--window-size={width},1600", "--dump-dom", probe.as_uri()], profile)
    found = re.search(r'<pre id="probe">(.*?)</pre>', run.stdout, re.S)
    assert found, f"chromium printed no probe (rc {run.returncode}): {run.stderr[-2000:]}"
    m = json.loads(found.group(1).replace("&quot;", '"'))
    assert m["feedback"] >= 0.4 * m["table"], m  # the widest column, not squeezed by names
    assert m["feedback"] >= 300, m
    for pre in m["pres"]:
        assert not pre["hscroll"], pre  # wrapped, never a sideways scroll box
        if pre["lines"] <= 10:
            assert not pre["vscroll"], pre  # a short message is shown whole
    assert any(p["vscroll"] for p in m["pres"] if p["lines"] > 100)  # a long trace scrolls

    shot_page = tmp_path / "report.html"
    shot_page.write_text(page, encoding="utf-8")
    shot = tmp_path / f"report-{width}.png"
    _chromium([f"--window-size={width},1600", f"--screenshot={shot}", shot_page.as_uri()], profile)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (width, 1600)
    print(f"screenshot: {shot}")

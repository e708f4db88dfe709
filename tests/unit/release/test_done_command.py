"""The notebooks' "Done" command, `pytest tests/public/<id>`, works in the exported student repo.

There is no solutions/ folder there, so the plugin must default to the student's exercises/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from factories import ROOT

from grader.release import export_student


def _pytest(repo: Path, suite: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"tests/public/{suite}"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_done_command_grades_the_students_exercises(tmp_path):
    repo = export_student(ROOT, tmp_path / "student")
    assert not (repo / "solutions").exists()
    stub = _pytest(repo, "m9_roofline")
    assert stub.returncode == 1, stub.stdout[-2000:] + stub.stderr[-2000:]  # tests ran and failed
    assert "KeyError" not in stub.stdout + stub.stderr
    assert "implement this" in stub.stdout

    # A student who fills the notebook in and runs it to the end passes the same command.
    folder = repo / "exercises" / "m9_roofline"
    shutil.copy(ROOT / "solutions" / "m9_roofline" / "m9_roofline.py", folder)
    env = {**os.environ, "MPLBACKEND": "Agg"}
    subprocess.run(
        [sys.executable, "m9_roofline.py"], cwd=folder, env=env, check=True, capture_output=True
    )
    assert (repo / "metrics.json").is_file()
    done = _pytest(repo, "m9_roofline")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

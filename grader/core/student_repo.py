"""Files the student repository holds under another name than the course repository does.

The export (grader.release.export_student) writes them; intake reads this mapping so that a
student's untouched fork, graded against the course repository, is not told that its README,
.gitignore and workflows "have no effect" (they are the course's own, renamed).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path, PurePosixPath

STUDENT_README = "STUDENT_README.md"  # exported as README.md
STUDENT_WORKFLOWS = ".github/student-workflows"  # exported as .github/workflows
STUDENT_GITIGNORE = """\
# Python and Jupyter clutter
__pycache__/
*.py[cod]
.ipynb_checkpoints/
.pytest_cache/
.venv/
venv/
*.egg-info/
.DS_Store
# local grading output (metrics.json is part of your submission: commit it)
grader-output/
"""


RELEASE_RECORD = "course-release.json"  # the instructor commit the export was made from
SUITE_PATHS = ("tests/hidden", "tests/public", "solutions", "course.toml")


def _git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              check=False, timeout=60)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def release_record(root: Path) -> bytes:
    """`course-release.json` for an export of `root`: its git commit (null outside git), and
    whether the suites had uncommitted changes (then that commit does not hold them). Grading
    fetches the hidden suites at this commit and refuses a record it cannot use."""
    commit = _git(Path(root), "rev-parse", "HEAD") or None
    dirty = bool(_git(Path(root), "status", "--porcelain", "--", *SUITE_PATHS)) if commit else False
    record = {"instructor_commit": commit, "suites_uncommitted": dirty}
    return (json.dumps(record, indent=2) + "\n").encode("utf-8")


def exported_original(root: Path, rel: PurePosixPath | str) -> bytes | None:
    """The bytes the export wrote at `rel` of the student repository, from the course at
    `root`, or None when `rel` is not one of the renamed files."""
    rel = PurePosixPath(rel)
    if rel == PurePosixPath(".gitignore"):
        return STUDENT_GITIGNORE.encode("utf-8")
    if rel == PurePosixPath(RELEASE_RECORD):
        return release_record(Path(root))
    if rel == PurePosixPath("README.md"):
        source = Path(root) / STUDENT_README
    elif rel.parent == PurePosixPath(".github/workflows"):
        source = Path(root) / STUDENT_WORKFLOWS / rel.name
    else:
        return None
    try:
        return source.read_bytes() if source.is_file() and not source.is_symlink() else None
    except OSError:
        return None

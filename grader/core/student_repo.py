"""Files the student repository holds under another name than the course repository does.

The export (grader.release.export_student) writes them; intake reads this mapping so that a
student's untouched fork, graded against the course repository, is not told that its README,
.gitignore and workflows "have no effect" (they are the course's own, renamed).
"""

from __future__ import annotations

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


def exported_original(root: Path, rel: PurePosixPath | str) -> bytes | None:
    """The bytes the export wrote at `rel` of the student repository, from the course at
    `root`, or None when `rel` is not one of the renamed files."""
    rel = PurePosixPath(rel)
    if rel == PurePosixPath(".gitignore"):
        return STUDENT_GITIGNORE.encode("utf-8")
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

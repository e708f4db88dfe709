"""student-check.yml run end to end by act, offline, on a filled pull request and on a main
push. Opt-in (tests/slow, not in `make test`): each run's install step is a real pip install of
the student profile (a minute or more). The stand-ins are tests/unit/github's (act_actions/).

The check installs with locks/student-py3.12-linux.txt on Python 3.12, as the workflow asks
setup-python for: the stand-in finds that interpreter on this machine (PATH, or pyenv's, passed
as ACT_STANDIN_PYTHONS) and fails the job when there is none, never another Python instead.
Run: pytest -q tests/slow/test_act_student_check.py
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from act_standins import PINS, STANDINS, dev_tool

from grader.core.course import load_course
from grader.grading.reference import reference_record

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "locks" / "student-py3.12-linux.txt"
# the act runs of tests/slow go one at a time under pytest-xdist (.ci/run's slow run): both use
# this machine's act cache folders (~/.cache/act)
pytestmark = pytest.mark.xdist_group("act")
PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))


@pytest.fixture(scope="module")
def act() -> str:
    return dev_tool("act")


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    """This work tree with the reference solutions in exercises/ and the M9 record."""
    src = tmp_path_factory.mktemp("filled") / "course"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__"))
    course = load_course(ROOT)
    for aid in course.assignment_ids:
        shutil.copyfile(
            ROOT / "solutions" / aid / f"{aid}.py", src / "exercises" / aid / f"{aid}.py"
        )
    (src / "metrics.json").write_text(json.dumps({"m9_roofline": reference_record(course)}))
    return src


IMAGE_OS = "ubuntu20"  # act's ImageOS for ubuntu-latest (ImageVersion it leaves empty)


def cache_key() -> str:
    """The key the workflow writes: runner.os, the image, the lock's hash as hashFiles computes
    it (the SHA-256 of the file's SHA-256)."""
    lock_hash = hashlib.sha256(hashlib.sha256(LOCK.read_bytes()).digest()).hexdigest()
    return f"pip-student-Linux-{IMAGE_OS}--py3.12-{lock_hash}"


def run_check(act_exe: str, tmp: Path, source: Path, event_name: str, event: dict):
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python", "python3"):
        (bin_dir / name).symlink_to(sys.executable)
    event_path = tmp / "event.json"
    event_path.write_text(json.dumps(event))
    home = tmp / "home"  # ~/.cache/pip: what the cache steps restore and save
    home.mkdir()
    # where setup-python's stand-in looks for the asked-for version: this machine's PATH, pyenv's
    pythons = os.pathsep.join([*os.environ.get("PATH", "").split(os.pathsep), str(PYENV_ROOT)])
    args = [act_exe, event_name, "-W", ".github/student-workflows/student-check.yml",
            "-P", "ubuntu-latest=-self-hosted", "--action-offline-mode",
            "--remote-name", "no-such-remote", "-e", str(event_path),
            "--env", f"ACT_STANDIN_STORE={tmp / 'store'}", "--env", f"ACT_STANDIN_SOURCE={source}",
            "--env", f"ACT_STANDIN_PYTHONS={pythons}",
            "--env", f"PATH={bin_dir}:/usr/bin:/bin", "--env", f"HOME={home}"]  # fmt: skip
    # this machine's pip settings (its package mirrors), which the fresh HOME would hide
    conf = Path.home() / ".config" / "pip" / "pip.conf"
    if conf.is_file():
        args += ["--env", f"PIP_CONFIG_FILE={conf}"]
    for key, value in os.environ.items():
        if key.startswith("PIP_") and key not in ("PIP_NO_CACHE_DIR", "PIP_CACHE_DIR"):
            args += ["--env", f"{key}={value}"]
    # pip's cache is the folder the workflow restores and saves, whatever pip.conf says
    args += ["--env", f"PIP_CACHE_DIR={home / '.cache' / 'pip'}"]
    for pin, folder in PINS.items():
        args += ["--local-repository", f"{pin}={STANDINS / folder}"]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=1500)
    log = proc.stdout + proc.stderr
    (tmp / "act.log").write_text(log)
    return proc, log


ROW = re.compile(r"\|\s+(\w+)\s+([\d.]+) / ([\d.]+)((?:\s+\d+){5})\s*$")


def assignment_rows(log: str) -> dict[str, tuple[float, float, list[int]]]:
    """`grader check`'s assignment table, as the job's log shows it: id -> (score, max, counts
    passed/failed/error/timeout/skipped)."""
    ids = load_course(ROOT).assignment_ids
    rows = {}
    for line in log.splitlines():
        m = ROW.search(line)
        if m and m[1] in ids:
            rows[m[1]] = (float(m[2]), float(m[3]), [int(n) for n in m[4].split()])
    return rows


def test_a_filled_pr_is_checked_green_and_its_submission_uploaded(act, filled, tmp_path):
    """The reference solutions earn every public point on Python 3.12, and the head's files are
    packed for grading; a PR never saves the cache."""
    sha = "a" * 40
    event = {"pull_request": {"number": 7, "head": {"sha": sha}}, "number": 7}
    proc, log = run_check(act, tmp_path, filled, "pull_request", event)
    assert re.search(r"setup-python stand-in: Python 3\.12 at \S+python3\.12", log), log[-4000:]
    assert proc.returncode == 0 and "Job succeeded" in log, log[-4000:]
    rows = assignment_rows(log)
    assert set(rows) == set(load_course(ROOT).assignment_ids), log[-4000:]
    for aid, (got, most, (passed, *others)) in rows.items():
        assert most > 0 and got == most, f"{aid}: {got} / {most}\n{log[-4000:]}"
        assert passed > 0 and others == [0, 0, 0, 0], f"{aid}: {passed}, {others}"
    art = tmp_path / "store" / "artifacts" / "submission"
    assert json.loads((art / "pr.json").read_text()) == {"number": 7, "head_sha": sha}, log[-4000:]
    for aid in load_course(ROOT).assignment_ids:
        rel = Path("exercises") / aid / f"{aid}.py"
        assert (art / rel).read_bytes() == (filled / rel).read_bytes(), rel
    assert json.loads((art / "metrics.json").read_text()) == json.loads(
        (filled / "metrics.json").read_text()
    )
    assert "cache save stand-in" not in log
    assert not (tmp_path / "store" / "cache").exists()


def test_a_main_push_saves_the_pip_cache_whatever_the_checks_outcome(act, tmp_path):
    """On the release's stubs the install passes and the public tests fail: the save step runs
    last all the same, under the key the next pull request restores. An older main's cache (an
    earlier lock) is there to restore by prefix, so the save holds real files: pip itself writes
    nothing to its cache on this machine (its packages come from file:// indexes)."""
    old = tmp_path / "store" / "cache" / f"pip-student-Linux-{IMAGE_OS}--py3.12-0ld10ck"
    (old / "wheels").mkdir(parents=True)
    (old / "wheels" / "earlier.whl").write_bytes(b"an earlier main's wheel")
    proc, log = run_check(act, tmp_path, ROOT, "push", {"ref": "refs/heads/main"})
    assert "setup-python stand-in: Python 3.12 at" in log, log[-4000:]
    assert proc.returncode != 0 and "Job failed" in log, log[-4000:]
    assert f"key {cache_key()} hit=false matched={old.name}" in log, log[-4000:]
    assert "Success - Main Install the grader" in log, log[-4000:]
    assert "Failure - Main Run the public tests" in log, log[-4000:]
    assert f"cache save stand-in: saved {cache_key()}" in log, log[-4000:]
    saved = tmp_path / "store" / "cache" / cache_key()
    home_cache = tmp_path / "home" / ".cache" / "pip"
    files = sorted(p.relative_to(saved) for p in saved.rglob("*") if p.is_file())
    assert files and files == sorted(
        p.relative_to(home_cache) for p in home_cache.rglob("*") if p.is_file()
    )
    assert (saved / "wheels" / "earlier.whl").read_bytes() == b"an earlier main's wheel"


def test_setup_python_fails_the_job_when_the_asked_for_version_is_absent(act, tmp_path):
    """The stand-in never hands over another Python: a version this machine lacks fails the
    job with its name, before any step that would run on the wrong interpreter."""
    pin = next(p for p in PINS if p.startswith("actions/setup-python@"))
    wf = tmp_path / "wf.yml"
    wf.write_text(
        "on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n"
        f"      - uses: {pin}\n"
        "        with: {python-version: '3.99'}\n"
        "      - run: echo reached the next step\n"
    )
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    pythons = os.pathsep.join([*os.environ.get("PATH", "").split(os.pathsep), str(PYENV_ROOT)])
    args = [act, "push", "-W", str(wf), "-P", "ubuntu-latest=-self-hosted",
            "--action-offline-mode", "--env", f"ACT_STANDIN_PYTHONS={pythons}",
            "--env", f"PATH={tmp_path / 'bin'}:/usr/bin:/bin",
            "--local-repository", f"{pin}={STANDINS / PINS[pin]}"]  # fmt: skip
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Job failed" in log, log[-4000:]
    assert "setup-python stand-in: no Python 3.99 on this machine" in log, log[-4000:]
    assert "reached the next step" not in log, log[-4000:]

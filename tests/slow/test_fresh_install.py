"""A new student's first hour, for real: the exported student repository installed in fresh
venvs with the student profile exactly as STUDENT_README says, on Python 3.11, 3.12 and 3.13,
and as a Mac gets it (no numba-cuda: Numba's own simulator). In each, `grader check` on the
untouched stubs scores 0 with the stub message, and on the reference solutions every public
point. pip's cache may be warm; nothing else of this machine's venvs is used. pip compiles no
bytecode (`--no-compile`, as the student check workflow installs): Python compiles what
`grader check` imports on first use, so nothing the test proves depends on it, and pip's compile
step was about 40% of each install's time.

Slow (minutes: four installs, two at a time): marked `slow`, outside tests/unit, run by .ci/run
on its own line.
Install times and venv sizes are printed (`pytest -s`) and kept in `install_report.json` in the
test's temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from grader.core.course import load_course
from grader.grading.reference import reference_record

ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("3.11", "3.12", "3.13")
PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
INSTALL_TIMEOUT_S = 900
CHECK_TIMEOUT_S = 600
ROW = re.compile(r"^(public/\S+)\s+(\S+ / \S+)\s+(passed|failed|error|timeout|skipped)\s*(.*)$")
STUB = re.compile(r"^\w+ is still the stub: fill in its body$")
METRICS_MISSING = "metrics.json not found at the repository root"

# one group under pytest-xdist (.ci/run's slow run): the module's installs are made once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fresh-install")]


def interpreter(version: str) -> str | None:
    """A CPython of `version` on this machine (python3.X on PATH, or pyenv's), or None."""
    found = [shutil.which(f"python{version}")]
    found += sorted(str(p) for p in PYENV.glob(f"{version}.*/bin/python{version}"))
    for exe in filter(None, found):
        probe = subprocess.run(
            [exe, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return exe
    return None


def _env() -> dict[str, str]:
    """This process's environment without its venv and without any path to the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


def _size_mb(path: Path) -> int:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return round(total / 1e6)


def _mac_requirements() -> list[str]:
    """The student extra as pip evaluates it on macOS (its top-level markers, for darwin)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    keep = []
    for spec in project["optional-dependencies"]["student"]:
        req = Requirement(spec)
        if req.marker is None or req.marker.evaluate({"sys_platform": "darwin"}):
            req.marker = None
            keep.append(str(req))
    return keep


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """`python -m grader export-student DIR`, as the instructor makes the student repository."""
    dest = tmp_path_factory.mktemp("export") / "student-repo"
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "--root", str(ROOT), "export-student", str(dest)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    data: dict = {}
    yield data
    out = tmp_path_factory.getbasetemp() / "install_report.json"
    out.write_text(json.dumps(data, indent=2))
    for k, v in data.items():
        print(f"\n{k}: install {v['install_s']:.0f} s, venv {v['venv_mb']} MB")


def _install(exported: Path, where: Path, python: str, mac: bool) -> tuple[Path, float]:
    repo = where / "repo"
    shutil.copytree(exported, repo, symlinks=True)
    t0 = time.monotonic()
    made = _run([python, "-m", "venv", ".venv"], repo, 120)
    assert made.returncode == 0, made.stderr
    pip = [str(repo / ".venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
    if mac:  # what `pip install -e ".[student]"` installs on a Mac
        proc = _run([*pip, "-e", ".", *_mac_requirements()], repo, INSTALL_TIMEOUT_S)
    else:  # STUDENT_README: pip install -e ".[student]"
        proc = _run([*pip, "-e", ".[student]"], repo, INSTALL_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return repo, time.monotonic() - t0


def _check(repo: Path) -> tuple[dict[str, tuple[str, str, str]], str]:
    proc = _run([str(repo / ".venv" / "bin" / "grader"), "check", "-v"], repo, CHECK_TIMEOUT_S)
    rows = {}
    for line in proc.stdout.splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3), m.group(4).strip())
    assert rows, proc.stdout[-3000:] + proc.stderr[-3000:]
    return rows, proc.stdout


def _fill_with_solutions(repo: Path) -> None:
    """The reference solutions copied into exercises/, and the M9 record a student commits."""
    course = load_course(ROOT)
    for aid in course.assignment_ids:
        shutil.copyfile(
            ROOT / "solutions" / aid / f"{aid}.py", repo / "exercises" / aid / f"{aid}.py"
        )
    record = reference_record(course)
    (repo / "metrics.json").write_text(json.dumps({"m9_roofline": record}, indent=2))


TARGETS = [(v, False) for v in PYTHONS] + [("3.12", True)]


@pytest.fixture(scope="module")
def installed(exported, report, tmp_path_factory) -> dict:
    """Every target's venv, two installs at a time (each waits on pip's cache and the disk as
    much as on the CPU): target -> the repository, or why it could not be made here."""

    def one(target: tuple[str, bool]) -> Path | str:
        version, mac = target
        python = interpreter(version)
        if python is None:
            return f"no Python {version} on this machine (python{version} or pyenv)"
        where = tmp_path_factory.mktemp(f"py{version}{'-mac' if mac else ''}")
        repo, seconds = _install(exported, where, python, mac)
        label = f"py{version}{' mac (no numba-cuda)' if mac else ''}"
        report[label] = {"install_s": seconds, "venv_mb": _size_mb(repo / ".venv")}
        return repo

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(TARGETS, pool.map(one, TARGETS), strict=True))


@pytest.mark.parametrize(
    ("version", "mac"), TARGETS, ids=[f"py{v}{'-mac' if m else ''}" for v, m in TARGETS]
)
def test_student_profile_in_a_fresh_venv(installed, version, mac):
    repo = installed[(version, mac)]
    if isinstance(repo, str):
        pytest.skip(repo)
    has_cuda_target = _run(
        [str(repo / ".venv" / "bin" / "python"), "-c", "import numba_cuda"], repo, 60
    )
    assert (has_cuda_target.returncode == 0) is not mac

    rows, out = _check(repo)  # the untouched stubs
    for name, (points, _, feedback) in rows.items():
        assert points.startswith("0 /"), (name, points)
        assert STUB.match(feedback) or feedback.startswith(METRICS_MISSING), (name, feedback)
    assert "Traceback" not in out and "NotImplementedError" not in out, out[-3000:]
    assert "the grader's fault" not in out

    _fill_with_solutions(repo)
    rows, out = _check(repo)
    for name, (points, outcome, feedback) in rows.items():
        got, _, total = points.partition(" / ")
        assert outcome == "passed" and got == total, (name, points, outcome, feedback)
    assert "the grader's fault" not in out
    # numba-cuda's student install has no CUDA compiler: said once, plainly. Numba's own CUDA
    # target (the Mac install) also finds a system toolkit (/usr/local/cuda), and then the PTX
    # check runs; either way the note is never repeated and is never a failure.
    notes = out.count("the compile check for the course GPU runs when your PR is graded")
    assert notes == 1 if not mac else notes <= 1, out[-2000:]

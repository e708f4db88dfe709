import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from factories import ROOT, course_tree

from grader.batch import (
    STATE,
    StateFile,
    discover,
    parse_shard,
    select_shard,
    submission_digest,
)
from grader.core.course import load_course
from grader.core.errors import UsageError

IDS = load_course(ROOT).assignment_ids  # the canned results follow the course's assignments
FIRST, LAST = IDS[0], IDS[-1]

# A batch driver with a stub grade_one (top-level in a script, so the spawned children can
# import it). Students named "crash*" raise, "die*" exit abruptly, the rest get canned results.
DRIVER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from grader.core.results import AssignmentResult, Environment, GradeResult, TestResult

    def grade(submission, student, work):
        with open(os.environ["CALLS"], "a") as fh:
            fh.write(student + "\\n")
        time.sleep(float(os.environ.get("STUB_SLEEP", "0")))
        if student.startswith("crash"):
            raise RuntimeError("student code <script> exploded")
        if student.startswith("die"):
            os._exit(7)
        n = len((submission / "exercises" / "a.py").read_text())
        tests = [TestResult("test_a", min(n, 4), 4, "passed" if n >= 4 else "failed", "fb")]
        a = AssignmentResult("FIRST_ID", min(n, 4), 4, raw_score=min(n, 4), tests=tests)
        return GradeResult(student, a.score, 4, Environment("cpu", True), [a])

    if __name__ == "__main__":
        from grader.batch import grade_all, parse_shard
        from grader.core.course import load_course
        shard = parse_shard(sys.argv[3]) if len(sys.argv) > 3 else None
        out = grade_all(Path(sys.argv[1]), Path(sys.argv[2]), jobs=2, shard=shard,
                        grade_one=grade, course=load_course(os.environ["COURSE_ROOT"]))
        print("FAILED=" + ",".join(out.failed))
    """
).replace("FIRST_ID", FIRST)


def make_class(tmp_path, students):
    subs = tmp_path / "subs"
    for i, s in enumerate(students):
        d = subs / s / "exercises"
        d.mkdir(parents=True)
        (d / "a.py").write_text("x" * (i % 5 + 1))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    return subs, driver


def run_driver(tmp_path, driver, subs, out, *extra, sleep=0.0, wait=True):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CALLS": str(tmp_path / "calls.txt"),
        "STUB_SLEEP": str(sleep),
        "COURSE_ROOT": str(ROOT),
    }
    cmd = [sys.executable, str(driver), str(subs), str(out), *extra]
    if not wait:
        return subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)


def state_students(out):
    lines = (out / "state.jsonl").read_text().splitlines()
    return [json.loads(line)["student"] for line in lines if line.strip()]


def test_sigkill_midway_then_resume(tmp_path, db_rows):
    students = [f"s{i:02d}" for i in range(8)] + ["crash1", "die1"]
    subs, driver = make_class(tmp_path, students)
    out = tmp_path / "out"
    proc = run_driver(tmp_path, driver, subs, out, sleep=0.4, wait=False)
    state = out / "state.jsonl"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if state.exists() and len(state.read_text().splitlines()) >= 3:
            break
        if proc.poll() is not None:
            pytest.fail("batch finished before it could be killed: " + proc.stderr.read().decode())
        time.sleep(0.05)
    else:
        pytest.fail("batch made no progress")
    os.killpg(proc.pid, signal.SIGKILL)  # the batch and its grading children, mid-run
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()
    done_before = set(state_students(out))
    assert 3 <= len(done_before) < len(students)
    entries = [json.loads(x) for x in (out / "state.jsonl").read_text().splitlines() if x.strip()]
    ok_before = {e["student"] for e in entries if e["status"] == "ok"}
    (tmp_path / "calls.txt").write_text("")

    res = run_driver(tmp_path, driver, subs, out)
    assert res.returncode == 0, res.stderr
    regraded = set((tmp_path / "calls.txt").read_text().split())
    # finished, unchanged submissions are skipped; errors are retried
    assert regraded == set(students) - ok_before
    assert "(unchanged, skipped)" in res.stderr
    assert "[10/10]" in res.stderr

    # one line / row per student everywhere, nothing lost, nothing duplicated
    assert sorted(state_students(out)) == sorted(students)
    db = out / "gradebook.db"
    assert db_rows(db, "select count(*) from student") == [(len(students),)]
    assert db_rows(
        db, "select count(*), count(distinct student_id || assignment_id) from submitted_assignment"
    ) == [(8 + 2 * len(IDS),) * 2]  # 8 x 1 + 2 errors x every assignment
    assert db_rows(db, "select count(*), count(distinct notebook_id || cell_id) from grade") == [
        (10, 10)
    ]
    grades = (out / "grades.csv").read_text().splitlines()
    assert len(grades) == 1 + len(IDS) * len(students)  # a row per student and assignment
    for s in students:
        assert (out / s / "result.json").is_file() and (out / s / "report.md").is_file()

    # failures were survived and recorded as errors with score 0
    assert "FAILED=crash1,die1" in res.stdout
    crash = json.loads((out / "crash1" / "result.json").read_text())
    assert crash["score"] == 0 and "exploded" in crash["assignments"][0]["error"]
    die = json.loads((out / "die1" / "result.json").read_text())
    assert "exit code 7" in die["assignments"][0]["error"]
    ok = json.loads((out / "s03" / "result.json").read_text())
    assert ok["score"] == 4

    # a third run changes nothing but regrades an edited submission (and retries errors)
    (tmp_path / "calls.txt").write_text("")
    (subs / "s01" / "exercises" / "a.py").write_text("xxxx")
    res = run_driver(tmp_path, driver, subs, out)
    assert set((tmp_path / "calls.txt").read_text().split()) == {"s01", "crash1", "die1"}
    assert sorted(state_students(out)) == sorted(students)  # compacted: still one line each
    assert db_rows(db, "select count(*) from submitted_assignment") == [(8 + 2 * len(IDS),)]
    assert json.loads((out / "s01" / "result.json").read_text())["score"] == 4


@pytest.mark.parametrize(
    ("shard", "expected"),
    [
        (None, ["a", "b", "c", "d", "e"]),
        ((1, 1), ["a", "b", "c", "d", "e"]),
        ((1, 2), ["a", "c", "e"]),
        ((2, 2), ["b", "d"]),
        ((3, 3), ["c"]),
    ],
)
def test_select_shard(shard, expected):
    assert select_shard(["e", "c", "a", "d", "b"], shard) == expected


def test_shards_partition_the_class():
    students = [f"s{i}" for i in range(23)]
    parts = [select_shard(students, (i, 4)) for i in range(1, 5)]
    assert sorted(sum(parts, [])) == sorted(students)
    assert len(set(sum(parts, []))) == 23


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "a/b", "2", "-1/2"])
def test_parse_shard_rejects(text):
    with pytest.raises(ValueError):
        parse_shard(text)


def test_parse_shard():
    assert parse_shard("2/4") == (2, 4)
    assert parse_shard(None) is None


def test_discover_folder_and_csv(tmp_path):
    for s in ("bob", "alice", ".hidden"):
        (tmp_path / "subs" / s).mkdir(parents=True)
    (tmp_path / "subs" / "notes.txt").write_text("x")
    assert list(discover(tmp_path / "subs")) == ["alice", "bob"]
    listing = tmp_path / "class.csv"
    listing.write_text("student_id,path\nzed,subs/bob\namy,subs/alice\n")
    found = discover(listing)
    assert list(found) == ["amy", "zed"]
    assert found["zed"] == tmp_path / "subs" / "bob"
    listing.write_text("../etc,subs/bob\n")
    with pytest.raises(ValueError, match="student id"):
        discover(listing)
    listing.write_text("amy,subs/alice\namy,subs/bob\n")
    with pytest.raises(ValueError, match="twice"):
        discover(listing)
    listing.write_bytes(b"\xffamy,subs/alice\n")  # saved as UTF-16 or Latin-1
    with pytest.raises(UsageError, match=f"{listing}: cannot read the class listing"):
        discover(listing)


def test_submission_digest(tmp_path):
    sub = tmp_path / "s"
    (sub / "exercises" / "m").mkdir(parents=True)
    (sub / "exercises" / "m" / "m.py").write_text("a = 1\n")
    (sub / "metrics.json").write_text("{}")
    (sub / "README.md").write_text("ignored")
    d1 = submission_digest(sub)
    assert len(d1) == 64 and d1 == submission_digest(sub)
    (sub / "README.md").write_text("still ignored")
    assert submission_digest(sub) == d1
    (sub / "metrics.json").write_text('{"a": 1}')
    d2 = submission_digest(sub)
    assert d2 != d1
    (sub / "exercises" / "m" / "m.py").rename(sub / "exercises" / "m" / "n.py")
    d3 = submission_digest(sub)
    assert d3 != d2  # the path counts, not only the bytes
    (sub / "exercises" / "link").symlink_to("/etc/passwd")
    assert submission_digest(sub) == d3  # a symlink is not followed, nor taken, nor graded


def test_state_file_tolerates_torn_line(tmp_path):
    path = tmp_path / "state.jsonl"
    path.write_text('{"student": "a", "status": "ok"}\n{"student": "b", "sta')
    state = StateFile(path)
    state.append({"student": "c", "status": "ok"})
    assert set(state.read()) == {"a", "c"}
    state.append({"student": "a", "status": "error"})
    state.compact()
    assert path.read_text().count("\n") == 2
    assert state.read()["a"]["status"] == "error"


def _course_copy(tmp_path):
    """A course root the test may edit: course.toml, tests/ and solutions/ copied."""
    parts = ("course.toml", "tests/public", "tests/hidden", "solutions")
    return course_tree(tmp_path / "course", copy=parts)


def _run(tmp_path, driver, subs, out, root, *extra):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CALLS": str(tmp_path / "calls.txt"),
        "STUB_SLEEP": "0",
        "COURSE_ROOT": str(root),
        "FORCE": "1" if "--force" in extra else "",
    }
    (tmp_path / "calls.txt").write_text("")
    res = subprocess.run(
        [sys.executable, str(driver), str(subs), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert res.returncode == 0, res.stderr
    return res, set((tmp_path / "calls.txt").read_text().split())


def _rows(stdout):
    """student -> the class table's row cells (split on runs of 2+ spaces)."""
    import re

    rows = {}
    for line in stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] in {"s00", "s01", "s02"}:
            rows[cells[0]] = cells
    return rows


PER_ASSIGNMENT = (
    DRIVER.replace(
        "def grade(submission, student, work):",
        "def grade(submission, student, work, assignments=None):",
    )
    .replace(
        'fh.write(student + "\\n")',
        'fh.write(student + ("=" + ",".join(assignments) if assignments else "") + "\\n")',
    )
    .replace(
        'return GradeResult(student, a.score, 4, Environment("cpu", True), [a])',
        "others = [AssignmentResult(i, 2, 2, raw_score=2,\n"
        f"        tests=[TestResult('test_m', 2, 2, 'passed')]) for i in {IDS[1:]!r}]\n"
        "    keep = [x for x in (a, *others) if assignments is None or x.id in assignments]\n"
        "    total = sum(x.score for x in keep)\n"
        "    most = sum(x.max_score for x in keep)\n"
        "    return GradeResult(student, total, most, Environment('cpu', True), keep)",
    )
    .replace("jobs=2, shard=shard,", "jobs=2, shard=shard, force=bool(os.environ['FORCE']),")
)


def _scores(first: int) -> list[str]:
    """A row's scores: the first assignment's, each other's (2 / 2), and the total."""
    others = len(IDS) - 1
    return [f"{first} / 4", *["2 / 2"] * others, f"{first + 2 * others} / {4 + 2 * others}"]


def test_regrade_per_assignment_when_what_grades_changes_and_force(tmp_path, umask):
    assert PER_ASSIGNMENT.count("assignments") >= 4
    root = _course_copy(tmp_path)
    subs, driver = make_class(tmp_path, ["s00", "s01", "s02"])
    driver.write_text(PER_ASSIGNMENT)
    out = tmp_path / "out"
    res, calls = _run(tmp_path, driver, subs, out, root)
    assert calls == {"s00", "s01", "s02"}
    assert "regraded" in res.stdout and "before -> after" in res.stdout
    assert all("new" in r for r in _rows(res.stdout).values())
    columns = slice(1, len(IDS) + 2)
    assert _rows(res.stdout)["s00"][columns] == _scores(1)

    res, calls = _run(tmp_path, driver, subs, out, root)
    assert calls == set()
    assert "graded 0, unchanged 3" in res.stdout

    # a fixed hidden test of the last assignment: it alone is regraded for everyone, and merged
    # with the kept grades
    hidden = next((root / "tests" / "hidden" / LAST).glob("test_*.py"))
    hidden.write_text(hidden.read_text() + "\n# fixed a message\n")
    res, calls = _run(tmp_path, driver, subs, out, root)
    assert calls == {f"s00={LAST}", f"s01={LAST}", f"s02={LAST}"}
    rows = _rows(res.stdout)
    assert all(f"{LAST}: suites changed" in r for r in rows.values()), res.stdout
    assert rows["s00"][columns] == _scores(1) and f"{LAST} 2 -> 2" in rows["s00"]
    merged = json.loads((out / "s00" / "result.json").read_text())
    assert [a["id"] for a in merged["assignments"]] == IDS
    assert merged["score"] == 1 + 2 * (len(IDS) - 1)
    assert any("kept from the previous" in w for w in merged["warnings"])
    res, calls = _run(tmp_path, driver, subs, out, root)
    assert calls == set()

    # a shared input (course.toml) makes every assignment stale
    (root / "course.toml").write_text((root / "course.toml").read_text() + "\n# edited\n")
    res, calls = _run(tmp_path, driver, subs, out, root)
    assert calls == {"s00", "s01", "s02"}
    assert all("course.toml changed" in r for r in _rows(res.stdout).values())
    # one assignment's reference solution regrades that assignment alone
    ref = next((root / "solutions" / FIRST).glob("*.py"))
    ref.write_text(ref.read_text() + "\n# edited\n")
    res, calls = _run(tmp_path, driver, subs, out, root)
    assert calls == {f"s00={FIRST}", f"s01={FIRST}", f"s02={FIRST}"}
    assert all(f"{FIRST}: reference changed" in r for r in _rows(res.stdout).values())

    # a changed submission: before -> after shows the score moving, per assignment
    (subs / "s00" / "exercises" / "a.py").write_text("xxxx")  # was 1 point, now 4
    res, calls = _run(tmp_path, driver, subs, out, root)
    assert calls == {"s00"}
    row = _rows(res.stdout)["s00"]
    moved = "; ".join([f"{FIRST} 1 -> 4", *(f"{a} 2 -> 2" for a in IDS[1:])])
    assert "submission changed" in row and moved in row
    assert _rows(res.stdout)["s01"][-1] == "no"  # unchanged rows: regraded "no", no why

    # --force regrades everyone
    res, calls = _run(tmp_path, driver, subs, out, root, "--force")
    assert calls == {"s00", "s01", "s02"}
    assert all("forced" in r for r in _rows(res.stdout).values())
    # no stray files are left beside the reports
    for s in ("s00", "s01", "s02"):
        assert not (out / s / ".child-result.json").exists()
        for name in ("report.md", "report.html", "result.json"):
            assert (out / s / name).stat().st_mode & 0o777 == 0o644 & ~umask


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_children_die_with_a_killed_batch(tmp_path, sig):
    subs, driver = make_class(tmp_path, ["s00", "s01"])
    text = DRIVER.replace(
        'fh.write(student + "\\n")', 'fh.write(student + " " + str(os.getpid()) + "\\n")'
    )
    assert text != DRIVER
    driver.write_text(text)
    out = tmp_path / "out"
    proc = run_driver(tmp_path, driver, subs, out, sleep=120, wait=False)
    calls = tmp_path / "calls.txt"
    deadline = time.monotonic() + 60
    pids: list[int] = []
    while time.monotonic() < deadline:
        if calls.exists():
            pids = [
                int(x.split()[1]) for x in calls.read_text().splitlines() if len(x.split()) == 2
            ]
            if len(pids) == 2:
                break
        time.sleep(0.05)
    assert len(pids) == 2, "the children never started"
    assert all(_alive(p) for p in pids)
    os.kill(proc.pid, sig)  # the batch alone, not its process group
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), "a grading child outlived its batch"


# A grading process (as a grade-all child is) whose sandboxed worker runs a student loop.
GRADER_WITH_LOOPING_WORKER = textwrap.dedent(
    """
    import sys, threading, time
    from pathlib import Path
    from grader.core.course import load_course
    from grader.sandbox import WorkerBackend

    work = Path(sys.argv[1])
    b = WorkerBackend(work, {"a": work / "exercises/a/a.py"}, load_course(sys.argv[2]).limits)
    req = {"assignment": "a", "op": "call", "name": "loop", "args": [], "kwargs": {}}
    threading.Thread(target=b.request, args=(req, 600), daemon=True).start()
    while b.notebook_worker._proc is None:
        time.sleep(0.05)
    time.sleep(3)  # the call is in the student's loop by now
    print(b.notebook_worker._proc.pid, flush=True)
    time.sleep(600)
    """
)


def test_sandbox_worker_dies_with_its_grading_process(tmp_path):
    """A killed grade-all child's worker must not keep running the student's loop."""
    work = tmp_path / "work"
    (work / "exercises" / "a").mkdir(parents=True)
    (work / "exercises" / "a" / "a.py").write_text(
        "# %%\ndef loop():\n    while True:\n        pass\n"
    )
    script = tmp_path / "grader_proc.py"
    script.write_text(GRADER_WITH_LOOPING_WORKER)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(work), str(ROOT)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        worker = int(proc.stdout.readline())
        assert _alive(worker)
        proc.kill()  # as PR_SET_PDEATHSIG kills a grade-all child
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(worker):
            time.sleep(0.1)
        assert not _alive(worker), "the worker outlived the grading process that started it"
    finally:
        proc.kill()
        proc.stdout.close()


def test_csv_submission_times_reach_grading_and_the_resume_key(tmp_path):
    subs, driver = make_class(tmp_path, ["s00", "s01"])
    text = DRIVER.replace(
        "def grade(submission, student, work):",
        "def grade(submission, student, work, timestamp=None):",
    ).replace('fh.write(student + "\\n")', 'fh.write(f"{student}={timestamp}\\n")')
    assert text != DRIVER
    driver.write_text(text)
    listing = tmp_path / "class.csv"
    listing.write_text(
        "student_id,path,submitted_at\ns00,subs/s00,2026-12-15T10:00:00Z\ns01,subs/s01\n"
    )
    out = tmp_path / "out"
    res, calls = _run(tmp_path, driver, listing, out, ROOT)
    assert calls == {"s00=2026-12-15T10:00:00+00:00", "s01=None"}
    res, calls = _run(tmp_path, driver, listing, out, ROOT)
    assert calls == set()
    listing.write_text("s00,subs/s00,2026-12-16T10:00:00Z\ns01,subs/s01\n")
    res, calls = _run(tmp_path, driver, listing, out, ROOT)
    assert calls == {"s00=2026-12-16T10:00:00+00:00"}
    assert "submission time changed" in _rows(res.stdout)["s00"]
    listing.write_text("s00,subs/s00,yesterday\n")
    from grader.batch import submission_times

    with pytest.raises(ValueError, match="class.csv:1: submitted_at"):
        submission_times(listing)


def test_a_folder_regrade_keeps_earlier_times_and_refuses_to_drop_them(tmp_path):
    """GITHUB_SETUP's folder regrade after a CSV grading: unchanged work keeps its trusted time
    (and so its late penalty); changed work without a time is refused unless --drop-times."""
    subs, driver = make_class(tmp_path, ["s00", "s01"])
    text = (
        DRIVER.replace(
            "def grade(submission, student, work):",
            "def grade(submission, student, work, timestamp=None):",
        )
        .replace('fh.write(student + "\\n")', 'fh.write(f"{student}={timestamp}\\n")')
        .replace(
            "jobs=2, shard=shard,", "jobs=2, shard=shard, drop_times=bool(os.environ['FORCE']),"
        )
    )
    driver.write_text(text)
    listing = tmp_path / "class.csv"
    listing.write_text("s00,subs/s00,2026-12-16T10:00:00Z\ns01,subs/s01\n")
    out = tmp_path / "out"
    _run(tmp_path, driver, listing, out, ROOT)
    res, calls = _run(tmp_path, driver, subs, out, ROOT)  # the folder: no times at all
    assert calls == set(), "unchanged work with its kept time is not regraded"
    assert "kept the submission time of the previous grading" in res.stderr and "s00" in res.stderr
    lines = (out / STATE).read_text().splitlines()
    entry = {json.loads(x)["student"]: json.loads(x) for x in lines}
    assert entry["s00"]["digest"].endswith("@2026-12-16T10:00:00+00:00")

    (subs / "s00" / "exercises" / "a.py").write_text("changed")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CALLS": str(tmp_path / "calls.txt"),
        "COURSE_ROOT": str(ROOT),
        "FORCE": "",
    }
    refused = subprocess.run(
        [sys.executable, str(driver), str(subs), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert refused.returncode != 0
    assert "DroppedTimes" in refused.stderr and "--drop-times" in refused.stderr
    assert "s00 (graded before as submitted at 2026-12-16T10:00:00+00:00)" in refused.stderr
    assert json.loads((out / "s00" / "result.json").read_text())["student"] == "s00"
    res, calls = _run(tmp_path, driver, subs, out, ROOT, "--force")  # FORCE: drop_times here
    assert calls == {"s00=None"}


def test_state_and_result_record_the_same_submission_digest(tmp_path):
    """The resume key in state.jsonl is the digest result.json records (intake's), not another."""
    subs, driver = make_class(tmp_path, ["s00"])
    sub = subs / "s00"
    (sub / "metrics.json").write_text('{"m9_roofline": {}}')
    (sub / "README.md").write_text("not graded")
    (sub / "exercises" / "link").symlink_to("/etc/passwd")
    text = DRIVER.replace(
        'return GradeResult(student, a.score, 4, Environment("cpu", True), [a])',
        "from grader.core.course import load_course\n"
        "    from grader.grading.intake import prepare\n"
        "    course = load_course(os.environ['COURSE_ROOT'])\n"
        "    taken = prepare(submission, work / 'scratch', course)\n"
        "    return GradeResult(student, a.score, 4, Environment('cpu', True), [a],\n"
        "                       submission_digest=taken.digest)",
    )
    assert text != DRIVER
    driver.write_text(text)
    out = tmp_path / "out"
    res = run_driver(tmp_path, driver, subs, out)
    assert res.returncode == 0, res.stderr
    (entry,) = [json.loads(x) for x in (out / STATE).read_text().splitlines() if x.strip()]
    recorded = json.loads((out / "s00" / "result.json").read_text())["submission_digest"]
    assert entry["digest"] == recorded == submission_digest(sub)
    (tmp_path / "calls.txt").write_text("")
    res = run_driver(tmp_path, driver, subs, out)  # unchanged: resumed, not graded again
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "calls.txt").read_text() == ""


# Two batches in one process, each child reporting what its process looks like: whether it
# started with the fork server's preload, who its parent is, and the batch's environment.
SERVER_DRIVER = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from grader.batch import grade_all
    from grader.core.course import load_course
    from grader.core.results import Environment, GradeResult
    from grader.sandbox import procs

    def grade(submission, student, work):
        seen = {"preloaded": "grader.batch.preload" in sys.modules, "parent": os.getppid(),
                "grandparent": procs.parent_of(os.getppid()), "mark": os.environ["MARK"]}
        return GradeResult(student, 0.0, 4.0, Environment("cpu", True), [],
                           warnings=[json.dumps(seen)])

    def servers():
        return [p for p in procs.children(os.getpid())
                if b"forkserver" in Path(f"/proc/{p}/cmdline").read_bytes()]

    if __name__ == "__main__":
        report = {"batch": os.getpid(), "runs": []}
        for mark in ("first", "second"):
            os.environ["MARK"] = mark
            out = grade_all(Path(sys.argv[1]), Path(sys.argv[2]) / mark, jobs=2,
                            grade_one=grade, course=load_course(os.environ["COURSE_ROOT"]))
            seen = [json.loads(r.warnings[0]) for r in out.results.values()]
            report["runs"].append({"seen": seen, "servers_after": servers()})
        print(json.dumps(report))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux's")
def test_children_come_from_a_preloaded_fork_server_that_ends_with_its_batch(tmp_path):
    subs, driver = make_class(tmp_path, ["s00", "s01", "s02"])
    driver.write_text(SERVER_DRIVER)
    res = run_driver(tmp_path, driver, subs, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout.splitlines()[-1])
    batch = report["batch"]
    parents = []
    for mark, run in zip(("first", "second"), report["runs"], strict=True):
        assert len(run["seen"]) == 3
        for seen in run["seen"]:
            assert seen["preloaded"], "the child imported the grader itself"
            assert seen["parent"] != batch and seen["grandparent"] == batch, seen
            assert seen["mark"] == mark, "a child saw an earlier batch's environment"
        assert len({s["parent"] for s in run["seen"]}) == 1  # one server for the batch
        assert run["servers_after"] == [], "the fork server outlived its batch"
        parents.append(run["seen"][0]["parent"])
    assert parents[0] != parents[1]  # each batch started its own


# The first student's commit (its reports) is slow: 3 s. s01 grades for 0.8 s, so it ends while
# that commit runs; s02 and s03 wait for a slot.
SLOW_COMMIT_DRIVER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from grader.batch import schedule
    from grader.core.results import AssignmentResult, Environment, GradeResult, TestResult

    COMMIT_S, GRADE_S = 3.0, {"s01": 0.8}

    def grade(submission, student, work):
        with open(os.environ["CALLS"], "a") as fh:
            fh.write(json.dumps({"student": student, "started": time.monotonic()}) + "\\n")
        time.sleep(GRADE_S.get(student, 0.1))
        a = AssignmentResult("gpu_fundamentals", 4, 4, raw_score=4,
                             tests=[TestResult("test_a", 4, 4, "passed", "fb")])
        return GradeResult(student, 4, 4, Environment("cpu", True), [a])

    real = schedule.write_reports

    def slow_reports(result, *args, **kwargs):
        if result.student == "s00":
            time.sleep(COMMIT_S)
            print(json.dumps({"committed": time.monotonic()}))
        return real(result, *args, **kwargs)

    if __name__ == "__main__":
        from grader.core.course import load_course
        schedule.write_reports = slow_reports
        schedule.grade_all(Path(sys.argv[1]), Path(sys.argv[2]), jobs=2, grade_one=grade,
                           course=load_course(os.environ["COURSE_ROOT"]),
                           summary=open(os.devnull, "w"))
    """
)


def test_a_slow_commit_neither_idles_a_slot_nor_counts_in_another_students_seconds(tmp_path):
    """The batch commits a student (reports, gradebook row, state line) after it has given the
    freed slots to the next students, and each student's seconds end when its own child ended."""
    subs, driver = make_class(tmp_path, ["s00", "s01", "s02", "s03"])
    driver.write_text(SLOW_COMMIT_DRIVER)
    out = tmp_path / "out"
    res = run_driver(tmp_path, driver, subs, out)
    assert res.returncode == 0, res.stderr
    committed = json.loads(res.stdout.splitlines()[-1])["committed"]
    calls = tmp_path / "calls.txt"
    started = {c["student"]: c["started"] for c in map(json.loads, calls.read_text().splitlines())}
    # s02 took the slot s00 freed at once, not after s00's 3-second commit
    assert started["s02"] < committed - 1.5, (started, committed)
    seconds = {
        json.loads(line)["student"]: json.loads(line)["seconds"]
        for line in (out / "state.jsonl").read_text().splitlines()
    }
    assert set(seconds) == {"s00", "s01", "s02", "s03"}
    # s01 graded for 0.8 s and ended during s00's commit: that commit is not its time
    assert 0.8 <= seconds["s01"] < 2.5, seconds


HANG_DRIVER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from grader.batch import grade_all
    from grader.core.results import AssignmentResult, Environment, GradeResult, TestResult

    HANGS = (
        "import time\\n\\n"
        "def test_loses_a_point_first():\\n    assert False\\n\\n"
        "def wait_for_nothing():\\n    time.sleep(3600)\\n\\n"
        "def test_hangs():\\n    wait_for_nothing()\\n"
    )

    def grade(submission, student, work):
        if student.startswith("hang"):
            # inside a test of a pytest session run with a grading's own flags, after a failed
            # test, as a grading's hang would be: pytest's capture has fds 1 and 2 then, and
            # its faulthandler plugin would cancel the dumps at that failure
            import pytest
            from grader.suites.runner import pytest_args

            (Path(work) / "test_hangs.py").write_text(HANGS)
            pytest.main(pytest_args([Path(work) / "test_hangs.py"], Path(work), Path(work) / "tmp"))
        a = AssignmentResult("gpu_fundamentals", 4, 4, raw_score=4,
                             tests=[TestResult("test_a", 4, 4, "passed", "fb")])
        return GradeResult(student, 4, 4, Environment("cpu", True), [a])

    if __name__ == "__main__":
        from grader.core.course import load_course
        out = grade_all(Path(sys.argv[1]), Path(sys.argv[2]), jobs=2, grade_one=grade,
                        course=load_course(os.environ["COURSE_ROOT"]), timeout_s=8.0,
                        summary=open(os.devnull, "w"))
        print("FAILED=" + ",".join(out.failed))
    """
)


def test_a_hung_grading_is_killed_and_leaves_where_it_hung_in_its_log(tmp_path):
    subs, driver = make_class(tmp_path, ["hang-ada", "s01"])
    driver.write_text(HANG_DRIVER)
    out = tmp_path / "out"
    res = run_driver(tmp_path, driver, subs, out)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "FAILED=hang-ada"
    result = json.loads((out / "hang-ada" / "result.json").read_text())
    assert any("timed out after 8 s" in w and "grade.log" in w for w in result["warnings"])
    log = (out / "hang-ada" / "grade.log").read_text()
    # faulthandler's dump, taken at 90% of the timeout (`stacks_every`), past pytest's capture
    # and its faulthandler plugin (the failed test before the hang): the hung function and its
    # test are named
    assert "most recent call first" in log and "wait_for_nothing" in log, log[-2000:]
    assert "test_hangs" in log, log[-2000:]
    assert "most recent call first" not in (out / "s01" / "grade.log").read_text()

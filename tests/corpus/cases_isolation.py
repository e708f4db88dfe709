"""Corpus cases: isolation between a worker and the host and between concurrent workers (issue 11).

Imported by build.py after its own cases; uses build's helpers. The neighbour cases start a
second grading (the reference, with a canary in its notebook) beside the attacker, in a process
of its own, so two sandboxes are live at once; their checks assert that the two really overlapped.
Every case passes as root and as an ordinary user (tests/unit/sandbox/test_corpus.py, .ci/run).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from build import (
    BROKEN,
    FAKE_TOKEN,
    M9,
    OK,
    Case,
    Ctx,
    Expect,
    Rule,
    _fn,
    _no_canary,
    _no_token,
    insert_cell_before,
    patch,
    patched,
    with_source,
    write_fork,
)

CMDLINE_CANARY = "CMDLINE-CANARY-4b1d-token-on-a-command-line"
VICTIM_CANARY = "VICTIM-CANARY-77e0-another-students-notebook"
PWNED = "PWNED-by-the-neighbour"
DAEMON = "corpus-daemon-5ac1"
IPC_KEY = 0x11C0FFEE

# Processes a builder started for its check (the sleeper with a token on its command line, the
# concurrent victim grading), by case name.
_STARTED: dict[str, subprocess.Popen] = {}
_T0: dict[str, float] = {}


def _json(result) -> str:
    return result.to_json()


# ----------------------------------------------------------------------------- the host

PROC_AND_HOME = r"""
import glob, os, time
from pathlib import Path
found = []
def grab(p):
    try:
        found.append(Path(p).read_text(errors="replace")[:4000])
    except OSError:
        pass
course = {root!r}.lstrip("/")
for proc in glob.glob("/proc/[0-9]*"):
    grab(proc + "/environ")
    for via in ("cwd", "root"):
        base = Path(proc) / via
        for rel in ("tests/hidden", "solutions", course + "/tests/hidden", course + "/solutions"):
            try:
                for p in sorted((base / rel).rglob("*"))[:200]:
                    grab(p)
            except OSError:
                pass
homes = [os.path.expanduser("~"), "/root", "/github/workspace", "/home/runner/work",
         os.environ.get("GITHUB_WORKSPACE", ""), *glob.glob("/home/*")]
t0 = time.monotonic()
for home in filter(None, homes):
    for dirpath, dirnames, filenames in os.walk(home):
        if time.monotonic() - t0 > 2:
            break
        if "hidden" in dirpath or "solutions" in dirpath:
            for f in filenames:
                grab(os.path.join(dirpath, f))
return "\n".join(found)
"""


def _start_sleeper(dest: Path, ctx: Ctx) -> None:
    """A host process whose command line carries a token, as a runner's may."""
    code = "import time; time.sleep(120)"
    _STARTED["cmdline_of_other_processes"] = subprocess.Popen(
        [sys.executable, "-c", code, CMDLINE_CANARY]
    )
    write_fork(dest, {M9: patch(ctx.solutions[M9], "m9_record", CMDLINES)}, ctx=ctx)


# As an attacker would: anything that looks like a token first, in full; then each process's
# program and first two words that are not options, so the answer fits in the feedback however long bwrap's own
# command line is (feedback is clipped, and a canary past the clip would prove nothing).
CMDLINES = r"""
import glob
import os
tokens, names = [], []
for p in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        args = open(p, "rb").read().decode(errors="replace").split("\0")
    except OSError:
        continue
    tokens += [a for a in args if "token" in a.lower()]
    words = [a for a in args[1:] if a and not a.startswith("-")][:2]
    names.append(" ".join([os.path.basename(args[0]), *words])[:60])
return " | ".join(tokens + names)
"""


def _no_cmdline(result, ctx: Ctx) -> None:
    proc = _STARTED.pop("cmdline_of_other_processes")
    try:
        assert proc.poll() is None, "the sleeper died before the check"
        assert CMDLINE_CANARY not in _json(result), "another process's command line leaked"
        assert "grader.sandbox.worker" in _json(result)  # the worker did read its own /proc
    finally:
        proc.kill()
        proc.wait()


# ----------------------------------------------------------------------------- neighbours

VICTIM = """
import json, sys, time
sys.path.insert(0, {corpus!r})
from pathlib import Path
from grader.grading.grade import grade_submission
t0 = time.time()
r = grade_submission(Path({sub!r}), root=Path({root!r}), student="victim", assignments=[{m9!r}])
Path({out!r}).write_text(json.dumps({{"start": t0, "end": time.time(), "result": r.to_dict()}}))
"""


def _start_victim(name: str, dest: Path, ctx: Ctx) -> None:
    """The reference, with a canary and a 4 s pause at import, graded in a process of its own."""
    # Outside dest's folder: a batch over the corpus must not take the victim for a student.
    victim = Path(tempfile.mkdtemp(prefix="corpus-victim-")) / "fork"
    src = insert_cell_before(
        ctx.solutions[M9],
        "validate_config",
        f'import time as _t\n_CANARY = "{VICTIM_CANARY}"\n_t.sleep(4)\n',
    )
    write_fork(victim, {M9: src}, ctx=ctx)
    out = victim.parent / "victim.json"
    code = VICTIM.format(
        corpus=str(Path(__file__).parent), sub=str(victim), root=str(ctx.root), m9=M9, out=str(out)
    )
    _STARTED[name] = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _STARTED[name].out = out  # type: ignore[attr-defined]
    _T0[name] = time.time()


def _victim_untouched(name: str):
    def check(result, ctx: Ctx) -> None:
        proc = _STARTED.pop(name)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-2000:]
        data = json.loads(proc.out.read_text())  # type: ignore[attr-defined]
        shutil.rmtree(proc.out.parent, ignore_errors=True)  # type: ignore[attr-defined]
        # The two gradings really overlapped (the victim's worker sleeps 4 s at import).
        assert data["start"] < time.time() and data["end"] > _T0[name] + 2, data
        victim = data["result"]
        lost = victim["max_score"] - victim["score"]
        assert victim["max_score"] > 0 and lost < 1e-6, f"the neighbour lost {lost} points"
        assert PWNED not in json.dumps(victim)
        assert VICTIM_CANARY not in _json(result), "the neighbour's notebook was read"
        _no_canary(result, ctx)

    return check


NEIGHBOUR_FILES = r"""
import glob, os, signal, threading, time
from pathlib import Path
_found = []
def _scan():
    t0 = time.monotonic()
    while time.monotonic() - t0 < 20:
        pats = ["/proc/[0-9]*/root/tmp/grade-*/work", "/proc/[0-9]*/cwd", "/tmp/grade-*/work",
                "/proc/[0-9]*/root" + os.path.dirname(os.getcwd()) + "/../../grade-*/work"]
        for pat in pats:
            for work in glob.glob(pat):
                if os.path.realpath(work) == os.path.realpath(os.getcwd()):
                    continue  # its own scratch: the neighbour's is the target
                for p in glob.glob(work + "/exercises/*/*.py") + glob.glob(work + "/*.json"):
                    try:
                        _found.append(Path(p).read_text(errors="replace")[:3000])
                    except OSError:
                        pass
                    try:
                        with open(p, "a") as f:
                            f.write("\n# {pwned}\n")
                    except OSError:
                        pass
                for d in glob.glob(work + "/.sandbox"):
                    try:
                        Path(d, "metrics.json").write_text('{{"{pwned}": 1}}')
                    except OSError:
                        pass
        for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
            if pid not in (1, os.getpid()):
                try:
                    os.kill(pid, signal.SIGSTOP)
                except OSError:
                    pass
        time.sleep(0.2)
threading.Thread(target=_scan, daemon=True).start()
"""


def _neighbour_files(dest: Path, ctx: Ctx) -> None:
    _start_victim("neighbour_files", dest, ctx)
    src = insert_cell_before(
        ctx.solutions[M9], "validate_config", NEIGHBOUR_FILES.format(pwned=PWNED)
    )
    src = patch(src, "m9_record", 'return "\\n".join(_found)')
    write_fork(dest, {M9: src}, ctx=ctx)


PROCESS_HOG = r"""
import threading, time
_held = []
while True:
    try:
        t = threading.Thread(target=time.sleep, args=(60,), daemon=True)
        t.start()
        _held.append(t)
    except RuntimeError:
        break
assert len(_held) > 8, len(_held)
"""


def _neighbour_processes(dest: Path, ctx: Ctx) -> None:
    _start_victim("neighbour_process_limit", dest, ctx)
    src = insert_cell_before(ctx.solutions[M9], "validate_config", PROCESS_HOG)
    write_fork(dest, {M9: src}, ctx=ctx)


# ----------------------------------------------------------------------------- leftovers

IPC = rf"""
import ctypes, os
_libc = ctypes.CDLL(None, use_errno=True)
assert _libc.shmget({IPC_KEY}, 1 << 20, 0o1666) >= 0, "shmget"
assert _libc.msgget({IPC_KEY}, 0o1666) >= 0, "msgget"
assert _libc.semget({IPC_KEY}, 1, 0o1666) >= 0, "semget"
with open("/dev/shm/corpus-ipc-canary", "wb") as _f:
    _f.write(b"x" * 4096)
"""


def _no_ipc_left(result, ctx: Ctx) -> None:
    for kind in ("shm", "msg", "sem"):
        table = Path(f"/proc/sysvipc/{kind}").read_text()
        assert f" {IPC_KEY} " not in table, f"a SysV {kind} object outlived the grading"
    assert not Path("/dev/shm/corpus-ipc-canary").exists(), "a POSIX shm file outlived it"


DAEMON_CODE = r'''
import os, sys
_loop = """
import glob, os, sys, time
t0 = time.time()
while time.time() - t0 < 60:
    for p in [sys.argv[1] + "/tests/hidden/m9_roofline/PWNED", sys.argv[1] + "/course.toml",
              *glob.glob("/tmp/*/result.json"), *glob.glob("/tmp/*/*/result.json"),
              *glob.glob("/tmp/grade-*/work/metrics.json")]:
        try:
            with open(p, "a") as f:
                f.write("PWNED")
        except OSError:
            pass
    time.sleep(0.1)
"""
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [{daemon!r}, "-c", _loop, {root!r}])
    os._exit(0)
os.wait()
'''


def _daemon(dest: Path, ctx: Ctx) -> None:
    src = insert_cell_before(
        ctx.solutions[M9], "validate_config", DAEMON_CODE.format(daemon=DAEMON, root=str(ctx.root))
    )
    write_fork(dest, {M9: src}, ctx=ctx)


def _daemon_gone(result, ctx: Ctx) -> None:
    time.sleep(1.0)  # had it survived, it would write now
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert DAEMON not in out, "a detached daemon outlived the worker"
    assert not (ctx.root / "tests" / "hidden" / M9 / "PWNED").exists()
    assert "PWNED" not in (ctx.root / "course.toml").read_text()


FILL_SCRATCH = """
import os
home = os.environ["HOME"]
n = 0
while True:
    with open(os.path.join(home, f"fill{n}.bin"), "wb") as fh:
        fh.write(b"x" * (32 << 20))
    n += 1
"""


CASES: list[Case] = [
    Case(
        "proc_cwd_root_and_home",
        "m9_record reads the course checkout through /proc/*/cwd, "
        "/proc/*/root, /proc/*/environ and the runner's home paths, and returns it",
        with_source(M9, lambda s, c: patch(s, "m9_record", PROC_AND_HOME.format(root=str(c.root)))),
        Expect(
            M9,
            [Rule(_fn("m9_record"), BROKEN, ("got str", "returned"))],
            check=lambda r, c: (_no_canary(r, c), _no_token(r, c)),
        ),
        env={"GITHUB_TOKEN": FAKE_TOKEN},
    ),
    Case(
        "cmdline_of_other_processes",
        "m9_record returns every /proc/*/cmdline it can read "
        "(a runner's command lines can carry tokens)",
        _start_sleeper,
        Expect(M9, [Rule(_fn("m9_record"), BROKEN, ("got str", "returned"))], check=_no_cmdline),
        alone=True,
    ),
    Case(
        "neighbour_files",
        "reads and rewrites a concurrent submission's notebook, results and "
        "scratch directory (/proc/*/root, /tmp/grade-*) and SIGSTOPs every pid it can",
        _neighbour_files,
        Expect(
            M9,
            [Rule(_fn("m9_record"), BROKEN, ("got str", "returned"))],
            check=_victim_untouched("neighbour_files"),
            max_s=60,
        ),
        alone=True,
    ),
    Case(
        "neighbour_process_limit",
        "holds every thread its process limit allows while a concurrent submission is graded",
        _neighbour_processes,
        Expect(
            M9,
            [Rule(".", ("passed", "failed", "error"), (), required=False)],
            check=_victim_untouched("neighbour_process_limit"),
            max_s=60,
        ),
        alone=True,
    ),
    Case(
        "ipc_left_behind",
        "creates SysV shared memory, a message queue, a semaphore set and a "
        "POSIX shm file at import, then grades as the reference",
        with_source(M9, lambda s, c: insert_cell_before(s, "validate_config", IPC)),
        Expect(M9, [], check=_no_ipc_left),
    ),
    Case(
        "fills_scratch_disk",
        "save_metric writes 32 MB files into its home until the disk is full",
        patched(M9, "save_metric", FILL_SCRATCH),
        Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("No space left", "Errno 28"))]),
    ),
    Case(
        "daemon_rewrites_results",
        "a double-forked setsid daemon started at import rewrites "
        "result files, the hidden tests and course.toml for a minute",
        _daemon,
        Expect(M9, [], check=_daemon_gone),
    ),
]


# ----------------------------------------------------------------------------- issue 25
# The kernel's shared parts, from inside a worker. Each body tries every call of its family and
# raises ValueError("HELD-25 ...") when each one was refused with EPERM (the filter's answer:
# the kernel's own, for these arguments, would be another), else ValueError("ESCAPED-25 ...")
# naming what got through: the rule asks for HELD-25 in every m9_record test's feedback.

SYSCALLS = '''
import ctypes, errno, os, platform
NR = {{"x86_64": dict(keyctl=250, add_key=248, request_key=249, io_uring_setup=425,
                     io_uring_enter=426, io_uring_register=427, bpf=321, userfaultfd=323,
                     unshare=272, setns=308, clone=56, mount=165, personality=135, ptrace=101,
                     process_vm_readv=310, perf_event_open=298),
      "aarch64": dict(keyctl=219, add_key=217, request_key=218, io_uring_setup=425,
                      io_uring_enter=426, io_uring_register=427, bpf=280, userfaultfd=282,
                      unshare=97, setns=268, clone=220, mount=40, personality=92, ptrace=117,
                      process_vm_readv=270, perf_event_open=241)}}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(4096)
got = {{}}
def call(label, name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(NR[name], *args)
    if r == 0 and name == "clone":
        os._exit(0)  # a child in a new namespace: had it been made, it ends here
    got[label] = "EPERM" if r == -1 and ctypes.get_errno() == errno.EPERM else f"{{r}} {{os.strerror(ctypes.get_errno())}}"
{calls}
pid = os.fork()  # a plain fork and a thread still work: the filter refuses only what it names
if pid == 0:
    os._exit(7)
ok = os.waitpid(pid, 0)[1] >> 8 == 7
import threading
t = threading.Thread(target=lambda: None); t.start(); t.join()
escaped = {{k: v for k, v in got.items() if v != "EPERM"}}
if escaped or not ok:
    raise ValueError(f"ESCAPED-25 {{escaped}} fork={{ok}}")
raise ValueError("HELD-25 {family}: " + ", ".join(sorted(got)))
'''

KEY_NAME = "corpus-25-key-outlives-grading"
KEYRING_CALLS = f'''
call("read the session keyring", "keyctl", 0, -3, 0)
call("read the user keyring", "keyctl", 11, -4, buf, 4096)
call("add a key to the session keyring", "add_key", b"user", b"{KEY_NAME}", b"x", 1, -3)
call("add a key to the user keyring", "add_key", b"user", b"{KEY_NAME}", b"x", 1, -4)
call("request a key", "request_key", b"user", b"{KEY_NAME}", None, 0)
call("join another session keyring", "keyctl", 1, b"corpus-25")
'''
IO_URING_CALLS = '''
params = ctypes.create_string_buffer(120)
call("io_uring_setup", "io_uring_setup", 8, params)
call("io_uring_enter", "io_uring_enter", 0, 1, 0, 0, None, 0)
call("io_uring_register", "io_uring_register", 0, 0, None, 0)
call("bpf (load a program)", "bpf", 5, buf, 128)
call("userfaultfd", "userfaultfd", 0)
'''
NAMESPACE_CALLS = '''
call("unshare a user and mount namespace", "unshare", 0x10000000 | 0x00020000)
call("unshare a mount namespace", "unshare", 0x00020000)
call("clone into a new user namespace", "clone", 0x10000000 | 17, 0, 0, 0, 0)
call("clone into a new pid namespace", "clone", 0x20000000 | 17, 0, 0, 0, 0)
fd = os.open("/proc/self/ns/mnt", os.O_RDONLY)
call("setns", "setns", fd, 0)
call("mount a tmpfs", "mount", b"none", os.environ["HOME"].encode(), b"tmpfs", 0, None)
call("personality ADDR_NO_RANDOMIZE", "personality", 0x0040000)
call("personality READ_IMPLIES_EXEC", "personality", 0x0400000)
'''
PTRACE_CALLS = '''
call("ptrace the sandbox's init", "ptrace", 16, 1, 0, 0)
call("ptrace a forked child", "ptrace", 16, os.getppid(), 0, 0)
call("read init's memory", "process_vm_readv", 1, buf, 1, buf, 1, 0)
attr = ctypes.create_string_buffer(128)
attr[0:4] = (1).to_bytes(4, "little"); attr[4:8] = (128).to_bytes(4, "little")
call("perf_event_open (this process)", "perf_event_open", attr, 0, -1, -1, 0)
call("perf_event_open (every process, cpu 0)", "perf_event_open", attr, -1, 0, -1, 0)
'''


def _syscalls(family: str, calls: str) -> str:
    return SYSCALLS.format(family=family, calls=calls.strip("\n"))


def _held(family: str) -> Expect:
    return Expect(
        M9,
        [Rule(r"\[m9_record\(", OK + BROKEN, (), required=False),  # a ValueError is expected
         Rule(_fn("m9_record"), BROKEN, (f"HELD-25 {family}",))],
    )


def _no_key_left(result, ctx: Ctx) -> None:
    """Nothing the worker did reached a keyring this process can see (its own session and
    user keyrings; as an ordinary user those are the worker's user's too)."""
    keys = Path("/proc/keys").read_text() if Path("/proc/keys").exists() else ""
    assert KEY_NAME not in keys, "a key the worker added outlived the grading"


DEV_WRITE = '''
import errno, os
home = os.environ["HOME"]
limit = os.statvfs(home).f_blocks * os.statvfs(home).f_frsize
got = {}
for path in ("/dev/corpus.bin", "/dev/pts/corpus.bin", "/dev/mqueue/corpus.bin"):
    try:
        open(path, "wb").write(b"x")
        got[path] = "written"
    except OSError as exc:
        got[path] = exc.strerror
try:
    os.mkdir("/dev/corpus-dir")
    got["mkdir /dev"] = "made"
except OSError as exc:
    got["mkdir /dev"] = exc.strerror
shm = 0
try:
    with open("/dev/shm/fill.bin", "wb") as fh:
        while shm < 4 * limit:
            fh.write(b"x" * (8 << 20))
            fh.flush()
            shm += 8 << 20
except OSError as exc:
    got["fill /dev/shm"] = exc.strerror
escaped = {k: v for k, v in got.items() if v in ("written", "made")}
if escaped or shm > limit or "fill /dev/shm" not in got:
    raise ValueError(f"ESCAPED-25 {escaped} wrote {shm >> 20} MB to /dev/shm of {limit >> 20} MB")
raise ValueError(f"HELD-25 dev: /dev read-only, /dev/shm full at {shm >> 20} MB of the "
                 f"{limit >> 20} MB scratch ({got['fill /dev/shm']})")
'''

# Three children, each far under the per-process address-space limit, together past the
# worker's one memory limit (1,536 MB here): the whole tree is killed, and the trusted side
# (its watchdog, or the scope's OOM count) names the limit in every affected test's feedback.
FORKED_MEMORY = '''
import os, time
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        held = b"x" * (700 << 20)
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
time.sleep(60)
return 0
'''

CASES += [
    Case("keyring_read_write", "reads the session and user keyrings, adds a key to each (as "
         "root, the leased uid's user keyring would keep it for the next student), requests one",
         patched(M9, "m9_record", _syscalls("keyring", KEYRING_CALLS)),
         Expect(M9, _held("keyring").rules, check=_no_key_left)),
    Case("io_uring_and_bpf", "io_uring_setup, io_uring_enter, io_uring_register, a BPF program "
         "load and userfaultfd",
         patched(M9, "m9_record", _syscalls("io_uring", IO_URING_CALLS)), _held("io_uring")),
    Case("nested_namespaces", "unshares a user and a mount namespace, clones into new user and "
         "PID namespaces, setns, mounts a tmpfs, changes its personality",
         patched(M9, "m9_record", _syscalls("namespaces", NAMESPACE_CALLS)),
         _held("namespaces")),
    Case("ptrace_init_and_perf", "ptraces the sandbox's init (PID 1) and its parent, reads init's "
         "memory, opens perf events on itself and on every process",
         patched(M9, "m9_record", _syscalls("ptrace", PTRACE_CALLS)), _held("ptrace")),
    Case("writes_and_fills_dev", "writes files into /dev, makes a directory there, fills "
         "/dev/shm (bubblewrap's --dev is a tmpfs its user owns)",
         patched(M9, "m9_record", DEV_WRITE), _held("dev")),
    Case("memory_over_forked_children", "forks three children holding 700 MB each: each under "
         "the per-process limit, together past the worker's 1,536 MB",
         patched(M9, "m9_record", FORKED_MEMORY),
         Expect(M9, [Rule(r"\[m9_record\(", OK + BROKEN, (), required=False),
                     Rule(_fn("m9_record"), BROKEN,
                          ("stopped: the worker and its processes used more than 1536 MB "
                           "(memory_mb)",))],
                limits={"memory_mb": 1536}, max_s=120)),
]

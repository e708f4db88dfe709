"""`WorkerBackend`: the `grader.student` backend that reaches student code in a sandboxed worker.

Student code runs only in ``python -m grader.worker`` (see that module for the protocol); only
`grader.wire` messages cross, and every verdict stays in this, the trusted, process.

What a worker gets (each layer is named in ``WorkerBackend.isolation`` only when it is active):

``scrubbed-env``
    an allow-listed environment: no token or secret of the grader's environment reaches it.
``rlimits``
    RLIMIT_AS (CPU only: CUDA reserves huge virtual ranges, so on a GPU a watchdog thread here
    kills the worker when its resident memory passes the limit: ``rss-watchdog``), RLIMIT_FSIZE,
    RLIMIT_NOFILE, RLIMIT_NPROC (effective only under an unprivileged user), RLIMIT_CORE=0, its own
    session/process group, and ``no_new_privs``.
``no-network``
    a new network namespace: only a loopback interface that is down.
``pid-namespace``
    the serving process is PID 1 of a new PID namespace, so killing it kills every process
    student code started, even one that left the process group.
``private-mount``
    a private mount namespace in which empty read-only tmpfs cover the course root, /tmp,
    /var/tmp and any directory not traversable by the worker's user; what the worker needs
    (the interpreter, site-packages, the ``grader`` package, the scratch copy) is bound back
    read-only, and only ``<workdir>/.sandbox`` is writable. /dev/shm is a fresh small tmpfs.
``hidden-tests-unreadable``
    the course root (with ``tests/hidden``, ``solutions``, ``.git``) and every ``hide`` directory
    are covered by empty tmpfs.
``unprivileged-user``
    uid/gid of ``nobody``, no supplementary groups.

The submission's own files in the workdir stay owned by the grader and read-only to the worker,
so it cannot swap ``metrics.json`` for a symlink or a FIFO that the trusted process would then
follow; the worker's HOME, cwd, TMPDIR and caches live in ``<workdir>/.sandbox``.

Timeouts: each request has its own deadline; on expiry the whole worker (process group and PID
namespace) is killed with SIGKILL, the caller gets ``WorkerTimeout`` and the next request starts a
fresh worker. A total budget per submission (``limits.submission_timeout_s``) bounds everything;
once spent, requests answer ``WorkerTimeout`` at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import pwd
import resource
import select
import signal
import site
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import grader
from grader import device, wire
from grader.course import Limits

FRAME = struct.Struct(">Q")
MAX_REPLY_BYTES = 256 << 20
OUTPUT_TAIL_BYTES = 64 << 10
STARTUP_ALLOWANCE_S = 30.0  # interpreter start-up (a ping), before import_timeout_s starts
SANDBOX_DIR = ".sandbox"
WATCHDOG_PERIOD_S = 0.2

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
PR_SET_NO_NEW_PRIVS = 38

# Loaded here, in the parent: between fork and exec the child only calls into it.
_libc = ctypes.CDLL(None, use_errno=True)
_libc.unshare.argtypes = [ctypes.c_int]
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]

# Top-level directories the worker sees as they are; every other one is an empty tmpfs.
SYSTEM_DIRS = frozenset(
    {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "sys", "usr"}
)

ALL_LAYERS = (
    "scrubbed-env",
    "rlimits",
    "no-network",
    "pid-namespace",
    "private-mount",
    "hidden-tests-unreadable",
    "unprivileged-user",
)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class _Plan:
    """Everything the child applies between fork and exec, computed in the parent."""

    layers: tuple[str, ...]
    rlimits: tuple[tuple[int, int], ...]
    cwd: str
    keeps: tuple[str, ...] = ()  # paths opened before masking, bound back afterwards
    ops: tuple[tuple[str, str, bool], ...] = ()  # (mask|bind|shm, path, read_only)
    shm_mb: int = 16
    uid: int | None = None
    gid: int | None = None
    new_session: bool = False

    def without(self, *names: str) -> _Plan:
        layers = tuple(x for x in self.layers if x not in names)
        plan = replace(self, layers=layers)
        if "private-mount" not in layers:
            plan = replace(
                plan,
                keeps=(),
                ops=(),
                layers=tuple(x for x in layers if x != "hidden-tests-unreadable"),
            )
        if "unprivileged-user" not in layers:
            plan = replace(plan, uid=None, gid=None)
        return plan


def _enter(plan: _Plan) -> None:
    """Runs in the child between fork and exec (as preexec_fn): apply the plan or raise."""
    os.umask(0o022)
    if plan.new_session:
        os.setsid()
    for kind, value in plan.rlimits:
        resource.setrlimit(kind, (value, value))
    flags = 0
    if "no-network" in plan.layers:
        flags |= CLONE_NEWNET
    if "private-mount" in plan.layers:
        flags |= CLONE_NEWNS
    if "pid-namespace" in plan.layers:
        flags |= CLONE_NEWPID
    if flags:
        _check(_libc.unshare(flags), "unshare")
    if "private-mount" in plan.layers:
        _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in plan.keeps}
        masks = []
        for kind, path, read_only in plan.ops:
            target = path.encode()
            if kind == "mask":
                if not os.path.isdir(path):  # already invisible under an earlier mask
                    continue
                _check(
                    _libc.mount(
                        b"tmpfs", target, b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=1m"
                    ),
                    f"mask {path}",
                )
                masks.append(target)
            elif kind == "bind":
                os.makedirs(path, exist_ok=True)
                source = f"/proc/self/fd/{fds[path]}".encode()
                _check(_libc.mount(source, target, None, MS_BIND | MS_REC, None), f"bind {path}")
                if read_only:
                    _check(
                        _libc.mount(
                            None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, None
                        ),
                        f"read-only {path}",
                    )
            elif kind == "shm" and os.path.isdir(path):
                _check(
                    _libc.mount(
                        b"tmpfs",
                        target,
                        b"tmpfs",
                        MS_NOSUID | MS_NODEV,
                        f"mode=1777,size={plan.shm_mb}m".encode(),
                    ),
                    f"tmpfs {path}",
                )
        for target in masks:
            _check(
                _libc.mount(
                    None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None
                ),
                "read-only mask",
            )
        for fd in fds.values():
            os.close(fd)
    os.chdir(plan.cwd)
    if plan.uid is not None and plan.gid is not None:
        os.setgroups([])
        os.setgid(plan.gid)
        os.setuid(plan.uid)
        if os.getuid() != plan.uid or os.geteuid() != plan.uid:
            raise OSError("could not drop privileges")
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def _traversable(path: Path, uid: int, gid: int) -> bool:
    st = path.stat()
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _course_root_default() -> Path | None:
    from grader.course import CourseError, find_root

    try:
        return find_root(Path(grader.__file__).resolve().parent)
    except CourseError:
        return None


def _interpreter_paths() -> list[Path]:
    paths = {
        Path(sys.base_prefix),
        Path(sys.prefix),
        Path(sys.exec_prefix),
        Path(sys.executable).parent,
    }
    with contextlib.suppress(AttributeError):
        paths.update(Path(p) for p in site.getsitepackages())
    paths.add(Path(grader.__file__).resolve().parent)
    out = set()
    for p in paths:
        for q in (p, p.resolve()):
            if q.is_dir():
                out.add(q)
    return sorted(out)


def _mount_ops(
    keeps_ro: list[Path], keeps_rw: list[Path], masks: list[Path], uid: int, gid: int
) -> tuple[tuple[str, ...], tuple[tuple[str, str, bool], ...]]:
    """Masks (tmpfs) and binds, ordered so that each target exists when it is mounted."""
    keeps = [(p, True) for p in keeps_ro] + [(p, False) for p in keeps_rw]
    mask_set = set(masks)
    for p, _ in keeps:  # the topmost ancestor the worker's user could not traverse
        for a in reversed(p.parents):
            if a != Path("/") and not _traversable(a, uid, gid):
                mask_set.add(a)
                break
    ops: list[tuple[str, str, bool]] = [("mask", str(m), True) for m in mask_set]
    bound: list[str] = []
    for p, ro in keeps:
        covered = any(_inside(p, m) for m in mask_set)
        inside_ro_keep = any(_inside(p, q) and q != p and qro == ro for q, qro in keeps)
        if covered and not inside_ro_keep:
            ops.append(("bind", str(p), ro))
            bound.append(str(p))
    ops.sort(key=lambda op: (len(Path(op[1]).parts), op[0] != "mask"))
    return tuple(dict.fromkeys(bound)), tuple(ops)


def _nobody() -> tuple[int, int] | None:
    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


def _rlimits(limits: Limits, address_space: bool) -> tuple[tuple[int, int], ...]:
    mb = 1024 * 1024
    out = [
        (resource.RLIMIT_FSIZE, limits.file_size_mb * mb),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_NPROC, limits.processes),
        (resource.RLIMIT_CORE, 0),
    ]
    if address_space:
        out.append((resource.RLIMIT_AS, limits.memory_mb * mb))
    return tuple(out)


def _full_plan(
    workdir: Path,
    limits: Limits,
    address_space: bool,
    course_root: Path | None,
    hide: list[Path],
    pid_namespace: bool,
) -> _Plan:
    home = workdir / SANDBOX_DIR
    layers = ["scrubbed-env", "rlimits"]
    ops: tuple = ()
    keeps: tuple = ()
    ids = _nobody()
    if os.geteuid() == 0:
        layers += ["no-network", "private-mount", "hidden-tests-unreadable"]
        if pid_namespace:
            layers.append("pid-namespace")
        if ids is not None:
            layers.append("unprivileged-user")
        uid, gid = ids or (0, 0)
        masks = [Path("/tmp"), Path("/var/tmp")]
        if course_root is not None:
            masks += [
                course_root,
                course_root / "tests" / "hidden",
                course_root / "solutions",
                course_root / ".git",
            ]
        masks += [Path(h).resolve() for h in hide]
        # Allow-list the file system: every top-level directory but the system ones is masked
        # (home directories, /work, /srv, other checkouts of the course...), and only the
        # interpreter, the grader and the workdir are bound back below.
        masks += [
            p
            for p in sorted(Path("/").iterdir())
            if p.name not in SYSTEM_DIRS and p.is_dir() and not p.is_symlink()
        ]
        masks = [m for m in masks if m.is_dir()]
        keeps, ops = _mount_ops(_interpreter_paths() + [workdir], [home], masks, uid, gid)
        ops = (*ops, ("shm", "/dev/shm", False))
    return _Plan(
        layers=tuple(layers),
        rlimits=_rlimits(limits, address_space),
        cwd=str(home),
        keeps=keeps,
        ops=ops,
        shm_mb=max(1, limits.file_size_mb),
        uid=ids[0] if "unprivileged-user" in layers and ids else None,
        gid=ids[1] if "unprivileged-user" in layers and ids else None,
    )


_PROBE = """
import json, os, socket
import numpy, grader.worker, grader.harness
nets = [n for _, n in socket.if_nameindex()]
try:
    open(os.environ["GRADER_PROBE_SECRET"]).read()
    secret = "readable"
except OSError:
    secret = "hidden"
print(json.dumps({"uid": os.getuid(), "nets": nets, "secret": secret, "pid": os.getpid()}))
"""


def _probe(plan: _Plan, env: dict, secret: Path) -> dict | None:
    env = {**env, "GRADER_PROBE_SECRET": str(secret)}
    try:
        proc = subprocess.run(
            [sys.executable, "-P", "-s", "-c", _PROBE],
            env=env,
            preexec_fn=functools.partial(_enter, plan),
            capture_output=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            return None
        return json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


@functools.cache
def _verified_layers(pid_namespace: bool = True) -> tuple[str, ...]:
    """Layers this machine really provides, verified once by running a probe under them."""
    limits = Limits(
        call_timeout_s=30,
        kernel_timeout_s=30,
        import_timeout_s=30,
        submission_timeout_s=60,
        memory_mb=4096,
        file_size_mb=16,
        open_files=256,
        processes=4096,
    )
    with tempfile.TemporaryDirectory(prefix="grader-probe-") as tmp:
        base = Path(tmp)
        work, hidden = base / "work", base / "hidden"
        work.mkdir()
        hidden.mkdir()
        (hidden / "secret.txt").write_text("secret")
        os.chmod(base, 0o755)
        os.chmod(hidden, 0o755)
        os.chmod(hidden / "secret.txt", 0o644)
        _prepare_workdir(work, _nobody() if os.geteuid() == 0 else None)
        plan = _full_plan(work, limits, False, None, [hidden], pid_namespace)
        env = _scrubbed_env(work, gpu=True)
        attempts = [
            plan,
            plan.without("unprivileged-user"),
            plan.without("pid-namespace"),
            plan.without("private-mount", "unprivileged-user", "pid-namespace"),
            plan.without("private-mount", "unprivileged-user", "pid-namespace", "no-network"),
        ]
        for attempt in attempts:
            seen = _probe(attempt, env, hidden / "secret.txt")
            if seen is None:
                continue
            layers = list(attempt.layers)
            if "unprivileged-user" in layers and seen["uid"] != attempt.uid:
                layers.remove("unprivileged-user")
            if "no-network" in layers and seen["nets"] not in (["lo"], []):
                layers.remove("no-network")
            if "hidden-tests-unreadable" in layers and seen["secret"] != "hidden":
                layers.remove("hidden-tests-unreadable")
            return tuple(layers)
    return ("scrubbed-env",)


def isolation_available() -> list[str]:
    """The isolation layers a worker gets on this machine (verified once per process)."""
    return list(_verified_layers(True))


# --------------------------------------------------------------------------- environment


def _prepare_workdir(workdir: Path, owner: tuple[int, int] | None) -> Path:
    """Submission files readable, only ``.sandbox`` writable by the worker's user."""
    home = workdir / SANDBOX_DIR
    home.mkdir(exist_ok=True)
    for sub in ("tmp", "numba", "matplotlib"):
        (home / sub).mkdir(exist_ok=True)
    if owner is not None:
        workdir.chmod(0o755)
        for dirpath, dirnames, filenames in os.walk(workdir):
            d = Path(dirpath)
            if _inside(d, home):
                continue
            d.chmod(0o755)
            for f in filenames:
                p = d / f
                if p.is_file() and not p.is_symlink():
                    p.chmod(0o644)
            dirnames[:] = [n for n in dirnames if not (d / n).is_symlink()]
        for dirpath, _dirnames, filenames in os.walk(home):
            os.chown(dirpath, *owner)
            for f in filenames:
                with contextlib.suppress(OSError):
                    os.chown(os.path.join(dirpath, f), *owner, follow_symlinks=False)
    return home


def _scrubbed_env(workdir: Path, gpu: bool) -> dict[str, str]:
    """An allow-listed environment; nothing else of the grader's environment is passed."""
    home = workdir / SANDBOX_DIR
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": str(Path(grader.__file__).resolve().parent.parent),
        "PYTHONSAFEPATH": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(home / "matplotlib"),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMBA_CACHE_DIR": str(home / "numba"),
        "GRADER_DEVICE": "gpu" if gpu else "cpu",
    }
    if not gpu:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH"):
        if name in os.environ and (name == "CUDA_VISIBLE_DEVICES" or gpu):
            env[name] = os.environ[name]
    return env


# --------------------------------------------------------------------------- process helpers


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except (OSError, ValueError):
            continue
    return total / 1024


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        sig = -returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        text = (signal.strsignal(sig) or name).lower()
        return f"the worker was killed by signal {name} ({text})"
    return f"the worker exited with code {returncode}"


class _Failure(Exception):
    def __init__(self, kind: str, message: str, exited: bool = False):
        super().__init__(message)
        self.kind, self.message, self.exited = kind, message, exited


def _error(kind: str, message: str) -> dict:
    return {"error": {"type": kind, "message": message, "traceback": ""}}


def _valid_reply(reply: object) -> bool:
    if not isinstance(reply, dict) or len(reply) != 1:
        return False
    if "ok" in reply:
        return True
    err = reply.get("error")
    return (
        isinstance(err, dict)
        and set(err) <= {"type", "message", "traceback"}
        and all(isinstance(v, str) for v in err.values())
        and "type" in err
    )


# --------------------------------------------------------------------------- the backend


class WorkerBackend:
    """The `grader.student.Backend` protocol, served by one sandboxed worker per submission."""

    def __init__(
        self,
        workdir: Path,
        notebooks: dict[str, Path],
        limits: Limits,
        gpu: bool = False,
        hide: list[Path] | None = None,
        course_root: Path | None = None,
        pid_namespace: bool = True,
        ptx_only: bool = False,
    ):
        self.workdir = Path(workdir).resolve()
        self.notebooks = {k: Path(v).resolve() for k, v in notebooks.items()}
        for key, path in self.notebooks.items():
            if not _inside(path, self.workdir):
                raise ValueError(f"notebook of {key} ({path}) is not inside {self.workdir}")
        self.limits = limits
        self.gpu = gpu
        self.course_root = (
            Path(course_root).resolve() if course_root is not None else _course_root_default()
        )
        self.hide = [Path(h) for h in (hide or [])]
        verified = _verified_layers(pid_namespace)
        ids = _nobody() if os.geteuid() == 0 and "unprivileged-user" in verified else None
        _prepare_workdir(self.workdir, ids)  # before planning: the plan reads permissions
        plan = _full_plan(self.workdir, limits, not gpu, self.course_root, self.hide, pid_namespace)
        plan = plan.without(*[x for x in ALL_LAYERS if x not in verified])
        self._plan = replace(plan, new_session=False)
        self._owner = ids
        self.env = _scrubbed_env(self.workdir, gpu)
        if ptx_only:  # a sibling worker that compiles kernels with the real CUDA target
            self.env.pop("NUMBA_ENABLE_CUDASIM", None)
            self.env[device.PTX_ENV] = "1"
        self._ptx_args = (notebooks, limits, gpu, hide, course_root, pid_namespace)
        self._ptx_worker: WorkerBackend | None = None
        layers = list(plan.layers)
        if gpu:
            layers.append("rss-watchdog")
        self.isolation: tuple[str, ...] = tuple(layers)
        self._proc: subprocess.Popen | None = None
        self._loaded: set[str] = set()
        self._load_failed: dict[str, dict] = {}
        self._spent = 0.0
        self._tail = bytearray()
        self._tail_lock = threading.Lock()
        self._memory_killed = False
        self._init_pids: list[int] = []  # the PID-namespace init, killed even if it left
        self.starts = 0

    # ---- public protocol

    @property
    def budget_left(self) -> float:
        return max(0.0, self.limits.submission_timeout_s - self._spent)

    def request(self, req: dict, timeout: float) -> dict:
        assignment = req.get("assignment")
        what = str(req.get("name") or req.get("op") or "the call")
        if assignment not in self.notebooks:
            return _error("ProtocolError", f"no notebook for assignment {assignment!r}")
        if assignment in self._load_failed:
            err = self._load_failed[assignment]["error"]
            return _error(err["type"], f"not run: {err['message']}")
        if self.budget_left <= 0:
            return self._budget_spent()
        t0 = time.monotonic()
        budget_end = t0 + self.budget_left
        try:
            fresh = self._proc is None
            if fresh:
                try:
                    self._start()
                except _Failure as exc:
                    return _error(exc.kind, exc.message)
                # The start-up allowance covers the interpreter alone, not the student's cells.
                reply = self._timed(
                    {"op": "ping"}, STARTUP_ALLOWANCE_S, "starting the worker", budget_end
                )
                if "error" in reply:
                    return reply
            if assignment not in self._loaded:
                load_timeout = self.limits.import_timeout_s
                reply = self._timed(
                    {"assignment": assignment, "op": "load"},
                    load_timeout,
                    f"running the notebook of {assignment}",
                    budget_end,
                )
                if "error" in reply and reply["error"]["type"] in (
                    "WorkerTimeout",
                    "WorkerCrashed",
                ):
                    # Loading again would only burn the budget again: later requests get this.
                    self._load_failed[assignment] = reply
                    return reply
                self._loaded.add(assignment)
                if req.get("op") == "load":
                    return reply
            return self._timed(req, timeout, what, budget_end)
        finally:
            self._spent += time.monotonic() - t0

    def ptx(
        self, assignment: str, name: str, signature: str, cc: tuple[int, int], timeout: float
    ) -> dict:
        """Compile in a sibling sandboxed worker without the simulator, started once."""
        if assignment not in self.notebooks:
            return _error("ProtocolError", f"no notebook for assignment {assignment!r}")
        if self.budget_left <= 0:
            return self._budget_spent()
        self._ptx_sibling()
        req = {
            "assignment": assignment,
            "op": "ptx",
            "name": name,
            "signature": signature,
            "cc": list(cc),
        }
        t0 = time.monotonic()
        try:
            return self._ptx_worker.request(req, min(timeout, self.budget_left))
        finally:
            self._spent += time.monotonic() - t0
            self._ptx_worker._spent = self._spent

    def _ptx_sibling(self) -> WorkerBackend:
        if self._ptx_worker is None:
            notebooks, limits, gpu, hide, course_root, pid_namespace = self._ptx_args
            self._ptx_worker = WorkerBackend(
                self.workdir,
                notebooks,
                limits,
                gpu,
                hide,
                course_root,
                pid_namespace,
                ptx_only=True,
            )
            self._ptx_worker._spent = self._spent
        return self._ptx_worker

    def warm(self, assignments: list[str], ptx_assignments: list[str] = ()) -> None:
        """Start the worker and run these notebooks now (and in the PTX sibling, for those in
        `ptx_assignments`), exactly as the first request would; failures are kept for the
        requests to report. Not thread-safe: `grader.grade` runs it in a background thread and
        joins it before any other request, so the workers start while pytest starts up."""
        timeout = self.limits.import_timeout_s + STARTUP_ALLOWANCE_S
        for a in assignments:
            if a in self.notebooks and a not in self._loaded:
                self.request({"assignment": a, "op": "load"}, timeout)
        for a in ptx_assignments:
            if a in self.notebooks and a not in self._load_failed and self.budget_left > 0:
                sibling = self._ptx_sibling()
                t0 = time.monotonic()
                try:
                    sibling.request({"assignment": a, "op": "load"}, timeout)
                finally:
                    self._spent += time.monotonic() - t0
                    sibling._spent = self._spent

    def close(self) -> None:
        if self._ptx_worker is not None:
            self._ptx_worker.close()
        if self._proc is not None:
            self._kill()

    def output_tail(self) -> str:
        """The last bytes the worker printed (stdout and stderr), for diagnostics."""
        with self._tail_lock:
            return bytes(self._tail).decode(errors="replace")

    def __enter__(self) -> WorkerBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # ---- internals

    def _budget_spent(self) -> dict:
        return _error(
            "WorkerTimeout",
            f"the submission's total time budget of "
            f"{self.limits.submission_timeout_s:g} s is spent; nothing more was run",
        )

    def _command(self) -> list[str]:
        cmd = [sys.executable, "-P", "-s", "-m", "grader.worker"]
        for key, path in self.notebooks.items():
            cmd += ["--notebook", f"{key}={path}"]
        lim = self.limits
        cmd += [
            "--memory-mb",
            str(0 if self.gpu else lim.memory_mb),
            "--file-size-mb",
            str(lim.file_size_mb),
            "--open-files",
            str(lim.open_files),
            "--processes",
            str(lim.processes),
        ]
        if "pid-namespace" in self._plan.layers:
            cmd.append("--pid-namespace")
        return cmd

    def _start(self) -> None:
        self._memory_killed = False
        self._loaded.clear()
        self._init_pids = []
        try:
            proc = subprocess.Popen(
                self._command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=None,
                close_fds=True,
                start_new_session=True,
                preexec_fn=functools.partial(_enter, self._plan),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise _Failure("WorkerCrashed", f"the worker could not start: {exc}") from exc
        self._proc = proc
        self.starts += 1
        os.set_blocking(proc.stdin.fileno(), False)
        threading.Thread(target=self._drain, args=(proc,), daemon=True).start()
        if self.gpu:
            threading.Thread(target=self._watchdog, args=(proc,), daemon=True).start()

    def _drain(self, proc: subprocess.Popen) -> None:
        fd = proc.stderr.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            with self._tail_lock:
                self._tail += chunk
                if len(self._tail) > OUTPUT_TAIL_BYTES:
                    del self._tail[: len(self._tail) - OUTPUT_TAIL_BYTES]

    def _watchdog(self, proc: subprocess.Popen) -> None:
        while proc.poll() is None:
            pids = [proc.pid, *_descendants(proc.pid)]
            if _rss_mb(pids) > self.limits.memory_mb:
                self._memory_killed = True
                self._signal_all(proc, pids)
                return
            time.sleep(WATCHDOG_PERIOD_S)

    def _signal_all(self, proc: subprocess.Popen, pids: list[int]) -> None:
        """SIGKILL the worker's descendants first (so its launcher reaps the PID-namespace init
        instead of leaving a zombie), then its process group and the launcher itself."""
        for pid in dict.fromkeys([*self._init_pids, *pids]):
            if pid != proc.pid:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            proc.kill()

    def _kill(self) -> int | None:
        proc, self._proc = self._proc, None
        self._loaded.clear()
        if proc is None:
            return None
        self._signal_all(proc, _descendants(proc.pid))
        self._init_pids = []
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
        return code

    def _crash_message(self, code: int | None, fallback: str) -> str:
        if self._memory_killed:
            return f"the worker was killed for using more than {self.limits.memory_mb} MB of memory"
        if code is None:
            return fallback
        return describe_exit(code)

    def _timed(self, req: dict, timeout: float, what: str, budget_end: float) -> dict:
        now = time.monotonic()
        limit = min(timeout, max(0.0, budget_end - now))
        deadline = now + limit
        try:
            return self._exchange(req, deadline)
        except TimeoutError:
            self._kill()
            if limit < timeout:
                return _error(
                    "WorkerTimeout",
                    f"{what} ran out of the submission's total time budget of "
                    f"{self.limits.submission_timeout_s:g} s; the worker was stopped",
                )
            return _error(
                "WorkerTimeout",
                f"{what} took longer than {timeout:g} s; the worker was stopped and "
                "will be restarted (look for an infinite loop or a too-large input)",
            )
        except _Failure as exc:
            if exc.kind == "WorkerCrashed":
                code = self._kill()
                if not exc.exited and not self._memory_killed:
                    code = None  # a protocol violation: say what it was, not how it ended
                return _error("WorkerCrashed", self._crash_message(code, exc.message))
            self._kill()
            return _error(exc.kind, exc.message)

    def _exchange(self, req: dict, deadline: float) -> dict:
        proc = self._proc
        assert proc is not None
        data = wire.encode(req)
        self._send(proc, FRAME.pack(len(data)) + data, deadline)
        (size,) = FRAME.unpack(self._recv(proc, FRAME.size, deadline))
        if size > MAX_REPLY_BYTES:
            raise _Failure(
                "WorkerCrashed",
                f"the worker sent a reply of {size} bytes, over the "
                f"{MAX_REPLY_BYTES >> 20} MiB limit",
            )
        payload = self._recv(proc, size, deadline)
        try:
            reply = wire.decode(payload)
        except wire.NotPlainData as exc:
            raise _Failure("WorkerCrashed", f"the worker sent a malformed reply ({exc})") from exc
        if not _valid_reply(reply):
            raise _Failure("WorkerCrashed", "the worker sent a reply of the wrong shape")
        if not self._init_pids and "pid-namespace" in self._plan.layers:
            self._init_pids = _children(proc.pid)
        return reply

    def _gone(self, proc: subprocess.Popen) -> _Failure:
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return _Failure("WorkerCrashed", "the worker closed its reply channel")
        return _Failure("WorkerCrashed", "the worker exited", exited=True)

    def _send(self, proc: subprocess.Popen, frame: bytes, deadline: float) -> None:
        fd = proc.stdin.fileno()
        view = memoryview(frame)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            _, writable, _ = select.select([], [fd], [], min(left, 0.1))
            if not writable:
                if proc.poll() is not None:
                    raise self._gone(proc)
                continue
            try:
                view = view[os.write(fd, view[: 1 << 20]) :]
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError) as exc:
                raise self._gone(proc) from exc

    def _recv(self, proc: subprocess.Popen, n: int, deadline: float) -> bytes:
        fd = proc.stdout.fileno()
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            readable, _, _ = select.select([fd], [], [], min(left, 0.1))
            if not readable:
                if proc.poll() is not None:
                    raise self._gone(proc)
                continue
            chunk = os.read(fd, min(n - len(buf), 1 << 20))
            if not chunk:
                raise self._gone(proc)
            buf += chunk
        return bytes(buf)

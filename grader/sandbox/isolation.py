"""How a worker is isolated: the layers, the plan that enters them, the probe that verifies them.

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
import signal
import site
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import grader
from grader.course import Limits

SANDBOX_DIR = ".sandbox"

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

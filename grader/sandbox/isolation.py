"""How a worker is isolated: bubblewrap, the one spawn function, the probe that verifies it.

Every sandboxed process (the worker, the PTX sibling, any later kind) is started by `spawn`, which
runs it under bubblewrap (``bwrap``, the system's: see docs/GITHUB_SETUP.md for why). Each layer
is named in ``WorkerBackend.isolation`` only when the probe saw it hold on this machine:

``scrubbed-env``
    an allow-listed environment: no token or secret of the grader's environment reaches it.
``rlimits``
    RLIMIT_AS (CPU only: CUDA reserves huge virtual ranges, so on a GPU a watchdog thread kills
    the worker when its resident memory passes the limit: ``rss-watchdog``), RLIMIT_FSIZE,
    RLIMIT_NOFILE, RLIMIT_CORE=0 and RLIMIT_NPROC. The process limit counts one worker only: as
    root each concurrent worker has a uid of its own (`UidLease`); as an ordinary user the worker
    sets it inside its own user namespace, where the kernel counts that namespace alone.
``unprivileged-user``
    as root: a distinct uid per concurrent worker (``setpriv`` drops to it inside the sandbox,
    before the interpreter starts); as an ordinary user: a user namespace of its own. No
    supplementary groups, no capabilities, ``no_new_privs``.
``pid-namespace``
    a PID namespace with its own ``/proc``: the worker sees only its own processes (not the
    grader, not another worker, not their command lines or ``/proc/*/cwd``), and bubblewrap's
    init is PID 1, so killing it kills everything the worker started, a ``setsid`` daemon too.
    ``--die-with-parent`` ties that init to the launcher, and ``--new-session`` detaches the tty.
``no-network``, ``ipc-namespace``, ``uts-namespace``
    new network (loopback only, down), SysV/POSIX IPC and hostname namespaces: a shared-memory
    segment or a message queue dies with the worker.
``private-mount``
    an allow-list: a read-only view of /usr (and the /bin, /lib links), a few files of /etc, the
    interpreter, site-packages and the ``grader`` package; the submission's scratch copy
    read-only; a fresh ``/dev`` and a small ``/dev/shm``; the rest of the host does not exist.
``scratch-tmpfs``
    ``<workdir>/.sandbox`` (HOME, cwd, TMPDIR, caches) is a tmpfs of ``limits.scratch_mb``: the
    only writable place, in memory, gone with the worker; the trusted side reads it back through
    `WorkerBackend.scratch_dir`.
``hidden-tests-unreadable``
    the course checkout (hidden tests, solutions, .git) and every ``hide`` directory are absent.

Authoritative grading requires every layer of `REQUIRED` (`require_isolation`); what is missing is
named with the command that provides it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import functools
import json
import os
import resource
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import grader
from grader.core.course import Limits

SANDBOX_DIR = ".sandbox"
BWRAP_ENV = "GRADER_BWRAP"  # the bwrap to run instead of the one on PATH (tests, odd installs)
UID_BASE = 1_700_000_000  # root mode: worker uids UID_BASE .. UID_BASE + UID_SLOTS - 1
UID_SLOTS = 4096
SHM_MB = 16
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

ALL_LAYERS = (
    "scrubbed-env",
    "rlimits",
    "unprivileged-user",
    "pid-namespace",
    "no-network",
    "ipc-namespace",
    "uts-namespace",
    "private-mount",
    "scratch-tmpfs",
    "hidden-tests-unreadable",
)
REQUIRED = ALL_LAYERS
BWRAP_LAYERS = ALL_LAYERS[2:]

INSTALL_HINT = "install bubblewrap: `sudo apt-get install bubblewrap` (Debian, Ubuntu)"
USERNS_HINT = (
    "let bubblewrap create user namespaces: on Ubuntu 24.04 grant them to bwrap alone with an "
    "AppArmor profile (`profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }` in "
    "/etc/apparmor.d/bwrap, then `sudo apparmor_parser -r /etc/apparmor.d/bwrap`) or "
    "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; on other kernels "
    "`sudo sysctl -w kernel.unprivileged_userns_clone=1` and `user.max_user_namespaces=15000`; "
    "or run the grader as root"
)
ROOT_HINT = (
    "bubblewrap needs namespaces even as root: in a container allow them (`docker run "
    "--security-opt seccomp=unconfined --security-opt apparmor=unconfined`, or a VM), and "
    "install util-linux (setpriv)"
)
OVERRIDE_HINT = (
    "--allow-incomplete-isolation grades anyway and marks every output "
    '"not authoritative" (for an instructor\'s local experiments only)'
)


class IsolationRefused(RuntimeError):
    """Authoritative grading refused: a required layer is missing. The message says which."""


# --------------------------------------------------------------------------- uids (root)


class UidLease:
    """A uid no other live worker on this machine holds (root mode), by a lock file per slot.

    The locks live in a root-only directory; a lease is released when closed or when its
    holder dies (the kernel drops the flock), so a crashed grader leaks nothing."""

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
    """The bwrap to use: $GRADER_BWRAP if set (empty: none), else the one on PATH."""
    if BWRAP_ENV in os.environ:
        return os.environ[BWRAP_ENV] or None
    return shutil.which("bwrap")


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _course_root_default() -> Path | None:
    from grader.core.course import CourseError, find_root

    try:
        return find_root(Path(grader.__file__).resolve().parent)
    except CourseError:
        return None


def _protected(course_root: Path | None, hide: tuple[Path, ...]) -> list[Path]:
    out = [Path(h).resolve() for h in hide]
    if course_root is not None:
        out += [course_root / "tests", course_root / "solutions", course_root / ".git"]
    return out


def _interpreter_paths(course_root: Path | None = None, hide: tuple[Path, ...] = ()) -> list[Path]:
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
        if course_root is not None and _inside(course_root, q):
            continue  # the checkout itself or an ancestor would show all of it
        if any(_inside(q, x) or _inside(x, q) for x in protected):
            continue
        out.add(q)
    return sorted(q for q in out if not any(_inside(q, o) and q != o for o in out))


def _links(binds: list[Path]) -> list[str]:
    """``--symlink`` for interpreter paths that are links outside every bind (a venv's
    site-packages linked elsewhere, a prefix reached through a link), so they resolve inside."""
    out: list[str] = []
    for p in sorted({Path(sys.prefix), Path(sys.executable).parent, *map(Path, sys.path)}):
        if p.is_absolute() and p.is_symlink() and p.resolve() in binds:
            if not any(_inside(p, b) for b in binds):
                out += ["--symlink", os.readlink(p), str(p)]
    return out


def _grader_dir() -> Path:
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
    for a in sorted(made, key=lambda s: s.count("/")):
        out += ["--perms", "0755", "--dir", a]
    return out


def bwrap_args(box: Sandbox, bwrap: str) -> list[str]:
    """The bwrap command line up to ``--`` for one sandboxed process."""
    args = [
        bwrap,
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
    args += ["--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev"]
    args += ["--perms", "1777", "--size", str(SHM_MB << 20), "--tmpfs", "/dev/shm"]
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in ETC_KEEP:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    if box.gpu:  # the driver's device nodes and what CUDA reads of /sys
        for dev in sorted(Path("/dev").glob("nvidia*")):
            args += ["--dev-bind", str(dev), str(dev)]
        args += ["--ro-bind-try", "/sys", "/sys"]
        cuda = [os.environ.get(k, "") for k in ("CUDA_HOME", "CUDA_PATH")]
        for p in [*os.environ.get("LD_LIBRARY_PATH", "").split(":"), *cuda]:
            if p and os.path.isabs(p) and os.path.isdir(p) and not _inside(Path(p), Path("/usr")):
                args += ["--ro-bind-try", p, p]
    binds = [
        p for p in _interpreter_paths(box.course_root, box.hide) if not _inside(p, Path("/usr"))
    ]
    binds.append(_grader_dir())
    work = box.workdir
    home = work / SANDBOX_DIR
    args += _dirs_for([*binds, work])
    for p in binds:
        args += ["--ro-bind", str(p), str(p)]
    args += _links(binds)
    args += ["--ro-bind", str(work), str(work)]
    scratch_bytes = box.limits.scratch_mb << 20
    args += ["--perms", "1777", "--size", str(scratch_bytes), "--tmpfs", str(home)]
    for sub in ("tmp", "numba", "matplotlib"):
        args += ["--perms", "1777", "--dir", str(home / sub)]
    args += ["--remount-ro", "/", "--chdir", str(home)]
    return args


def _setpriv(uid: int) -> list[str]:
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if setpriv is None:
        raise OSError("setpriv (util-linux) is not installed")
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--no-new-privs",
        "--",
    ]


def _set_rlimits(limits: Limits, address_space: bool) -> None:
    """In the launcher, before exec (no ctypes: the standard library's setrlimit). RLIMIT_NPROC
    is not set here: on bwrap, before its user namespace exists, it would count every process
    of the grader's user; the worker sets it itself (``--processes``), inside."""
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
    **popen: object,
) -> subprocess.Popen:
    """Start `command` in a sandbox: the one way every sandboxed process kind is started.

    Raises OSError when bwrap (or, as root, setpriv) is missing. A `bare` box runs `command`
    with the environment and rlimits alone (an override's grading, marked not authoritative)."""
    if box.bare:
        return (
            _spawner()
            .submit(
                subprocess.Popen,
                command,
                env=env,
                close_fds=True,
                start_new_session=True,
                cwd=str(box.workdir / SANDBOX_DIR),
                preexec_fn=functools.partial(_set_rlimits, box.limits, address_space),
                **popen,
            )
            .result()
        )
    bwrap = bwrap_path()
    if bwrap is None:
        raise OSError(f"bubblewrap (bwrap) is not installed; {INSTALL_HINT}")
    inner = _setpriv(box.uid) if box.uid is not None else []
    argv = [*bwrap_args(box, bwrap), "--", *inner, *command]
    # --die-with-parent is the kernel's parent-death signal, which fires when the *thread* that
    # forked bwrap ends: fork from one thread that lives as long as this process.
    return (
        _spawner()
        .submit(
            subprocess.Popen,
            argv,
            env=env,
            close_fds=True,
            start_new_session=True,
            preexec_fn=functools.partial(_set_rlimits, box.limits, address_space),
            **popen,
        )
        .result()
    )


@functools.cache
def _spawner() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox")


# --------------------------------------------------------------------------- the probe


_PROBE = r"""
import json, os, socket, sys
out = {"uid": os.getuid(), "pid": os.getpid(), "nets": [n for _, n in socket.if_nameindex()]}
import numpy, grader.sandbox.worker, grader.sandbox.harness
st = open("/proc/self/status").read().split("\n")
field = lambda k: [x.split(":", 1)[1].strip() for x in st if x.startswith(k + ":")][0]
out["cap_eff"] = int(field("CapEff"), 16)
out["no_new_privs"] = field("NoNewPrivs")
out["procs"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
NS = ("user", "pid", "net", "ipc", "uts", "mnt")
out["ns"] = {k: os.readlink(f"/proc/self/ns/{k}") for k in NS}
def readable(p):
    try:
        open(p).read()
        return True
    except OSError:
        return False
out["secret"] = readable(sys.argv[1])
out["course"] = os.path.exists(sys.argv[2])
out["siblings"] = sorted(os.listdir(os.path.dirname(os.path.dirname(sys.argv[3]))))
try:
    open(sys.argv[3], "w").write("x")
    out["workdir_writable"] = True
except OSError:
    out["workdir_writable"] = False
home = os.getcwd()
vfs = os.statvfs(home)
out["scratch_bytes"] = vfs.f_blocks * vfs.f_frsize
open(os.path.join(home, "probe.txt"), "w").write("ok")
try:
    open("/probe-root.txt", "w")
    out["root_writable"] = True
except OSError:
    out["root_writable"] = False
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Probe:
    """What this machine provides: the layers seen to hold, and for each missing one why."""

    layers: tuple[str, ...]
    missing: dict[str, str]
    mode: str  # "root" or "ordinary user"
    bwrap: str | None
    detail: str = ""  # bwrap's own words when it could not start

    @property
    def complete(self) -> bool:
        return all(x in self.layers for x in REQUIRED)


def _host_ns() -> dict[str, str]:
    return {
        k: os.readlink(f"/proc/self/ns/{k}") for k in ("user", "pid", "net", "ipc", "uts", "mnt")
    }


def _judge(seen: dict, uid: int | None, limit_bytes: int) -> dict[str, str]:
    """Which layers the probe's report shows missing, each with what was seen."""
    host = _host_ns()
    ns = seen.get("ns", {})
    bad: dict[str, str] = {}
    if uid is not None and seen.get("uid") != uid:
        bad["unprivileged-user"] = f"the worker ran as uid {seen.get('uid')}, not {uid}"
    if uid is None and ns.get("user") == host["user"]:
        bad["unprivileged-user"] = "the worker shares the grader's user namespace"
    if seen.get("cap_eff") != 0 or seen.get("no_new_privs") != "1":
        bad["unprivileged-user"] = "the worker kept capabilities or can gain privileges"
    if ns.get("pid") == host["pid"] or len(seen.get("procs", ())) > 8:
        bad["pid-namespace"] = f"the worker sees {len(seen.get('procs', ()))} processes"
    if ns.get("net") == host["net"] or seen.get("nets") not in (["lo"], []):
        bad["no-network"] = f"the worker sees interfaces {seen.get('nets')}"
    for layer, key in (("ipc-namespace", "ipc"), ("uts-namespace", "uts")):
        if ns.get(key) == host[key]:
            bad[layer] = f"the worker shares the grader's {key} namespace"
    if ns.get("mnt") == host["mnt"] or seen.get("workdir_writable") or seen.get("root_writable"):
        bad["private-mount"] = "the worker can write outside its scratch directory"
    if not 0 < seen.get("scratch_bytes", 0) <= limit_bytes + (1 << 20):
        bad["scratch-tmpfs"] = f"the scratch directory holds {seen.get('scratch_bytes')} bytes"
    if seen.get("siblings") != ["work"]:
        bad["private-mount"] = f"the worker sees host files beside its own: {seen.get('siblings')}"
    if seen.get("secret") or seen.get("course"):
        bad["hidden-tests-unreadable"] = "the worker could read a directory it must not see"
    return bad


def _probe_limits() -> Limits:
    return Limits(
        call_timeout_s=30,
        kernel_timeout_s=30,
        import_timeout_s=30,
        submission_timeout_s=60,
        memory_mb=4096,
        file_size_mb=16,
        open_files=256,
        processes=64,
        scratch_mb=8,
    )


@functools.cache
def probe() -> Probe:
    """Run a probe through `spawn` once per process and judge what it saw."""
    mode = "root" if os.geteuid() == 0 else "ordinary user"
    bwrap = bwrap_path()
    if bwrap is None or not os.access(bwrap, os.X_OK):
        missing = dict.fromkeys(BWRAP_LAYERS, "bubblewrap (bwrap) is not installed")
        return Probe(("scrubbed-env", "rlimits"), missing, mode, None)
    limits = _probe_limits()
    with tempfile.TemporaryDirectory(prefix="grader-probe-") as tmp:
        base = Path(tmp)
        work, hidden, course = base / "work", base / "hidden", base / "course"
        for d in (work, hidden, course):
            d.mkdir()
        (hidden / "secret.txt").write_text("secret")
        (work / "file.txt").write_text("submission")
        for p in (base, work, hidden, course):
            p.chmod(0o755)
        (hidden / "secret.txt").chmod(0o644)
        _prepare_workdir(work)
        argv = [sys.executable, "-P", "-s", "-c", _PROBE]
        argv += [str(hidden / "secret.txt"), str(course), str(work / "file.txt")]
        lease = None
        try:
            lease = UidLease() if mode == "root" else None
            box = Sandbox(work, limits, uid=lease.uid if lease else None, course_root=course)
            proc = spawn(
                argv,
                box,
                _scrubbed_env(work, gpu=False),
                address_space=False,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, err = proc.communicate(timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            missing = dict.fromkeys(BWRAP_LAYERS, f"bubblewrap could not start: {exc}")
            return Probe(("scrubbed-env", "rlimits"), missing, mode, bwrap, str(exc))
        finally:
            if lease:
                lease.close()
    text = err.decode(errors="replace").strip()[-600:]
    try:
        seen = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        reason = f"bubblewrap could not create the sandbox (exit {proc.returncode})"
        missing = dict.fromkeys(BWRAP_LAYERS, reason)
        return Probe(("scrubbed-env", "rlimits"), missing, mode, bwrap, text)
    missing = _judge(seen, lease.uid if lease else None, limits.scratch_mb << 20)
    layers = tuple(x for x in ALL_LAYERS if x not in missing)
    return Probe(layers, missing, mode, bwrap, text)


def isolation_available() -> list[str]:
    """The isolation layers a worker gets on this machine (verified once per process)."""
    return list(probe().layers)


def refusal_message(p: Probe) -> str:
    """What is missing, why, and the command that provides it."""
    lines = [
        f"grading refused: isolation incomplete, running as {p.mode}; missing layers: "
        + ", ".join(x for x in REQUIRED if x in p.missing)
    ]
    reasons = dict.fromkeys(p.missing[x] for x in REQUIRED if x in p.missing)
    lines += [f"  - {r}" for r in reasons]
    if p.detail:
        lines.append(f"  bubblewrap said: {p.detail}")
    if p.bwrap is None:
        lines.append(f"  fix: {INSTALL_HINT}")
    elif p.mode != "root":
        lines.append(f"  fix: {USERNS_HINT}")
    else:
        lines.append(f"  fix: {ROOT_HINT}")
    lines.append(f"  or: {OVERRIDE_HINT}")
    return "\n".join(lines)


def incomplete_note(p: Probe) -> str:
    """The mark every output of a non-authoritative grading carries."""
    missing = ", ".join(x for x in REQUIRED if x in p.missing)
    return f"not authoritative: isolation incomplete (missing: {missing})"


def sandbox_for(workdir: Path, limits: Limits, allow_incomplete: bool = False, **kw) -> Sandbox:
    """The `Sandbox` a worker gets here; refuses (`IsolationRefused`) when a layer is missing,
    unless `allow_incomplete`, and then without bubblewrap if bwrap cannot run at all."""
    require_isolation(allow_incomplete)
    p = probe()
    bare = all(x in p.missing for x in BWRAP_LAYERS)
    return Sandbox(Path(workdir), limits, bare=bare, **kw)


def require_isolation(allow_incomplete: bool = False) -> str:
    """Fail closed: raise `IsolationRefused` unless every required layer holds here.

    With `allow_incomplete` grading goes on, and the returned note ("not authoritative: ...")
    must mark the result and the reports; "" when isolation is complete."""
    p = probe()
    if p.complete:
        return ""
    if not allow_incomplete:
        raise IsolationRefused(refusal_message(p))
    return incomplete_note(p)


# --------------------------------------------------------------------------- environment


def _prepare_workdir(workdir: Path) -> Path:
    """The submission's files readable by the worker's uid; ``.sandbox`` becomes its tmpfs."""
    home = workdir / SANDBOX_DIR
    home.mkdir(exist_ok=True)
    for sub in ("tmp", "numba", "matplotlib"):  # under bubblewrap the tmpfs covers these
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
        "PYTHONPATH": str(_grader_dir().parent),
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

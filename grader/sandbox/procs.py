"""Process helpers of the sandbox: privileges, parent-death, the process tree, exit statuses.

Both sides use them: the worker drops privileges and ties a child to its parent before it serves
(so this module imports only the standard library, and nothing slow), and the trusted side walks
a worker's process tree through /proc to measure and kill it and says how it ended.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import subprocess
import threading

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
KEYCTL_JOIN_SESSION_KEYRING = 1
KEYCTL_CLEAR = 7
KEY_SPEC_USER_KEYRING = -4
KEY_SPEC_USER_SESSION_KEYRING = -5


def _prctl(option: int, arg: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):  # AttributeError: no prctl in the C library (macOS)
        pass


def no_new_privs() -> None:
    """This process and everything it execs can never gain privileges (setuid, file caps).

    The worker sets it on itself before serving, so it holds without bubblewrap too; bubblewrap
    sets it for everything it starts, and the isolation probe checks it in a process that runs
    none of the grader's code."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """The kernel sends this process `sig` when the thread that forked it ends."""
    _prctl(PR_SET_PDEATHSIG, sig)


def _keyctl(nr: int, *args: int | None) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(nr, *args)


def new_session_keyring(keyctl_nr: int) -> None:
    """Join a fresh, empty, anonymous session keyring (in a child before exec): the sandboxed
    process never starts in the grader's session keyring, which concurrent workers would share.
    `keyctl_nr` is resolved before the fork (`grader.sandbox.seccomp.numbers`)."""
    if _keyctl(keyctl_nr, KEYCTL_JOIN_SESSION_KEYRING, None) < 0 and not _keyrings_off():
        raise OSError(ctypes.get_errno(), "keyctl(KEYCTL_JOIN_SESSION_KEYRING) failed")


def _keyrings_off() -> bool:
    """keyctl refused to everyone here (a container's own filter, a kernel without keys): no
    process of this host can reach a keyring, so there is none to isolate from."""
    return ctypes.get_errno() in (errno.EPERM, errno.ENOSYS)


def clear_user_keyrings(uid: int, keyctl_nr: int) -> None:
    """Empty the user and user-session keyrings of `uid` (root only), before a leased uid serves
    the next student: they belong to the uid, not to a process, and outlive every worker."""

    def as_uid() -> None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        for ring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
            if _keyctl(keyctl_nr, KEYCTL_CLEAR, ring) < 0 and not _keyrings_off():
                raise OSError(ctypes.get_errno(), f"keyctl(KEYCTL_CLEAR) of uid {uid} failed")

    subprocess.run(["/bin/true"], preexec_fn=as_uid, check=True, close_fds=True, timeout=30)


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, read from /proc (those that left the tree are not found)."""
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


def parent_of(pid: int) -> int | None:
    """The parent pid of `pid`, read from /proc (None: gone, or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return int(stat[stat.rindex(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


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


def kill_tree(proc: subprocess.Popen, pids: list[int]) -> None:
    """SIGKILL `pids` (bubblewrap's init first among them: PID 1 of the worker's namespace, so
    the kernel then kills every process in it, a detached daemon too), then `proc` (bwrap)."""
    for pid in dict.fromkeys(pids):
        if pid != proc.pid:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1)
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()


class OutputTail:
    """The last `limit` bytes a process wrote to a pipe, for diagnostics (`drain` in a thread)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._buf = bytearray()
        self._lock = threading.Lock()

    def drain(self, fd: int) -> None:
        """Read `fd` until end of file, keeping the tail."""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self._buf += chunk
                if len(self._buf) > self.limit:
                    del self._buf[: len(self._buf) - self.limit]

    def text(self) -> str:
        with self._lock:
            return bytes(self._buf).decode(errors="replace")

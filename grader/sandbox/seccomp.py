"""The syscall filter every sandboxed process runs under, and the kernel keyrings it starts with.

Namespaces do not cover the whole kernel: keyrings are shared by every process of a user,
io_uring and perf events have been a steady source of kernel escapes, and a process that can
make namespaces or mount file systems can undo the view bubblewrap built. So each sandboxed
process gets a seccomp filter (bubblewrap's ``--seccomp FD``, loaded after the sandbox is set
up and before the command is executed, inherited by everything it starts, never removable),
modelled on the default profiles of Docker and Podman: every call allowed unless it is one of
`DENIED` (EPERM), ``clone`` with a namespace flag (EPERM), ``clone3`` (ENOSYS: its flags sit in
memory a filter cannot read, and the C library then falls back to ``clone``), or a
``personality`` change beyond the plain Linux domains (EPERM). Calls of another ABI (i386's
``int 0x80``, x32) kill the process, libseccomp's default for a foreign architecture.

The filter is built with libseccomp through `pyseccomp` (ctypes over the system's
libseccomp2, which every Debian and Ubuntu system has, because systemd and apt link it): a
compiled binding would tie the grader to one interpreter (Debian's python3-seccomp serves only
the system's python3, not a venv or Colab's 3.12). `program` is the one filter; the isolation
probe proves it is loaded by seeing each of `PROBED` fail with EPERM.
"""

from __future__ import annotations

import errno
import functools
import os
from typing import Any

from grader.core.errors import InfrastructureError

# What Docker's and Podman's default profiles refuse a container without extra capabilities.
DENIED = (
    # kernel keyrings are not namespaced: another worker's keys, or the grader's
    "add_key",
    "keyctl",
    "request_key",
    # io_uring, BPF, perf events and userfaultfd: large attack surface, no use in grading
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    # another process's memory
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    # new namespaces, mounts, a new root: the sandbox's view undone
    "unshare",
    "setns",
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "open_by_handle_at",
    "name_to_handle_at",
    # the kernel itself: modules, kexec, reboot, swap, quotas, accounting, clocks, the log
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "quotactl",
    "quotactl_fd",
    "acct",
    "settimeofday",
    "stime",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "syslog",
    "lookup_dcookie",
    "nfsservctl",
    "sysfs",
    "_sysctl",
    "uselib",
    "ustat",
    "vhangup",
    "sethostname",
    "setdomainname",
    "fanotify_init",
    # raw hardware access
    "iopl",
    "ioperm",
    "vm86",
    "vm86old",
)
# clone's namespace flags (CLONE_NEWTIME is 0x80, which clone reads as part of its exit signal:
# only unshare and clone3 take it, and both are refused whole).
NAMESPACE_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
# personality: PER_LINUX (0), PER_LINUX32 (8) and UNAME26 (0x20000) only, as Docker allows
PERSONALITY_ALLOWED_BITS = 0x0008 | 0x20000
# the denied calls the probe makes, with harmless arguments, expecting EPERM
PROBED = ("keyctl", "io_uring_setup", "ptrace", "perf_event_open", "unshare", "bpf")
INSTALL_HINT = (
    "install the seccomp binding: `pip install pyseccomp` (it loads the system's libseccomp2: "
    "`sudo apt-get install libseccomp2` on Debian and Ubuntu)"
)


class SeccompUnavailable(InfrastructureError, OSError):
    """The filter cannot be built here (no binding, no libseccomp, not Linux): the reason."""


def _binding() -> Any:  # the pyseccomp module (untyped)
    try:
        import pyseccomp  # noqa: PLC0415 - Linux only, and only where a sandbox is built
    except (ImportError, OSError, AttributeError) as exc:  # OSError: no libseccomp.so
        raise SeccompUnavailable(f"libseccomp is not usable here ({exc}); {INSTALL_HINT}") from None
    return pyseccomp


@functools.cache
def program() -> bytes:
    """The filter as a BPF program (what ``bwrap --seccomp FD`` reads); built once a process."""
    sc = _binding()
    f = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        if _number(name) >= 0:  # calls this architecture lacks need no rule
            f.add_rule(eperm, name)
    for flag in NAMESPACE_FLAGS.values():
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    if _number("clone3") >= 0:
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for bit in range(32):
        if not (1 << bit) & PERSONALITY_ALLOWED_BITS:
            f.add_rule(eperm, "personality", sc.Arg(0, sc.MASKED_EQ, 1 << bit, 1 << bit))
    fd = os.memfd_create("grader-seccomp", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb", closefd=True) as out:
            f.export_bpf(out)
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _number(name: str) -> int:
    """The native syscall number of `name` (negative where this architecture has none)."""
    sc = _binding()
    try:
        return sc.resolve_syscall(sc.Arch.NATIVE, name)
    except (OSError, ValueError):
        return -1


def numbers(names: tuple[str, ...] = PROBED) -> dict[str, int]:
    """Native syscall numbers, for the probe (it calls them by number through ``syscall``)."""
    return {n: _number(n) for n in names if _number(n) >= 0}


def available() -> str:
    """ "" when the filter can be built here, else why not."""
    try:
        program()
    except (SeccompUnavailable, OSError) as exc:
        return str(exc) if isinstance(exc, SeccompUnavailable) else f"{exc}; {INSTALL_HINT}"
    return ""


def filter_fd() -> int:
    """A fresh descriptor holding `program` at offset 0, for one bwrap (the caller closes it).

    Inheritable, since bubblewrap reads it after exec; it is a memfd, so nothing on disk."""
    fd = os.memfd_create("grader-seccomp", 0)
    data = program()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd

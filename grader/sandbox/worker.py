"""The sandboxed worker: the only process in which student code runs during grading.

Started by `grader.sandbox.WorkerBackend` as ``python -P -m grader.sandbox.worker [options]``:

* requests arrive on stdin and replies leave on the original stdout, each a
  `grader.sandbox.protocol` frame (an 8-byte big-endian length, then one `grader.sandbox.wire`
  message). At start-up the worker moves both channels to private descriptors, points fd 0 at
  /dev/null and fd 1 at stderr, so whatever student code prints or reads can neither corrupt
  nor consume the channel;
* one `grader.sandbox.harness.Harness` per assignment (``--notebook ID=PATH``, keyed by
  ``req["assignment"]``); with ``--kernels`` (and no notebook) one
  `grader.sandbox.harness.KernelHost` that builds kernels only from the source the trusted side
  sends; every reply is `grader.sandbox.protocol.encode_reply` output, the same function the
  in-process backend uses, so replies are byte-for-byte what that backend produces;
* before reading a request it applies its own resource limits (idempotent when the launcher
  already set them) and ``no_new_privs``; with ``--pid-namespace`` (the launcher unshared a PID
  namespace) it forks once so that the serving process is PID 1 of that namespace: when it dies
  the kernel kills every process student code started, wherever they moved their session.

Nothing that arrives here is trusted by the grader: the trusted side decodes replies with
`wire.decode` only and treats anything malformed as a crash. This module imports only the
standard library, `grader.core` and `grader.sandbox`'s worker-side modules (protocol, wire,
harness, procs), never the trusted side: the worker starts in the time those take to import.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys
import time

from grader.sandbox import protocol, wire
from grader.sandbox.harness import Harness, KernelHost
from grader.sandbox.procs import die_with_parent, no_new_privs
from grader.sandbox.protocol import MAX_REQUEST_BYTES, PROTOCOL_ERROR, encode_reply


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m grader.sandbox.worker")
    p.add_argument("--notebook", action="append", default=[], metavar="ID=PATH")
    p.add_argument("--memory-mb", type=int, default=0, help="RLIMIT_AS (0: none, e.g. on GPU)")
    p.add_argument("--file-size-mb", type=int, default=0)
    p.add_argument("--open-files", type=int, default=0)
    p.add_argument("--processes", type=int, default=0)
    p.add_argument("--pid-namespace", action="store_true")
    p.add_argument("--kernels", action="store_true", help="serve kernel_* requests only")
    return p.parse_args(argv)


def _lower(kind: int, value: int) -> None:
    """Lower a limit to `value` (soft and hard); never raises one that is already lower."""
    soft, hard = resource.getrlimit(kind)
    inf = resource.RLIM_INFINITY
    new = value if hard == inf else min(value, hard)
    if soft != inf and soft <= new and hard != inf and hard <= new:
        return
    resource.setrlimit(kind, (new if soft == inf else min(soft, new), new))


def apply_limits(memory_mb: int, file_size_mb: int, open_files: int, processes: int) -> None:
    """Resource limits for this process and its children; a no-op where already applied."""
    mb = 1024 * 1024
    if memory_mb > 0:
        _lower(resource.RLIMIT_AS, memory_mb * mb)
    if file_size_mb > 0:
        _lower(resource.RLIMIT_FSIZE, file_size_mb * mb)
    if open_files > 0:
        _lower(resource.RLIMIT_NOFILE, open_files)
    if processes > 0:
        _lower(resource.RLIMIT_NPROC, processes)
    _lower(resource.RLIMIT_CORE, 0)
    no_new_privs()


def _become_namespace_init() -> None:
    """Fork: the child serves (PID 1 of the new namespace); this parent mirrors its exit."""
    pid = os.fork()
    if pid == 0:
        die_with_parent(signal.SIGKILL)
        return
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    parent = os.getppid()
    while True:  # polled, not a blocking wait: the grading process may die first (see below)
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            os._exit(70)
        except InterruptedError:
            continue
        if done:
            break
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)  # the child follows through PDEATHSIG
        time.sleep(0.2)
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 70)


def serve(request_fd: int, reply_fd: int, notebooks: dict[str, str], kernels: bool = False) -> int:
    """Answer framed requests until EOF on `request_fd` (65: a request over the frame limit)."""
    harnesses: dict[str, Harness] = {}
    host = KernelHost() if kernels else None
    warmed = False
    while True:
        try:
            payload = protocol.read_frame(request_fd, MAX_REQUEST_BYTES)
        except protocol.FrameTooLarge:
            return 65
        if payload is None:
            return 0
        name = ""
        try:
            req = wire.decode(payload)
            if isinstance(req, dict) and req.get("op") == "ping":  # start-up handshake
                protocol.write_frame(reply_fd, encode_reply(protocol.ok("pong")))
                if host is not None and not warmed:
                    warmed = True
                    host.warm()  # numba's import, while the grading starts up
                continue
            if host is not None:
                if not isinstance(req, dict):
                    raise wire.NotPlainData("a request is a dict")
                reply = host.handle(req)
                data = encode_reply(reply, str(req.get("name", "")))
                sys.stdout.flush()
                protocol.write_frame(reply_fd, data)
                continue
            if not isinstance(req, dict) or not isinstance(req.get("assignment"), str):
                raise wire.NotPlainData("a request is a dict with an assignment id")
            assignment = req["assignment"]
            name = str(req.get("name", ""))
            if assignment not in notebooks:
                reply = protocol.error(PROTOCOL_ERROR, f"no notebook for assignment {assignment!r}")
            else:
                if assignment not in harnesses:
                    harnesses[assignment] = Harness(notebooks[assignment], assignment)
                reply = harnesses[assignment].handle(req)
        except wire.NotPlainData as exc:
            reply = protocol.error(PROTOCOL_ERROR, str(exc))
        data = encode_reply(reply, name)
        sys.stdout.flush()
        protocol.write_frame(reply_fd, data)


def main(argv: list[str] | None = None) -> int:
    # Take the channel off fds 0 and 1 before any student code can print or read.
    request_fd, reply_fd = os.dup(0), os.dup(1)  # os.dup: not inherited by exec'd children
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    args = _parse(sys.argv[1:] if argv is None else argv)
    apply_limits(args.memory_mb, args.file_size_mb, args.open_files, args.processes)
    if args.pid_namespace:
        _become_namespace_init()
    notebooks = {}
    for item in args.notebook:
        key, _, path = item.partition("=")
        notebooks[key] = path
    return serve(request_fd, reply_fd, notebooks, kernels=args.kernels)


if __name__ == "__main__":
    raise SystemExit(main())

"""`WorkerBackend`: the `grader.suites` backend that reaches student code in a sandboxed worker.

Student code runs only in ``python -m grader.sandbox.worker``; only `grader.sandbox.protocol`
replies cross (one `grader.sandbox.channel.exchange` per request), and every verdict stays in
this, the trusted, process. The isolation each worker gets is `grader.sandbox.isolation`'s.

Timeouts: each request has its own deadline; on expiry the whole worker (process group and PID
namespace) is killed with SIGKILL, the caller gets ``WorkerTimeout`` and the next request starts a
fresh worker. A total budget per submission (``limits.submission_timeout_s``) bounds everything;
once spent, requests answer ``WorkerTimeout`` at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from grader.core import device
from grader.core.course import Limits
from grader.core.kernel_source import KernelSourceError, extract
from grader.core.notebook import graded_text
from grader.core.readback import list_dir, read_file
from grader.core.sourcemap import SourceMap, for_file
from grader.sandbox import memlimit, protocol
from grader.sandbox.channel import Failure, crashed, exchange
from grader.sandbox.isolation import ALL_LAYERS, Decision, decide, sandbox_for
from grader.sandbox.procs import OutputTail, children, descendants, describe_exit, kill_tree
from grader.sandbox.protocol import (
    OUTPUT_TAIL_BYTES,
    PROTOCOL_ERROR,
    STARTUP_ALLOWANCE_S,
    WORKER_CRASHED,
    WORKER_TIMEOUT,
    trusted_error,
)
from grader.sandbox.spawn import (
    SANDBOX_DIR,
    UidLease,
    course_root_default,
    inside,
    prepare_workdir,
    scrubbed_env,
    spawn,
    worker_command,
)


class WorkerBackend:
    """The `grader.suites.student.Backend` protocol, served by one sandboxed worker per
    submission (and two kernel workers that load no notebook)."""

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
        kernels: bool = False,
        decision: Decision | None = None,
    ):
        self.workdir = Path(workdir).resolve()
        self.notebooks = {k: Path(v).resolve() for k, v in notebooks.items()}
        for key, path in self.notebooks.items():
            if not inside(path, self.workdir):
                raise ValueError(f"notebook of {key} ({path}) is not inside {self.workdir}")
        self.limits = limits
        self.gpu = gpu
        self.course_root = (
            Path(course_root).resolve() if course_root is not None else course_root_default()
        )
        self.hide = [Path(h) for h in (hide or [])]
        # The grading's one isolation decision; a backend built alone decides here, and refuses
        # unless every layer holds (only `decide(allow_incomplete=True)` grades without one).
        self.decision = decision if decision is not None else decide()
        verified = self.decision.probe.layers
        prepare_workdir(self.workdir)
        self._box = sandbox_for(
            self.workdir,
            limits,
            self.decision,
            gpu=gpu,
            course_root=self.course_root,
            hide=tuple(self.hide),
        )
        self._lease: UidLease | None = None
        self._scratch_fd: int | None = None
        self.env = scrubbed_env(self.workdir, gpu)
        if ptx_only:  # a sibling worker that compiles kernels with the real CUDA target
            self.env.pop("NUMBA_ENABLE_CUDASIM", None)
            self.env[device.PTX_ENV] = "1"
        self._kernels = kernels  # a kernel worker: no notebook, builds kernels from source only
        self._sibling_args = (limits, gpu, hide, course_root, pid_namespace)
        self._siblings: dict[str, WorkerBackend] = {}
        self._layers = [x for x in ALL_LAYERS if x in verified]
        cgroup = bool(memlimit.scope_prefix_base()) and not self._box.bare
        self._memory_enforcer = "memory-cgroup" if cgroup else "memory-watchdog"
        self._watchdog: memlimit.Watchdog | None = None
        self._proc: subprocess.Popen | None = None
        self._loaded: set[str] = set()
        self._graded_text: dict[str, str] = {}
        self._source_maps: dict[str, SourceMap] = {}
        self._load_failed: dict[str, dict] = {}
        self._spent = 0.0
        self._tail = OutputTail(OUTPUT_TAIL_BYTES)
        self._cgroup: Path | None = None  # the started worker's scope, when the cgroup enforces
        self._init_pids: list[int] = []  # the PID-namespace init, killed even if it left
        self.starts = 0

    # ---- public protocol

    @property
    def isolation(self) -> tuple[str, ...]:
        """The verified layers and what enforced the worker's one memory limit (a start whose
        cgroup could not be seen carrying the limit leaves the watchdog as the enforcer)."""
        return (*self._layers, self._memory_enforcer)

    @property
    def budget_left(self) -> float:
        return max(0.0, self.limits.submission_timeout_s - self._spent)

    def request(self, req: dict, timeout: float) -> dict:
        assignment = req.get("assignment")
        what = str(req.get("name") or req.get("op") or "the call")
        if assignment not in self.notebooks:
            return trusted_error(PROTOCOL_ERROR, f"no notebook for assignment {assignment!r}")
        if assignment in self._load_failed:
            err = self._load_failed[assignment]["error"]
            return trusted_error(err["type"], f"not run: {err['message']}")
        if self.budget_left <= 0:
            return self._budget_spent()
        t0 = time.monotonic()
        budget_end = t0 + self.budget_left
        try:
            fresh = self._proc is None
            if fresh and (failed := self._start_and_ping(budget_end)):
                return failed
            if assignment not in self._loaded:
                load_timeout = self.limits.import_timeout_s
                reply = self._timed(
                    {"assignment": assignment, "op": "load"},
                    load_timeout,
                    f"running the notebook of {assignment}",
                    budget_end,
                )
                if "error" in reply and reply["error"]["type"] in (
                    WORKER_TIMEOUT,
                    WORKER_CRASHED,
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

    def kernel(self, req: dict, timeout: float, target: str = "run") -> dict:
        """A ``kernel_*`` request to a kernel worker that loads no notebook: ``compile`` (the
        real CUDA target, never the simulator) or ``run`` (the device kernels run on)."""
        if self.budget_left <= 0:
            return self._budget_spent()
        worker = self._sibling(target)
        t0 = time.monotonic()
        try:
            return worker._serve(req, min(timeout, self.budget_left), str(req.get("op")))
        finally:
            self._spent += time.monotonic() - t0
            worker._spent = self._spent

    def graded_source(self, assignment: str) -> str:
        """The graded cells of the submission's notebook, read here (the worker cannot write
        the submission's files: they stay the grader's and read-only to it, so it is read once)."""
        if assignment not in self._graded_text:
            self._graded_text[assignment] = graded_text(self.notebooks[assignment])
        return self._graded_text[assignment]

    def source_map(self, assignment: str) -> SourceMap:
        """The student's own line numbers for the graded cells (feedback names those), made
        once per assignment: the notebook is not read again for every kernel."""
        if assignment not in self._source_maps:
            path = self.notebooks[assignment]
            self._source_maps[assignment] = for_file(path)
        return self._source_maps[assignment]

    def read_back(self, path: str, max_bytes: int) -> bytes | None:
        """A file the student's code wrote in its working directory, read by this process."""
        scratch = self._live_scratch()
        return None if scratch is None else read_file(scratch, path, max_bytes)

    def list_back(self, path: str) -> list[str]:
        scratch = self._live_scratch()
        return [] if scratch is None else list_dir(scratch, path)

    def _live_scratch(self) -> Path | None:
        """The scratch of a running worker, started first if none runs: the scratch is a tmpfs
        that lives as long as its worker, so a listing taken while none runs would differ from
        one taken after the next call started it."""
        if self._proc is None and self.budget_left > 0:
            self._serve({"op": "ping"}, STARTUP_ALLOWANCE_S, "starting the worker")
        return self.scratch_dir()

    def ptx(
        self, assignment: str, name: str, signature: str, cc: tuple[int, int], timeout: float
    ) -> dict:
        """PTX of a kernel of the notebook, compiled from its extracted source."""
        if assignment not in self.notebooks:
            return trusted_error(PROTOCOL_ERROR, f"no notebook for assignment {assignment!r}")
        try:
            ks = extract(self.graded_source(assignment), name, self.notebooks[assignment].name)
        except KernelSourceError as exc:
            return trusted_error(protocol.KERNEL_SOURCE_ERROR, str(exc))
        return self.kernel(protocol.compile_request(ks, signature, cc), timeout, "compile")

    def _sibling(self, target: str) -> WorkerBackend:
        if target not in ("compile", "run"):
            raise ValueError(f"unknown kernel target {target!r}")
        if target not in self._siblings:
            limits, gpu, hide, course_root, pid_namespace = self._sibling_args
            worker = WorkerBackend(
                self.workdir,
                {},
                limits,
                gpu,
                hide,
                course_root,
                pid_namespace,
                ptx_only=target == "compile",
                kernels=True,
                decision=self.decision,
            )
            worker._spent = self._spent
            self._siblings[target] = worker
        return self._siblings[target]

    def _serve(self, req: dict, timeout: float, what: str) -> dict:
        """One request to this worker, started (and pinged) first when needed."""
        t0 = time.monotonic()
        budget_end = t0 + self.budget_left
        if self._proc is None and (failed := self._start_and_ping(budget_end)):
            return failed
        t1 = time.monotonic()
        reply = self._timed(req, timeout, what, budget_end)
        if "ok" in reply and req.get("op") == "kernel_run":
            reply["wall_s"] = time.monotonic() - t1  # the trusted clock, around one exchange
        return reply

    def warm(self, assignments: list[str], ptx_assignments: Sequence[str] = ()) -> None:
        """Start the worker and run these notebooks now, and start the kernel workers when an
        assignment in `ptx_assignments` has kernels, exactly as the first request would;
        failures are kept for the requests to report. Not thread-safe: `grader.grading.grade`
        runs it in a background thread and joins it before any other request, so the workers
        start while pytest starts up."""
        timeout = self.limits.import_timeout_s + STARTUP_ALLOWANCE_S
        for a in assignments:
            if a in self.notebooks and a not in self._loaded:
                self.request({"assignment": a, "op": "load"}, timeout)
        if any(a in self.notebooks for a in ptx_assignments) and self.budget_left > 0:
            # Both kernel workers start at once: each is an interpreter importing numba.
            starts = [
                threading.Thread(
                    target=self._sibling(target)._serve,
                    args=({"op": "ping"}, STARTUP_ALLOWANCE_S, "starting a kernel worker"),
                    daemon=True,
                )
                for target in ("compile", "run")
            ]
            t0 = time.monotonic()
            for t in starts:
                t.start()
            for t in starts:
                t.join()
            self._spent += time.monotonic() - t0
            for worker in self._siblings.values():
                worker._spent = self._spent

    def close(self) -> None:
        for worker in self._siblings.values():
            worker.close()
        if self._proc is not None:
            self._kill()
        if self._lease is not None:
            self._lease.close()
            self._lease = None

    def scratch_dir(self) -> Path | None:
        """The live worker's scratch tmpfs, for the trusted side to read back what the
        student's code wrote (open files in it with O_NOFOLLOW, regular files only): a
        directory descriptor taken through bubblewrap's init, valid until the worker stops.
        None when no worker runs."""
        if self._box.bare and self._proc is not None:
            return self.workdir / SANDBOX_DIR
        if self._scratch_fd is None and self._proc is not None:
            target = f"{self.workdir / SANDBOX_DIR}"
            for pid in self._init_pids or children(self._proc.pid):
                with contextlib.suppress(OSError):
                    flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
                    self._scratch_fd = os.open(f"/proc/{pid}/root{target}", flags)
                    break
        return None if self._scratch_fd is None else Path(f"/proc/self/fd/{self._scratch_fd}")

    def _close_scratch(self) -> None:
        if self._scratch_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._scratch_fd)
            self._scratch_fd = None

    def output_tail(self) -> str:
        """The last bytes the worker printed (stdout and stderr), for diagnostics."""
        return self._tail.text()

    def __enter__(self) -> WorkerBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # ---- internals

    def _budget_spent(self) -> dict:
        return trusted_error(
            WORKER_TIMEOUT,
            f"the submission's total time budget of "
            f"{self.limits.submission_timeout_s:g} s is spent; nothing more was run",
        )

    def _start_and_ping(self, budget_end: float) -> dict | None:
        """Start the worker and ping it; the error reply when either fails, else None."""
        try:
            self._start()
        except Failure as exc:
            return trusted_error(exc.kind, exc.message)
        # The start-up allowance covers the interpreter alone, not the student's cells.
        reply = self._timed({"op": "ping"}, STARTUP_ALLOWANCE_S, "starting the worker", budget_end)
        return reply if "error" in reply else None

    def _start(self) -> None:
        self._loaded.clear()
        self._init_pids = []
        box = self._box
        try:
            if os.geteuid() == 0 and not box.bare:  # a uid of its own: its own process count
                self._lease = self._lease or UidLease()
                box = replace(box, uid=self._lease.uid)
            command = worker_command(self.notebooks, self.limits, self.gpu, self._kernels)
            proc = spawn(
                command,
                box,
                self.env,
                address_space=not self.gpu,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise crashed(f"the worker could not start: {exc}") from exc
        self._proc = proc
        self.starts += 1
        assert proc.stdin is not None and proc.stderr is not None  # both PIPEs
        os.set_blocking(proc.stdin.fileno(), False)
        threading.Thread(target=self._tail.drain, args=(proc.stderr.fileno(),), daemon=True).start()
        self._cgroup = None
        if self._memory_enforcer == "memory-cgroup":
            if memlimit.verify_scope(proc.pid, self.limits.memory_mb):
                self._cgroup = memlimit.cgroup_dir(proc.pid)
            else:
                self._memory_enforcer = "memory-watchdog"
        self._watchdog = memlimit.Watchdog(
            proc, self.limits.memory_mb, lambda pids: self._memory_kill(proc, pids)
        )

    def _memory_kill(self, proc: subprocess.Popen, pids: list[int]) -> None:
        if proc is self._proc:
            self._signal_all(proc, pids)
        else:  # a watchdog outliving its worker: never this worker's init pids
            kill_tree(proc, pids)

    def _memory_stopped(self) -> bool:
        """Whether the current worker was stopped for its memory: its own watchdog killed its
        tree, or the kernel killed in its cgroup scope. Decided here, never from a reply; read
        before `_kill`, while the scope still exists."""
        proc, dog = self._proc, self._watchdog
        if proc is None:
            return False
        if dog is not None and dog.proc is proc and dog.killed:
            return True
        return memlimit.oom_killed(self._cgroup)

    def _signal_all(self, proc: subprocess.Popen, pids: list[int]) -> None:
        kill_tree(proc, [*self._init_pids, *children(proc.pid), *pids])

    def _kill(self) -> int | None:
        proc, self._proc = self._proc, None
        self._loaded.clear()
        self._close_scratch()
        if proc is None:
            return None
        self._signal_all(proc, descendants(proc.pid))
        self._init_pids = []
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and 128 < code < 128 + signal.NSIG:
            code = 128 - code  # bwrap reports its command's death by signal N as 128 + N
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]  # PIPEs, all three
        return code

    def _crash_message(self, code: int | None, fallback: str) -> str:
        if code is None:
            return fallback
        if code == -signal.SIGKILL and self._memory_enforcer == "memory-cgroup":
            return (
                f"{describe_exit(code)}: it may have passed its memory limit of "
                f"{self.limits.memory_mb} MB (the kernel's, for all its processes together)"
            )
        return describe_exit(code)

    def _timed(self, req: dict, timeout: float, what: str, budget_end: float) -> dict:
        now = time.monotonic()
        limit = min(timeout, max(0.0, budget_end - now))
        deadline = now + limit
        try:
            return self._exchange(req, deadline)
        except TimeoutError:
            if self._memory_stopped():  # the deadline came as the memory kill did
                self._kill()
                return trusted_error(WORKER_CRASHED, memlimit.kill_message(self.limits.memory_mb))
            self._kill()
            if limit < timeout:
                return trusted_error(
                    WORKER_TIMEOUT,
                    f"{what} ran out of the submission's total time budget of "
                    f"{self.limits.submission_timeout_s:g} s; the worker was stopped",
                )
            return trusted_error(WORKER_TIMEOUT, protocol.timeout_message(what, timeout))
        except Failure as exc:
            if self._memory_stopped():  # whatever the reply or its absence looked like
                self._kill()
                return trusted_error(WORKER_CRASHED, memlimit.kill_message(self.limits.memory_mb))
            if exc.kind == WORKER_CRASHED:
                code = self._kill()
                if not exc.exited:
                    code = None  # a protocol violation: say what it was, not how it ended
                return trusted_error(WORKER_CRASHED, self._crash_message(code, exc.message))
            self._kill()
            return trusted_error(exc.kind, exc.message)

    def _exchange(self, req: dict, deadline: float) -> dict:
        proc = self._proc
        assert proc is not None
        reply = exchange(proc, req, deadline)
        if not self._init_pids:
            self._init_pids = children(proc.pid)
        return reply

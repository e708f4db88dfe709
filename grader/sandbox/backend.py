"""`WorkerBackend`: the `grader.suites` backend that reaches student code in sandboxed workers.

Student code runs only in ``python -m grader.sandbox.worker``; only `grader.sandbox.protocol`
replies cross (one `grader.sandbox.channel.exchange` per request), and every verdict stays in
this, the trusted, process. The isolation each worker gets is `grader.sandbox.isolation`'s.

Workers: a submission's `WorkerBackend` is one `NotebookWorker` (runs the notebooks, from the
graded cells this process read and sends in each load request, and calls their functions) and
two kernel workers (`KernelWorker`, made on first use) that load no notebook and build kernels
from extracted source: target ``compile`` (the real CUDA target, never the simulator) and
``run`` (the device kernels run on). Each is a `_Worker`: one process at a time under the
grading's one isolation `Decision`, with a uid of its own, one memory limit for its whole tree
(whether it was stopped for memory is decided here, never from a reply), its scratch and its
output tail.

Timeouts: each request has its own deadline; on expiry the whole worker (process group and PID
namespace) is killed with SIGKILL, the caller gets ``WorkerTimeout`` and the next request starts a
fresh worker. A reply that breaks the protocol (malformed, over a bound) kills the worker too, and
the function whose call it answered is not called again in the grading: only a tampered worker
sends one (`protocol.encode_reply` refuses in the worker whatever this side would), and each
could cost this side another refused reply and another start. One
`grader.sandbox.budget.Budget` per submission (``limits.submission_timeout_s``),
shared by its three workers, bounds everything: a request's deadline is the sooner of its own
timeout and what is left; once spent, requests answer ``WorkerTimeout`` at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from grader.core import device
from grader.core.course import Limits
from grader.core.kernel_source import KernelSourceError, extract
from grader.core.notebook import GradedCell, NotebookError, cells_text, read_graded_cells
from grader.core.readback import list_dir, read_file
from grader.core.sourcemap import SourceMap, for_file
from grader.sandbox import memlimit, protocol
from grader.sandbox.budget import Budget
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
    Sandbox,
    UidLease,
    course_root_default,
    inside,
    prepare_workdir,
    scrubbed_env,
    spawn,
    worker_command,
)

KERNEL_TARGETS = ("compile", "run")
# the memory model's launches: the simulator on every machine (the `run` worker without a GPU)
MODEL = "model"


@dataclass(frozen=True)
class Shared:
    """What every worker of one submission shares: made once, by `WorkerBackend`."""

    workdir: Path
    limits: Limits
    gpu: bool
    decision: Decision  # the grading's one isolation decision
    box: Sandbox  # what `decision` gives a worker (each start adds the worker's own uid)
    budget: Budget  # the submission's one time budget


class _Worker:
    """One sandboxed worker process: its start (and ping), its exchanges under a deadline,
    its kill (the whole tree), its memory limit, its uid lease, scratch and output tail."""

    kernels = False  # started with ``--kernels``: loads no notebook

    def __init__(self, shared: Shared, env: dict[str, str]):
        self.decision = shared.decision
        self.limits = shared.limits
        self.budget = shared.budget
        self.workdir = shared.workdir
        self.gpu = shared.gpu
        self.env = env
        self._box = shared.box
        self._lease: UidLease | None = None
        self._scratch_fd: int | None = None
        cgroup = bool(memlimit.scope_prefix_base()) and not self._box.bare
        self.memory_enforcer = "memory-cgroup" if cgroup else "memory-watchdog"
        self._watchdog: memlimit.Watchdog | None = None
        self._proc: subprocess.Popen | None = None
        self._tail = OutputTail(OUTPUT_TAIL_BYTES)
        self._cgroup: Path | None = None  # the started worker's scope, when the cgroup enforces
        self._init_pids: list[int] = []  # the PID-namespace init, killed even if it left
        self.starts = 0

    def _notebooks(self) -> dict[str, Path]:
        """The notebooks the worker process is started with."""
        return {}

    def _forget(self) -> None:
        """Drop what only the stopped (or not yet started) worker process held."""

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

    @property
    def running(self) -> bool:
        """Whether a worker process was started and not since stopped."""
        return self._proc is not None

    def output_tail(self) -> str:
        """The last bytes the worker printed (stdout and stderr), for diagnostics."""
        return self._tail.text()

    def close(self) -> None:
        if self._proc is not None:
            self._kill()
        if self._lease is not None:
            self._lease.close()
            self._lease = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def _serve(self, req: dict, timeout: float, what: str, budget_end: float) -> dict:
        """One request, the worker started (and pinged) first when none runs; not charged to
        the budget here (the caller charges the whole request once)."""
        if self._proc is None and (failed := self._start_and_ping(budget_end)):
            return failed
        return self._timed(req, timeout, what, budget_end)

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
        self._forget()
        self._init_pids = []
        box = self._box
        try:
            if os.geteuid() == 0 and not box.bare:  # a uid of its own: its own process count
                self._lease = self._lease or UidLease()
                box = replace(box, uid=self._lease.uid)
            command = worker_command(self._notebooks(), self.limits, self.gpu, self.kernels)
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
        if self.memory_enforcer == "memory-cgroup":
            if memlimit.verify_scope(proc.pid, self.limits.memory_mb):
                self._cgroup = memlimit.cgroup_dir(proc.pid)
            else:
                self.memory_enforcer = "memory-watchdog"
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
        self._forget()
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
        if code == -signal.SIGKILL and self.memory_enforcer == "memory-cgroup":
            return (
                f"{describe_exit(code)}: it may have passed its memory limit of "
                f"{self.limits.memory_mb} MB (the kernel's, for all its processes together)"
            )
        return describe_exit(code)

    def _timed(
        self, req: dict, timeout: float, what: str, budget_end: float, key: str | None = None
    ) -> dict:
        """One exchange under the sooner of `timeout` (the `[limits]` key `key`, when the
        caller knows which it is) and the budget's end."""
        now = time.monotonic()
        limit = min(timeout, max(0.0, budget_end - now))
        deadline = now + limit
        try:
            return self._exchange(req, deadline)
        except TimeoutError:
            if self._memory_stopped():  # the deadline came as the memory kill did
                self._kill()
                return trusted_error(
                    WORKER_CRASHED, memlimit.kill_message(self.limits.memory_mb), memlimit.LIMIT
                )
            self._kill()
            if limit < timeout:
                return self.budget.ran_out(what)
            return trusted_error(WORKER_TIMEOUT, protocol.timeout_message(what, timeout), key)
        except Failure as exc:
            if self._memory_stopped():  # whatever the reply or its absence looked like
                self._kill()
                return trusted_error(
                    WORKER_CRASHED, memlimit.kill_message(self.limits.memory_mb), memlimit.LIMIT
                )
            if exc.kind == WORKER_CRASHED:
                code = self._kill()
                if not exc.exited:  # a protocol violation: say what it was, not how it ended
                    self._broke_protocol(req, exc.message)
                    return trusted_error(WORKER_CRASHED, exc.message)
                return trusted_error(WORKER_CRASHED, self._crash_message(code, exc.message))
            self._kill()
            return trusted_error(exc.kind, exc.message)

    def _broke_protocol(self, req: dict, message: str) -> None:
        """The reply to `req` broke the protocol (what `message` says), which only a tampered
        worker does (`protocol.encode_reply` never sends what this side refuses)."""

    def _exchange(self, req: dict, deadline: float) -> dict:
        proc = self._proc
        assert proc is not None
        reply = exchange(proc, req, deadline)
        if not self._init_pids:
            self._init_pids = children(proc.pid)
        return reply


class NotebookWorker(_Worker):
    """The worker that runs the submission's notebooks (each loaded once per worker process,
    before its first request) and calls their functions; the trusted side's reading of the same
    notebooks (graded cells, source map) and of the worker's scratch."""

    def __init__(self, shared: Shared, notebooks: dict[str, Path]):
        super().__init__(shared, scrubbed_env(shared.workdir, shared.gpu))
        self.notebooks = notebooks
        self._loaded: set[str] = set()
        self._graded_cells: dict[str, list[GradedCell]] = {}
        self._graded_text: dict[str, str] = {}
        self._source_maps: dict[str, SourceMap] = {}
        self._load_failed: dict[str, dict] = {}
        self._barred: dict[tuple[str, str], str] = {}

    def _notebooks(self) -> dict[str, Path]:
        return self.notebooks

    def _forget(self) -> None:
        self._loaded.clear()  # a fresh process runs each notebook again

    def request(self, req: dict, timeout: float) -> dict:
        assignment = req.get("assignment")
        what = str(req.get("name") or req.get("op") or "the call")
        if assignment not in self.notebooks:
            return trusted_error(PROTOCOL_ERROR, f"no notebook for assignment {assignment!r}")
        if assignment in self._load_failed:
            err = self._load_failed[assignment]["error"]
            return trusted_error(err["type"], f"not run: {err['message']}", err.get("limit"))
        if (barred := self._barred.get((assignment, str(req.get("name"))))) is not None:
            return trusted_error(WORKER_CRASHED, barred)
        if self.budget.left <= 0:
            return self.budget.spent_reply()
        # read before the budget's clock starts: the student's time is the worker's
        cells = None if assignment in self._loaded else self._cells(assignment)
        budget_end = self.budget.deadline()
        with self.budget.charge():
            if self._proc is None and (failed := self._start_and_ping(budget_end)):
                return failed
            if assignment not in self._loaded:
                reply = self._timed(
                    protocol.load_request(assignment, cells),
                    self.limits.import_timeout_s,
                    f"running the notebook of {assignment}",
                    budget_end,
                    "import_timeout_s",
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

    def _broke_protocol(self, req: dict, message: str) -> None:
        """A function whose call broke the protocol is not called again in this grading: each
        call could make this side read and refuse another reply (24 MB of them, in the corpus)
        and start the worker again, and a tampered harness earns nothing."""
        name = req.get("name")
        if isinstance(name, str) and name and isinstance(req.get("assignment"), str):
            self._barred[(req["assignment"], name)] = (
                f"{name} is not called again in this grading: a call of it broke the grader's "
                f"protocol ({message})"
            )

    def _cells(self, assignment: str) -> list[GradedCell] | None:
        """The graded cells for the load request, read here (pairing already parsed the file, so
        this is a copy of that parse); None for an unreadable file, which the worker reports."""
        try:
            return self._read_cells(assignment)
        except (NotebookError, OSError, UnicodeDecodeError):
            return None

    def _read_cells(self, assignment: str) -> list[GradedCell]:
        """The notebook's graded cells, read once: for the load request and the kernels' source."""
        if assignment not in self._graded_cells:
            self._graded_cells[assignment] = read_graded_cells(self.notebooks[assignment])
        return self._graded_cells[assignment]

    def loaded(self, assignment: str) -> bool:
        return assignment in self._loaded

    def graded_source(self, assignment: str) -> str:
        """The graded cells of the submission's notebook, read here (the worker cannot write
        the submission's files: they stay the grader's and read-only to it, so it is read once)."""
        if assignment not in self._graded_text:
            self._graded_text[assignment] = cells_text(self._read_cells(assignment))
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
        """The scratch of a running worker, started first if none runs (charged to the budget):
        the scratch is a tmpfs that lives as long as its worker, so a listing taken while none
        runs would differ from one taken after the next call started it."""
        if self._proc is None and self.budget.left > 0:
            budget_end = self.budget.deadline()
            with self.budget.charge():
                self._serve({"op": "ping"}, STARTUP_ALLOWANCE_S, "starting the worker", budget_end)
        return self.scratch_dir()


class KernelWorker(_Worker):
    """A worker that loads no notebook and serves ``kernel_*`` requests (kernels built from
    extracted source): target ``compile`` compiles with the real CUDA target (never the
    simulator), ``run`` launches and times on the device kernels run on."""

    kernels = True

    def __init__(self, shared: Shared, target: str):
        if target not in (*KERNEL_TARGETS, MODEL):
            raise ValueError(f"unknown kernel target {target!r}")
        env = scrubbed_env(shared.workdir, shared.gpu)
        if target == "compile":
            env.pop("NUMBA_ENABLE_CUDASIM", None)
            env[device.PTX_ENV] = "1"
        if target == MODEL:
            env.update(device.SIMULATOR_ENV)
        super().__init__(shared, env)
        self.target = target

    def serve(self, req: dict, timeout: float) -> dict:
        """One ``kernel_*`` request, charged to the budget; a ``kernel_run`` reply carries
        ``wall_s``, the trusted clock around its one exchange."""
        if self.budget.left <= 0:
            return self.budget.spent_reply()
        budget_end = self.budget.deadline()
        with self.budget.charge():
            if self._proc is None and (failed := self._start_and_ping(budget_end)):
                return failed
            t0 = time.monotonic()
            reply = self._timed(req, timeout, str(req.get("op")), budget_end)
            if "ok" in reply and req.get("op") == "kernel_run":
                reply["wall_s"] = time.monotonic() - t0
            return reply

    def start(self, budget_end: float) -> None:
        """Start the worker now, as its first request would; not charged here (the kernel
        workers start together, and their warm-up charges its wall time once)."""
        self._serve({"op": "ping"}, STARTUP_ALLOWANCE_S, "starting a kernel worker", budget_end)


class KernelWorkers:
    """A submission's two kernel workers (`KernelWorker`, each made on first use) over one
    `Shared`: the notebook worker's, or, with `kernel_workers`, a scratch directory of their own,
    which holds nothing of the submission, so that they can start before intake has read it."""

    def __init__(self, shared: Shared):
        self.shared = shared
        self._workers: dict[str, KernelWorker] = {}

    def get(self, target: str) -> KernelWorker:
        """The kernel worker of `target`, made (not started) on first use; `MODEL` is the `run`
        worker where that one simulates (no GPU), a third worker on a GPU machine."""
        if target == MODEL and not self.shared.gpu:
            target = "run"
        if target not in self._workers:
            self._workers[target] = KernelWorker(self.shared, target)
        return self._workers[target]

    def start(self) -> None:
        """Start both at once (each is an interpreter importing numba): their wall time is
        charged to the budget once. Failures are kept for the first request to report."""
        budget = self.shared.budget
        if budget.left <= 0 or all(self.get(t).running for t in KERNEL_TARGETS):
            return
        budget_end = budget.deadline()
        starts = [
            threading.Thread(target=self.get(t).start, args=(budget_end,), daemon=True)
            for t in KERNEL_TARGETS
        ]
        with budget.charge():
            for s in starts:
                s.start()
            for s in starts:
                s.join()

    def close(self) -> None:
        for worker in self._workers.values():
            worker.close()


def kernel_workers(
    workdir: Path,
    limits: Limits,
    decision: Decision,
    budget: Budget,
    gpu: bool = False,
    course_root: Path | None = None,
) -> KernelWorkers:
    """Kernel workers on `workdir`, an empty directory of their own, under the grading's
    `decision` and the submission's `budget` (hand both to the `WorkerBackend` too)."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    return KernelWorkers(_shared(workdir, limits, decision, budget, gpu, course_root))


def _shared(
    workdir: Path,
    limits: Limits,
    decision: Decision,
    budget: Budget,
    gpu: bool,
    course_root: Path | None,
    hide: tuple[Path, ...] = (),
) -> Shared:
    """The sandbox of the workers on `workdir` (resolved), and what they share."""
    prepare_workdir(workdir)
    root = Path(course_root).resolve() if course_root is not None else course_root_default()
    box = sandbox_for(workdir, limits, decision, gpu=gpu, course_root=root, hide=hide)
    return Shared(workdir, limits, gpu, decision, box, budget)


class WorkerBackend:
    """The `grader.suites.student.Backend` protocol for one submission: its `NotebookWorker`
    and its two kernel workers (`KernelWorkers`), all under one `Decision` and one `Budget`.
    `kernels` are workers made (and maybe started) earlier by `kernel_workers`, under the same
    decision and budget: `budget` and `decision` must be theirs."""

    def __init__(
        self,
        workdir: Path,
        notebooks: dict[str, Path],
        limits: Limits,
        gpu: bool = False,
        hide: list[Path] | None = None,
        course_root: Path | None = None,
        decision: Decision | None = None,
        budget: Budget | None = None,
        kernels: KernelWorkers | None = None,
    ):
        workdir = Path(workdir).resolve()
        notebooks = {k: Path(v).resolve() for k, v in notebooks.items()}
        for key, path in notebooks.items():
            if not inside(path, workdir):
                raise ValueError(f"notebook of {key} ({path}) is not inside {workdir}")
        self.limits = limits
        # The grading's one isolation decision; a backend built alone decides here, and refuses
        # unless every layer holds (only `decide(allow_incomplete=True)` grades without one).
        self.decision = decision if decision is not None else decide()
        self.budget = budget if budget is not None else Budget(limits.submission_timeout_s)
        hidden = tuple(Path(h) for h in hide or ())
        self._shared = _shared(
            workdir, limits, self.decision, self.budget, gpu, course_root, hidden
        )
        self.notebook_worker = NotebookWorker(self._shared, notebooks)
        if kernels is not None and (
            kernels.shared.budget is not self.budget or kernels.shared.decision is not self.decision
        ):
            raise ValueError("the kernel workers must share the backend's budget and decision")
        self.kernels = kernels if kernels is not None else KernelWorkers(self._shared)
        self._layers = [x for x in ALL_LAYERS if x in self.decision.probe.layers]

    # ---- public protocol

    @property
    def isolation(self) -> tuple[str, ...]:
        """The verified layers and what enforced the notebook worker's one memory limit (a start
        whose cgroup could not be seen carrying the limit leaves the watchdog as the enforcer)."""
        return (*self._layers, self.notebook_worker.memory_enforcer)

    @property
    def starts(self) -> int:
        """How many times the notebook worker started."""
        return self.notebook_worker.starts

    def request(self, req: dict, timeout: float) -> dict:
        return self.notebook_worker.request(req, timeout)

    def kernel(self, req: dict, timeout: float, target: str = "run") -> dict:
        """A ``kernel_*`` request to the kernel worker of `target`: ``compile`` (the real CUDA
        target, never the simulator), ``run`` (the device kernels run on) or ``model`` (the
        simulator, whatever the device: the memory model's launches)."""
        return self.kernel_worker(target).serve(req, timeout)

    def graded_source(self, assignment: str) -> str:
        return self.notebook_worker.graded_source(assignment)

    def source_map(self, assignment: str) -> SourceMap:
        return self.notebook_worker.source_map(assignment)

    def read_back(self, path: str, max_bytes: int) -> bytes | None:
        return self.notebook_worker.read_back(path, max_bytes)

    def list_back(self, path: str) -> list[str]:
        return self.notebook_worker.list_back(path)

    def ptx(
        self, assignment: str, name: str, signature: str, cc: tuple[int, int], timeout: float
    ) -> dict:
        """PTX of a kernel of the notebook, compiled from its extracted source."""
        notebooks = self.notebook_worker.notebooks
        if assignment not in notebooks:
            return trusted_error(PROTOCOL_ERROR, f"no notebook for assignment {assignment!r}")
        try:
            ks = extract(self.graded_source(assignment), name, notebooks[assignment].name)
        except KernelSourceError as exc:
            return trusted_error(protocol.KERNEL_SOURCE_ERROR, str(exc))
        return self.kernel(protocol.compile_request(ks, signature, cc), timeout, "compile")

    def kernel_worker(self, target: str) -> KernelWorker:
        """The kernel worker of `target`, made (not started) on first use."""
        return self.kernels.get(target)

    def warm(self, assignments: list[str], ptx_assignments: Sequence[str] = ()) -> None:
        """Start the notebook worker and run these notebooks now, and start both kernel workers
        when an assignment in `ptx_assignments` has kernels, exactly as the first request would;
        failures are kept for the requests to report. Not thread-safe: `grader.grading.grade`
        runs it in background threads (the notebooks in one, the kernel workers in another: they
        touch different workers, and the `Budget` is charged under a lock) and joins them before
        any other request to the same workers, so the workers start while pytest starts up."""
        timeout = self.limits.import_timeout_s + STARTUP_ALLOWANCE_S
        notebooks = self.notebook_worker
        for a in assignments:
            if a in notebooks.notebooks and not notebooks.loaded(a):
                notebooks.request({"assignment": a, "op": "load"}, timeout)
        if any(a in notebooks.notebooks for a in ptx_assignments):
            self.kernels.start()

    def close(self) -> None:
        self.kernels.close()
        self.notebook_worker.close()

    def __enter__(self) -> WorkerBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

"""`InProcessBackend`: student code on the student's own machine, for `grader check` and tests.

Not a sandbox: the code is the student's own, so nothing here is authoritative. But it behaves
as grading does. Every request crosses `grader.sandbox.wire` both ways and every reply is
`grader.sandbox.protocol.encode_reply` output, so a test passes or fails here as it does in the
sandbox. Kernels take the sandbox's path: built from the extracted source, compiled to PTX by
ONE long-lived compile worker per backend (``python -m grader.sandbox.worker --kernels`` with the
real CUDA target, started on the first compile), launched by the kernel host.

With ``children=True`` (what `grader check` uses) the notebook and the kernel launches also run
in plain child workers of this user (`ChildWorker`), under the same per-call time limits and
with the same timeout message as grading: an infinite loop costs its test, and the check goes
on. Without it (fast unit tests) they run in this process and the limits are not enforced.

Where this machine has no CUDA compiler (the student profile), the first compile is a probe
(`grader.core.compiler`): every later compile request is answered `PTX_DEFERRED`, kernels are
still graded in the simulator, and `compiler_missing` says why for the one note `grader check`
prints. Where the compiler works, `compiled` and `compile_failed` count what the check did, for
the note that says it ran.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from grader.core import compiler, device
from grader.core.course import Limits
from grader.core.notebook import graded_text
from grader.core.readback import list_dir, read_file
from grader.core.sourcemap import SourceMap, for_file
from grader.sandbox import protocol, wire
from grader.sandbox.channel import Failure, exchange
from grader.sandbox.harness import MODULE_PREFIX, Harness, KernelHost
from grader.sandbox.procs import describe_exit
from grader.sandbox.protocol import (
    STARTUP_ALLOWANCE_S,
    WORKER_CRASHED,
    WORKER_TIMEOUT,
    encode_reply,
    trusted_error,
    untagged,
)

PTX_DEFERRED = "PtxDeferred"  # in-process only: no compiler here, the PTX check waits for grading
PROBE_TIMEOUT_S = 120.0  # the compile worker's start: numba-cuda and NVVM load once


class ChildWorker:
    """One ``python -m grader.sandbox.worker`` run as a plain child of this process (same user,
    same working directory, no isolation), restarted after a timeout or a crash."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None):
        self.args = args
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def ask(self, req: dict, timeout: float, what: str, limit: str | None = None) -> dict:
        """The reply to `req`, or a trusted WorkerTimeout / WorkerCrashed (the worker stopped);
        `limit`: the `[limits]` key `timeout` is, when the caller knows."""
        if self.proc is None:
            self._start()
            pong = self._exchange({"op": "ping"}, STARTUP_ALLOWANCE_S, "starting the worker")
            if "error" in pong:
                return pong
        return self._exchange(req, timeout, what, limit)

    def _start(self) -> None:
        cmd = [sys.executable, "-m", "grader.sandbox.worker", *self.args]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=self.env,
            start_new_session=True,  # its own process group: a timeout kills what it started
        )
        self.starts += 1
        assert self.proc.stdin is not None  # stdin=PIPE
        os.set_blocking(self.proc.stdin.fileno(), False)

    def _exchange(self, req: dict, timeout: float, what: str, limit: str | None = None) -> dict:
        assert self.proc is not None
        try:
            return exchange(self.proc, req, time.monotonic() + timeout)
        except TimeoutError:
            self.close()
            return trusted_error(WORKER_TIMEOUT, protocol.timeout_message(what, timeout), limit)
        except Failure as exc:
            code = self.close()
            message = describe_exit(code) if exc.exited and code is not None else exc.message
            return trusted_error(exc.kind, message)

    def close(self) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]  # both PIPEs
        return code


def compiler_env() -> dict[str, str]:
    """The compile worker's environment: the real CUDA target, never the simulator."""
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env[device.PTX_ENV] = "1"
    return env


class InProcessBackend:
    """The `grader.suites.student.Backend` protocol on the student's own machine.

    `notebooks` maps assignment id to the notebook file; each is executed on first use.
    `children` runs the notebook and the launches in `ChildWorker`s under `limits`' time limits
    (one `Limits` for every assignment, or each assignment's own, `Course.limits_for`).
    """

    isolation: tuple[str, ...] = ()

    def __init__(
        self,
        notebooks: dict[str, Path],
        children: bool = False,
        limits: Limits | Mapping[str, Limits] | None = None,
    ):
        self.notebooks = {k: Path(v) for k, v in notebooks.items()}
        self._source_maps: dict[str, SourceMap] = {}
        self.harnesses: dict[str, Harness] = {}
        self.host = KernelHost()
        self.limits = limits
        self.compiler = ChildWorker(["--kernels"], compiler_env())
        self.compiler_missing: str | None = None
        self._probed = False
        # The PTX check where the compiler works: compilations asked, and the kernels that failed.
        self.compiled = 0
        self.compile_failed: list[str] = []
        self.children = children
        self._notebook_worker: ChildWorker | None = None
        self._run_worker: ChildWorker | None = None
        self._model_worker: ChildWorker | None = None  # the simulator on a GPU machine
        self._loaded: set[str] = set()
        self._load_failed: dict[str, dict] = {}
        if children:
            args = [f"--notebook={k}={v.resolve()}" for k, v in self.notebooks.items()]
            self._notebook_worker = ChildWorker(args)
            self._run_worker = ChildWorker(["--kernels"])

    def request(self, req: dict, timeout: float) -> dict:
        assignment = req["assignment"]
        if self._notebook_worker is None:
            if assignment not in self.harnesses:
                self.harnesses[assignment] = Harness(self.notebooks[assignment], assignment)
            reply = self.harnesses[assignment].handle(wire.roundtrip(req))
            return untagged(wire.decode(encode_reply(reply, str(req.get("name", "")))))
        if assignment in self._load_failed:
            err = self._load_failed[assignment]["error"]
            return trusted_error(err["type"], f"not run: {err['message']}", err.get("limit"))
        worker = self._notebook_worker
        if worker.proc is None:
            self._loaded.clear()  # a fresh worker (first use, or after a timeout) runs it again
        if assignment not in self._loaded:
            limits = self.limits
            if isinstance(limits, Mapping):
                limits = limits.get(assignment)
            reply = worker.ask(
                {"assignment": assignment, "op": "load"},
                limits.import_timeout_s if limits else 600.0,
                f"running the notebook of {assignment}",
                "import_timeout_s",
            )
            if "error" in reply and reply["error"]["type"] in (WORKER_TIMEOUT, WORKER_CRASHED):
                self._load_failed[assignment] = reply
                return reply
            self._loaded.add(assignment)
            if req.get("op") == "load":
                return reply
        what = str(req.get("name") or req.get("op") or "the call")
        return worker.ask(req, timeout, what)

    def kernel(self, req: dict, timeout: float, target: str = "run") -> dict:
        if target == "compile":
            return self._compile(req, timeout)
        if target == "model" and device.has_gpu():  # this process runs the real target
            if self._model_worker is None:
                env = {**os.environ, **device.SIMULATOR_ENV}
                self._model_worker = ChildWorker(["--kernels"], env)
            return self._model_worker.ask(req, timeout, str(req.get("op")))
        t0 = time.monotonic()
        if self._run_worker is not None:
            reply = self._run_worker.ask(req, timeout, str(req.get("op")))
        else:
            reply = untagged(wire.decode(encode_reply(self.host.handle(wire.roundtrip(req)))))
        if "ok" in reply and req.get("op") == "kernel_run":
            reply["wall_s"] = time.monotonic() - t0
        return reply

    def _compile(self, req: dict, timeout: float) -> dict:
        """One long-lived compile worker; the first request is the compiler probe."""
        if not self._probed:
            self._probed = True
            probe = protocol.compile_request(
                compiler.probe_source(), compiler.PROBE_SIGNATURE, req.get("cc", (7, 5))
            )
            answer = self.compiler.ask(probe, max(timeout, PROBE_TIMEOUT_S), "the compiler probe")
            self.compiler_missing = compiler.missing_reason(answer)
        if self.compiler_missing is not None:
            return trusted_error(PTX_DEFERRED, compiler.DEFERRED)
        reply = self.compiler.ask(req, timeout, f"compiling {req.get('name')}")
        self.compiled += 1
        if compiler.missing_reason(reply) is not None:  # not PTX: this kernel did not compile
            self.compile_failed.append(str(req.get("name")))
        return reply

    def graded_source(self, assignment: str) -> str:
        return graded_text(self.notebooks[assignment])

    def source_map(self, assignment: str) -> SourceMap:
        """The student's own line numbers for the graded cells (feedback names those), made
        once per assignment: the notebook is not read again for every kernel."""
        if assignment not in self._source_maps:
            path = self.notebooks[assignment]
            self._source_maps[assignment] = for_file(path)
        return self._source_maps[assignment]

    def read_back(self, path: str, max_bytes: int) -> bytes | None:
        return read_file(Path.cwd(), path, max_bytes)

    def list_back(self, path: str) -> list[str]:
        return list_dir(Path.cwd(), path)

    def close(self) -> None:
        for worker in (self.compiler, self._notebook_worker, self._run_worker, self._model_worker):
            if worker is not None:
                worker.close()
        self._loaded.clear()
        for assignment in self.harnesses:
            sys.modules.pop(f"{MODULE_PREFIX}{assignment}", None)
        self.harnesses.clear()

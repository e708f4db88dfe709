"""The `student` object that tests call, and the backends that reach student code.

Tests read naturally (``student.ridge_point(...)``, ``student.vector_add[blocks, tpb](a, b, c)``)
and never import the submission. Every argument and result goes through `grader.sandbox.wire` in
every backend, so a test passes or fails the same way in-process (`grader.suites.inprocess`, a
student's own `grader check`) and in the sandboxed worker (`grader.sandbox.WorkerBackend`).

Nothing the student's process says is a verdict. Kernels are taken from the notebook's source
(`grader.core.kernel_source`), compiled for the course GPU by a process that runs nothing of the
notebook, and launched, timed and read back by kernel workers that load no notebook; a host
wrapper's launches are replayed with that kernel on the test's own inputs
(`grader.suites.replay`). Infrastructure outcomes (timeout, crash, malformed reply) come only
from errors the trusted side made (``origin: grader``; see `grader.suites.errors`).

The exceptions (`grader.suites.errors`) and `InProcessBackend` are re-exported here, where tests
and suites have always imported them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pytest

from grader.core import compiler, kernel_source, sourcemap
from grader.core.course import Limits
from grader.core.feedback import excerpt
from grader.core.readback import READ_MAX_BYTES, ReadBackError
from grader.core.stubs import still_stub
from grader.sandbox import protocol
from grader.sandbox.protocol import (
    KERNEL_COMPILE_ERROR,
    KERNEL_REFUSED,
    NOTEBOOK_FAILED,
    WORKER_CRASHED,
    encode_reply,
)
from grader.suites import limit_hits
from grader.suites.errors import (
    KernelRefused,
    MissingFunction,
    NotebookFailed,
    NotPlainResult,
    StudentError,
    WorkerCrashed,
    WorkerTimeout,
    grader_error,
    make_error,
    malformed,
)
from grader.suites.inprocess import PTX_DEFERRED, ChildWorker, InProcessBackend
from grader.suites.kernels import Launch
from grader.suites.launches import dims, finding_failure, outputs, same_array, signature
from grader.suites.replay import RecordRefused, Relation, Replay

__all__ = [
    "Backend",
    "Function",
    "InProcessBackend",
    "KernelRefused",
    "Launch",
    "MissingFunction",
    "NotPlainResult",
    "NotebookFailed",
    "Outcome",
    "Student",
    "StudentError",
    "WorkerCrashed",
    "WorkerTimeout",
    "ChildWorker",
    "encode_reply",
    "grader_error",
    "make_error",
    "malformed",
    "same_array",
]


class Backend(Protocol):
    """Where student code runs. Every method returns a decoded reply dict or data."""

    def request(self, req: dict, timeout: float) -> dict: ...

    def kernel(self, req: dict, timeout: float, target: str = "run") -> dict: ...

    def graded_source(self, assignment: str) -> str: ...

    def read_back(self, path: str, max_bytes: int) -> bytes | None: ...

    def list_back(self, path: str) -> list[str]: ...

    def close(self) -> None: ...


# Each test gets a Student of its own; the same notebook's kernel is extracted once per process
# (keyed on the whole graded source: a KernelSource is frozen, a refusal is raised again).
_extract = functools.lru_cache(maxsize=256)(kernel_source.extract)


class Student:
    """What tests call. Attribute access names a function or kernel of the notebook."""

    def __init__(
        self,
        backend: Backend,
        assignment_id: str,
        call_timeout: float = 30.0,
        kernel_timeout: float = 60.0,
        cc: tuple[int, int] = (7, 5),
        memory: list | None = None,
        limits: Limits | None = None,
        limit_source: Callable[[str], str] | None = None,
    ):
        """`limits`: the assignment's (`Course.limits_for`), whose call and kernel timeouts
        then replace the two given; `limit_source` says where course.toml sets a key of them
        (`Course.limit_source`), for the feedback of a failure that hit one."""
        self._backend = backend
        # where profiled launches are kept for the result (`grader.suites.memory`); None: nowhere
        self._memory = memory
        self._assignment_id = assignment_id
        if limits is not None:
            call_timeout, kernel_timeout = limits.call_timeout_s, limits.kernel_timeout_s
        self._call_timeout = call_timeout
        self._kernel_timeout = kernel_timeout
        self._limits = limits
        self._limit_source = limit_source or (lambda key: f"[limits] {key} in course.toml")
        self._cc = cc
        self._sources: dict[str, kernel_source.KernelSource | StudentError] = {}
        self._compiled: dict[tuple[str, str], str | StudentError | None] = {}
        self._launch_checks: dict[tuple[str, str], bool] = {}
        # the graded names this test called, launched or compiled, in order (a result's
        # `functions`); a bare attribute read is not a use (hypothesis probes every object)
        self.touched: dict[str, None] = {}

    def __getattr__(self, name: str) -> Function:
        if name.startswith("_"):
            raise AttributeError(name)
        return Function(self, name)

    def has(self, name: str) -> bool:
        return bool(self._ask({"op": "has", "name": name}, self._call_timeout, name))

    def read_file(self, path: str) -> str | None:
        """Text of a file the student's code wrote, relative to its working directory, read by
        the trusted process (size-capped, no links followed, regular files only)."""
        try:
            data = self._backend.read_back(path, READ_MAX_BYTES)
        except ReadBackError as exc:
            raise grader_error("ReadBack", str(exc), "read_file") from None
        return None if data is None else data.decode("utf-8", errors="replace")

    def list_dir(self, path: str = ".") -> list[str]:
        """Names in a directory of the student's working directory, listed by the trusted side."""
        try:
            return self._backend.list_back(path)
        except ReadBackError as exc:
            raise grader_error("ReadBack", str(exc), "list_dir") from None

    def _ask(self, req: dict, timeout: float, name: str) -> Any:
        reply = self._backend.request({"assignment": self._assignment_id, **req}, timeout)
        if "error" in reply:
            raise self._error(reply["error"], name, "call_timeout_s")
        return reply["ok"]

    def _error(self, error: dict, name: str, request_limit: str) -> StudentError:
        """The exception of an error reply, its words naming a `[limits]` key it hit
        (`grader.suites.limit_hits`); `request_limit`: the timeout key of the request."""
        said = limit_hits.explained(
            error, self._assignment_id, self._limits, self._limit_source, request_limit
        )
        return make_error(said, name)

    # ---- kernels, from the source

    def _source(self, name: str) -> kernel_source.KernelSource:
        if name not in self._sources:
            try:
                text = self._backend.graded_source(self._assignment_id)
                smap = self._source_map()
                self._sources[name] = _extract(text, name, smap.file, smap.where)
            except kernel_source.KernelSourceError as exc:
                self._sources[name] = grader_error(KERNEL_REFUSED, str(exc), name)
            except Exception as exc:  # noqa: BLE001 - an unreadable notebook is the student's
                self._sources[name] = grader_error(
                    NOTEBOOK_FAILED, f"the notebook cannot be read for {name}: {exc}", name
                )
        found = self._sources[name]
        if isinstance(found, StudentError):
            raise found
        return found

    def _launches_in_body(self, function: str, kernel: str) -> bool:
        """Whether `function` launches `kernel` in its own body (the source parsed once)."""
        key = (function, kernel)
        if key not in self._launch_checks:
            text = self._backend.graded_source(self._assignment_id)
            self._launch_checks[key] = kernel_source.launches(text, function, kernel)
        return self._launch_checks[key]

    def _source_map(self) -> sourcemap.SourceMap:
        """Lines as the student's own file numbers them (a backend that cannot tell: as lines
        of the graded cells)."""
        find = getattr(self._backend, "source_map", None)
        return find(self._assignment_id) if find else sourcemap.plain(self._assignment_id)

    def _kernel_req(self, op: str, name: str, **extra: Any) -> dict:
        return protocol.kernel_request(op, self._source(name), **extra)

    def _ptx(self, name: str, signature: str, cc: tuple[int, ...]) -> str | None:
        """PTX for the course GPU, compiled once per signature; a failure is cached too. None:
        the in-process backend has no compiler, so the check waits for grading (`PTX_DEFERRED`)."""
        key = (name, f"{signature}@{cc[0]}.{cc[1]}")
        if key not in self._compiled:
            req = protocol.compile_request(self._source(name), signature, cc)
            reply = self._backend.kernel(req, self._kernel_timeout, "compile")
            if "ok" in reply and isinstance(reply["ok"], str):
                self._compiled[key] = reply["ok"]
            elif "ok" in reply:
                self._compiled[key] = malformed("PTX that is not text", name)
            elif reply["error"].get("origin") == protocol.ORIGIN:
                deferred = reply["error"].get("type") == PTX_DEFERRED
                self._compiled[key] = (
                    None if deferred else self._error(reply["error"], name, "kernel_timeout_s")
                )
            elif reply["error"].get("type") != KERNEL_COMPILE_ERROR:
                err = reply["error"]
                self._compiled[key] = grader_error(
                    WORKER_CRASHED,
                    f"the grader's kernel compiler failed on {name} ({err.get('type')}: "
                    f"{str(err.get('message', ''))[-800:]}); this is the grader's fault, not "
                    "yours: tell the course staff",
                    name,
                )
            else:
                err = reply["error"]
                self._compiled[key] = grader_error(
                    KERNEL_REFUSED,
                    f"{name} does not compile for the course GPU (compute capability "
                    f"{cc[0]}.{cc[1]}, {signature}): "
                    f"{excerpt(str(err.get('message', '')))}. A GPU accepts only what Numba "
                    "compiles (numbers and arrays, no lists, dicts, strings or numpy calls "
                    "inside a kernel), so the kernel earns none of its points",
                    name,
                )
        found = self._compiled[key]
        if isinstance(found, StudentError):
            raise found
        return found

    def _launch(self, name: str, grid: Any, block: Any, args: list) -> list:
        """Launch the kernel compiled from the source on the trusted side's kernel worker; the
        outputs (arrays copied back, None for scalars), checked against the arguments."""
        grid, block = dims(grid, "grid"), dims(block, "block")
        self._ptx(name, signature(args, name), self._cc)  # the GPU compiler goes first
        req = self._kernel_req("kernel_launch", name, grid=grid, block=block, args=list(args))
        reply = self._backend.kernel(req, self._kernel_timeout, "run")
        if "error" in reply:
            raise self._error(reply["error"], name, "kernel_timeout_s")
        if isinstance(reply["ok"], dict):  # compute-sanitizer's findings, not outputs
            raise finding_failure(reply["ok"], self._source(name), self._source_map(), name)
        return outputs(reply["ok"], args, name)


class Outcome:
    """One call of a `Function.many` batch: `get()` returns what it returned or raises the
    `StudentError` it raised, as a single call would have."""

    def __init__(self, reply: dict, function: str):
        self._reply, self._function = reply, function

    def get(self) -> Any:
        if "error" in self._reply:
            raise make_error(self._reply["error"], self._function)
        return self._reply["ok"]


class Function:
    """A named function or kernel of the submission."""

    def __init__(self, student: Student, name: str):
        self._student = student
        self.name = name

    def _use(self) -> None:
        """This test uses the function (`Student.touched`)."""
        self._student.touched[self.name] = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._use()
        s = self._student
        req = {"op": "call", "name": self.name, "args": list(args), "kwargs": kwargs}
        return s._ask(req, s._call_timeout, self.name)

    def many(self, calls: Sequence[tuple[Sequence[Any], Mapping[str, Any]]]) -> list[Outcome]:
        """Call the function once per ``(args, kwargs)`` of `calls`, all in one request.

        For property tests that call a cheap function a thousand times: one round trip to the
        worker instead of one per call, and the batch shares one call's time limit. Each
        `Outcome` is what that call returned or raised, so a failure costs only its own entry.
        A batch that fails as a whole (the notebook, a timeout, a crash) raises here.
        """
        self._use()
        s = self._student
        if len(calls) > protocol.MAX_BATCH_CALLS:
            raise ValueError(f"at most {protocol.MAX_BATCH_CALLS} calls per batch")
        batch = [{"args": list(a), "kwargs": dict(k)} for a, k in calls]
        req = {"op": "call_many", "name": self.name, "calls": batch}
        replies = s._ask(req, s._call_timeout, self.name)
        if not (
            isinstance(replies, list)
            and len(replies) == len(calls)
            and all(protocol.valid_reply(r) for r in replies)
        ):
            raise malformed("a batch whose replies do not match its calls", self.name)
        return [Outcome(r, self.name) for r in replies]

    def __getitem__(self, dims: Any) -> Launch:
        self._use()
        if not (isinstance(dims, tuple) and len(dims) == 2):
            raise TypeError("launch a kernel as student.kernel[blocks, threads_per_block](...)")
        return Launch(self, dims[0], dims[1])

    def ptx(self, signature: str, cc: tuple[int, int] | None = None) -> str:
        """PTX text for `signature` on the course GPU (raises StudentError if it won't compile)."""
        self._use()
        s = self._student
        ptx = s._ptx(self.name, signature, tuple(cc or s._cc))
        if ptx is None:
            pytest.skip(compiler.DEFERRED)
        return ptx

    def launching(
        self,
        *kernels: str,
        returns: Callable[[np.ndarray], Any] | None = None,
        rtol: float = 0.0,
        atol: float = 0.0,
    ) -> Callable[..., Any]:
        """This host wrapper, credited only for a result its launches of `kernels` produced.

        The wrapper must launch them in its own body (``kernel[grid, block](...)``, checked in
        the source) and does so at least once: while it runs, each kernel name resolves to a
        recorder that logs what each launch was given. Every logged launch is then replayed
        here with the kernel compiled from the source, on the test's own inputs and on fresh
        poisoned outputs (`grader.suites.replay`), and the wrapper's returned value must follow
        from what those launches wrote: by default an array they wrote, or a number that is the
        one element of an array they wrote. `returns` states another relation: the value that
        follows from one array the kernels wrote (for a reduction whose host adds the partial
        sums: ``returns=np.sum``), None for an array it cannot be; the returned value must
        equal it within `rtol` and `atol` (`grader.suites.replay.Replay.produced`).
        """
        self._use()

        def call(*args: Any, **kwargs: Any) -> Any:
            s = self._student
            text = s._backend.graded_source(s._assignment_id)
            if kernel_source.is_stub(text, self.name):
                raise grader_error(KERNEL_REFUSED, still_stub(self.name), self.name)
            value, launches = self._recorded(kernels, args, kwargs, timing=False)
            if not launches:
                raise grader_error(
                    KERNEL_REFUSED,
                    f"{self.name} returned without launching {' or '.join(kernels)}; compute "
                    "the result on the device with the kernel, not on the host",
                    self.name,
                )
            replay = self._replay(launches, args, kwargs)
            relation = Relation(returns, rtol, atol)
            if not replay.produced(value, relation):
                shown = "; ".join(self._shown(e) for e in launches)
                what = (
                    "an array that is not what its launches"
                    if isinstance(value, np.ndarray)
                    else "a value that does not follow from what its launches"
                )
                raise grader_error(
                    KERNEL_REFUSED,
                    f"{self.name} returned {what} ({shown}) write when the grader replays them "
                    "on the test's own inputs, every other array starting as NaN: "
                    f"{replay.closest(value, relation)}. "
                    "The result must come from the kernel launch itself (an output filled on "
                    "the host before the launch, or a result computed with numpy, earns "
                    "nothing)",
                    self.name,
                )
            return value

        return call

    def timing(self, *kernels: str) -> Callable[..., Any]:
        """This timing function, credited only when the trusted side's launch record shows it
        launched each of the student's `kernels` (a constant earns nothing).

        The launches are recorded like a wrapper's (`launching`), but the timed loop is left
        alone: no copy, no synchronize; the first few launches are logged, the rest run. Nothing
        is replayed: a timing function returns no array to compare, and on a GPU runner the
        trusted side times the same kernels itself.
        """
        self._use()

        def call(*args: Any, **kwargs: Any) -> Any:
            value, launches = self._recorded(kernels, args, kwargs, timing=True)
            missing = [k for k in kernels if not any(e["kernel"] == k for e in launches)]
            if missing:
                shown = repr(value) if type(value) in (int, float) else type(value).__name__
                raise grader_error(
                    KERNEL_REFUSED,
                    f"{self.name} returned {shown} without launching "
                    f"{' or '.join(missing)}; a timing function earns its points by timing "
                    "the kernels themselves",
                    self.name,
                )
            return value

        return call

    def _recorded(
        self, kernels: tuple[str, ...], args: tuple, kwargs: dict, timing: bool
    ) -> tuple[Any, list[dict]]:
        """Call this function with launches of `kernels` recorded: (its value, the record)."""
        s = self._student
        for k in kernels:
            s._source(k)  # refused kernels and unreadable notebooks raise here
        for k in kernels:
            if not s._launches_in_body(self.name, k):
                raise grader_error(
                    KERNEL_REFUSED,
                    f"{self.name} does not launch {k} in its own body ({k}[blocks, "
                    f"threads](...)); it earns its points by launching {k}",
                    self.name,
                )
        req = {
            "op": "call",
            "name": self.name,
            "args": list(args),
            "kwargs": kwargs,
            "record": list(kernels),
            "timing": timing,
        }
        out = s._ask(req, s._call_timeout, self.name)
        if not (
            isinstance(out, dict)
            and set(out) == {"value", "launches"}
            and isinstance(out["launches"], list)
        ):
            raise malformed("a wrapper reply without its launch record", self.name)
        if len(out["launches"]) > protocol.MAX_RECORDED_LAUNCHES:  # the harness cap, kept here
            raise malformed("a launch record longer than the harness keeps", self.name)
        for entry in out["launches"]:
            if not (
                isinstance(entry, dict)
                and set(entry) == {"kernel", "grid", "block", "args"}
                and entry["kernel"] in kernels
                and isinstance(entry["args"], list)
            ):
                raise malformed("a launch record of the wrong shape", self.name)
        return out["value"], out["launches"]

    @staticmethod
    def _shown(entry: dict) -> str:
        return f"{entry['kernel']}[{entry['grid']!r}, {entry['block']!r}]"

    def _replay(self, launches: list[dict], args: tuple, kwargs: dict) -> Replay:
        """Replay `launches` in order on the test's data; a record naming anything else, or a
        replay that fails, earns nothing."""
        s = self._student
        replay = Replay(self.name, args, kwargs)
        for n, entry in enumerate(launches, 1):
            k = entry["kernel"]
            where = f"launch {n} ({self._shown(entry)}) made by {self.name}"
            try:
                replay.launched(
                    entry,
                    n,
                    lambda a, e=entry: s._launch(e["kernel"], e["grid"], e["block"], a),  # type: ignore[misc]
                )
            except RecordRefused as exc:
                raise grader_error(
                    KERNEL_REFUSED,
                    f"the launch record of {self.name} names something that is not one of the "
                    f"test's input arrays nor a fresh output ({exc}), so it earns nothing: "
                    f"launch {k} on the arrays {self.name} was given (or device copies of "
                    "them) and on arrays it allocates",
                    self.name,
                ) from None
            except KernelRefused:
                raise
            except StudentError as exc:
                raise grader_error(
                    KERNEL_REFUSED, f"replaying {where} failed: {exc.feedback()}", self.name
                ) from None
        return replay

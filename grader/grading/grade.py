"""Grading one submission: intake, sandboxed suites, late policy, one typed result.

This is the trusted process. Student code runs only behind the worker backend; what comes back
is data, and the verdicts are the suites' asserts here.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import platform
import re
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from datetime import datetime
from pathlib import Path
from typing import Any

from grader import __version__
from grader.core import compiler, device, parse_lock, points, sourcemap
from grader.core.course import Course, Limits, load_course
from grader.core.errors import InfrastructureError
from grader.core.feedback import EXCERPT_CHARS, clip
from grader.core.preflight import gpu_preflight
from grader.core.results import AssignmentResult, Environment, GradeResult
from grader.core.staff import Staff
from grader.grading.finalize import finalize, late
from grader.grading.intake import Intake, prepare
from grader.sandbox import Budget, KernelWorkers, WorkerBackend, kernel_workers, protocol
from grader.sandbox.isolation import Decision, decide
from grader.suites.runner import run_assignment, suite_dirs
from grader.suites.student import Backend, InProcessBackend

COMPILE_OUTPUT_CHARS = 600  # of the compile worker's output in a refusal


class GradingBackend:
    """The worker backend as grading uses it.

    A broken assignment answers every request with its intake error, and a function that timed
    out once is not called again in this submission: a hang costs that function's tests, not
    a timeout for each of them.
    """

    def __init__(self, inner: Backend, errors: dict[str, str]) -> None:
        self.inner, self.errors = inner, errors
        self.isolation = getattr(inner, "isolation", ())
        self.timed_out: dict[tuple[str, str], str] = {}
        # Once per grading, in this process: the graded source of each notebook (the worker
        # cannot write the submission's files) and each compile, keyed on the whole request
        # (the extracted source, its device functions, the signature and the target GPU).
        self._sources: dict[str, str] = {}
        self.compiled: dict[str, dict] = {}
        self._warming: list[threading.Thread] = []
        self._warming_ptx: list[threading.Thread] = []
        # Set by `check_compiler` when the compile probe failed: the grading is refused.
        self.refusal: compiler.PtxCompilerMissing | None = None

    def warm(
        self,
        assignments: list[str],
        ptx_assignments: list[str],
        compiler_timeout: float = 0.0,
        early: EarlyKernels | None = None,
    ) -> None:
        """Start the sandboxed workers and run the notebooks in the background while this
        process imports pytest and collects the suites. The worker and its PTX sibling warm up
        in threads of their own: a call waits only for the worker, a kernel for both. With a
        `compiler_timeout`, the PTX thread then runs the compile probe (`check_compiler`), so
        every kernel request, which waits for that thread, comes after the probe. `early`: the
        kernel workers are already starting there; the PTX thread waits for them instead."""
        warm = getattr(self.inner, "warm", None)
        if warm is None:
            return
        ok = [a for a in assignments if a not in self.errors]
        ptx = [a for a in ptx_assignments if a in ok]

        def warm_kernels() -> None:
            if early is not None:
                early.started.join()
            if ptx:
                warm([], ptx)  # starts nothing that `early` started
                if compiler_timeout > 0:
                    self.check_compiler(compiler_timeout)

        self._warming = [threading.Thread(target=warm, args=(ok, []), daemon=True)]
        kernels = ptx or early is not None  # a kernel request also waits for `early`'s start
        self._warming_ptx = [threading.Thread(target=warm_kernels, daemon=True)] if kernels else []
        for t in self._warming + self._warming_ptx:
            t.start()

    def check_compiler(self, timeout: float) -> None:
        """The compile probe, straight to the compile worker; a failure sets `refusal`."""
        probe = protocol.compile_request(compiler.probe_source(), compiler.PROBE_SIGNATURE, (7, 5))
        reason = compiler.missing_reason(self.inner.kernel(probe, max(timeout, 120.0), "compile"))
        if reason is not None:
            self.refusal = compiler.refusal(reason + self._compile_output())

    def _compile_output(self) -> str:
        """What the compile worker last printed (why NVVM or numba failed to load, say), for the
        refusal; no student code has reached that worker before the probe. '' when none."""
        worker = getattr(self.inner, "kernel_worker", None)
        if worker is None:
            return ""
        text = worker("compile").output_tail()
        text = "".join(c if c.isprintable() or c == "\n" else "?" for c in text).strip()
        text = text[-COMPILE_OUTPUT_CHARS:]
        return f" (the compile worker's last output: {text})" if text else ""

    def raise_refusal(self) -> None:
        """Raise `refusal` (`PtxCompilerMissing`) once the probe has run and failed."""
        self._wait(ptx=True)
        if self.refusal is not None:
            raise self.refusal

    def _wait(self, ptx: bool = False) -> None:
        for t in self._warming + (self._warming_ptx if ptx else []):
            t.join()

    def _error(self, assignment: str) -> dict:
        return protocol.trusted_error(protocol.NOTEBOOK_FAILED, self.errors[assignment])

    def _not_run(self, key: tuple[str, str]) -> dict:
        message = f"not run: {self.timed_out[key]} in an earlier test"
        return protocol.trusted_error(protocol.WORKER_TIMEOUT, message)

    def request(self, req: dict, timeout: float) -> dict:
        self._wait()
        if req.get("assignment") in self.errors:
            return self._error(req["assignment"])
        key = (str(req.get("assignment")), str(req.get("name", "")))
        if key in self.timed_out:
            return self._not_run(key)
        reply = self.inner.request(req, timeout)
        error: Any = reply.get("error") if isinstance(reply, dict) else None
        trusted = bool(error) and error.get("origin") == protocol.ORIGIN
        if trusted and error.get("type") == protocol.WORKER_TIMEOUT and key[1]:
            self.timed_out[key] = error.get("message", "it timed out")
        return reply

    def source_map(self, assignment: str) -> sourcemap.SourceMap:
        find = getattr(self.inner, "source_map", None)
        return find(assignment) if find else sourcemap.plain(assignment)

    def kernel(self, req: dict, timeout: float, target: str = "run") -> dict:
        self._wait(ptx=True)
        if self.refusal is not None:  # the grading is refused: no kernel runs to be discarded
            return protocol.trusted_error(protocol.PROTOCOL_ERROR, f"not run: {self.refusal}")
        key = ("kernel", str(req.get("name", "")))
        if key in self.timed_out:
            return self._not_run(key)
        if target == "compile":  # the compile worker serves compile requests alone
            cache_key = json.dumps(req, sort_keys=True)
            if cache_key not in self.compiled:
                self.compiled[cache_key] = self._kernel(req, timeout, target, key)
            return copy.deepcopy(self.compiled[cache_key])
        return self._kernel(req, timeout, target, key)

    def _kernel(self, req: dict, timeout: float, target: str, key: tuple[str, str]) -> dict:
        reply = self.inner.kernel(req, timeout, target)
        error: Any = reply.get("error") if isinstance(reply, dict) else None
        timeout_ = (
            error
            and error.get("origin") == protocol.ORIGIN
            and error["type"] == protocol.WORKER_TIMEOUT
        )
        if timeout_ and key[1]:
            self.timed_out[key] = error.get("message", "it timed out")
        return reply

    def cell_warnings(self, assignment: str, timeout: float) -> list[str]:
        """One warning per cell of the notebook that failed to run (the worker's own account:
        words for the student, never a verdict; the tests' verdicts already counted them)."""
        if assignment in self.errors:
            return []
        reply = self.request({"assignment": assignment, "op": "cells"}, timeout)
        cells = reply.get("ok") if isinstance(reply, dict) else None
        if not isinstance(cells, list):
            return []
        out = []
        for c in cells[:MAX_CELL_WARNINGS]:
            if not isinstance(c, dict):
                continue
            what = f"{c.get('where')} failed to run: {c.get('type')}: {c.get('message')}"
            cost = (
                "what it defines scores 0; the rest of the notebook was graded"
                if c.get("graded")
                else "a cell the grader does not grade, so it costs nothing by itself"
            )
            out.append(clip(f"{assignment}: {what} ({cost})", EXCERPT_CHARS))
        return out

    def graded_source(self, assignment: str) -> str:
        if assignment in self.errors:
            raise ValueError(self.errors[assignment])
        if assignment not in self._sources:
            self._sources[assignment] = self.inner.graded_source(assignment)
        return self._sources[assignment]

    def read_back(self, path: str, max_bytes: int) -> bytes | None:
        return self.inner.read_back(path, max_bytes)

    def list_back(self, path: str) -> list[str]:
        return self.inner.list_back(path)

    def close(self) -> None:
        self._wait(ptx=True)
        self.inner.close()


MAX_CELL_WARNINGS = 20  # per assignment: a notebook of broken cells is summed up, not listed
_COMPILES = re.compile(r"\.ptx\(|\.launching\(|student\.\w+\[")


def _compiles_ptx(root: Path, assignment: str) -> bool:
    """Whether the suites of `assignment` compile kernels to PTX (so the PTX worker is needed):
    a ``.ptx(`` call, or a launch (every launch is compiled for the course GPU first)."""
    return any(
        _COMPILES.search(p.read_text(encoding="utf-8", errors="replace"))
        for d in suite_dirs(root, assignment)
        for p in sorted(d.rglob("*.py"))
    )


PHASES = (("public",), ("hidden",))  # every assignment's public suites, then the hidden ones
NO_SUITES = "no test suites found"  # run_assignment's error for a run with no suite folder
HIDDEN_OUTPUT = " (the hidden suites' output is not shown; `grader grade` shows it to the staff)"


def _run_suites(
    root: Path,
    ids: list[str],
    work: Path,
    intake: Intake,
    backend: GradingBackend,
    course: Course,
    student: str | None,
    warnings: list[str],
) -> list[AssignmentResult]:
    """The suites of `ids` on one set of workers: the public suites of every assignment, then
    the cell warnings (the worker's own account, shown under every feedback policy), then the
    hidden suites. Nothing a hidden test gives the student's code can reach what is shown
    before the hidden feedback is due (docs/PRIVACY.md): student state lives on in the worker
    (a list in `builtins`, a file in its scratch), but every public test, and every word the
    worker says that is shown anyway, comes before the first hidden call. One result per
    assignment, its public tests first (`merge_phases`)."""
    phases: list[dict[str, AssignmentResult]] = []
    for n, suites in enumerate(PHASES):
        if n == 1:  # between the phases: the last thing the worker says before a hidden call
            for a in ids:
                warnings += backend.cell_warnings(a, course.limits_for(a).call_timeout_s)
        done: dict[str, AssignmentResult] = {}
        for a in ids:
            if n == 1 and not suite_dirs(root, a, suites) and a in phases[0]:
                continue  # no hidden suites: the public run's result is the assignment's
            try:
                done[a] = run_assignment(
                    root,
                    a,
                    work / "exercises",
                    intake.metrics_path,
                    suites=suites,
                    backend=backend,
                    course=course,
                    identity=student or intake.digest,
                )
            except InfrastructureError as exc:
                if n == 0:
                    raise
                raise _hidden_refusal(exc, a) from None
            backend.raise_refusal()  # a failed probe: nothing graded is returned
            error = done[a].error
            if n == 1 and error:  # pytest's own output of the hidden run names hidden tests
                done[a].error = error.split(":", 1)[0] + HIDDEN_OUTPUT
        phases.append(done)
    return [merge_phases([p[a] for p in phases if a in p]) for a in ids]


def _hidden_refusal(exc: InfrastructureError, assignment: str) -> InfrastructureError:
    """A refusal a hidden test raised (an impossible time), its detail, which names what the
    test measured, replaced: the "not graded" comment is public (docs/PRIVACY.md)."""
    exc.detail = (
        f"It happened in a hidden test of {assignment}; what that test measured is not shown "
        "here. Staff: grade this commit with `grader grade` to see it, and rerun "
        "`make gpu-check`."
    )
    exc.args = (f"{exc.headline}\n{exc.detail}",)
    return exc


def merge_phases(parts: Sequence[AssignmentResult]) -> AssignmentResult:
    """One assignment's result from its public and its hidden runs (in that order): the tests
    and memory profiles in order, the points added; a run that found no suites adds nothing."""
    found = [p for p in parts if p.tests or not (p.error or "").startswith(NO_SUITES)]
    found = found or list(parts[:1])
    first = found[0]
    tests = [t for p in found for t in p.tests]
    score = points.total(t.score for t in tests)
    errors = [p.error for p in found if p.error]
    return dataclasses.replace(
        first,
        score=score,
        raw_score=score,
        max_score=points.total(t.max_score for t in tests) if tests else first.max_score,
        error="; ".join(errors) if errors else None,
        tests=tests,
        memory=[m for p in found for m in p.memory],
    )


def apply_late_policy(result: AssignmentResult, course: Course, submitted: datetime | None) -> None:
    """Take the late penalty off (the course's due date; `finalize` adds the staff's data)."""
    late(result, course.assignment(result.id).due, submitted, course)


class EarlyKernels:
    """The kernel workers, started as soon as the isolation decision is in, while intake reads
    the submission: they load no notebook, on a scratch directory of their own
    (`grader.sandbox.kernel_workers`), so nothing they need waits for intake. `workers` is set
    (made, not yet started) before `made` is; None when the decision refused, which the
    grading raises itself. A `WorkerBackend` takes them with `budget` and the same decision."""

    def __init__(
        self, workdir: Path, limits: Limits, gpu: bool, decided: Callable[[], Decision | None]
    ) -> None:
        self.budget = Budget(limits.submission_timeout_s)
        self.workers: KernelWorkers | None = None
        self.made = threading.Event()
        self.started = threading.Thread(
            target=self._run, args=(workdir, limits, gpu, decided), name="kernels", daemon=True
        )
        self.started.start()

    def _run(
        self, workdir: Path, limits: Limits, gpu: bool, decided: Callable[[], Decision | None]
    ) -> None:
        try:
            decision = decided()
            if decision is None:
                return
            # the same sandbox as the backend's own kernel workers would get, on another folder
            self.workers = kernel_workers(workdir, limits, decision, self.budget, gpu=gpu)
        except BaseException:  # noqa: BLE001 - the grading raises a refusal itself; otherwise
            return  # the backend makes its own kernel workers, as without this
        finally:
            self.made.set()
        self.workers.start()

    def for_backend(self, decision: Decision | None) -> KernelWorkers | None:
        """The workers, when they are under `decision` (the grading's); else None."""
        self.made.wait()
        if self.workers is not None and self.workers.shared.decision is decision:
            return self.workers
        return None

    def close(self) -> None:
        self.started.join()
        if self.workers is not None:
            self.workers.close()


def _decide_in_background(allow_incomplete: bool) -> Future[Decision]:
    """`decide` in a thread: its probe is a sandboxed process of its own (0.2-0.4 s)."""
    future: Future[Decision] = Future()

    def run() -> None:
        try:
            future.set_result(decide(allow_incomplete))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, which raises it
            future.set_exception(exc)

    threading.Thread(target=run, name="isolation-probe", daemon=True).start()
    return future


def grade_submission(
    submission: Path,
    root: Path | None = None,
    student: str | None = None,
    assignments: Sequence[str] | None = None,
    timestamp: datetime | None = None,
    sandbox: bool = True,
    course: Course | None = None,
    allow_incomplete_isolation: bool = False,
    decision: Decision | None = None,
    staff: Staff | None = None,
) -> GradeResult:
    """Grade a fork-shaped directory (`exercises/**`, `metrics.json`) against the course at root.

    Assignments graded under the same limits (`Course.limit_groups`: most courses have one
    group) share one grading's workers and time budget; an assignment whose `[assignments.limits]`
    differ is graded by workers of its own, under its own limits and budget, so its grade does
    not depend on what it was graded with. The groups' results are merged in course order.
    See `_grade_group` for one group. `staff`: the staff's data (grader.core.staff), applied
    last (`grader.grading.finalize`): the student's extensions in the late policy, then the
    overrides.
    """
    parse_lock.install()  # this grading's threads parse Python at once (CPython 3.11's race)
    course = course or load_course(root)
    ids = list(assignments or course.assignment_ids)
    for a in ids:
        course.assignment(a)
    groups = [group for _, group in course.limit_groups(ids)]
    if len(groups) > 1 and sandbox and decision is None:  # one decision for every group
        decision = decide(allow_incomplete_isolation)
    parts = [
        _grade_group(
            Path(submission),
            course,
            group,
            student=student,
            timestamp=timestamp,
            sandbox=sandbox,
            allow_incomplete_isolation=allow_incomplete_isolation,
            decision=decision,
        )
        for group in groups
    ]
    result = parts[0] if len(parts) == 1 else merge_results(parts, ids)
    # the late policy (the student's due date), then the staff's overrides
    return finalize(result, course, staff)


def merge_results(parts: Sequence[GradeResult], ids: Sequence[str]) -> GradeResult:
    """One result from the gradings of groups of one submission's assignments: the assignments
    in the order of `ids`, each warning once, the scores added, the durations too."""
    first = parts[0]
    by_id = {a.id: a for part in parts for a in part.assignments}
    results = [by_id[a] for a in ids if a in by_id]
    warnings = list(dict.fromkeys(w for part in parts for w in part.warnings))
    return dataclasses.replace(
        first,
        score=points.total(r.score for r in results),
        max_score=points.total(r.max_score for r in results),
        assignments=results,
        warnings=warnings,
        duration_s=round(sum(part.duration_s for part in parts), 3),
    )


def _grade_group(
    submission: Path,
    course: Course,
    ids: list[str],
    *,
    student: str | None,
    timestamp: datetime | None,
    sandbox: bool,
    allow_incomplete_isolation: bool,
    decision: Decision | None,
) -> GradeResult:
    """`grade_submission` for assignments that share their limits (`Course.limits_for`).

    `timestamp` is the trusted submission time for the late policy (from CI, never from a
    commit). `sandbox=False` runs student code in this process: only for a student's own check.
    Sandboxed on a GPU, the GPU preflight runs first and raises GpuUnavailable (an
    InfrastructureError) when the GPU does not work: nothing is graded, nothing recorded.
    With the sandbox, grading fails closed (`IsolationRefused`) unless every required isolation
    layer holds; `allow_incomplete_isolation` grades anyway and marks the result not
    authoritative. `decision` is the caller's own (`grader.sandbox.isolation.decide`), when it
    decided before grading (to say "not graded" its own way): then it is the one used.

    `student` keys the suites' draws (`grader.suites.seeds`); without it the submission's
    digest does, so an unnamed submission is graded the same wherever it is graded.

    Long because the order of its steps (isolation decision, GPU preflight, intake, worker
    warm-up and compile probe, suites, late policy) is the fail-closed story and reads best in
    one place.
    """
    started = time.perf_counter()
    limits = course.limits_for(ids[0])
    # decided once for the grading and handed to every worker it starts; the probe runs while
    # this process loads the course and reads the submission (no student code runs meanwhile)
    deciding = (
        _decide_in_background(allow_incomplete_isolation) if sandbox and decision is None else None
    )
    with tempfile.TemporaryDirectory(prefix="grade-") as scratch, contextlib.ExitStack() as stack:
        early: EarlyKernels | None = None
        try:
            root = course.root
            gpu = device.has_gpu()
            # before any student code runs: a broken GPU stops the grading (InfrastructureError)
            check = gpu_preflight() if sandbox and gpu else None
            compiles = [a for a in ids if _compiles_ptx(root, a)]
            if sandbox and compiles:
                given = decision
                decided = deciding.result if deciding is not None else lambda: given
                early = EarlyKernels(Path(scratch) / "kernels", limits, gpu, decided)
                stack.callback(early.close)
            work = Path(scratch) / "work"
            intake = prepare(Path(submission), work, course, root / "exercises", assignments=ids)
        finally:  # the decision first: a refusal (IsolationRefused) replaces any other failure
            if deciding is not None:
                decision = deciding.result()
        decision = decision if sandbox else None
        inner: Backend
        if sandbox:
            kernels = early.for_backend(decision) if early is not None else None
            budget = kernels.shared.budget if kernels is not None else None
            inner = WorkerBackend(
                work,
                intake.notebooks,
                limits,
                gpu=gpu,
                decision=decision,
                budget=budget,
                kernels=kernels,
            )
        else:
            inner = InProcessBackend(intake.notebooks)
        errors = {
            a: intake.errors.get(a) or f"no notebook found for {a}"
            for a in ids
            if a not in intake.notebooks
        }
        backend = GradingBackend(inner, errors)
        ptx = [a for a in compiles if a not in errors]
        if sandbox:  # the compile probe runs in the warm-up, before any graded kernel
            backend.warm(ids, ptx, limits.kernel_timeout_s, early)
        warnings = list(intake.warnings)
        try:
            results = _run_suites(root, ids, work, intake, backend, course, student, warnings)
            for res in results:
                if res.id in errors:
                    res.error = errors[res.id]
                nb = intake.notebooks.get(res.id)
                res.graded_file = str(nb.relative_to(work)) if nb else None
        finally:
            backend.close()
        isolation = list(getattr(inner, "isolation", ()))
    result = GradeResult(
        student=student or "student",
        score=points.total(r.score for r in results),
        max_score=points.total(r.max_score for r in results),
        environment=Environment(
            device=check.device if check else device.describe(),
            simulator=not gpu,
            isolation=isolation,
            grader_version=__version__,
            python=platform.python_version(),
            driver=check.driver if check else "",
            cuda=check.cuda if check else "",
            not_authoritative=decision.note if decision else "",
            bubblewrap=decision.probe.binary if decision else "",
        ),
        assignments=results,
        warnings=warnings,
        timestamp=timestamp.isoformat() if timestamp else None,
        submission_digest=intake.digest,
        duration_s=round(time.perf_counter() - started, 3),
    )
    return result

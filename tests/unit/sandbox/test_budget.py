"""A submission's one time budget (`grader.sandbox.budget`), shared by all its workers."""

from __future__ import annotations

import threading
import time

import pytest

from grader.core.course import Limits
from grader.sandbox import backend as sandbox_backend
from grader.sandbox import isolation, protocol
from grader.sandbox.budget import Budget

LIMITS = Limits(
    call_timeout_s=10,
    kernel_timeout_s=20,
    import_timeout_s=30,
    submission_timeout_s=5,
    memory_mb=2048,
    file_size_mb=64,
    open_files=256,
    processes=32,
)


def test_a_budget_charges_each_block_and_answers_once_spent():
    budget = Budget(2)
    assert budget.left == 2 and budget.deadline() <= time.monotonic() + 2
    with pytest.raises(RuntimeError), budget.charge():
        time.sleep(0.05)
        raise RuntimeError  # charged however the block ends
    assert 0.05 <= budget.spent < 0.5 and budget.left == 2 - budget.spent
    budget.spent = 3
    assert budget.left == 0
    spent = budget.spent_reply()["error"]
    assert spent["origin"] == protocol.ORIGIN and spent["type"] == protocol.WORKER_TIMEOUT
    assert spent["message"] == (
        "the submission's total time budget of 2 s is spent; nothing more was run"
    )
    assert budget.ran_out("loop")["error"]["message"] == (
        "loop ran out of the submission's total time budget of 2 s; the worker was stopped"
    )


def test_charges_from_threads_add_up():
    budget = Budget(100)

    def spend() -> None:
        with budget.charge():
            time.sleep(0.05)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert budget.spent >= 8 * 0.05


@pytest.fixture
def backend(tmp_path):
    work = tmp_path / "work"
    (work / "exercises" / "a").mkdir(parents=True)
    (work / "exercises" / "a" / "a.py").write_text("x = 1\n")
    decision = isolation.decide(allow_incomplete=True)
    b = sandbox_backend.WorkerBackend(
        work, {"a": work / "exercises/a/a.py"}, LIMITS, decision=decision
    )
    try:
        yield b
    finally:
        b.close()


def test_all_workers_of_a_submission_share_its_one_budget_and_decision(backend):
    workers = [backend.notebook_worker, *map(backend.kernel_worker, ("compile", "run"))]
    assert all(w.budget is backend.budget and w.decision is backend.decision for w in workers)
    assert backend.kernel_worker("run") is backend.kernel_worker("run")
    with pytest.raises(ValueError, match="unknown kernel target"):
        backend.kernel_worker("elsewhere")
    backend.budget.spent = LIMITS.submission_timeout_s  # spent, by whichever worker
    reply = backend.kernel({"op": "kernel_run", "name": "k"}, 10, "run")
    assert "is spent; nothing more was run" in reply["error"]["message"]
    reply = backend.request({"assignment": "a", "op": "call", "name": "f"}, 10)
    assert "is spent; nothing more was run" in reply["error"]["message"]
    assert [w.starts for w in workers] == [0, 0, 0]  # nothing started


def test_the_parallel_kernel_warm_up_charges_its_wall_time_once(backend, monkeypatch):
    started: list[str] = []

    def start(self: sandbox_backend.KernelWorker, budget_end: float) -> None:
        assert budget_end <= time.monotonic() + LIMITS.submission_timeout_s
        started.append(self.target)
        time.sleep(0.5)

    monkeypatch.setattr(sandbox_backend.KernelWorker, "start", start)
    backend.warm([], ["a"])
    assert sorted(started) == ["compile", "run"]
    assert 0.5 <= backend.budget.spent < 0.9  # once, not 1 s for the two


def test_kernel_workers_made_before_intake_join_the_backend_on_a_folder_of_their_own(tmp_path):
    # grading makes them while intake still reads the submission (`grader.grading.grade`)
    decision = isolation.decide(allow_incomplete=True)
    budget = Budget(LIMITS.submission_timeout_s)
    kernels = sandbox_backend.kernel_workers(tmp_path / "kernels", LIMITS, decision, budget)
    work = tmp_path / "work"
    (work / "exercises" / "a").mkdir(parents=True)
    (work / "exercises" / "a" / "a.py").write_text("x = 1\n")
    notebooks = {"a": work / "exercises/a/a.py"}
    with pytest.raises(ValueError, match="share the backend's budget and decision"):
        sandbox_backend.WorkerBackend(work, notebooks, LIMITS, decision=decision, kernels=kernels)
    b = sandbox_backend.WorkerBackend(
        work, notebooks, LIMITS, decision=decision, budget=budget, kernels=kernels
    )
    try:
        run = b.kernel_worker("run")
        assert run is kernels.get("run") and b.kernel_worker("compile") is kernels.get("compile")
        assert run.budget is b.budget is budget and run.decision is b.decision
        # nothing of the submission where the kernel workers run, and not inside its folder
        assert run.workdir == (tmp_path / "kernels").resolve() != b.notebook_worker.workdir
        assert sorted(p.name for p in run.workdir.iterdir()) == [".sandbox"]
    finally:
        b.close()

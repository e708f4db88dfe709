"""A failure that hit one of course.toml's [limits] says which key, its value, where it is set
and the assignment (grader.suites.limit_hits), never a bare RuntimeError."""

from __future__ import annotations

from dataclasses import replace

import pytest
from factories import course_tree

from grader.core.course import load_course
from grader.release.scaffold import _with_entry
from grader.sandbox.budget import Budget
from grader.sandbox.memlimit import LIMIT as MEMORY
from grader.sandbox.memlimit import kill_message
from grader.sandbox.protocol import WORKER_CRASHED, WORKER_TIMEOUT, timeout_message, trusted_error
from grader.suites.limit_hits import explained, limit_hit
from grader.suites.student import Student, StudentError, WorkerCrashed, WorkerTimeout

SLOW_ENTRY = """[[assignments]]
id = "slow_one"
title = "Slow"
notebook = "slow_one.ipynb"
due = "2027-01-01T00:00:00+00:00"
points = 1
needs_gpu = false
[assignments.limits]
kernel_timeout_s = 90
"""


def _error(reply: dict) -> dict:
    return reply["error"]


TIMEOUT = _error(trusted_error(WORKER_TIMEOUT, timeout_message("gpu_sum", 20)))
LOAD = _error(trusted_error(WORKER_TIMEOUT, "running the notebook took long", "import_timeout_s"))
MEMORY_KILL = _error(trusted_error(WORKER_CRASHED, kill_message(4096), MEMORY))
CRASH = _error(trusted_error(WORKER_CRASHED, "killed by signal 11 (SIGSEGV)"))
THREAD = {"type": "RuntimeError", "message": "tid=[62, 0, 0]: can't start new thread"}


@pytest.mark.parametrize(
    "error,request_limit,key",
    [
        (TIMEOUT, "call_timeout_s", "call_timeout_s"),
        (TIMEOUT, "kernel_timeout_s", "kernel_timeout_s"),
        (LOAD, "call_timeout_s", "import_timeout_s"),
        (_error(Budget(600).spent_reply()), "call_timeout_s", "submission_timeout_s"),
        (_error(Budget(600).ran_out("block_sum")), "kernel_timeout_s", "submission_timeout_s"),
        (MEMORY_KILL, "call_timeout_s", "memory_mb"),
        (CRASH, "call_timeout_s", None),
        (THREAD, "kernel_timeout_s", "processes"),
        ({"type": "OSError", "message": "[Errno 11] Resource temporarily unavailable"}, "", "processes"),  # noqa: E501
        ({"type": "MemoryError", "message": ""}, "call_timeout_s", "memory_mb"),
        ({"type": "OSError", "message": "[Errno 27] File too large"}, "", "file_size_mb"),
        ({"type": "OSError", "message": "[Errno 24] Too many open files"}, "", "open_files"),
        ({"type": "OSError", "message": "[Errno 28] No space left on device"}, "", "scratch_mb"),
        ({"type": "ValueError", "message": "can't start new thread"}, "", None),
        ({"type": "RuntimeError", "message": "boom"}, "call_timeout_s", None),
        # the student's process cannot claim a trusted stop: no origin, no timeout
        ({"type": WORKER_TIMEOUT, "message": "x", "limit": "memory_mb"}, "call_timeout_s", None),
    ],
)
def test_which_limit_an_error_hit(error, request_limit, key):
    assert limit_hit(error, request_limit) == key


def test_the_words_name_the_key_its_value_where_it_is_set_and_the_assignment(tmp_path):
    text = (course_tree(tmp_path) / "course.toml").read_text()
    (tmp_path / "course.toml").write_text(_with_entry(text, SLOW_ENTRY))
    course = load_course(tmp_path)
    a = "slow_one"
    limits = course.limits_for(a)
    kernel = explained(TIMEOUT, a, limits, lambda k: course.limit_source(a, k), "kernel_timeout_s")
    assert kernel["message"].startswith("gpu_sum took longer than 20 s")
    assert (
        f"kernel_timeout_s = 90 ([assignments.limits] kernel_timeout_s of {a!r} in course.toml, "
        f"assignment {a!r})" in kernel["message"]
    )
    threads = explained(THREAD, a, limits, lambda k: course.limit_source(a, k), "kernel_timeout_s")
    said = threads["message"]
    assert said.startswith("tid=[62, 0, 0]") and "the limit on processes and threads" in said
    assert f"processes = {course.limits.processes} ([limits] processes in course.toml" in said
    assert "the CUDA simulator's too" in said
    memory = explained(MEMORY_KILL, a, limits, lambda k: course.limit_source(a, k), "")
    assert f"memory_mb = {limits.memory_mb} MB" in memory["message"]
    assert explained(CRASH, a, limits, lambda k: "", "call_timeout_s") is CRASH


class _Replies:
    """A backend answering every request and launch with one error reply."""

    def __init__(self, error: dict):
        self.error = error

    def request(self, req, timeout):
        return {"error": dict(self.error)}

    def kernel(self, req, timeout, target="run"):
        return {"error": dict(self.error)}

    def graded_source(self, assignment):
        return "from numba import cuda\n\n@cuda.jit\ndef k(x):\n    x[0] = 1\n"


def test_a_students_failure_names_the_limit_it_hit(course):
    a = course.assignment_ids[0]
    limits = replace(course.limits_for(a), call_timeout_s=7.0)
    student = Student(
        _Replies(TIMEOUT), a, limits=limits, limit_source=lambda k: course.limit_source(a, k)
    )
    with pytest.raises(WorkerTimeout) as info:
        student.gpu_sum(1)
    assert "call_timeout_s = 7 ([limits] call_timeout_s in course.toml" in info.value.feedback()
    assert student._call_timeout == 7.0  # the assignment's limits are the ones used
    student = Student(_Replies(MEMORY_KILL), a, limits=limits)
    with pytest.raises(WorkerCrashed, match=f"memory_mb = {limits.memory_mb} MB"):
        student.f()
    student = Student(_Replies(THREAD), a, limits=limits)
    with pytest.raises(StudentError) as info:
        student.f()
    assert isinstance(info.value, RuntimeError) and not info.value.grader
    assert f"processes = {limits.processes}" in info.value.feedback()

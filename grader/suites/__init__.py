"""The suites: the `Student` facade tests see, the pytest plugin, the runner, shared helpers,
and the GPU tests' side of the one timing routine (`timing`)."""

from grader.suites.errors import StudentError
from grader.suites.inprocess import InProcessBackend
from grader.suites.runner import run_assignment, suite_dirs
from grader.suites.student import Student
from grader.suites.timing import CallTarget, KernelTarget, device_of, judge, torch_target

__all__ = [
    "CallTarget",
    "InProcessBackend",
    "KernelTarget",
    "Student",
    "StudentError",
    "device_of",
    "judge",
    "run_assignment",
    "suite_dirs",
    "torch_target",
]

"""The suites: the `Student` facade tests see, the pytest plugin, the runner, shared helpers."""

from grader.suites.errors import StudentError
from grader.suites.inprocess import InProcessBackend
from grader.suites.runner import run_assignment, suite_dirs
from grader.suites.student import Student

__all__ = ["InProcessBackend", "Student", "StudentError", "run_assignment", "suite_dirs"]

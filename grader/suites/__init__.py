"""The suites: the `Student` facade tests see, the pytest plugin, the runner, shared helpers."""

from grader.suites.runner import run_assignment, suite_dirs

__all__ = ["run_assignment", "suite_dirs"]

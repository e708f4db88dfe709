"""Autograder for the GPU mental-model course: release, sandboxed grading, reports, gradebook."""

__version__ = "0.1.0"

"""Grading one submission: intake (the submission as data) and the graded result."""

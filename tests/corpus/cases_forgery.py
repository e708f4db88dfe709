"""Corpus cases: forged verdicts: code in the student's process pretending to be kernels, harness or results (issue 10).

Imported by build.py after its own cases; uses build's helpers.
"""

from __future__ import annotations

from build import Case

CASES: list[Case] = []

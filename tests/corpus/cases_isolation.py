"""Corpus cases: isolation between a worker and the host and between concurrent workers (issue 11).

Imported by build.py after its own cases; uses build's helpers.
"""

from __future__ import annotations

from build import Case

CASES: list[Case] = []

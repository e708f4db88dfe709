"""Corpus cases: the trusted process bounded against what a submission sends (issue 12).

Imported by build.py after its own cases; uses build's helpers.
"""

from __future__ import annotations

from build import Case

CASES: list[Case] = []

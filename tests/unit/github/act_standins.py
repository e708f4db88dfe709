"""The act tests' stand-ins for GitHub's actions (act_actions/), shared by tests/unit/github and
tests/slow: each pinned action, as the workflows name it, and the folder that replaces it; and
where the dev extra's tools (act, zizmor) are found."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

STANDINS = Path(__file__).resolve().parent / "act_actions"
PINS = {
    "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1": "checkout",
    "actions/setup-python@5fda3b95a4ea91299a34e894583c3862153e4b97": "setup-python",
    "actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae": "cache",
    "actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f": "upload-artifact",
    "actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c": "download-artifact",
}


def dev_tool(name: str) -> str:
    """A tool of the dev extra, beside this interpreter or on PATH; missing is a failure, never a
    skip (a check that cannot run must not count as passing)."""
    here = Path(sys.executable).parent / name
    exe = str(here) if here.is_file() else shutil.which(name)
    if not exe:
        pytest.fail(f'{name} is not installed: pip install -e ".[dev]"')
    return exe

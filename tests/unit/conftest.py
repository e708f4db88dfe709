"""Fixtures the unit tests share: the real course manifest, a gradebook query, the umask.

Each was a copy in several test files; a test names the fixture it needs.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from factories import ROOT

from grader.core.course import Course, load_course


@pytest.fixture(scope="session")
def course() -> Course:
    """The repository's own course.toml, loaded once (a test that needs a scratch course
    defines its own `course`)."""
    return load_course(ROOT)


def _query(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture
def db_rows() -> Callable[[Path, str], list[tuple]]:
    """`db_rows(db, sql)`: the rows of one query on an sqlite file (the gradebook), closed after."""
    return _query


@pytest.fixture
def umask() -> int:
    """The process's umask, which decides the mode of the files the grader writes."""
    mask = os.umask(0)
    os.umask(mask)
    return mask

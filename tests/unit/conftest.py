"""Fixtures the unit tests share: the real course manifest, a gradebook query, the umask.

Each was a copy in several test files; a test names the fixture it needs. Also, under
pytest-xdist, the controller's side of the corpus's wall-times table (tests/corpus/corpus_times).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import corpus_times
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


_WORKER_TIMES: dict[str, dict] = {}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist's controller: the corpus's times, from the worker that graded it."""
    sent = getattr(node, "workeroutput", {}).get(corpus_times.WORKER_KEY)
    if sent:
        _WORKER_TIMES.update(json.loads(sent))


def pytest_terminal_summary(terminalreporter) -> None:
    if _WORKER_TIMES:
        corpus_times.show(terminalreporter, _WORKER_TIMES)

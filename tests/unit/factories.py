"""Factories more than one test folder uses: the repository's root, a scratch course tree, a PR
artifact and its workflow event, a fake nvidia-smi, a `grade-pr` run. Import them by name
(`from factories import ROOT`): tests/unit is on the path because its conftest.py lives there."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from grader import github

DATA = Path(__file__).resolve().parent / "data"
EVENT = DATA / "workflow_run_event.json"
ROOT = Path(__file__).resolve().parents[2]  # the repository: the one ROOT every test uses
HEAD = "5c1d7e0b9a2f4c3d8e6f1a0b2c3d4e5f60718293"  # the event's workflow_run.head_sha
PR = 7


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
            shutil.copytree(src, out, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, out)
    for rel, text in (files or {}).items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    return dest


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

"""Part 1: one submission, `grader grade` against `nbgrader autograde`.

Both grade the reference solution of gpu_fundamentals, each in a cold process, the runs
interleaved (ours, nbgrader, ours, ...) so that a change of the machine's load hits both:
`grader grade <ada_reference> --assignment gpu_fundamentals`, and `nbgrader autograde
gpu_fundamentals --force` in a temporary nbgrader course directory whose source is the solution
converted with jupytext (released once with `generate_assignment`, not counted). With `trees`
(`--against`), the before tree's `python -m grader grade` runs in the same rounds.

Contract: `part_one_submission(tmp, runs, trees)` prints the part's table and returns its JSON
(`one_submission`): `ours` and `nbgrader` (wall and CPU summaries, runs, score), `ratio`,
`cpu_ratio`, `target` and `met` (wall), `cpu_target` and `cpu_met`, `cpu_counts`, `by_process`
(where one more run of ours spent its CPU, by process: `proc_cpu`, Linux only, else absent),
`floor` (`cpu_floor`: the CPU this design's processes pay before any work, and
`cpu_ratio_ceiling`, nbgrader's CPU over it), and with trees `before` and `compare`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
from compare import Tree, compared
from cpu_floor import cpu_floor, floor_table
from nbgrader.api import Gradebook
from proc_cpu import PROC, by_process_table, cpu_by_process
from timing import (
    ASSIGNMENT,
    ROOT,
    STUDENT,
    TARGETS,
    VENV_BIN,
    load,
    print_compare,
    ratio,
    sample_class,
    spread,
    summary,
    table,
    timed_run,
)

OURS = "grader grade <ada_reference> --assignment gpu_fundamentals"
NBGRADER = "nbgrader autograde gpu_fundamentals --force"


def _python3_kernel(env: dict[str, str]) -> None:
    """nbgrader executes with the venv's python3 kernel: install it when it is missing."""
    specs = subprocess.run(
        [str(VENV_BIN / "jupyter"), "kernelspec", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if '"python3"' not in specs.stdout:
        subprocess.run(
            [sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3"],
            env=env,
            check=True,
            capture_output=True,
        )


def nbgrader_course(tmp: Path) -> tuple[Path, dict[str, str], float]:
    """A course directory with the solution notebook as source, released and submitted for
    STUDENT; its environment, and the seconds `generate_assignment` took."""
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}"}
    _python3_kernel(env)
    course = tmp / "nbgrader-course"
    src = course / "source" / ASSIGNMENT
    src.mkdir(parents=True)
    nb = jupytext.read(ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.py")
    jupytext.write(nb, src / f"{ASSIGNMENT}.ipynb", fmt="ipynb")
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        "c.CourseDirectory.course_id = 'bench'\n"
        f"c.CourseDirectory.root = {str(course)!r}\n"
        "c.Execute.timeout = 600\n",
        encoding="utf-8",
    )
    gen = timed_run(
        [str(VENV_BIN / "nbgrader"), "generate_assignment", ASSIGNMENT, "--force"], course, env
    )
    if gen["rc"] != 0:
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{gen['stderr'][-3000:]}")
    sub = course / "submitted" / STUDENT / ASSIGNMENT
    sub.mkdir(parents=True)
    shutil.copyfile(src / f"{ASSIGNMENT}.ipynb", sub / f"{ASSIGNMENT}.ipynb")
    return course, env, gen["wall_s"]


def nbgrader_score(course: Path) -> str:
    """STUDENT's score in the course's nbgrader gradebook, `10/10`."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        s = gb.find_submission(ASSIGNMENT, STUDENT)
        return f"{s.score:g}/{s.max_score:g}"


def our_score(stdout: str) -> str:
    """The total of `grader grade`'s table: `12.5 / 40` (or `12.5/40`); `?` when absent."""
    m = re.search(r"total (\S+(?: / \S+)?)\s+\(", stdout)
    return m.group(1) if m else "?"


def _checked(cmd: list[str], cwd: Path, env: dict[str, str] | None, what: str) -> dict:
    r = timed_run(cmd, cwd, env)
    if r["rc"] != 0:
        raise RuntimeError(f"{what} in {cwd} failed:\n{r['stderr'][-3000:]}")
    return r


def _figures(rs: list[dict], score: str) -> dict:
    """The JSON of one grader's runs."""
    return {
        "wall_s": summary([r["wall_s"] for r in rs]),
        "cpu_s": summary([r["cpu_s"] for r in rs]),
        "runs": [{"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "load": r["load"]} for r in rs],
        "score": score,
    }


def _print(res: dict, setup_s: float) -> None:
    print("\n## 1. One submission (gpu_fundamentals, reference), ours vs nbgrader\n")
    rows = [
        [
            k,
            spread(res[k]["wall_s"]),
            spread(res[k]["cpu_s"]),
            res[k]["score"],
            " ".join(f"{r['load'][0]:.1f}" for r in res[k]["runs"]),
        ]
        for k in ("ours", "nbgrader")
    ]
    headers = ["grader", "wall median (min-max)", "CPU median (min-max)", "score"]
    print(table([*headers, "load avg per run"], rows))
    met = {True: "met", False: "NOT met"}
    print(
        f"\nratio nbgrader/ours: wall {res['ratio']:.2f}x (target {res['target']:g}x: "
        f"{met[res['met']]}), CPU {res['cpu_ratio']:.2f}x (target {res['cpu_target']:g}x: "
        f"{met[res['cpu_met']]}); nbgrader generate_assignment (once) {setup_s:.1f} s; CPU "
        f"counted by {res['cpu_counts']}"
    )
    if "by_process" in res:
        print("\nwhere one more run of ours spent its CPU, by process (read from /proc):\n")
        print(table(*by_process_table(res["by_process"])))
    floor = res["floor"]
    print("\nthe CPU floor of this design: each process kind cold, doing only what it must:\n")
    print(table(*floor_table(floor)))
    print(
        f"\nnbgrader's CPU / the floor: {floor['cpu_ratio_ceiling']:.2f}x, the most a CPU "
        "ratio can reach in this design, with no test, kernel or notebook "
        f"(target {res['cpu_target']:g}x)"
    )


def _before_after(res: dict, ours: list[dict], before: list[dict], trees: tuple[Tree, Tree]):
    """Add `before` and `compare` to the part's JSON and print the side-by-side table."""
    loads = [x for r in ours + before for x in r["load"]]
    res["before"] = {k: v for k, v in _figures(before, "").items() if k != "score"}
    res["compare"] = {
        key: compared(res["ours"][key], res["before"][key], loads) for key in ("wall_s", "cpu_s")
    }
    print_compare(
        "1. One submission, before and after",
        trees,
        [
            ("grader grade, wall", "s", res["compare"]["wall_s"]),
            ("grader grade, CPU", "s", res["compare"]["cpu_s"]),
        ],
    )


def part_one_submission(tmp: Path, runs: int, trees: tuple[Tree, Tree] | None = None) -> dict:
    """Part 1: the same reference submission graded by `grader grade` and `nbgrader autograde`
    (and, with `trees`, by the before tree's `grader grade` in the same rounds)."""
    submission = sample_class(tmp / "class") / "ada_reference"
    course, env, setup_s = nbgrader_course(tmp)
    args = ["grade", str(submission), "--assignment", ASSIGNMENT]
    ours_cmd = trees[0].grader(*args) if trees else [str(VENV_BIN / "grader"), *args]
    ours_env = trees[0].env if trees else None
    nbg_cmd = [str(VENV_BIN / "nbgrader"), "autograde", ASSIGNMENT, "--force"]
    ours, nbg, before = [], [], []
    for _ in range(runs):  # interleaved, so that a change of the machine's load hits both
        ours.append(_checked(ours_cmd, ROOT, ours_env, "grader grade"))
        if trees:
            before.append(_checked(trees[1].grader(*args), trees[1].root, trees[1].env, "grade"))
        nbg.append(_checked(nbg_cmd, course, env, "nbgrader autograde"))
    res = {
        "ours": {**_figures(ours, our_score(ours[-1]["stdout"])), "command": OURS},
        "nbgrader": {
            **_figures(nbg, nbgrader_score(course)),
            "command": NBGRADER,
            "generate_assignment_s": setup_s,
        },
    }
    res["ratio"] = ratio(res["nbgrader"]["wall_s"]["median"], res["ours"]["wall_s"]["median"])
    res["cpu_ratio"] = ratio(res["nbgrader"]["cpu_s"]["median"], res["ours"]["cpu_s"]["median"])
    res["target"] = TARGETS["vs_nbgrader"]
    res["met"] = res["ratio"] >= res["target"]
    res["cpu_target"] = TARGETS["vs_nbgrader_cpu"]
    res["cpu_met"] = res["cpu_ratio"] >= res["cpu_target"]
    if PROC.is_dir():  # untimed: the sampling costs the machine a little CPU of its own
        res["by_process"] = cpu_by_process(ours_cmd, ROOT, ours_env)
    floor = res["floor"] = cpu_floor(runs)
    floor["cpu_ratio_ceiling"] = ratio(res["nbgrader"]["cpu_s"]["median"], floor["cpu_s"])
    res["load"] = [load()]
    res["cpu_counts"] = ours[-1]["cpu_counts"]
    _print(res, setup_s)
    if trees:
        _before_after(res, ours, before, trees)
    return res

"""Before and after in one run (`bench/run.py --against DIR`): the same measurement in two trees.

DIR is another checkout of the repository. A tree runs under its own `.venv` when it has one,
else under this interpreter: a tree's commands as `python -m grader ...` with the tree on
PYTHONPATH and as the working directory (the venv's `grader` script and its editable install
point at one checkout only; so does its pytest plugin entry point, which is why a tree whose
plugin lives at another path needs its own venv: `check` refuses it otherwise), and what
the bench measures in-process (part 2's `grade_all`, part 3's worker start-up) in a child
process that imports that tree's own bench module (`part_class`, `part_startup`; `run` in a
tree from before the split), so each tree runs the code it ships with its own import paths.
The caller interleaves the two trees measurement by measurement, so that a change of the
machine's load hits both; `side_by_side` prints the figures with the ratio
after / before (above 1: the after tree is slower) and the load average around them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Run in the child: import the tree's bench module that defines `name` and call it with JSON
# arguments. A tree since the split has one module per part (`part_class.run_batch`,
# `part_startup.worker_startup`); an older tree has them all in `run`. A grade_one is not JSON,
# so part 2's is built here from its description, from the same module's `grade_some` and ROOT.
_CHILD = """
import functools, importlib, json, sys
from pathlib import Path
bench, name, kwargs, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
sys.path.insert(0, bench)  # the tree's bench/ modules import each other by name
for module in ("part_class", "part_startup", "run"):
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as exc:  # an older tree: no such module
        if exc.name != module:
            raise
        continue
    if hasattr(found, name):
        break
if "grade_one" in kwargs:
    spec = kwargs.pop("grade_one")
    root = str(getattr(found, "ROOT", Path(bench).parent))
    if spec["assignments"]:
        grade_one = functools.partial(
            found.grade_some, root=root, assignments=spec["assignments"]
        )
    else:
        from grader.batch import grade_entry
        grade_one = functools.partial(grade_entry, root=root)
    kwargs["grade_one"] = grade_one
for key in ("tmp", "klass", "out"):
    if key in kwargs:
        kwargs[key] = Path(kwargs[key])
Path(out).write_text(json.dumps(getattr(found, name)(**kwargs)))
"""


# Where the tree's `grader` and its pytest plugin (the pytest11 entry point) are imported from.
_WHERE = """
import grader
from importlib.metadata import entry_points
(ep,) = entry_points(group="pytest11", name="grader")
print(grader.__file__, ep.load().__file__)
"""


@dataclass(frozen=True)
class Tree:
    """One checkout: where it is, and the environment that makes `import grader` find it."""

    label: str
    root: Path
    env: dict[str, str] = field(repr=False, hash=False, compare=False)
    python: str = sys.executable

    @classmethod
    def at(cls, label: str, root: Path) -> Tree:
        root = Path(root).resolve()
        env = {**os.environ, "PYTHONPATH": str(root)}
        own = root / ".venv" / "bin" / "python"
        return cls(label, root, env, str(own) if own.is_file() else sys.executable)

    def grader(self, *args: str) -> list[str]:
        return [self.python, "-m", "grader", *args]

    def check(self) -> str:
        """Where `import grader` and the pytest plugin resolve in this tree's environment;
        refuse a tree where either comes from another checkout."""
        proc = subprocess.run(
            [self.python, "-c", _WHERE],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        found = proc.stdout.split()
        if proc.returncode != 0 or not all(
            Path(w).resolve().is_relative_to(self.root) for w in found
        ):
            raise RuntimeError(
                f"{self.label} tree {self.root}: `import grader` and its pytest plugin give "
                f"{found or proc.stderr!r}; give that tree a venv of its own (make setup)"
            )
        return found[0]

    def commit(self) -> str:
        """The tree's commit, with `+changes` when its working tree differs from it."""

        def git(*args: str) -> str:
            proc = subprocess.run(
                ["git", "-C", str(self.root), *args], capture_output=True, text=True, check=False
            )
            return proc.stdout.strip()

        head = git("rev-parse", "--short", "HEAD") or "unknown"
        return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")

    def call(self, name: str, timeout: float = 1800, **kwargs) -> dict:
        """The bench function `name(**kwargs)` of this tree, in a child process; its result."""
        with tempfile.TemporaryDirectory(prefix="bench-child-") as tmp:
            out = Path(tmp) / "result.json"
            proc = subprocess.run(
                [
                    self.python,
                    "-c",
                    _CHILD,
                    str(self.root / "bench"),
                    name,
                    json.dumps(kwargs, default=str),
                    str(out),
                ],
                cwd=self.root,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            if proc.returncode != 0 or not out.is_file():
                raise RuntimeError(
                    f"{self.label} tree: bench {name} failed:\n{proc.stderr[-3000:]}"
                )
            return json.loads(out.read_text(encoding="utf-8"))


def compared(after: dict, before: dict, loads: Sequence[float]) -> dict:
    """One row of the comparison as data: both summaries, after / before, the loads seen."""
    ratio = round(after["median"] / before["median"], 3) if before["median"] > 0 else None
    return {"after": after, "before": before, "ratio": ratio, "load": [min(loads), max(loads)]}


def _cell(s: dict, unit: str) -> str:
    if s.get("n", 1) == 1:
        return f"{s['median']:.2f} {unit}"
    return f"{s['median']:.2f} {unit} ({s['min']:.2f}-{s['max']:.2f})"


def side_by_side(
    rows: Sequence[tuple[str, str, dict]], before: str, after: str
) -> tuple[list[str], list[list[str]]]:
    """The comparison table's headers and cells (for timing.table): one line per (what, unit,
    `compared(...)`), after beside before, labelled with the trees' commits."""
    headers = ["what", f"after ({after})", f"before ({before})", "after/before", "load avg"]
    cells = [
        [
            what,
            _cell(c["after"], unit),
            _cell(c["before"], unit),
            "-" if c["ratio"] is None else f"{c['ratio']:.2f}",
            f"{c['load'][0]:.1f}-{c['load'][1]:.1f}",
        ]
        for what, unit, c in rows
    ]
    return headers, cells

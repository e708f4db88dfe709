"""Write the lock files: one per install profile, each pinned for the Python it runs on.

    python locks/lock.py            (`make lock`) resolve every profile with `uv pip compile`
    python locks/lock.py --check    exit 1 naming each lock whose profile changed since

A workflow installs a profile with its lock as pip constraints (`-c`) and keys its cache on
the lock (`hashFiles`), so one resolution serves every run until pyproject.toml changes. Each
lock's header records a digest of the profile's own requirement lines (pyproject's base
dependencies and the extras it names, expanded), so a change to them without `make lock` is
caught by tests/unit/test_locks.py rather than by a stale cache. Standard library only (uv is
the dev extra's).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "locks"
PLATFORM = "x86_64-manylinux_2_28"  # GitHub's ubuntu-24.04 runners and this course's machines
DIGEST_RE = re.compile(r"^# requirements-digest: sha256:([0-9a-f]{64})$", re.M)


@dataclass(frozen=True)
class Profile:
    """One lock: the extras installed together and the Python they run on."""

    name: str
    extras: tuple[str, ...]
    python: str

    @property
    def path(self) -> Path:
        return LOCKS / f"{self.name}-py{self.python}-linux.txt"


# What each workflow installs (and the Makefile's full profile); the student check runs 3.12.
PROFILES = (
    Profile("student", ("student",), "3.12"),
    Profile("gpu-cu13", ("gpu-cu13",), "3.11"),
    Profile("gpu-cu12", ("gpu-cu12",), "3.11"),
    Profile("instructor", ("instructor",), "3.11"),
    Profile("instructor-gpu-cu13", ("instructor", "gpu-cu13"), "3.11"),
    Profile("instructor-gpu-cu12", ("instructor", "gpu-cu12"), "3.11"),
    Profile("full", ("instructor", "gpu-cu13", "dev"), "3.11"),
)


def requirement_lines(pyproject: dict, extras: tuple[str, ...]) -> list[str]:
    """The base dependencies and the named extras, self-references expanded, sorted."""
    project = pyproject["project"]
    name = project["name"]
    optional = project.get("optional-dependencies", {})
    self_ref = re.compile(rf"^{re.escape(name)}\[([^\]]+)\]\s*$")
    lines: set[str] = {" ".join(d.split()) for d in project.get("dependencies", [])}
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        if extra not in optional:
            raise KeyError(f"pyproject.toml has no extra {extra!r}")
        seen.add(extra)
        for req in optional[extra]:
            m = self_ref.match(req)
            if m:
                todo.extend(e.strip() for e in m.group(1).split(","))
            else:
                lines.add(" ".join(req.split()))
    return sorted(lines)


def digest(pyproject: dict, profile: Profile) -> str:
    """What the lock was resolved from: the profile's requirement lines, Python and platform."""
    text = "\n".join(
        [f"python {profile.python}", f"platform {PLATFORM}",
         f"requires-python {pyproject['project'].get('requires-python', '')}",
         *requirement_lines(pyproject, profile.extras)]
    )  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()


def header(pyproject: dict, profile: Profile) -> str:
    """The lock's first lines: what it is, how to remake it, and the digest the test checks."""
    return (
        f"# Lock of pyproject.toml's [{','.join(profile.extras)}] for Python {profile.python} "
        f"on Linux ({PLATFORM}).\n"
        "# Written by `make lock` (locks/lock.py, uv pip compile); do not edit. Installed as pip\n"
        '# constraints: pip install -c THIS_FILE -e ".[EXTRAS]"\n'
        f"# requirements-digest: sha256:{digest(pyproject, profile)}\n"
    )


def recorded_digest(path: Path) -> str | None:
    """The digest in a lock's header, or None when the file or the line is missing."""
    try:
        m = DIGEST_RE.search(path.read_text(encoding="utf-8"))
    except OSError:
        return None
    return m.group(1) if m else None


def stale(pyproject: dict) -> list[str]:
    """Each lock whose header does not match its profile's requirements now."""
    return [
        f"{p.path.relative_to(ROOT)}: stale or missing; run `make lock`"
        for p in PROFILES
        if recorded_digest(p.path) != digest(pyproject, p)
    ]


def uv_command() -> list[str]:
    """How to run uv: the venv's (the dev extra's), else one on PATH, else `python -m uv`.
    Never a Python download: `--python-version` is all a resolution needs, and without this
    flag uv fetches an interpreter of that version first (seconds, or a retry loop offline).
    tests/unit/test_profiles.py resolves the install profiles with it too."""
    here = Path(sys.executable).parent / "uv"
    if here.is_file():
        uv = [str(here)]
    else:
        found = shutil.which("uv")
        uv = [found] if found else [sys.executable, "-m", "uv"]
    return [*uv, "--no-python-downloads"]


def compile_lock(pyproject: dict, profile: Profile) -> None:
    """Resolve one profile with uv and write its lock (header first)."""
    cmd = [*uv_command(), "pip", "compile", str(ROOT / "pyproject.toml"), "--quiet", "--no-header",
           "--annotation-style", "line", "--python-version", profile.python,
           "--python-platform", PLATFORM]  # fmt: skip
    for extra in profile.extras:
        cmd += ["--extra", extra]
    env = {**os.environ, "UV_NO_CONFIG": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"uv pip compile failed for {profile.name}:\n{proc.stderr[-3000:]}")
    profile.path.write_text(header(pyproject, profile) + proc.stdout, encoding="utf-8")
    print(f"wrote {profile.path.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    """`make lock` (write them all) or `--check` (list the stale ones)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="only report stale locks")
    args = p.parse_args(argv)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    if args.check:
        bad = stale(pyproject)
        print("\n".join(bad) or "every lock matches pyproject.toml")
        return 1 if bad else 0
    for profile in PROFILES:
        compile_lock(pyproject, profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

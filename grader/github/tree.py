"""The artifact held file by file against the PR head's own tree: what is graded is that commit.

The `submission` artifact is packed by the PR's own (editable) check workflow, so it could hold
anything. The grading job fetches the head commit GitHub names in the event into a bare
repository (data: never checked out, nothing in it runs) and `verify_tree` requires that every
file of the artifact is the blob at that path of the commit's tree, and that every regular file
the tree holds under `exercises/` (and `metrics.json`) is in the artifact; what `pack-submission`
leaves out (links, caches, checkpoints) is left out here too. A mismatch is a `TreeMismatch`
naming the file. Standard library and `git` only: it runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from grader.core.errors import SubmissionError
from grader.github.artifact import EXERCISES, PACK_SKIP, show

_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_REGULAR = ("100644", "100755")


class TreeMismatch(SubmissionError, ValueError):
    """The artifact is not the head commit's files; the message names the first difference."""


def blob_id(data: bytes) -> str:
    """Git's object id (SHA-1) of a blob holding `data`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def tree_files(git_dir: Path | str, sha: str) -> dict[str, str]:
    """{path: blob id} of the regular files a commit holds under exercises/ and metrics.json."""
    if not _SHA_RE.match(sha):
        raise TreeMismatch(f"{show(sha)}: not a full commit sha")
    proc = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", "--full-tree", sha, "--",
         EXERCISES, "metrics.json"],
        capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    if proc.returncode != 0:
        raise TreeMismatch(
            f"commit {sha} is not in {git_dir}: {proc.stderr.decode(errors='replace')[:300]}"
        )
    files = {}
    for entry in proc.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, kind, oid = meta.decode().split()
        name = path.decode("utf-8", errors="surrogateescape")
        if kind != "blob" or mode not in _REGULAR:
            continue  # links and submodules: pack-submission leaves them out
        if any(part in PACK_SKIP for part in name.split("/")):
            continue
        files[name] = oid
    return files


def verify_tree(artifact: Path | str, git_dir: Path | str, sha: str) -> int:
    """Every artifact file (but pr.json) equals the commit's blob, and none is missing; the
    number of files compared."""
    root = Path(artifact)
    expected = tree_files(git_dir, sha)
    seen = set()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        name = path.relative_to(root).as_posix()
        if name == "pr.json":
            continue
        if name not in expected:
            raise TreeMismatch(f"{show(name)}: in the artifact but not in commit {sha}")
        if blob_id(path.read_bytes()) != expected[name]:
            raise TreeMismatch(f"{show(name)}: differs from its version in commit {sha}")
        seen.add(name)
    missing = sorted(set(expected) - seen)
    if missing:
        raise TreeMismatch(f"{show(missing[0])}: in commit {sha} but not in the artifact")
    return len(seen)

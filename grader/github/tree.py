"""The artifact held file by file against the PR head's own tree: what is graded is that commit.

The `submission` artifact is packed by the PR's own (editable) check workflow, so it could hold
anything. The grading job fetches the head commit GitHub names in the event into a bare
repository (data: never checked out, nothing in it runs) and `verify_tree` requires that every
file of the artifact is the blob at that path of the commit's tree, and that every regular file
the tree holds under `exercises/` (and `metrics.json`) is in the artifact; what `pack-submission`
leaves out (links, caches, checkpoints) is left out here too. A mismatch is a `TreeMismatch`
naming the file. `submission_from_tree` lays out the same files, read from the commit as data
(blob by blob, sizes bounded before any is read), as the submission of a PR that no check ran on
(the sweep grades a conflicting PR this way). Standard library and `git` only: it runs before
anything is installed.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

from grader.core.errors import SubmissionError
from grader.github.artifact import (
    EXERCISES,
    PACK_SKIP,
    Artifact,
    ArtifactError,
    show,
    validate_artifact,
)
from grader.grading.limits import LIMITS

_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_REGULAR = ("100644", "100755")


class TreeMismatch(SubmissionError, ValueError):
    """The artifact is not the head commit's files; the message names the first difference."""


def blob_id(data: bytes) -> str:
    """Git's object id (SHA-1) of a blob holding `data`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def tree_files(git_dir: Path | str, sha: str) -> dict[str, str]:
    """{path: blob id} of the regular files a commit holds under exercises/ and metrics.json."""
    return {name: oid for name, (oid, _) in _tree_entries(git_dir, sha).items()}


def _tree_entries(git_dir: Path | str, sha: str) -> dict[str, tuple[str, int]]:
    """{path: (blob id, size)} of the files `tree_files` names."""
    if not _SHA_RE.match(sha):
        raise TreeMismatch(f"{show(sha)}: not a full commit sha")
    proc = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-l", "-z", "--full-tree", sha, "--",
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
        mode, kind, oid, size = meta.decode().split()
        name = path.decode("utf-8", errors="surrogateescape")
        if kind != "blob" or mode not in _REGULAR:
            continue  # links and submodules: pack-submission leaves them out
        if any(part in PACK_SKIP for part in name.split("/")):
            continue
        files[name] = (oid, int(size))
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


def submission_from_tree(
    git_dir: Path | str, sha: str, out: Path | str, pr_number: int
) -> Artifact:
    """The submission of PR `pr_number` at commit `sha`, read from its tree as data into `out`
    (exercises/**, metrics.json, pr.json) and validated as an artifact is; ArtifactError when
    the commit's files break the artifact's limits (checked on the sizes before reading)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise ArtifactError(f"{show(str(out))}: output folder is not empty")
    entries = _tree_entries(git_dir, sha)
    if len(entries) > LIMITS.max_files:
        raise ArtifactError(f"commit {sha}: more than {LIMITS.max_files} files under exercises/")
    total = 0
    for name, (_, size) in sorted(entries.items()):
        total += size
        if size > LIMITS.max_file_bytes or total > LIMITS.max_total_bytes:
            raise ArtifactError(f"{show(name)}: over the submission's size limits in commit {sha}")
    for name, (oid, _) in sorted(entries.items()):
        parts = name.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise ArtifactError(f"{show(name)}: not a plain path")
        blob = subprocess.run(
            ["git", "--git-dir", str(git_dir), "cat-file", "blob", oid],
            capture_output=True, check=False, timeout=120,
        )  # fmt: skip
        if blob.returncode != 0 or blob_id(blob.stdout) != oid:
            raise TreeMismatch(f"{show(name)}: cannot read blob {oid} of commit {sha}")
        target = out.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob.stdout)
    (out / "pr.json").write_text(
        json.dumps({"number": pr_number, "head_sha": sha}) + "\n", encoding="utf-8"
    )
    return validate_artifact(out)

"""Similarity of the graded cells across a class: pairs for the instructor to look at.

It is never a verdict: shared starter code, a hint from the course or a short correct answer look
alike; the class report says so beside the pairs.

The graded cells (nbgrader `solution: true`) of the notebook each student was graded on are
fingerprinted with copydetect's pieces (its Pygments filter, so that renaming variables changes
nothing and comments and docstrings are dropped; its winnowing of k-grams, noise threshold 25
tokens, guarantee 30; its `compare_files` for a pair's shared share), with one change: k-grams are
hashed with blake2b rather than Python's `hash`, which is salted per process and would make the
same class come out a few percent different on every run. The release's own stub cells are its
boilerplate, and, as MOSS's `-m` does, a fingerprint found in more than max(10, 10% of the class)
submissions is common knowledge and dropped too, so an idiom everyone writes does not link
everyone. Pairs are found through an inverted index from fingerprint to submissions, so only
submissions that share a fingerprint are compared: the work grows with the pairs that share code
(at most the common-fingerprint cut squared per fingerprint), not with all n^2 pairs.

Submissions are untrusted: their sources are read without following links and up to the
notebook reader's size cap (grader.core.notebook).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from copydetect.detector import compare_files
from copydetect.utils import filter_code, get_token_coverage, winnow

from grader.core.notebook import MAX_NOTEBOOK_BYTES, NotebookError, read_notebook
from grader.core.results import GradeResult

THRESHOLD = 0.6  # a pair is listed when either side has this fraction of its code in common
NOISE_T = 25  # copydetect: matches shorter than this (in tokens) are ignored
GUARANTEE_T = 30  # copydetect: matches at least this long are always found
COMMON_MIN = 10  # a fingerprint in more submissions than max(COMMON_MIN, COMMON_FRACTION x n)
COMMON_FRACTION = 0.10  # is common knowledge (MOSS's -m) and is not evidence of anything


@dataclass
class SimilarPair:
    assignment: str
    student_a: str
    student_b: str
    similarity_a: float  # fraction of a's graded code found in b's
    similarity_b: float
    tokens: int  # overlapping tokens


def graded_cells(path: Path) -> str | None:
    """The code of the cells a student fills in (nbgrader `solution: true`; every code cell
    when a notebook lost its metadata), or None when the file cannot be read safely."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return None
        nb = read_notebook(path)
    except (OSError, NotebookError):
        return None
    code = [c for c in nb.cells if c.cell_type == "code"]
    marked = [c for c in code if (c.metadata.get("nbgrader") or {}).get("solution") is True]
    return "\n\n".join(c.source for c in (marked or code)) + "\n"


def release_stub(root: Path, assignment: str) -> str:
    """The graded cells of the release's own notebook (its boilerplate); empty when absent."""
    release = root / "exercises" / assignment
    for suffix in (".py", ".ipynb"):
        if (release / f"{assignment}{suffix}").is_file():
            return graded_cells(release / f"{assignment}{suffix}") or ""
    return ""


@dataclass
class _Fingerprint:
    """What copydetect's `compare_files` reads of a `CodeFingerprint` (same attributes)."""

    k: int
    filtered_code: str
    offsets: object  # numpy array: characters removed by the filter, for copydetect's slices
    hashes: set[int]
    hash_idx: dict[int, list[int]]
    token_coverage: float


def _kgram_hashes(doc: str, k: int) -> np.ndarray:
    """A stable 63-bit hash of every k-gram. copydetect hashes with Python's `hash`, which
    changes with each process (PYTHONHASHSEED): the same class would give other percentages
    on every run."""
    return np.array(
        [
            int.from_bytes(hashlib.blake2b(doc[i : i + k].encode(), digest_size=8).digest()) >> 1
            for i in range(len(doc) - k + 1)
        ],
        dtype=np.int64,
    )


def _fingerprint(code: str, boilerplate: set[int] | frozenset[int] = frozenset()) -> _Fingerprint:
    """copydetect's fingerprint (Pygments tokens, names and literals folded, comments dropped;
    winnowed k-grams) with stable hashes; fingerprints in `boilerplate` are left out."""
    filtered, offsets = filter_code(code, "cells.py", "python")
    hashes, idx = winnow(
        _kgram_hashes(filtered, NOISE_T), GUARANTEE_T - NOISE_T + 1, remove_duplicates=False
    )
    where: dict[int, list[int]] = defaultdict(list)
    for h, i in zip(hashes.tolist(), idx.tolist(), strict=True):
        if h not in boilerplate:
            where[h].append(i)
    return _with(_Fingerprint(NOISE_T, filtered, offsets, set(), {}, 0.0), dict(where))


def _with(fp: _Fingerprint, where: dict[int, list[int]]) -> _Fingerprint:
    """`fp` keeping only the fingerprints in `where` (positions by hash)."""
    coverage = float(get_token_coverage(where, fp.k, len(fp.filtered_code)))
    return _Fingerprint(fp.k, fp.filtered_code, fp.offsets, set(where), where, coverage)


def similar_pairs(
    sources: dict[str, str], boilerplate: str, assignment: str, threshold: float = THRESHOLD
) -> tuple[list[SimilarPair], dict[str, int]]:
    """Pairs of students whose graded code overlaps above `threshold` (module docstring), and
    how many were compared."""
    base = set(_fingerprint(boilerplate).hashes) if boilerplate.strip() else set()
    first = {s: _fingerprint(code, base) for s, code in sources.items()}
    df: Counter[int] = Counter(h for fp in first.values() for h in set(fp.hashes))
    cut = max(COMMON_MIN, int(COMMON_FRACTION * len(sources)))
    common = {h for h, n in df.items() if n > cut}
    prints = {
        s: _with(fp, {h: i for h, i in fp.hash_idx.items() if h not in common})
        for s, fp in first.items()
    }
    index: dict[int, list[str]] = defaultdict(list)
    for s in sorted(prints):
        for h in set(prints[s].hashes):
            index[h].append(s)
    candidates: set[tuple[str, str]] = set()
    for students in index.values():
        for i, a in enumerate(students):
            for b in students[i + 1 :]:
                candidates.add((a, b))
    pairs = []
    for a, b in sorted(candidates):
        tokens, (sim_a, sim_b), _ = compare_files(prints[a], prints[b])
        if max(sim_a, sim_b) >= threshold:
            pairs.append(
                SimilarPair(
                    assignment, a, b, round(float(sim_a), 3), round(float(sim_b), 3), int(tokens)
                )
            )
    pairs.sort(key=lambda p: (-max(p.similarity_a, p.similarity_b), p.student_a, p.student_b))
    stats = {
        "submissions": len(sources),
        "common_fingerprints_dropped": len(common),
        "candidate_pairs": len(candidates),
        "all_pairs": len(sources) * (len(sources) - 1) // 2,
    }
    return pairs, stats


def class_sources(
    results: dict[str, GradeResult], paths: dict[str, Path], aid: str
) -> tuple[dict[str, str], list[str]]:
    """{student: graded cells} of assignment `aid` from each student's submission folder, and the
    students whose graded file could not be read (a path outside the folder, a link, too big)."""
    out: dict[str, str] = {}
    missing: list[str] = []
    for student, r in sorted(results.items()):
        a = next((x for x in r.assignments if x.id == aid), None)
        if a is None or not a.graded_file or student not in paths:
            continue
        rel = Path(a.graded_file)
        if rel.is_absolute() or ".." in rel.parts:
            missing.append(student)
            continue
        code = graded_cells(paths[student] / rel)
        if code is None:
            missing.append(student)
        else:
            out[student] = code
    return out, missing

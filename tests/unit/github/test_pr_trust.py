"""What ties a grading to the PR: its head commit's tree, GitHub's time, the course's own check,
the exported instructor commit, and a comment for every outcome (refusals, the sweep)."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from factories import EVENT, HEAD, make_artifact

from grader import github as gha
from grader.github import comment, sweep, tree

SHA = "0123456789abcdef0123456789abcdef01234567"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def head(tmp_path):
    """A student repository whose head holds the artifact's files (and clutter pack leaves out)."""
    repo = tmp_path / "student"
    art = make_artifact(tmp_path)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for rel in ("exercises", "metrics.json"):
        subprocess.run(["cp", "-r", str(art / rel), str(repo / rel)], check=True)
    (repo / "exercises" / "m9_roofline" / "__pycache__").mkdir()
    (repo / "exercises" / "m9_roofline" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (repo / "exercises" / "link.py").symlink_to("m9_roofline/m9_roofline.py")
    (repo / "README.md").write_text("not graded\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "head")
    return repo / ".git", git(repo, "rev-parse", "HEAD"), art


def test_blob_id_is_gits():
    assert (
        tree.blob_id(b"x = 1\n")
        == subprocess.run(
            ["git", "hash-object", "--stdin"], input=b"x = 1\n", capture_output=True, check=True
        )
        .stdout.decode()
        .strip()
    )


def test_an_artifact_of_the_heads_files_is_accepted(head):
    git_dir, sha, art = head
    assert tree.verify_tree(art, git_dir, sha) == 3  # two notebooks + metrics.json


def test_a_forged_file_is_refused_by_name(head, tmp_path, capsys):
    git_dir, sha, art = head
    (art / "exercises" / "m9_roofline" / "m9_roofline.py").write_text("x = 2  # not in head\n")
    with pytest.raises(tree.TreeMismatch, match="m9_roofline.py: differs from its version"):
        tree.verify_tree(art, git_dir, sha)
    out = tmp_path / "report"
    args = ["verify-tree", str(art), "--git-dir", str(git_dir), "--sha", sha]
    assert gha.main([*args, "--comment-to", str(out)]) == 1
    assert "differs from its version" in capsys.readouterr().err
    body = (out / "comment.md").read_text()
    assert body.startswith(gha.MARKER) and "refused" in body and f"commit {sha[:12]}" in body


def test_an_extra_or_a_missing_file_is_refused(head):
    git_dir, sha, art = head
    (art / "exercises" / "extra.py").write_text("y = 1\n")
    with pytest.raises(tree.TreeMismatch, match="extra.py: in the artifact but not in commit"):
        tree.verify_tree(art, git_dir, sha)
    (art / "exercises" / "extra.py").unlink()
    (art / "metrics.json").unlink()
    with pytest.raises(tree.TreeMismatch, match="metrics.json: in commit .* not in the artifact"):
        tree.verify_tree(art, git_dir, sha)


def test_a_commit_that_was_not_fetched_is_refused(head):
    git_dir, _, art = head
    with pytest.raises(tree.TreeMismatch, match="is not in"):
        tree.verify_tree(art, git_dir, SHA)
    with pytest.raises(tree.TreeMismatch, match="not a full commit sha"):
        tree.verify_tree(art, git_dir, "HEAD")


def test_the_time_is_githubs_for_that_head_and_the_result_says_which():
    ev = json.loads(EVENT.read_text())
    assert gha.submitted_at(ev) == ev["workflow_run"]["created_at"]
    assert ev["workflow_run"]["head_commit"]["timestamp"] != ev["workflow_run"]["created_at"]
    from grader.github.event import TIME_SOURCE

    assert TIME_SOURCE == "workflow_run.created_at"


def test_only_the_courses_own_check_file_starts_a_grading():
    ev = json.loads(EVENT.read_text())
    pr = gha.PullRequest(7, HEAD)
    gha.cross_check(pr, ev)
    forged = copy.deepcopy(ev)
    forged["workflow_run"]["path"] = ".github/workflows/my-check.yml"  # also named "Student check"
    with pytest.raises(gha.EventError, match="not the course's own check"):
        gha.cross_check(pr, forged)


def test_the_release_commit_is_read_and_checked(tmp_path, capsys):
    with pytest.raises(ValueError, match="cannot read the release record"):
        gha.release_commit(tmp_path)
    (tmp_path / "course-release.json").write_text('{"instructor_commit": "main"}')
    with pytest.raises(ValueError, match="not a full commit sha"):
        gha.release_commit(tmp_path)
    record = {"instructor_commit": SHA, "suites_uncommitted": True}
    (tmp_path / "course-release.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="uncommitted changes"):
        gha.release_commit(tmp_path)
    record["suites_uncommitted"] = False
    (tmp_path / "course-release.json").write_text(json.dumps(record))
    out = tmp_path / "gh_output"
    rc = gha.main(["release-commit", "--root", str(tmp_path), "--github-output", str(out)])
    assert rc == 0 and out.read_text() == f"commit={SHA}\n"


def test_the_export_records_the_commit_and_whether_the_suites_were_committed(tmp_path):
    from grader.core.student_repo import release_record

    assert json.loads(release_record(tmp_path)) == {
        "instructor_commit": None,
        "suites_uncommitted": False,
    }  # not a git checkout: grading refuses the record and says to export from one
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "tests" / "hidden").mkdir(parents=True)
    (tmp_path / "tests" / "hidden" / "test_a.py").write_text("x = 1\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "suites")
    head = git(tmp_path, "rev-parse", "HEAD")
    assert json.loads(release_record(tmp_path)) == {
        "instructor_commit": head,
        "suites_uncommitted": False,
    }
    (tmp_path / "tests" / "hidden" / "test_a.py").write_text("x = 2\n")
    assert json.loads(release_record(tmp_path))["suites_uncommitted"] is True


def test_a_refused_artifact_gets_a_comment_naming_the_file(tmp_path, capsys):
    art = make_artifact(tmp_path)
    (art / "setup.py").write_text("import os\n")
    out = tmp_path / "report"
    rc = gha.main(["validate-artifact", str(art), "--event", str(EVENT), "--comment-to", str(out)])
    assert rc == 1
    body = (out / "comment.md").read_text()
    assert body.startswith(gha.MARKER) and "setup.py" in body and f"commit {HEAD[:12]}" in body


def test_a_missing_artifact_gets_a_comment(tmp_path):
    out = tmp_path / "report"
    rc = gha.main(["validate-artifact", str(tmp_path / "nothing"), "--event", str(EVENT),
                   "--comment-to", str(out)])  # fmt: skip
    assert rc == 1
    assert "no artifact there" in (out / "comment.md").read_text()


class FakeGitHub:
    """The few GitHub API endpoints the PR verbs call through `gh api`, answered from memory."""

    def __init__(self, prs, comments):
        self.prs, self.comments, self.posted = prs, comments, []

    def __call__(self, args, stdin):
        args = list(args)
        path = next(a for a in args if a.startswith("repos/"))
        if path.endswith("/pulls") and "-X" in args:
            head = next((a[5:] for a in args if a.startswith("head=")), None)
            rows = [p for p in self.prs if head is None or p["head"] == head]
            if "@tsv" in args[-1] and "updated_at" in args[-1]:
                return "".join(f"{p['number']}\t{p['sha']}\t{p['updated']}\n" for p in rows)
            return "".join(f"{p['number']}\t{p['sha']}\n" for p in rows)
        if "/pulls/" in path and "mergeable" in args[-1]:
            pr = next(p for p in self.prs if str(p["number"]) == path.split("/")[-1])
            merge = {True: "true", False: "false", None: ""}[pr.get("mergeable", True)]
            return f"{merge}\t{pr['head'].split(':')[0]}\t{pr['updated']}\n"
        if path.endswith("/comments") and "-X" not in args:
            number = int(path.split("/")[-2])
            return "".join(
                json.dumps({"id": i, "login": c["login"], "body": c["body"],
                            "head": c["body"][:40]}) + "\n"
                for i, c in enumerate(self.comments.get(number, []), 1)
            )  # fmt: skip
        self.posted.append((path, json.loads(stdin)["body"]))
        return "{}"


def test_find_pr_asks_github_for_the_head():
    gh = FakeGitHub([{"number": 3, "sha": "a" * 40, "head": "ada:m9"},
                     {"number": 7, "sha": HEAD, "head": "ada:m9"}], {})  # fmt: skip
    assert comment.find_pr("gpu-course/repo", "ada", "m9", HEAD, gh=gh) == 7
    with pytest.raises(ValueError, match="no open pull request"):
        comment.find_pr("gpu-course/repo", "ada", "m9", SHA, gh=gh)


def test_the_sweep_comments_once_on_heads_left_ungraded():
    now = datetime(2026, 12, 15, 12, 0, tzinfo=UTC)
    graded = f"{gha.MARKER}\n## ✅ Grading finished\n<sub>PR #1 · commit {'1' * 12}</sub>"
    gh = FakeGitHub(
        [
            {"number": 1, "sha": "1" * 40, "head": "a:x", "updated": "2026-12-15T09:00:00Z"},
            {"number": 2, "sha": "2" * 40, "head": "b:x", "updated": "2026-12-15T09:00:00Z"},
            {"number": 3, "sha": "3" * 40, "head": "c:x", "updated": "2026-12-15T11:50:00Z"},
        ],
        {1: [{"login": gha.BOT_LOGIN, "body": graded}]},
    )
    done = sweep.sweep("gpu-course/repo", 60, now=now, gh=gh)
    assert [(s.number, s.action) for s in done] == [(1, "graded"), (2, "commented"), (3, "recent")]
    [(path, body)] = gh.posted
    assert path == "repos/gpu-course/repo/issues/2/comments"
    assert body.startswith(gha.MARKER) and "Not graded yet" in body and "merge conflicts" in body
    assert "2" * 12 in body  # names the head, so the next sweep leaves it alone
    gh.comments[2] = [{"login": gha.BOT_LOGIN, "body": body}]
    gh.posted.clear()
    assert [s.action for s in sweep.sweep("gpu-course/repo", 60, now=now, gh=gh)] == [
        "graded", "graded", "recent"
    ]  # fmt: skip
    assert gh.posted == []


def test_the_sweep_names_a_conflicting_head_for_grading_at_githubs_time_and_no_comment():
    """GitHub runs no check on a conflicting PR: the sweep hands its head to the GPU job at
    once (no waiting), with the fork owner and updated_at; `mergeable` unknown is not a
    conflict (GitHub is still computing it)."""
    now = datetime(2026, 12, 15, 12, 0, tzinfo=UTC)
    gh = FakeGitHub(
        [
            {"number": 4, "sha": "4" * 40, "head": "ada:x", "updated": "2026-12-15T11:55:00Z",
             "mergeable": False},
            {"number": 5, "sha": "5" * 40, "head": "bo:x", "updated": "2026-12-15T09:00:00Z",
             "mergeable": None},
            {"number": 6, "sha": "6" * 40, "head": "cy:x", "updated": "2026-12-15T09:00:00Z",
             "mergeable": False},
        ],
        {6: [{"login": gha.BOT_LOGIN, "body": f"{gha.MARKER}\nok\n<sub>commit {'6' * 12}</sub>"}]},
    )  # fmt: skip
    done = sweep.sweep("gpu-course/repo", 60, now=now, gh=gh)
    assert [(s.number, s.action) for s in done] == [(4, "conflicting"), (5, "commented"),
                                                    (6, "graded")]  # fmt: skip
    assert [path for path, _ in gh.posted] == ["repos/gpu-course/repo/issues/5/comments"]
    assert sweep.plan(done) == [
        {"number": 4, "head_sha": "4" * 40, "student": "ada", "updated_at": "2026-12-15T11:55:00Z"}
    ]


def test_a_conflicting_head_with_an_unusable_login_is_not_planned():
    now = datetime(2026, 12, 15, 12, 0, tzinfo=UTC)
    gh = FakeGitHub([{"number": 4, "sha": "4" * 40, "head": "-bad login:x",
                      "updated": "2026-12-15T11:55:00Z", "mergeable": False}], {})  # fmt: skip
    done = sweep.sweep("gpu-course/repo", 60, now=now, gh=gh)
    assert [s.action for s in done] == ["recent"] and sweep.plan(done) == []


def test_the_sweep_verb_writes_the_heads_output(tmp_path, monkeypatch):
    planned = [
        sweep.Swept(
            4, "4" * 40, "conflicting", gha.sweep_event(4, "4" * 40, "ada", "2026-12-15T11:55:00Z")
        )
    ]
    monkeypatch.setattr(gha, "sweep_ungraded", lambda repo, minutes, **_: planned)
    out = tmp_path / "out"
    assert gha.main(["sweep", "--repo", "a/b", "--github-output", str(out)]) == 0
    key, _, value = out.read_text().strip().partition("=")
    assert key == "heads" and json.loads(value) == [planned[0].head["sweep_head"]]


def test_a_swept_heads_tree_is_laid_out_and_graded_at_the_recorded_time(head, tmp_path):
    """head-submission: the commit's own files (no link, no cache), a pr.json naming it, and a
    sweep_head event that grade-pr's checks, student and time read from."""
    git_dir, sha, art = head
    entry = {"number": 9, "head_sha": sha, "student": "ada", "updated_at": "2026-12-15T11:55:00Z"}
    sub, ev = tmp_path / "sub", tmp_path / "event.json"
    rc = gha.main(["head-submission", "--git-dir", str(git_dir), "--head", json.dumps(entry),
                   "--out", str(sub), "--event-out", str(ev)])  # fmt: skip
    assert rc == 0
    assert tree.verify_tree(sub, git_dir, sha) == 3  # exactly the head's files
    assert not (sub / "exercises" / "link.py").exists()
    assert not (sub / "exercises" / "m9_roofline" / "__pycache__").exists()
    pr = gha.validate_artifact(sub).pr
    assert (pr.number, pr.head_sha) == (9, sha)
    event = gha.load_event(ev)
    gha.cross_check(pr, event)
    assert gha.student_of(event) == "ada" and gha.submitted_at(event) == entry["updated_at"]
    from grader.github.event import SWEEP_TIME_SOURCE, time_source

    assert time_source(event) == SWEEP_TIME_SOURCE
    other = gha.PullRequest(number=9, head_sha="f" * 40)
    with pytest.raises(gha.EventError, match="not the swept head"):
        gha.cross_check(other, event)


def test_a_swept_head_that_is_not_fetched_or_forged_is_refused_with_a_comment(head, tmp_path):
    git_dir, sha, _ = head
    out = tmp_path / "report"
    missing = {"number": 9, "head_sha": "e" * 40, "student": "ada",
               "updated_at": "2026-12-15T11:55:00Z"}  # fmt: skip
    rc = gha.main(["head-submission", "--git-dir", str(git_dir), "--head", json.dumps(missing),
                   "--out", str(tmp_path / "s1"), "--event-out", str(tmp_path / "e1"),
                   "--comment-to", str(out)])  # fmt: skip
    assert rc == 1 and not (tmp_path / "e1").exists()
    body = (out / "comment.md").read_text()
    assert body.startswith(gha.MARKER) and f"commit {'e' * 12}" in body
    bads = [{**missing, "head_sha": sha, "student": "no such/login"},
            {**missing, "head_sha": sha, "updated_at": "yesterday"}, ["not", "a dict"]]  # fmt: skip
    for bad in bads:
        args = ["--out", str(tmp_path / "s2"), "--event-out", str(tmp_path / "e2")]
        rc = gha.main(["head-submission", "--git-dir", str(git_dir), "--head", json.dumps(bad),
                       *args])  # fmt: skip
        assert rc == 1 and not (tmp_path / "e2").exists()


def test_a_swept_head_over_the_size_limits_is_refused_before_reading(head, tmp_path, monkeypatch):
    git_dir, sha, _ = head
    monkeypatch.setattr(tree, "LIMITS", dataclasses.replace(tree.LIMITS, max_file_bytes=10))
    with pytest.raises(gha.ArtifactError, match="size limits"):
        tree.submission_from_tree(git_dir, sha, tmp_path / "s", 9)

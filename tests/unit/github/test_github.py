"""grader.github: what the GitHub workflows run (artifact validation, PR grading, comment)."""

from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
import sys
import zipfile
from datetime import datetime
from pathlib import Path

import factories
import pytest
from factories import EVENT, HEAD, PR, ROOT, grade_pr, make_artifact

from grader import cli
from grader import github as gha
from grader.github import comment as comment_module
from grader.github import grade as gha_grade
from grader.github import private
from grader.grading.limits import LIMITS


def make_zip(path: Path, members: dict[str, bytes], symlinks: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


GOOD_ZIP = {
    "exercises/m9_roofline/m9_roofline.py": b"x = 1\n",
    "metrics.json": b"{}",
    "pr.json": json.dumps({"number": PR, "head_sha": HEAD}).encode(),
}


def rejected(src: Path, *needles: str) -> str:
    with pytest.raises(gha.ArtifactError) as info:
        gha.validate_artifact(src)
    msg = str(info.value)
    for n in needles:
        assert n in msg, msg
    return msg


# ----------------------------------------------------------------------------- accepted


def test_accepts_a_clean_directory_and_extracts_it(tmp_path):
    art = make_artifact(tmp_path)
    out = tmp_path / "clean"
    result = gha.validate_artifact(art, extract_to=out)
    assert result.pr == gha.PullRequest(PR, HEAD)
    assert result.files == (
        "exercises/gpu_fundamentals/gpu_fundamentals.ipynb",
        "exercises/m9_roofline/m9_roofline.py",
        "metrics.json",
        "pr.json",
    )
    assert (out / "exercises/m9_roofline/m9_roofline.py").read_text() == "x = 1\n"
    assert (out / "pr.json").is_file()


def test_accepts_the_zip_that_download_artifact_leaves_with_skip_decompress(tmp_path):
    folder = tmp_path / "artifact"
    folder.mkdir()
    make_zip(folder / "submission.zip", GOOD_ZIP)
    out = tmp_path / "clean"
    result = gha.validate_artifact(folder, extract_to=out)
    assert result.pr.number == PR
    assert (out / "exercises/m9_roofline/m9_roofline.py").read_bytes() == b"x = 1\n"
    assert sorted(p.name for p in out.iterdir()) == ["exercises", "metrics.json", "pr.json"]


def test_metrics_json_is_optional(tmp_path):
    art = make_artifact(tmp_path)
    (art / "metrics.json").unlink()
    assert gha.validate_artifact(art).pr.number == PR


# ----------------------------------------------------------------------------- rejected


def test_rejects_dotdot_in_a_zip(tmp_path):
    z = make_zip(tmp_path / "a.zip", {**GOOD_ZIP, "exercises/../../etc/cron.d/x": b"boom"})
    rejected(z, "exercises/../../etc/cron.d/x", "'..'")


def test_rejects_an_absolute_path_in_a_zip(tmp_path):
    z = make_zip(tmp_path / "a.zip", {**GOOD_ZIP, "/etc/passwd": b"root"})
    rejected(z, "/etc/passwd", "absolute")


def test_rejects_a_symlink_in_a_zip(tmp_path):
    z = make_zip(tmp_path / "a.zip", GOOD_ZIP, {"exercises/m9_roofline/key": "/root/.ssh/id"})
    rejected(z, "exercises/m9_roofline/key", "symbolic link")


def test_rejects_a_symlink_in_a_directory(tmp_path):
    art = make_artifact(tmp_path)
    os.symlink("/etc/passwd", art / "exercises" / "m9_roofline" / "secrets.txt")
    rejected(art, "exercises/m9_roofline/secrets.txt", "symbolic link")


def test_rejects_a_symlinked_folder(tmp_path):
    art = make_artifact(tmp_path)
    os.symlink("/etc", art / "exercises" / "etc")
    rejected(art, "exercises/etc", "symbolic link")


def test_rejects_a_hard_link(tmp_path):
    art = make_artifact(tmp_path)
    os.link(art / "metrics.json", art / "exercises" / "m9_roofline" / "copy.json")
    msg = rejected(art, "hard link")
    assert "metrics.json" in msg or "copy.json" in msg


def test_rejects_a_named_pipe(tmp_path):
    art = make_artifact(tmp_path)
    os.mkfifo(art / "exercises" / "m9_roofline" / "pipe")
    rejected(art, "exercises/m9_roofline/pipe", "named pipe")


def test_rejects_a_device_file(tmp_path):
    art = make_artifact(tmp_path)
    try:
        os.mknod(art / "exercises" / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device file needs root; the named-pipe case covers the rule")
    rejected(art, "exercises/null", "device file")


def test_rejects_a_device_file_in_a_zip(tmp_path):
    z = tmp_path / "a.zip"
    make_zip(z, GOOD_ZIP)
    with zipfile.ZipFile(z, "a") as zf:
        info = zipfile.ZipInfo("exercises/m9_roofline/tty")
        info.create_system = 3
        info.external_attr = (stat.S_IFCHR | 0o600) << 16
        zf.writestr(info, b"")
    rejected(z, "exercises/m9_roofline/tty", "device file")


def test_rejects_files_outside_exercises(tmp_path):
    for name in ("conftest.py", "tests/hidden/test_x.py", ".github/workflows/x.yml"):
        art_base = tmp_path / name.replace("/", "_")
        art_base.mkdir()
        art = make_artifact(art_base)
        target = art / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("print('hi')\n")
        rejected(art, name.split("/")[0], "outside exercises/")


def test_rejects_an_oversize_file(tmp_path):
    art = make_artifact(tmp_path)
    big = art / "exercises" / "m9_roofline" / "weights.bin"
    with open(big, "wb") as fh:
        fh.truncate(LIMITS.max_file_bytes + 1)  # sparse: no real disk use
    rejected(art, "exercises/m9_roofline/weights.bin", "larger than 20 MB")


def test_rejects_an_oversize_total(tmp_path):
    art = make_artifact(tmp_path)
    for i in range(LIMITS.max_total_bytes // LIMITS.max_file_bytes + 1):
        with open(art / "exercises" / f"part{i:02d}.bin", "wb") as fh:
            fh.truncate(LIMITS.max_file_bytes)
    rejected(art, "exercises/part", f"larger than {LIMITS.max_total_bytes // 2**20} MB in all")


def test_rejects_a_zip_bomb_by_its_declared_size(tmp_path):
    z = tmp_path / "a.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in GOOD_ZIP.items():
            zf.writestr(name, data)
        zf.writestr("exercises/zeros.bin", b"\0" * (LIMITS.max_file_bytes + 1))
    assert z.stat().st_size < 1_000_000
    rejected(z, "exercises/zeros.bin", "larger than 20 MB")


def test_rejects_a_zip_member_whose_size_lies(tmp_path):
    z = make_zip(tmp_path / "a.zip", {**GOOD_ZIP, "exercises/x.bin": b"a" * 1000})
    raw = bytearray(z.read_bytes())
    # the central directory's uncompressed size of the member: claim 10 bytes instead of 1000
    name = b"exercises/x.bin"
    cd = raw.rindex(b"PK\x01\x02" + raw[raw.rindex(name) - 46 + 4 : raw.rindex(name) - 46 + 6])
    assert raw[cd + 46 : cd + 46 + len(name)] == name
    raw[cd + 24 : cd + 28] = (10).to_bytes(4, "little")
    z.write_bytes(bytes(raw))
    rejected(z, "exercises/x.bin")


def test_rejects_too_many_files(tmp_path):
    art = make_artifact(tmp_path)
    many = art / "exercises" / "many"
    many.mkdir()
    for i in range(LIMITS.max_files):
        (many / f"f{i:04d}.py").write_text("")
    rejected(art, "exercises/many/f", "too many files")


@pytest.mark.parametrize(
    "number", ["7", 7.0, -3, 0, True, None, "7; rm -rf /", [7], 2**40], ids=repr
)
def test_rejects_a_pr_number_that_is_not_a_positive_integer(tmp_path, number):
    art = make_artifact(tmp_path, pr=number)
    rejected(art, "pr.json", "positive integer")


def test_rejects_a_bad_head_sha_and_a_missing_pr_json(tmp_path):
    art = make_artifact(tmp_path, head_sha="main")
    rejected(art, "pr.json", "head_sha")
    (art / "pr.json").unlink()
    rejected(art, "pr.json", "missing")


def test_rejects_control_characters_without_printing_them(tmp_path):
    z = make_zip(tmp_path / "a.zip", {**GOOD_ZIP, "exercises/x\n::set-output name=a::b": b""})
    msg = rejected(z, "control characters")
    assert "\n" not in msg


def test_rejects_an_artifact_without_exercises(tmp_path):
    z = make_zip(tmp_path / "a.zip", {"pr.json": GOOD_ZIP["pr.json"]})
    rejected(z, "no exercise files")


def test_cli_rejection_names_the_file_and_fails(tmp_path, capsys):
    art = make_artifact(tmp_path)
    os.symlink("/etc/shadow", art / "exercises" / "evil")
    assert gha.main(["validate-artifact", str(art)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rejected: exercises/evil: is a symbolic link")


def test_cli_writes_github_outputs(tmp_path, capsys):
    art = make_artifact(tmp_path)
    outputs = tmp_path / "gh_output"
    rc = gha.main(
        ["validate-artifact", str(art), "--event", str(EVENT), "--github-output", str(outputs)]
    )
    assert rc == 0, capsys.readouterr().err
    assert outputs.read_text().splitlines() == [
        f"pr-number={PR}",
        f"head-sha={HEAD}",
        "student=ada-student",
    ]


# ----------------------------------------------------------------------------- event checks


def event() -> dict:
    return json.loads(EVENT.read_text())


def test_cross_check_accepts_a_fork_pr_without_pull_requests():
    gha.cross_check(gha.PullRequest(PR, HEAD), event())


def test_cross_check_uses_pull_requests_when_present():
    ev = event()
    ev["workflow_run"]["pull_requests"] = [{"number": 8, "head": {"sha": HEAD}}]
    with pytest.raises(gha.EventError, match="PR #7 is not among"):
        gha.cross_check(gha.PullRequest(PR, HEAD), ev)
    gha.cross_check(gha.PullRequest(8, HEAD), ev)


def test_cross_check_rejects_another_commit_and_other_events():
    with pytest.raises(gha.EventError, match="head_sha"):
        gha.cross_check(gha.PullRequest(PR, "a" * 40), event())
    ev = event()
    ev["workflow_run"]["event"] = "push"
    with pytest.raises(gha.EventError, match="not pull_request"):
        gha.cross_check(gha.PullRequest(PR, HEAD), ev)


def test_student_and_time_come_from_the_event_not_the_commit():
    ev = event()
    assert gha.student_of(ev) == "ada-student"
    assert gha.submitted_at(ev) == "2026-12-15T10:30:00Z"  # not head_commit.timestamp
    ev["workflow_run"]["head_repository"]["owner"]["login"] = "bad name\n"
    assert gha.student_of(ev) == "ada-student"  # falls back to the actor


# ----------------------------------------------------------------------------- grade-pr


@pytest.fixture
def sandboxed(monkeypatch):
    """The grading itself is a stand-in in these tests: let grade-pr pass its sandbox check on a
    machine without bubblewrap (test_grade_pr_fails_closed_without_the_sandbox keeps it real)."""
    monkeypatch.setattr(gha_grade, "decide", lambda: None)


def canned_result(student: str, timestamp: datetime):
    from grader.core.results import AssignmentResult, Environment, GradeResult, TestResult

    tests = [
        TestResult("test_ridge_point_h100", 4.0, 4.0, "passed", suite="public"),
        TestResult(
            "test_vector_add_bounds",
            0.0,
            6.0,
            "failed",
            feedback="c[256] is 0.0, expected 1.5: @maintainer <script>alert(1)</script>",
            suite="hidden",
        ),
    ]
    a = AssignmentResult(
        id="gpu_fundamentals",
        score=3.625,
        max_score=10.0,
        late_penalty=0.1,
        raw_score=4.0,
        graded_file="exercises/gpu_fundamentals/gpu_fundamentals.ipynb",
        tests=tests,
    )
    return GradeResult(
        student=student,
        score=3.625,
        max_score=10.0,
        environment=Environment(
            device="NVIDIA T4", simulator=False, isolation=["rlimits"], grader_version="0.1.0"
        ),
        assignments=[a],
        timestamp=timestamp.isoformat(),
        submission_digest="sha256:0",
        duration_s=12.5,
    )


def test_grade_pr_writes_comment_summary_and_reports_offline(tmp_path, monkeypatch, sandboxed):
    """The real grade-pr path with the grading itself replaced by a canned result."""
    pytest.importorskip("grader.reports")
    calls = []

    def fake_grade(submission, root, student, timestamp, **kw):
        names = sorted(p.relative_to(submission).as_posix() for p in submission.rglob("*"))
        calls.append((names, root, student, timestamp))
        return canned_result(student, timestamp)

    monkeypatch.setattr(gha_grade, "_grade", fake_grade)
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "gpu-course/gpu-mental-model")
    monkeypatch.setenv("GITHUB_RUN_ID", "12744300001")
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    art = make_artifact(tmp_path)
    out = tmp_path / "report"
    rc = grade_pr(art, out)
    assert rc == 0

    [(names, root, student, ts)] = calls
    assert "pr.json" not in names  # the grader sees the student's files only
    assert "metrics.json" in names and "exercises/m9_roofline/m9_roofline.py" in names
    assert root == ROOT and student == "ada-student"
    assert ts.isoformat() == "2026-12-15T10:30:00+00:00"  # workflow_run.created_at

    comment = (out / "comment.md").read_text()
    assert comment.startswith(gha.MARKER + "\n")
    assert "PR #7" in comment and "/actions/runs/12744300001" in comment
    assert "grader open-report report.age" not in comment  # no SSH key: staff only
    assert "github.com/settings/keys" in comment
    assert sorted(p.name for p in out.iterdir()) == ["comment.md", "pr.json", "report.age",
                                                    "summary.md"]  # fmt: skip
    public = "\n".join(p.read_text() for p in out.glob("*.[jm][sd]*"))
    for secret in ("3.625", "10.0", "vector_add_bounds", "vector\\_add", "c[256]", "ridge_point"):
        assert secret not in public, secret
    meta = json.loads((out / "pr.json").read_text())
    assert meta["number"] == PR and meta["head_sha"] == HEAD and "score" not in meta
    assert meta["submitted_at_source"] == "workflow_run.created_at"

    # the staff open it with their age key
    key = tmp_path / "staff.key"
    key.write_text(f"{factories.STAFF}\n")
    opened = tmp_path / "opened"
    assert cli.main(["open-report", str(out / "report.age"), "--identity", str(key),
                     "--out", str(opened)]) == 0  # fmt: skip
    result = json.loads((opened / "result.json").read_text())
    assert result["student"] == "ada-student" and result["score"] == 3.625
    assert "3.625 / 10" in (opened / "report.md").read_text()
    html = (opened / "report.html").read_text()
    assert "<html" in html.lower() and "<script>alert" not in html
    assert json.loads((opened / "pr.json").read_text())["score"] == 3.625


def test_the_student_opens_the_report_with_their_key_and_no_one_else_can(
    tmp_path, monkeypatch, sandboxed
):
    monkeypatch.setattr(gha_grade, "_grade", lambda sub, root, st, ts, **kw: canned_result(st, ts))
    keys = []
    for name in ("student", "other"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name)],
                       check=True)  # fmt: skip
        keys.append(tmp_path / name)
    listing = tmp_path / "ada.keys"  # what https://github.com/ada-student.keys serves
    listing.write_text(
        "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTY=\n"  # age can't
        + (tmp_path / "student.pub").read_text()
    )
    out = tmp_path / "report"
    assert grade_pr(make_artifact(tmp_path), out, "--student-keys", str(listing)) == 0
    comment = (out / "comment.md").read_text()
    assert "grader open-report report.age" in comment and "3.625" not in comment
    opened = tmp_path / "mine"
    files = private.open_report(out / "report.age", keys[0], opened)
    assert {f.name for f in files} == {"result.json", "report.md", "report.html", "pr.json"}
    assert json.loads((opened / "result.json").read_text())["score"] == 3.625
    with pytest.raises(private.PrivateReportError, match="this key cannot open it"):
        private.open_report(out / "report.age", keys[1], tmp_path / "theirs")
    assert not (tmp_path / "theirs" / "result.json").exists()


def test_grade_pr_without_the_staff_key_is_not_graded_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        gha_grade, "_grade", lambda *a, **kw: pytest.fail("graded with no staff key")
    )
    out = tmp_path / "report"
    rc = gha.main(["grade-pr", "--artifact", str(make_artifact(tmp_path)), "--event", str(EVENT),
                   "--out", str(out), "--root", str(ROOT), "--staff-recipient", ""])  # fmt: skip
    assert rc == 3
    assert "STAFF_AGE_RECIPIENT" in capsys.readouterr().err
    comment = (out / "comment.md").read_text()
    assert comment.startswith(gha.MARKER) and "Not graded" in comment
    assert not (out / "report.age").exists()


def test_grade_pr_refuses_a_pr_json_for_another_commit(tmp_path, monkeypatch, sandboxed):
    monkeypatch.setattr(
        gha_grade, "_grade", lambda *a, **kw: pytest.fail("graded a spoofed submission")
    )
    art = make_artifact(tmp_path, head_sha="b" * 40)
    rc = grade_pr(art, tmp_path / "o")
    assert rc == 1
    assert not (tmp_path / "o" / "comment.md").exists()


def test_grade_pr_stops_workflow_commands_while_grading(tmp_path, monkeypatch, sandboxed, capsys):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    seen = []

    def fake_grade(submission, root, student, timestamp, **kw):
        seen.append(capsys.readouterr().out)
        print("::add-mask::nothing")  # what student output may try
        return canned_result(student, timestamp)

    monkeypatch.setattr(gha_grade, "_grade", fake_grade)
    art = make_artifact(tmp_path)
    rc = grade_pr(art, tmp_path / "o")
    assert rc == 0
    [before] = seen
    token = before.strip().split("::stop-commands::")[1]
    after = capsys.readouterr().out
    assert f"::{token}::" in after and after.index("::add-mask::") < after.index(f"::{token}::")


# ----------------------------------------------------------------------------- pack


def test_pack_submission_lays_out_a_valid_artifact(tmp_path):
    repo = tmp_path / "fork"
    (repo / "exercises" / "m9_roofline" / "__pycache__").mkdir(parents=True)
    (repo / "exercises" / "m9_roofline" / "m9_roofline.py").write_text("x = 1\n")
    (repo / "exercises" / "m9_roofline" / "__pycache__" / "m.pyc").write_bytes(b"\0")
    os.symlink("/etc/passwd", repo / "exercises" / "m9_roofline" / "link")
    (repo / "metrics.json").write_text("{}")
    (repo / "tests").mkdir()
    (repo / "tests" / "conftest.py").write_text("")
    out = tmp_path / "out"
    art = gha.pack_submission(repo, out, PR, HEAD)
    assert art.files == ("exercises/m9_roofline/m9_roofline.py", "metrics.json", "pr.json")
    assert json.loads((out / "pr.json").read_text()) == {"number": PR, "head_sha": HEAD}


def test_pack_submission_cli_rejects_a_non_integer_pr(tmp_path, capsys):
    (tmp_path / "exercises").mkdir()
    rc = gha.main(
        [
            "pack-submission",
            "--out",
            str(tmp_path / "o"),
            "--pr",
            "x",
            "--head-sha",
            HEAD,
            "--root",
            str(tmp_path),
        ]
    )
    assert rc == 1 and "not an integer" in capsys.readouterr().err


# ----------------------------------------------------------------------------- post-comment


class FakeGh:
    def __init__(self, comments: list[dict], head: str = HEAD):
        self.comments = comments
        self.head = head
        self.calls: list[tuple[list[str], str | None]] = []

    def __call__(self, args, stdin):
        self.calls.append((list(args), stdin))
        if args[1].endswith("/pulls/7"):
            return self.head + "\n"
        if "--paginate" in args:
            return "".join(json.dumps(c) + "\n" for c in self.comments)
        return "{}"


def test_post_comment_creates_then_updates_only_the_bots_comment():
    body = gha.MARKER + "\nscore"
    planted = {"id": 1, "login": "ada-student", "head": gha.MARKER + " fake"}
    gh = FakeGh([planted])
    assert gha.post_comment("gpu-course/gpu-mental-model", PR, body, HEAD, gh=gh) == "created"
    args, stdin = gh.calls[-1]
    assert args[:4] == ["api", "-X", "POST", "repos/gpu-course/gpu-mental-model/issues/7/comments"]
    assert json.loads(stdin) == {"body": body}

    ours = {"id": 99, "login": gha.BOT_LOGIN, "head": gha.MARKER + "\n## score"}
    gh = FakeGh([planted, ours])
    assert gha.post_comment("gpu-course/gpu-mental-model", PR, body, HEAD, gh=gh) == "updated"
    assert gh.calls[-1][0][:4] == [
        "api",
        "-X",
        "PATCH",
        "repos/gpu-course/gpu-mental-model/issues/comments/99",
    ]


def test_post_comment_refuses_when_the_pr_head_moved_or_the_body_is_not_ours():
    gh = FakeGh([], head="c" * 40)
    with pytest.raises(ValueError, match="not posting"):
        gha.post_comment("o/r", PR, gha.MARKER + "x", HEAD, gh=gh)
    assert all("POST" not in c[0] for c in gh.calls)
    with pytest.raises(ValueError, match="marker"):
        gha.post_comment("o/r", PR, "hello", HEAD, gh=FakeGh([]))
    with pytest.raises(ValueError, match="repository"):
        gha.post_comment("o/r; rm", PR, gha.MARKER, HEAD, gh=FakeGh([]))


def test_event_fixture_is_a_realistic_fork_pr_run():
    ev = copy.deepcopy(event())
    run = ev["workflow_run"]
    assert run["event"] == "pull_request" and run["pull_requests"] == []
    assert run["head_repository"]["fork"] is True
    assert ev["repository"]["default_branch"] == "main"


@pytest.mark.slow
def test_grade_pr_end_to_end_with_the_real_grader(tmp_path):
    """pack-submission -> validate-artifact -> grade-pr on the released stubs, sandboxed, offline.

    The late policy uses the event's workflow_run.created_at (2026-12-15T10:30Z: one day after
    gpu_fundamentals was due), not the commit date in the payload (2026-12-01, on time).
    """
    art = gha.pack_submission(ROOT, tmp_path / "art", PR, HEAD)
    assert any(f.startswith("exercises/gpu_fundamentals/") for f in art.files)
    clean = tmp_path / "clean"
    assert gha.main(["validate-artifact", str(tmp_path / "art"), "--extract-to", str(clean)]) == 0
    out = tmp_path / "out"
    rc = grade_pr(clean, out)
    assert rc == 0
    assert (out / "comment.md").read_text().startswith(gha.MARKER)
    assert (out / "summary.md").stat().st_size > 0 and not (out / "result.json").exists()
    key = tmp_path / "staff.key"
    key.write_text(f"{factories.STAFF}\n")
    private.open_report(out / "report.age", key, tmp_path / "opened")
    assert (tmp_path / "opened" / "report.html").stat().st_size > 0
    result = json.loads((tmp_path / "opened" / "result.json").read_text())
    assert result["student"] == "ada-student" and result["score"] == 0  # stubs earn nothing
    late = {a["id"]: a["late_penalty"] for a in result["assignments"]}
    assert late["gpu_fundamentals"] == pytest.approx(0.1) and late["m9_roofline"] == 0


def test_grade_pr_fails_closed_without_the_sandbox(tmp_path, monkeypatch, capsys):
    from grader.sandbox import isolation

    monkeypatch.setattr(
        gha_grade, "_grade", lambda *a, **kw: pytest.fail("graded without a sandbox")
    )
    monkeypatch.setenv(isolation.BWRAP_ENV, "")
    isolation.probe.cache_clear()
    try:
        rc = grade_pr(make_artifact(tmp_path), tmp_path / "report")
    finally:
        monkeypatch.undo()
        isolation.probe.cache_clear()
    assert rc == 3  # the machine's fault: an infrastructure error, with its own comment
    err = capsys.readouterr().err
    assert "grading refused: isolation incomplete" in err and "install bubblewrap" in err
    comment = (tmp_path / "report" / "comment.md").read_text()
    assert comment.startswith(gha.MARKER) and "not set up" in comment
    assert "install bubblewrap" in comment and not (tmp_path / "report" / "report.age").exists()


def test_the_artifact_check_and_intake_share_one_set_of_limits():
    """One policy: what the PR path accepts is what intake takes (grader.grading.limits)."""
    from grader.github import artifact
    from grader.grading import intake, limits

    assert artifact.LIMITS is intake.LIMITS is limits.LIMITS
    assert isinstance(limits.LIMITS, limits.SubmissionLimits)
    with pytest.raises(AttributeError):
        limits.LIMITS.max_files = 1  # frozen


def test_the_bare_python_verbs_import_no_third_party_module():
    """validate-artifact, pack-submission and the comment verbs run before anything is installed."""
    probe = (
        "import sys, grader.github, grader.github.artifact, grader.github.comment; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'jsonschema', 'pytest'}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert proc.stdout.strip() == "[]", proc.stdout


def test_the_not_graded_comment_is_written_whole_beside_what_was_there(tmp_path):
    """write_not_graded replaces comment.md and summary.md (atomic_write): a link left in OUT
    is replaced, not written through, and no temporary file stays behind."""
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (out / "comment.md").symlink_to(victim)
    comment_module.write_not_graded(out, "## Not graded\n\nwhy", "<sub>commit abc</sub>")
    assert victim.read_text() == "keep\n"
    comment = out / "comment.md"
    assert not comment.is_symlink() and comment.read_text().startswith(gha.MARKER + "\n")
    assert comment.read_text().endswith("why\n\n<sub>commit abc</sub>\n")
    assert sorted(p.name for p in out.iterdir()) == ["comment.md", "summary.md"]

"""grade.yml run end to end by act, offline (see test_act.py): the GPU job on a self-hosted
platform named by `--var GPU_RUNNER_LABEL`, the head commit fetched from a local repository
(git's `url.<base>.insteadOf`, so the workflow's own `git fetch` of `$SERVER/$REPO` runs), the
artifact, cache and setup-python actions replaced by the stand-ins in act_actions/ (act cannot
reach GitHub's services), the API by fake_gh.py. What these runs stop before: the deploy-key
checkout of the private instructor repository and the grading itself, which need GitHub and a
GPU (docs/GITHUB_SETUP.md, "Tested offline")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from act_standins import PINS, STANDINS
from factories import EVENT, ROOT, make_artifact

from grader import github as gha

HERE = Path(__file__).resolve().parent
PR_NUMBER = 7


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def act_args(
    act_exe: str, tmp: Path, state: Path, remote: Path, source: Path = ROOT
) -> list[str]:
    """act with the stand-ins, the fake gh and python on PATH, the local 'GitHub' for git;
    `source` is the default branch the checkouts see (this repository's work tree)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gh").write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "fake_gh.py"} "$@"\n')
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA H200, 580.65.06'\n")
    for name in ("gh", "nvidia-smi"):
        (bin_dir / name).chmod(0o755)
    for name in ("python", "python3"):
        if not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(sys.executable)
    args = [act_exe, "workflow_run", "-W", ".github/student-workflows/grade.yml",
            "-P", "ubuntu-latest=-self-hosted", "-P", "gpu-runner=-self-hosted",
            "--var", "GPU_RUNNER_LABEL=gpu-runner", "--action-offline-mode",
            "--remote-name", "no-such-remote", "--concurrent-jobs", "1",
            "--env", f"FAKE_GH_STATE={state}", "--env", f"ACT_STANDIN_STORE={tmp / 'store'}",
            "--env", f"PATH={bin_dir}:/usr/bin:/bin", "--env", f"ACT_STANDIN_SOURCE={source}",
            # the workflow fetches "$SERVER/$GITHUB_REPOSITORY": answered from `remote`
            "--env", "GIT_CONFIG_COUNT=1",
            "--env", f"GIT_CONFIG_KEY_0=url.file://{remote}/.insteadOf",
            "--env", "GIT_CONFIG_VALUE_0=https://github.com/"]  # fmt: skip
    for pin, folder in PINS.items():
        args += ["--local-repository", f"{pin}={STANDINS / folder}"]
    return args


@pytest.fixture
def student_head(tmp_path):
    """A student's head commit (the artifact's files), served as the repository act names."""
    remote = tmp_path / "remote"
    repo = remote / "student"
    art = make_artifact(tmp_path / "packed")
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    for rel in ("exercises", "metrics.json"):
        subprocess.run(["cp", "-r", str(art / rel), str(repo / rel)], check=True)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "head")
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "config", "uploadpack.allowAnySHA1InWant", "true")
    return remote, repo, sha


def run_grade(act_exe: str, tmp: Path, remote: Path, sha: str, artifact: Path | None):
    event = json.loads(EVENT.read_text())
    event["workflow_run"]["head_sha"] = sha
    event["workflow_run"]["pull_requests"] = [{"number": PR_NUMBER}]
    event_path = tmp / "event.json"
    event_path.write_text(json.dumps(event))
    state = tmp / "state.json"
    state.write_text(json.dumps({
        "pulls": [{"number": PR_NUMBER, "sha": sha, "head": "ada-student:m9-roofline",
                   "updated_at": "2026-12-15T10:30:00Z"}],
        "comments": [],
    }))  # fmt: skip
    if artifact is not None:
        store = tmp / "store" / "artifacts" / "submission"
        store.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-r", str(artifact), str(store)], check=True)
    proc = subprocess.run(
        [*act_args(act_exe, tmp, state, remote), "-e", str(event_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    log = proc.stdout + proc.stderr
    (tmp / "act.log").write_text(log)  # the whole run, for a failure's reader
    return proc, log, json.loads(state.read_text())["comments"]


def test_a_forged_artifact_is_refused_by_the_grading_job_and_the_student_is_told(
    act, tmp_path, student_head
):
    remote, repo, sha = student_head
    _expose(remote, repo)
    art = make_artifact(tmp_path / "forged", head_sha=sha)
    (art / "exercises" / "m9_roofline" / "m9_roofline.py").write_text("x = 2  # not the head\n")
    proc, log, comments = run_grade(act, tmp_path, remote, sha, art)
    assert "artifact accepted: 4 files" in log, log[-4000:]  # validate passed: the forgery is in
    assert "m9_roofline.py: differs from its version in commit" in log, log[-4000:]
    ran = _ran_steps(log)
    assert "Hold the artifact against the head commit" in ran  # the step that refused it
    assert "Grade in the sandbox" not in ran and "Install the grader" not in ran
    [posted] = comments
    assert posted["pr"] == PR_NUMBER and posted["body"].startswith(gha.MARKER)
    assert "refused" in posted["body"] and f"commit {sha[:12]}" in posted["body"]
    assert proc.returncode != 0  # the grade job failed, as it must


def test_a_missing_artifact_is_commented_on(act, tmp_path, student_head):
    remote, repo, sha = student_head
    _expose(remote, repo)
    proc, log, comments = run_grade(act, tmp_path, remote, sha, None)
    assert "Artifact not found: submission" in log, log[-4000:]
    [posted] = comments
    assert posted["pr"] == PR_NUMBER and posted["body"].startswith(gha.MARKER)
    assert f"{sha[:12]}" in posted["body"] and "no score" in posted["body"].lower()


def _expose(remote: Path, repo: Path) -> None:
    """Serve `repo` as the repository act names when it reads no remote (nektos/act)."""
    (remote / "nektos").mkdir(exist_ok=True)
    (remote / "nektos" / "act").symlink_to(repo)


def _ran_steps(log: str) -> str:
    """The lines act prints as it starts a step ('⭐ Run Main ...')."""
    return "\n".join(ln for ln in log.splitlines() if "⭐ Run" in ln)


def test_the_heads_own_files_pass_the_tree_check_and_the_run_stops_where_github_is_needed(
    act, tmp_path, student_head
):
    """The honest artifact is accepted file by file; the run then needs what only GitHub has
    (this is the instructor repository, with no course-release.json: the record a student
    repository holds, read before the deploy-key checkout), and the student is told."""
    remote, repo, sha = student_head
    _expose(remote, repo)
    art = make_artifact(tmp_path / "honest", head_sha=sha)
    proc, log, comments = run_grade(act, tmp_path, remote, sha, art)
    assert f"artifact matches commit {sha}: 3 files compared" in log, log[-4000:]
    assert "cannot read the release record" in log, log[-4000:]
    assert "Grade in the sandbox" not in _ran_steps(log)
    [posted] = comments
    assert posted["body"].startswith(gha.MARKER) and f"{sha[:12]}" in posted["body"]
    assert proc.returncode != 0

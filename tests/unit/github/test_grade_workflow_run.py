"""grade.yml's own scripts, run in order as a runner would, on a forged and a missing artifact.

A small runner: each `run:` step of the grading job and then of the comment job is executed
with bash, its `env:` expressions filled from the event, the step outputs and the variables,
$GITHUB_OUTPUT read back, and GitHub's step rules kept (after a failure only `!cancelled()`
steps run). `uses:` steps are done here the way the action would (download-artifact copies the
submission or fails when there is none; upload-artifact copies what the step lists), the PR's
head is fetched from a local repository through `git`'s file:// transport, and `gh` is the
stand-in `fake_gh.py`. What is asserted is what the student would see: one comment on their PR,
saying what was refused.
"""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from factories import EVENT, PR, ROOT, staff_identity

from grader import github as gha
from grader.github import private

GRADE_YML = ROOT / ".github" / "student-workflows" / "grade.yml"
REPO = "gpu-course/gpu-mental-model"
EXPR = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), "-c", "user.name=a", "-c", "user.email=a@b", *args],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


class Runner:
    """One job's steps, run the way GitHub runs them (as far as these workflows need)."""

    def __init__(self, tmp: Path, event: dict, uses: dict, needs: dict | None = None):
        self.tmp, self.event, self.uses, self.needs = tmp, event, uses, needs or {}
        self.vars = {"STAFF_AGE_RECIPIENT": (tmp / "staff.pub").read_text().strip(),
                     "INSTRUCTOR_REPO": "gpu-course/instructor"}  # fmt: skip
        self.outputs: dict[str, dict[str, str]] = {}
        self.log: list[tuple[str, str]] = []

    def value(self, expr: str) -> str:
        ctx = {
            "github": {"event": self.event, "server_url": f"file://{self.tmp / 'server'}",
                       "token": "fake-token", "repository": REPO},
            "steps": {k: {"outputs": v} for k, v in self.outputs.items()},
            "vars": self.vars,
            "needs": self.needs,
            "runner": {"temp": str(self.tmp / "rt")},
        }  # fmt: skip
        node = ctx
        for part in expr.split("."):
            node = node.get(part, "") if isinstance(node, dict) else ""
        return str(node)

    def runs(self, step: dict, failed: bool) -> bool:
        cond = str(step.get("if", ""))
        if "cancelled()" in cond or "always()" in cond:
            return True
        if failed:
            return False
        if "cache-hit != 'true'" in cond:
            return False  # the environment cache is warm in this runner
        same = re.fullmatch(r"\s*([\w.-]+)\s*([=!])=\s*'([^']*)'\s*", cond)
        if same:  # `steps.gate.outputs.grade == 'false'`, `... != 'false'`
            equal = self.value(same.group(1)) == same.group(3)
            return equal if same.group(2) == "=" else not equal
        return True

    def job(self, steps: list[dict], env: dict[str, str]) -> str:
        failed = False
        for i, step in enumerate(steps):
            name = step.get("name", f"step {i}")
            if not self.runs(step, failed):
                self.log.append((name, "skipped"))
                continue
            if "uses" in step:
                action = step["uses"].split("@")[0]
                ok = self.uses.get(action, lambda s: True)(step)
                ok = ok or bool(step.get("continue-on-error"))
            else:
                out = self.tmp / f"out-{i}"
                out.write_text("")
                step_env = {k: EXPR.sub(lambda m: self.value(m.group(1)), str(v))
                            for k, v in (step.get("env") or {}).items()}  # fmt: skip
                proc = subprocess.run(
                    ["bash", "-e", "-c", step["run"]],
                    env={**env, **step_env, "GITHUB_OUTPUT": str(out)},
                    cwd=self.tmp / "repo", capture_output=True, text=True, timeout=300,
                )  # fmt: skip
                self.log.append((name, proc.stdout + proc.stderr))
                ok = proc.returncode == 0
                if "id" in step:
                    self.outputs[step["id"]] = dict(
                        ln.split("=", 1) for ln in out.read_text().splitlines() if "=" in ln
                    )
            failed = failed or not ok
            self.log.append((name, "ok" if ok else "failed"))
        return "failure" if failed else "success"


@pytest.fixture
def world(tmp_path):
    """The student repository on the server (file://), a PR head in it, the runner's folders."""
    server = tmp_path / "server" / REPO
    head = tmp_path / "student"
    shutil.copytree(ROOT / "exercises", head / "exercises",
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))  # fmt: skip
    (head / "metrics.json").write_text('{"m9_roofline": {}}\n')
    subprocess.run(["git", "init", "-q", str(head)], check=True)
    git(head, "add", "-A")
    git(head, "commit", "-qm", "my work")
    sha = git(head, "rev-parse", "HEAD")
    server.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(head), str(server)], check=True)
    git(server, "config", "uploadpack.allowAnySHA1InWant", "true")
    repo = tmp_path / "repo"  # the trusted checkout of the default branch
    shutil.copytree(ROOT, repo, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", "*-output", ".pytest_cache"))  # fmt: skip
    (repo / "course-release.json").write_text(
        json.dumps({"instructor_commit": "1" * 40, "suites_uncommitted": False})
    )
    event = json.loads(EVENT.read_text())
    event["workflow_run"]["head_sha"] = sha
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(
        f'#!/bin/sh\nexec {sys.executable} {Path(__file__).with_name("fake_gh.py")} "$@"\n'
    )
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)
    state = tmp_path / "gh-state.json"
    owner = event["workflow_run"]["head_repository"]["owner"]["login"]
    branch = event["workflow_run"]["head_branch"]
    state.write_text(json.dumps({
        "pulls": [{"number": PR, "sha": sha, "head": f"{owner}:{branch}",
                   "updated_at": "2026-12-15T10:30:00Z"}],
        "comments": [],
    }))  # fmt: skip
    (tmp_path / "rt").mkdir()
    (tmp_path / "staff.pub").write_text(f"{staff_identity().to_public()}\n")
    env = {
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(repo),
        "RUNNER_TEMP": str(tmp_path / "rt"),
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "FAKE_GH_STATE": str(state),
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "1",
    }
    (tmp_path / "event.json").write_text(json.dumps(event))
    return {"tmp": tmp_path, "head": head, "sha": sha, "event": event, "env": env, "state": state}


def run_grading(world, artifact: Path | None) -> tuple[str, str, list]:
    """The grade job, then the comment job; their results and the comments on the PR."""
    tmp, env = world["tmp"], world["env"]
    wf = yaml.safe_load(GRADE_YML.read_text())
    uploaded = tmp / "uploaded"

    def download(step):
        if step["with"].get("name") != "submission":  # the comment job: the grading report
            if not uploaded.is_dir():
                return False
            shutil.copytree(uploaded, tmp / "rt" / "report", dirs_exist_ok=True)
            return True
        if artifact is None:
            return False  # "Unable to find an artifact named submission"
        shutil.copytree(artifact, tmp / "rt" / "artifact")
        return True

    def upload(step):
        for line in step["with"]["path"].splitlines():
            src = Path(line.replace("${{ runner.temp }}", str(tmp / "rt")))
            if src.is_file():
                uploaded.mkdir(exist_ok=True)
                shutil.copy(src, uploaded / src.name)
        return True

    def checkout(step):
        if step["with"].get("repository"):  # a private checkout: the suites, the staff's data
            for part in step["with"]["sparse-checkout"].split():
                source = tmp / "instructor" / part if part == "staff" else ROOT / part
                if source.is_dir():  # this instructor repository keeps no staff data
                    shutil.copytree(source, tmp / "repo" / step["with"]["path"] / part)
        return True

    uses = {
        "actions/download-artifact": download,
        "actions/upload-artifact": upload,
        "actions/checkout": checkout,
    }
    gate = Runner(tmp, world["event"], uses)  # the course sets no cap: every push is graded
    gated = gate.job(wf["jobs"]["gate"]["steps"], env)
    admitted = gate.outputs.get("gate", {})
    grade = Runner(tmp, world["event"], uses)
    # the machine's own set-up is left out: the GPU check (needs a GPU) and the bubblewrap
    # install (needs sudo); grade-pr itself still refuses when the sandbox is incomplete
    machine = ("nvidia-smi", "apt-get install")
    steps = [s for s in wf["jobs"]["grade"]["steps"]
             if not any(m in s.get("run", "") for m in machine)]  # fmt: skip
    result = grade.job(steps, env) if admitted.get("grade") == "true" else "skipped"
    needs = {"gate": {"result": gated, "outputs": admitted}, "grade": {"result": result}}
    comment = Runner(tmp, world["event"], uses, needs=needs)
    comment.job(wf["jobs"]["comment"]["steps"], env)
    posted = json.loads(world["state"].read_text())["comments"]
    log = "\n".join(f"{n}: {t}" for n, t in gate.log + grade.log + comment.log)
    return result, log, posted


def test_a_forged_artifact_is_refused_with_a_comment_naming_the_file(world):
    art = world["tmp"] / "packed"
    gha.pack_submission(world["head"], art, PR, world["sha"])
    notebook = art / "exercises" / "m9_roofline" / "m9_roofline.py"
    notebook.write_text(notebook.read_text() + "\n# packed from somewhere else\n")
    result, log, posted = run_grading(world, art)
    assert result == "failure", log
    assert "differs from its version in commit" in log
    [c] = posted
    assert c["pr"] == PR and c["body"].startswith(gha.MARKER)
    assert "refused" in c["body"] and "m9_roofline.py" in c["body"]
    assert f"commit {world['sha'][:12]}" in c["body"]


def test_a_missing_artifact_gets_a_comment(world):
    result, log, posted = run_grading(world, None)
    assert result == "failure", log
    [c] = posted
    assert c["pr"] == PR and "Not graded" in c["body"] and "no score was recorded" in c["body"]
    assert f"commit {world['sha'][:12]}" in c["body"]


def test_an_honest_artifact_passes_every_check_before_grading(world):
    """Validation, the head tree and the release record pass; grading then stops where this
    machine cannot grade (no sandbox, or no GPU: an infrastructure comment) or, on a GPU runner
    with bubblewrap, grades; either way the student gets one comment and no report is public."""
    art = world["tmp"] / "packed"
    gha.pack_submission(world["head"], art, PR, world["sha"])
    venv = world["tmp"] / "repo" / ".venv" / "bin"  # the warm environment cache: this venv
    venv.mkdir(parents=True)
    (venv / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (venv / "python").chmod(0o755)
    key = world["tmp"] / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    shutil.copy(key.with_suffix(".pub"), world["tmp"] / "server" / "ada-student.keys")
    result, log, posted = run_grading(world, art)
    assert "artifact matches commit" in log, log
    assert "exported from instructor commit 1111" in log
    [c] = posted
    assert c["body"].startswith(gha.MARKER) and "/ " not in c["body"].split("<sub>")[0]
    assert (world["tmp"] / "uploaded").is_dir(), log
    uploaded = {p.name for p in (world["tmp"] / "uploaded").iterdir()}
    assert "result.json" not in uploaded and "report.html" not in uploaded
    if result == "success":  # a machine with bubblewrap graded it: sealed for the student
        assert "report.age" in uploaded and "Grading finished" in c["body"]
        opened = private.open_report(world["tmp"] / "uploaded" / "report.age", key,
                                     world["tmp"] / "opened")  # fmt: skip
        assert {p.name for p in opened} >= {"result.json", "report.html"}
    else:  # this machine cannot grade (no sandbox, or no GPU for GRADER_DEVICE=gpu): exit 3
        assert "Not graded" in c["body"] and "**no score was recorded**" in c["body"]
        assert "graded PR" not in log and "Grade in the sandbox: failed" in log

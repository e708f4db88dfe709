"""Typed results of a grading, and their versioned JSON form (schema/result.schema.json)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from grader.core.errors import UsageError
from grader.core.files import atomic_write

# 2: AssignmentResult.seed, Environment.bubblewrap; 3: TestResult.timings, the memory profiles
# (AssignmentResult.memory), the staff's decisions and the feedback policy (TestResult.functions
# and override, AssignmentResult.extended_due, override and the feedback fields). A version-2
# result reads as one with none of them.
SCHEMA_VERSION = 3
READABLE_VERSIONS = (2, 3)
Outcome = Literal["passed", "failed", "error", "timeout", "skipped"]
OUTCOMES: tuple[str, ...] = ("passed", "failed", "error", "timeout", "skipped")


@dataclass
class TestResult:
    name: str
    score: float
    max_score: float
    outcome: Outcome
    feedback: str = ""
    suite: str = "public"
    duration_s: float = 0.0
    # the graded functions the test called (the student facade's names): how a report that
    # shows the hidden tests' scores alone groups them (grader.core.visibility)
    functions: list[str] = field(default_factory=list)
    # an instructor's points for this test (grader.grading.finalize): points, reason, by, at,
    # and auto_score, the score grading gave; `score` is then the override's points
    override: dict[str, Any] | None = None
    # a timed GPU test's figures (grader.suites.timing.judge): each target's median and spread,
    # each verdict's ratio, threshold and margin, the device and its NVML readings
    timings: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class KernelMemory:
    """How one launch of a kernel used memory, as the suites profiled it: `profile` is a
    `grader.simt.memmodel.LaunchProfile` as plain data (its own version inside)."""

    kernel: str
    launch: str  # the launch as the report names it: grid, block and the arrays' shapes
    profile: dict[str, Any]


@dataclass
class AssignmentResult:
    id: str
    score: float
    max_score: float
    late_penalty: float = 0.0  # fraction of the raw score taken off (0..1)
    raw_score: float = 0.0
    error: str | None = None  # an assignment-wide failure (unreadable notebook...)
    graded_file: str | None = None
    tests: list[TestResult] = field(default_factory=list)
    seed: str = ""  # the draws' seed (grader.suites.seeds): same student and suites, same draws
    memory: list[KernelMemory] = field(default_factory=list)  # the kernels' memory profiles
    extended_due: str | None = None  # the student's extended due date (ISO 8601), if any
    # an instructor's score for the whole assignment: points, reason, by, at, and auto_score,
    # what the tests and the late policy gave; `score` is then the override's points
    override: dict[str, Any] | None = None
    feedback_policy: str = "full"  # course.toml's feedback policy of the assignment
    # what this result shows of the hidden tests: "full", "held" (their scores per graded
    # function until feedback_until), "scores" (those alone: grader.core.visibility)
    hidden_feedback: str = "full"
    feedback_until: str | None = None  # "held": when the full feedback is shown (ISO 8601)


@dataclass
class Environment:
    device: str
    simulator: bool
    isolation: list[str] = field(default_factory=list)
    grader_version: str = ""
    python: str = ""
    driver: str = ""  # NVIDIA driver version the GPU preflight saw ("" in the simulator)
    cuda: str = ""  # the CUDA version that driver runs
    # "" when graded with every required isolation layer; else the "not authoritative: ..." mark
    not_authoritative: str = ""
    # which bubblewrap ran the workers and its version ("" in-process or without bubblewrap)
    bubblewrap: str = ""


@dataclass
class GradeResult:
    student: str
    score: float
    max_score: float
    environment: Environment
    assignments: list[AssignmentResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timestamp: str | None = None  # trusted submission time (ISO 8601), for the late policy
    submission_digest: str = ""
    duration_s: float = 0.0
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, allow_nan=False)

    def write(self, path: Path | str) -> None:
        """result.json, atomically: a reader (a resumed batch, the class report) never sees half
        of it. The reports write it through this method too (`grader.reports.outputs`)."""
        atomic_write(path, self.to_json() + "\n")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GradeResult:
        if data.get("schema_version") not in READABLE_VERSIONS:
            raise UsageError(
                f"result schema_version {data.get('schema_version')!r} is not one of "
                f"{READABLE_VERSIONS}"
            )
        d = {**data, "schema_version": SCHEMA_VERSION}  # the fields version 3 added default
        d["environment"] = Environment(**d["environment"])
        d["assignments"] = [
            AssignmentResult(
                **{
                    **a,
                    "tests": [TestResult(**t) for t in a["tests"]],
                    "memory": [KernelMemory(**m) for m in a.get("memory", [])],
                }
            )
            for a in d["assignments"]
        ]
        return cls(**d)

    @classmethod
    def read(cls, path: Path | str) -> GradeResult:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


SCHEMA_PATH = Path(__file__).with_name("schema") / "result.schema.json"
_VALIDATOR: Any = None


def _validator() -> Any:
    global _VALIDATOR
    if _VALIDATOR is None:
        from jsonschema import Draft202012Validator  # lazy: importing jsonschema takes ~1 s

        schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
        Draft202012Validator.check_schema(schema)
        _VALIDATOR = Draft202012Validator(schema)
    return _VALIDATOR


def validate(data: dict[str, Any]) -> None:
    """Check `data` (GradeResult.to_dict()) against schema/result.schema.json.

    Raises ValueError naming the JSON path of the first problem (ordered by path), e.g.
    ``result invalid at $.assignments[0].tests[2].outcome: 'crashed' is not one of [...]``.
    """
    errors = list(_validator().iter_errors(data))
    if not errors:
        return
    first = min(errors, key=lambda e: [str(p) for p in e.absolute_path])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    message = first.message if len(first.message) <= 300 else first.message[:300] + "..."
    raise UsageError(f"result invalid at {first.json_path}: {message}{more}")

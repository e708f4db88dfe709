"""The course manifest (`course.toml`) as typed, validated objects.

Every other module reads hardware figures, points, due dates and limits from here, so the numbers
live in exactly one file. Validation is strict: a typo in a key would otherwise silently fall back
to a default and grade a class with the wrong limits.

Limits are the course's `[limits]`; an assignment may raise or lower its time and memory limits
in an `[assignments.limits]` table of its own (`ASSIGNMENT_LIMIT_KEYS`), and `Course.limits_for`
is the one place the two are merged: every grading, check and verify of that assignment runs
under them (`grader.grading.grade` gives assignments whose limits differ workers of their own).
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any, get_args, get_type_hints

from grader.core.errors import UsageError

MANIFEST = "course.toml"


class CourseError(UsageError):
    """course.toml is missing, unreadable or invalid; the message names the key."""


@dataclass(frozen=True)
class SMLimits:
    """What one streaming multiprocessor can hold at once: the inputs of an occupancy estimate.

    The fields are those CUDA's occupancy calculator (`cuda_occupancy.h`) reads for a compute
    capability: totals per SM, limits per block, and the units registers and shared memory are
    handed out in. Shared-memory sizes other than `shared_memory_kib` are in bytes.
    """

    max_threads: int
    max_blocks: int
    max_warps: int
    registers: int
    shared_memory_kib: int
    register_granularity: int
    max_threads_per_block: int
    max_registers_per_thread: int
    max_registers_per_block: int
    register_sub_partitions: int
    shared_memory_granularity: int
    reserved_shared_memory_per_block: int
    max_shared_memory_per_block: int

    @property
    def shared_memory_bytes(self) -> int:
        return self.shared_memory_kib * 1024

    def as_dict(self) -> dict[str, int]:
        """The plain dict the notebooks' `occupancy(..., sm)` takes (shared memory in bytes)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "shared_memory_kib"}
        out["shared_memory_bytes"] = self.shared_memory_bytes
        return out


@dataclass(frozen=True)
class Hardware:
    """One [hardware.KEY] table: a GPU's peak rates (the vendor's decimal units), its memory in
    real bytes (`memory_mib`, nvidia-smi's total) and the share of it a serving engine budgets,
    its SM count and per-SM limits."""

    key: str
    name: str
    fp16_tensor_tflops: float
    int8_tensor_tops: float  # the 8-bit tensor-core roof (W8A8 kernels)
    fp32_tflops: float
    bandwidth_gbs: float
    compute_capability: tuple[int, int]
    memory_mib: int  # as `nvidia-smi --query-gpu=memory.total` reports it (2^20 bytes)
    usable_memory_fraction: float  # the share a serving engine may use: weights, runtime, KV
    sm_count: int
    pcie_gbs: float  # the host link, one direction
    sm: SMLimits
    # What the card holds on long fp16 GEMMs under its power cap, where the course quotes one
    # (a practical roof); optional, so a GPU without a measured figure leaves it out.
    sustained_fp16_tflops: float | None = None
    fp8_tensor_tflops: float | None = None  # only where the card has FP8 tensor cores (Hopper)
    # NVLink to its peer GPUs in one server, GB/s per GPU (all links, one direction): what a
    # tensor-parallel all-reduce runs over; absent where the card has none (the T4: PCIe only).
    nvlink_gbs: float | None = None

    @property
    def memory_bytes(self) -> int:
        """Device memory in bytes: nvidia-smi's MiB, 2^20 bytes each."""
        return self.memory_mib * 2**20

    @property
    def peak_flops(self) -> float:
        """FP16 tensor-core peak in FLOP/s (the roofline's flat roof)."""
        return self.fp16_tensor_tflops * 1e12

    @property
    def peak_bandwidth(self) -> float:
        """HBM/GDDR bandwidth in byte/s (the roofline's slope)."""
        return self.bandwidth_gbs * 1e9

    @property
    def ridge(self) -> float:
        return self.peak_flops / self.peak_bandwidth

    def as_gpu_dict(self) -> dict[str, Any]:
        """The gpu dict the M9 notebook's `load_hardware()` makes of this table: what its
        functions (and the reference's metrics record) take."""
        return {
            "name": self.key,
            "peak_flops": self.peak_flops,
            "peak_bandwidth": self.peak_bandwidth,
            "memory_bytes": self.memory_bytes,
            "usable_memory_fraction": self.usable_memory_fraction,
            "sm_count": self.sm_count,
        }


FEEDBACK_POLICIES = ("full", "hidden-after-due", "score-only")


@dataclass(frozen=True)
class Assignment:
    id: str
    title: str
    notebook: str
    due: datetime
    points: float
    needs_gpu: bool
    # How much of the hidden tests a pull request's report shows the student (FEEDBACK_POLICIES;
    # grader.core.visibility): "full" every test's feedback; "hidden-after-due" the hidden
    # tests' scores per graded function until the due date (and the student's extension), then
    # in full; "score-only" their scores per graded function, always.
    feedback: str = "full"
    # `[assignments.limits]`: this assignment's own values of some `[limits]` keys (time and
    # memory, `ASSIGNMENT_LIMIT_KEYS`), as (key, value) pairs; () when it has none
    limits: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class MetricsRecord:
    """`[metrics]`: the record one assignment's notebook writes into metrics.json, under that
    assignment's id. Its suites grade it; the reference computes it for every report's roofline
    by calling `function(*arguments)` of `solutions/<assignment>/<assignment>.py`, each argument a
    module-level name of that solution, except `COURSE_GPU_ARGUMENT`, which is the course GPU as
    the dict the notebook's `load_hardware` makes (`Hardware.as_gpu_dict`). `roofline` maps the
    record's keys drawn on the roofline (arithmetic intensities, FLOP/byte) to their labels, in
    the order drawn."""

    assignment: str
    function: str
    arguments: tuple[str, ...]
    roofline: dict[str, str]


COURSE_GPU_ARGUMENT = "course_gpu"


@dataclass(frozen=True)
class Limits:
    call_timeout_s: float
    kernel_timeout_s: float
    import_timeout_s: float
    submission_timeout_s: float
    memory_mb: int
    file_size_mb: int
    open_files: int
    processes: int
    scratch_mb: int = 256  # the worker's scratch tmpfs (HOME, cwd, TMPDIR)


# What an assignment may set for itself in `[assignments.limits]`: how long its calls, kernels,
# notebook and whole grading may take, and its memory. The rest of `[limits]` (processes, open
# files, file and scratch sizes) is the sandbox's shape and stays course-wide.
ASSIGNMENT_LIMIT_KEYS = (
    "call_timeout_s",
    "kernel_timeout_s",
    "import_timeout_s",
    "submission_timeout_s",
    "memory_mb",
)


@dataclass(frozen=True)
class LatePolicy:
    grace_minutes: float
    penalty_per_day: float
    max_penalty: float


@dataclass(frozen=True)
class GradingCap:
    """`[grading_cap]`: at most `gradings` authoritative (GPU) gradings of one student's pull
    requests in any `window_hours` (grader.github.cap); a push over it is graded by the sweep
    once the window lets it. The free CPU check still runs on every push."""

    gradings: int
    window_hours: float


@dataclass(frozen=True)
class Course:
    id: str
    title: str
    course_gpu: str
    timezone: str
    hardware: dict[str, Hardware]
    assignments: tuple[Assignment, ...]
    limits: Limits
    late_policy: LatePolicy
    root: Path
    metrics: MetricsRecord | None = None  # None: no assignment writes metrics.json
    grading_cap: GradingCap | None = None  # None: every push is graded

    @property
    def gpu(self) -> Hardware:
        """The course GPU (the reports' roofline, PTX compute capability)."""
        return self.hardware[self.course_gpu]

    def assignment(self, assignment_id: str) -> Assignment:
        for a in self.assignments:
            if a.id == assignment_id:
                return a
        known = ", ".join(a.id for a in self.assignments)
        raise CourseError(f"unknown assignment {assignment_id!r}; course.toml defines: {known}")

    @property
    def assignment_ids(self) -> list[str]:
        return [a.id for a in self.assignments]

    def limits_for(self, assignment_id: str) -> Limits:
        """The limits `assignment_id` is graded under: `[limits]` with its own
        `[assignments.limits]` values in their place."""
        own: dict[str, Any] = dict(self.assignment(assignment_id).limits)
        return replace(self.limits, **own)

    def limit_source(self, assignment_id: str, key: str) -> str:
        """Where the value of `[limits]` key `key` for `assignment_id` is set, as an instructor
        finds it in course.toml (what a limit's message names)."""
        if key in dict(self.assignment(assignment_id).limits):
            return f"[assignments.limits] {key} of {assignment_id!r} in course.toml"
        return f"[limits] {key} in course.toml"

    def limit_groups(self, assignment_ids: Sequence[str]) -> list[tuple[Limits, list[str]]]:
        """`assignment_ids` grouped by the limits they are graded under, in their order: the
        assignments of one group share a grading's workers and its time budget."""
        groups: dict[Limits, list[str]] = {}
        for a in assignment_ids:
            groups.setdefault(self.limits_for(a), []).append(a)
        return list(groups.items())

    def submission_seconds(self, assignment_ids: Sequence[str] | None = None) -> float:
        """The most a grading of these assignments (default: all) may take: the time budget
        of each group of `limit_groups`, added up."""
        ids = self.assignment_ids if assignment_ids is None else assignment_ids
        return sum(limits.submission_timeout_s for limits, _ in self.limit_groups(ids))


def find_root(start: Path | None = None) -> Path:
    """The nearest directory at or above `start` (default: cwd) that holds course.toml."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / MANIFEST).is_file():
            return d
    raise CourseError(
        f"no {MANIFEST} found in {here} or any parent; run from the course repository"
    )


_TYPES: dict[type, tuple[type, ...]] = {
    float: (int, float),
    int: (int,),
    str: (str,),
    bool: (bool,),
}


def _typed(section: str, table: Any, cls: type, extra: dict[str, Any] | None = None) -> Any:
    """Build dataclass `cls` from a TOML table, naming the key on any mismatch."""
    if not isinstance(table, dict):
        raise CourseError(f"[{section}] must be a table")
    extra = extra or {}
    hints = get_type_hints(cls)
    wanted = {f.name: hints[f.name] for f in fields(cls) if f.name not in extra}
    unknown = sorted(set(table) - set(wanted))
    if unknown:
        raise CourseError(f"[{section}] unknown key {unknown[0]!r}; allowed: {', '.join(wanted)}")
    values: dict[str, Any] = dict(extra)
    optional = {f.name for f in fields(cls) if f.default is None}
    defaulted = {f.name for f in fields(cls) if f.default is not MISSING}
    for name, kind in wanted.items():
        if name not in table and name in defaulted:
            continue
        if name not in table:
            raise CourseError(f"[{section}] missing key {name!r}")
        if name in optional:
            kind = next(k for k in get_args(kind) if k is not type(None))
        values[name] = _convert(f"{section}.{name}", table[name], kind)
    return cls(**values)


def _convert(key: str, value: Any, kind: Any) -> Any:
    if kind is datetime:
        if isinstance(value, datetime):
            parsed = value
        elif isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError as exc:
                raise CourseError(f"{key}: {value!r} is not an ISO date-time") from exc
        else:
            raise CourseError(f"{key}: expected an ISO date-time, got {type(value).__name__}")
        if parsed.tzinfo is None:
            raise CourseError(f"{key}: {value!r} needs a time zone, e.g. +00:00")
        return parsed
    if kind == tuple[int, int]:
        if not (isinstance(value, list) and len(value) == 2 and all(_is(v, int) for v in value)):
            raise CourseError(f"{key}: expected [major, minor], got {value!r}")
        return (value[0], value[1])
    if not _is(value, kind):
        raise CourseError(f"{key}: expected {kind.__name__}, got {type(value).__name__} {value!r}")
    return kind(value)


def _is(value: Any, kind: type) -> bool:
    if isinstance(value, bool) and kind is not bool:
        return False
    return isinstance(value, _TYPES.get(kind, (kind,)))


def _hardware(key: str, table: Any) -> Hardware:
    """One [hardware.KEY] table with its [hardware.KEY.sm] per-SM limits."""
    section = f"hardware.{key}"
    if not isinstance(table, dict):
        raise CourseError(f"[{section}] must be a table")
    if "sm" not in table:
        raise CourseError(f"[{section}] missing table [{section}.sm] (per-SM limits)")
    rest = {k: v for k, v in table.items() if k != "sm"}
    sm = _typed(f"{section}.sm", table["sm"], SMLimits)
    return _typed(section, rest, Hardware, {"key": key, "sm": sm})


def _check_head(p: Path, head: Any) -> None:
    """[course] is a table with exactly the known keys, each of its type."""
    if not isinstance(head, dict):
        raise CourseError(f"{p}: [course] must be a table")
    head_fields = {"id": str, "title": str, "course_gpu": str, "timezone": str}
    unknown = sorted(set(head) - set(head_fields))
    if unknown:
        raise CourseError(f"{p}: [course] unknown key {unknown[0]!r}")
    for name, kind in head_fields.items():
        if name not in head:
            raise CourseError(f"{p}: [course] missing key {name!r}")
        _convert(f"course.{name}", head[name], kind)


def _check_hardware(p: Path, hw: Hardware) -> None:
    """One [hardware.*] entry is physically consistent (positive rates, SM limits that fit)."""
    positive = (
        "fp16_tensor_tflops",
        "int8_tensor_tops",
        "fp32_tflops",
        "bandwidth_gbs",
        "memory_mib",
        "sm_count",
        "pcie_gbs",
    )
    for name in positive:
        if getattr(hw, name) <= 0:
            raise CourseError(f"{p}: hardware.{hw.key}.{name} must be positive")
    if not 0 < hw.usable_memory_fraction <= 1:
        raise CourseError(
            f"{p}: hardware.{hw.key}.usable_memory_fraction must be a fraction in (0, 1] "
            "(the share of memory_mib a serving engine budgets)"
        )
    if hw.fp8_tensor_tflops is not None and hw.fp8_tensor_tflops <= 0:
        raise CourseError(f"{p}: hardware.{hw.key}.fp8_tensor_tflops must be positive")
    if hw.nvlink_gbs is not None and hw.nvlink_gbs <= 0:
        raise CourseError(
            f"{p}: hardware.{hw.key}.nvlink_gbs must be positive (leave the key out for a card "
            "without NVLink)"
        )
    if hw.sustained_fp16_tflops is not None and not (
        0 < hw.sustained_fp16_tflops <= hw.fp16_tensor_tflops
    ):
        raise CourseError(
            f"{p}: hardware.{hw.key}.sustained_fp16_tflops must be positive and at most "
            "fp16_tensor_tflops (a sustained rate cannot pass the peak)"
        )
    for f in fields(SMLimits):
        least = 0 if f.name == "reserved_shared_memory_per_block" else 1
        if getattr(hw.sm, f.name) < least:
            raise CourseError(
                f"{p}: hardware.{hw.key}.sm.{f.name} must be " + ("positive" if least else ">= 0")
            )
    if hw.sm.max_threads_per_block > hw.sm.max_threads:
        raise CourseError(
            f"{p}: hardware.{hw.key}.sm: max_threads_per_block must not exceed max_threads"
        )
    if hw.sm.max_shared_memory_per_block > hw.sm.shared_memory_bytes:
        raise CourseError(
            f"{p}: hardware.{hw.key}.sm: max_shared_memory_per_block must not exceed the "
            "SM's shared memory (shared_memory_kib x 1024)"
        )
    if hw.sm.max_threads != 32 * hw.sm.max_warps:
        raise CourseError(
            f"{p}: hardware.{hw.key}.sm: max_threads ({hw.sm.max_threads}) must be 32 x "
            f"max_warps ({hw.sm.max_warps})"
        )


def _identifier(p: Path, key: str, value: Any) -> str:
    if not (isinstance(value, str) and value.isidentifier()):
        raise CourseError(f"{p}: {key} must be a Python name (a string), got {value!r}")
    return value


def _metrics(p: Path, table: Any, assignment_ids: list[str]) -> MetricsRecord:
    """[metrics] and its [metrics.roofline] table, each name checked (see `MetricsRecord`)."""
    if not isinstance(table, dict):
        raise CourseError(f"{p}: [metrics] must be a table")
    allowed = ("assignment", "function", "arguments", "roofline")
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise CourseError(
            f"{p}: [metrics] unknown key {unknown[0]!r}; allowed: {', '.join(allowed)}"
        )
    for name in allowed:
        if name not in table:
            raise CourseError(f"{p}: [metrics] missing key {name!r}")
    assignment = table["assignment"]
    if assignment not in assignment_ids:
        raise CourseError(
            f"{p}: metrics.assignment {assignment!r} is not an [[assignments]] id "
            f"({', '.join(assignment_ids)}): name the assignment whose notebook writes the record"
        )
    function = _identifier(p, "metrics.function", table["function"])
    arguments = table["arguments"]
    if not isinstance(arguments, list):
        raise CourseError(f"{p}: metrics.arguments must be a list of names, got {arguments!r}")
    for i, name in enumerate(arguments):
        _identifier(p, f"metrics.arguments[{i}]", name)
    roofline = table["roofline"]
    if not isinstance(roofline, dict) or not roofline:
        raise CourseError(
            f"{p}: [metrics.roofline] must map at least one key of the record to its label, "
            'e.g. intensity_b1 = "batch 1"'
        )
    for key, label in roofline.items():
        if not isinstance(label, str) or not label:
            raise CourseError(f"{p}: metrics.roofline.{key} must be a label (a non-empty string)")
    return MetricsRecord(assignment, function, tuple(arguments), dict(roofline))


def _assignments(p: Path, raw: Any) -> tuple[Assignment, ...]:
    """[[assignments]]: at least one, ids unique, each feedback policy one of FEEDBACK_POLICIES."""
    if not isinstance(raw, list) or not raw:
        raise CourseError(f"{p}: [[assignments]] must list at least one assignment")
    assignments = tuple(_assignment(p, i, a) for i, a in enumerate(raw))
    ids = [a.id for a in assignments]
    if len(set(ids)) != len(ids):
        raise CourseError(f"{p}: duplicate assignment id in {ids}")
    for i, a in enumerate(assignments):
        if a.feedback not in FEEDBACK_POLICIES:
            raise CourseError(
                f"{p}: assignments[{i}].feedback {a.feedback!r} is not one of "
                f"{', '.join(FEEDBACK_POLICIES)}"
            )
    return assignments


def _grading_cap(p: Path, table: Any) -> GradingCap:
    """[grading_cap]: a positive number of gradings in a positive window of hours."""
    cap = _typed("grading_cap", table, GradingCap)
    if cap.gradings < 1 or not 0 < cap.window_hours <= 24 * 31:
        raise CourseError(
            f"{p}: [grading_cap] needs gradings >= 1 and 0 < window_hours <= 744 (a month), "
            f"got {cap.gradings} in {cap.window_hours} h"
        )
    return cap


def _assignment(p: Path, index: int, table: Any) -> Assignment:
    """One [[assignments]] entry with its optional [assignments.limits] table."""
    section = f"assignments[{index}]"
    if not isinstance(table, dict):
        raise CourseError(f"{p}: [{section}] must be a table")
    rest = {k: v for k, v in table.items() if k != "limits"}
    limits = _assignment_limits(p, section, table.get("limits", {}))
    return _typed(section, rest, Assignment, {"limits": limits})


def _assignment_limits(p: Path, section: str, table: Any) -> tuple[tuple[str, float], ...]:
    """[assignments.limits]: a subset of `ASSIGNMENT_LIMIT_KEYS`, each a positive number of the
    type `[limits]` gives it."""
    if not isinstance(table, dict):
        raise CourseError(f"{p}: {section}.limits must be a table ([assignments.limits])")
    kinds = get_type_hints(Limits)
    out = []
    for key, value in table.items():
        if key not in ASSIGNMENT_LIMIT_KEYS:
            why = (
                "it is course-wide: set it in [limits]"
                if key in kinds
                else f"allowed: {', '.join(ASSIGNMENT_LIMIT_KEYS)}"
            )
            raise CourseError(f"{p}: {section}.limits: unknown key {key!r}; {why}")
        number = _convert(f"{section}.limits.{key}", value, kinds[key])
        if not number > 0:
            raise CourseError(f"{p}: {section}.limits.{key} must be positive, got {value!r}")
        out.append((key, number))
    return tuple(out)


def load_course(path: Path | str | None = None) -> Course:
    """Load and validate course.toml (a file path, a directory holding it, or found from cwd)."""
    p = Path(path) if path is not None else find_root() / MANIFEST
    if p.is_dir():
        p = p / MANIFEST
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CourseError(f"{p}: not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CourseError(f"{p}: not valid TOML: {exc}") from exc
    allowed = {"course", "hardware", "assignments", "limits", "late_policy"}
    optional = {"metrics", "grading_cap"}
    unknown = sorted(set(data) - allowed - optional)
    if unknown:
        raise CourseError(
            f"{p}: unknown top-level key {unknown[0]!r}; allowed: {sorted(allowed | optional)}"
        )
    for key in sorted(allowed):
        if key not in data:
            raise CourseError(f"{p}: missing [{key}]")

    head = data["course"]
    _check_head(p, head)

    hardware = {key: _hardware(key, table) for key, table in data["hardware"].items()}
    if head["course_gpu"] not in hardware:
        raise CourseError(
            f"{p}: course.course_gpu {head['course_gpu']!r} is not in [hardware] "
            f"({', '.join(hardware)})"
        )
    for hw in hardware.values():
        _check_hardware(p, hw)

    assignments = _assignments(p, data["assignments"])
    ids = [a.id for a in assignments]

    limits = _typed("limits", data["limits"], Limits)
    late = _typed("late_policy", data["late_policy"], LatePolicy)
    if not 0 <= late.penalty_per_day <= 1 or not 0 <= late.max_penalty <= 1:
        raise CourseError(f"{p}: late_policy penalties are fractions between 0 and 1")
    metrics = _metrics(p, data["metrics"], ids) if "metrics" in data else None
    cap = _grading_cap(p, data["grading_cap"]) if "grading_cap" in data else None
    return Course(
        id=head["id"],
        title=head["title"],
        course_gpu=head["course_gpu"],
        timezone=head["timezone"],
        hardware=hardware,
        assignments=assignments,
        limits=limits,
        late_policy=late,
        root=p.parent.resolve(),
        metrics=metrics,
        grading_cap=cap,
    )

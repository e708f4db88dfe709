"""The roofline plot of the HTML report: the course GPU's roof with the student's points.

The points are the intensities of the metrics record course.toml's `[metrics]` names (its
`[metrics.roofline]` keys, e.g. M9's decode at batch 1, 8 and 32), the student's from their
metrics.json and the reference's beside them. metrics.json is the student's: every value is
checked before it is drawn, and a record that cannot be drawn is a note on the plot, never an
exception.
"""

from __future__ import annotations

import io
import math
from typing import Any

from grader.core.course import Course, MetricsRecord

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # one per roofline key, in course.toml's order


def _points(
    spec: MetricsRecord | None, data: Any, label: str
) -> tuple[dict[str, float], list[str]]:
    """Valid intensities from a metrics record (or a metrics dict holding one under its
    assignment's id) and the problems."""
    if spec is None:
        return {}, []
    record = spec.assignment
    if data is None:
        return {}, [f"no {label} {record} metrics"]
    if isinstance(data, dict) and record in data:
        data = data[record]
    if not isinstance(data, dict):
        return {}, [f"{label} {record} is not a table of numbers"]
    points: dict[str, float] = {}
    problems: list[str] = []
    for key in spec.roofline:
        value = data.get(key)
        if value is None:
            problems.append(f"{label} {key} missing")
        elif (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= 1e9
        ):
            problems.append(f"{label} {key} is not a positive number")
        else:
            points[key] = float(value)
    return points, problems


def _note_box(ax: Any, notes: list[str]) -> None:
    """The first notes about unusable metrics, boxed in red in the plot's top-left corner."""
    ax.text(
        0.02,
        0.97,
        "\n".join(notes[:6]),
        transform=ax.transAxes,
        va="top",
        fontsize=8,
        color="#b00",
        bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "#b00"},
    )


def _plot_points(
    ax: Any,
    spec: MetricsRecord | None,
    mine: dict[str, float],
    ref: dict[str, float],
    attainable: Any,
) -> None:
    """The reference's points (hollow) and the student's (filled), one marker per roofline key,
    each labelled with its course.toml label."""
    labels = spec.roofline if spec is not None else {}
    markers = {key: MARKERS[i % len(MARKERS)] for i, key in enumerate(labels)}
    for who, found, style in (
        ("reference", ref, {"ms": 11, "mfc": "none", "mec": "#1f77b4", "mew": 2}),
        ("yours", mine, {"ms": 7, "color": "#d62728"}),
    ):
        for key, x in found.items():
            label = f"{who} {labels[key]}"
            ax.plot([x], [attainable(x) / 1e12], markers[key], label=label, **style)


def roofline_png(
    course: Course, metrics: dict | None = None, reference: dict | None = None
) -> tuple[bytes, list[str]]:
    """PNG of the course GPU's roofline with the student's and the reference's points.

    Returns (png bytes, notes about missing or unusable metrics). Never raises on bad metrics.
    """
    # lazy: matplotlib takes about half a second to import, and `grader check` and the PR
    # comment never draw
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    gpu = course.gpu
    peak, bw = gpu.peak_flops, gpu.peak_bandwidth
    ridge = peak / bw
    spec = course.metrics
    mine, notes = _points(spec, metrics, "student")
    ref, ref_notes = _points(spec, reference, "reference") if reference is not None else ({}, [])
    notes += ref_notes

    values = [*mine.values(), *ref.values(), ridge]
    lo = 10 ** math.floor(math.log10(min(values) / 4))
    hi = 10 ** math.ceil(math.log10(max(values) * 4))
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]

    def attainable(x: float) -> float:
        return min(x * bw, peak)

    fig = Figure(figsize=(7, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.loglog(xs, [attainable(x) / 1e12 for x in xs], color="#333", lw=2, label=f"{gpu.name} roof")
    ax.axvline(ridge, color="#999", ls=":", lw=1)
    ax.annotate(
        f"ridge ≈ {ridge:.0f} FLOP/B",
        (ridge, peak / 1e12),
        textcoords="offset points",
        xytext=(5, -15),
        fontsize=8,
        color="#555",
    )
    _plot_points(ax, spec, mine, ref, attainable)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable TFLOP/s")
    title = course.assignment(spec.assignment).title if spec is not None else course.title
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    if notes:
        _note_box(ax, notes)
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue(), notes

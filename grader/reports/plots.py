"""The roofline plot of the HTML report: the course GPU's roof with the student's M9 points.

metrics.json is the student's: every value is checked before it is drawn, and a record that
cannot be drawn is a note on the plot, never an exception.
"""

from __future__ import annotations

import io
import math
from typing import Any

from grader.core.course import Course

M9_KEYS = ("intensity_b1", "intensity_b8", "intensity_b32")


def _m9_points(data: Any, label: str) -> tuple[dict[str, float], list[str]]:
    """Valid intensities from an m9 record (or a metrics dict holding one) and the problems."""
    if data is None:
        return {}, [f"no {label} M9 metrics"]
    if isinstance(data, dict) and "m9_roofline" in data:
        data = data["m9_roofline"]
    if not isinstance(data, dict):
        return {}, [f"{label} m9_roofline is not a table of numbers"]
    points: dict[str, float] = {}
    problems: list[str] = []
    for key in M9_KEYS:
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


def roofline_png(
    course: Course, metrics: dict | None = None, reference: dict | None = None
) -> tuple[bytes, list[str]]:
    """PNG of the course GPU's roofline with the student's and the reference M9 points.

    Returns (png bytes, notes about missing or unusable metrics). Never raises on bad metrics.
    """
    # lazy: matplotlib takes about half a second to import, and `grader check` and the PR
    # comment never draw
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    gpu = course.gpu
    peak, bw = gpu.peak_flops, gpu.peak_bandwidth
    ridge = peak / bw
    mine, notes = _m9_points(metrics, "student")
    ref, ref_notes = _m9_points(reference, "reference") if reference is not None else ({}, [])
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
    markers = {"intensity_b1": "o", "intensity_b8": "s", "intensity_b32": "^"}
    for who, found, style in (
        ("reference", ref, {"ms": 11, "mfc": "none", "mec": "#1f77b4", "mew": 2}),
        ("yours", mine, {"ms": 7, "color": "#d62728"}),
    ):
        for key, x in found.items():
            label = f"{who} batch {key.removeprefix('intensity_b')}"
            ax.plot([x], [attainable(x) / 1e12], markers[key], label=label, **style)  # type: ignore[arg-type]
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(f"Decode on the {gpu.name} roofline (M9)")
    ax.grid(True, which="both", alpha=0.25)
    if notes:
        _note_box(ax, notes)
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue(), notes

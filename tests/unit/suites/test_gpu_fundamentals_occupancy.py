"""The occupancy oracle of S5.1's hidden suite, checked from outside.

`tests/hidden/gpu_fundamentals/test_occupancy_hidden.py` grades `occupancy` against its own
transcription of CUDA's occupancy calculator. Here: course.toml's per-SM figures agree with the
header's per-architecture constants; the reference solution agrees with the transcription on
many draws; the hidden test itself fails each plausible wrong model (on its fixed examples, so
on every seed; dropping the per-block register check is no mutant on these GPUs, whose
sub-partition rule already refuses every block that check refuses); and the notebook's
occupancy plot drops where the rules say it does.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from factories import GF_SOLUTION, ROOT, Facade, hidden_suite, solution_function

from grader.core.notebook import read_notebook

SOLUTION = GF_SOLUTION
GPUS = ("T4", "A100_SXM", "H100_SXM", "H200")


@pytest.fixture(scope="module")
def hidden():
    return hidden_suite("gpu_fundamentals/test_occupancy_hidden.py", "gf_occupancy_hidden")


def _solution_occupancy(replacements: tuple[tuple[str, str], ...] = ()):
    """The reference `occupancy`, built from its source with some lines replaced (a mutant)."""
    return solution_function("occupancy", replacements)


def _student(fn) -> Facade:
    return Facade(occupancy=fn)


def test_course_toml_agrees_with_the_header_constants(hidden, course):
    for key in GPUS:
        hw = course.hardware[key]
        p = hidden.occ_device_prop(hw)
        assert hw.sm.register_granularity == hidden.reg_allocation_granularity(p), key
        assert hw.sm.register_sub_partitions == hidden.sub_partitions_per_multiprocessor(p), key
        assert hw.sm.shared_memory_granularity == hidden.smem_allocation_granularity(p), key
        assert hw.sm.max_blocks == hidden.max_blocks_per_multiprocessor(p), key
        assert hidden.smem_per_multiprocessor(p) == hw.sm.shared_memory_bytes, key


def test_the_reference_agrees_with_the_transcription(hidden, course):
    occupancy = _solution_occupancy()
    rng = random.Random(20261201)
    draws, mismatches, refused = 20000, [], 0
    for _ in range(draws):
        hw = course.hardware[rng.choice(GPUS)]
        tpb = rng.choice([rng.randint(1, 1024), rng.randint(1, 2048), 32 * rng.randint(1, 32)])
        regs = rng.randint(0, 255)
        smem = rng.choice([0, rng.randint(0, 48 * 1024), rng.randint(0, 240 * 1024)])
        want = hidden.expected(hw, tpb, regs, smem)
        try:
            got = occupancy(tpb, regs, smem, hw.sm.as_dict())
        except ValueError:
            got = None
        refused += want is None
        if got != want:
            mismatches.append((hw.key, tpb, regs, smem, got, want))
    assert mismatches == [], mismatches[:5]
    assert 0.2 * draws < refused < 0.8 * draws  # both outcomes are well covered


MUTANTS = {
    "ignores the register unit": (
        ("per_warp = -(-(32 * regs) // unit) * unit", "per_warp = 32 * regs"),
    ),
    "rounds registers per block": (
        (
            'warps_per_part = (lim["registers"] // parts) // per_warp\n'
            '        candidates["registers"] = warps_per_part * parts // wpb',
            'candidates["registers"] = lim["registers"] // (-(-(32 * regs * wpb) // unit) * unit)',
        ),
    ),
    "no sub-partitions": (
        (
            'candidates["registers"] = warps_per_part * parts // wpb',
            'candidates["registers"] = (lim["registers"] // per_warp) // wpb',
        ),
    ),
    "no shared-memory reserve": (('(smem + lim["reserved_shared_memory_per_block"])', "(smem)"),),
    "no shared-memory unit": (
        (
            'per_block = -(-(smem + lim["reserved_shared_memory_per_block"]) // unit) * unit',
            'per_block = smem + lim["reserved_shared_memory_per_block"]',
        ),
    ),
    "blocks as large as the SM": (
        (
            'if not 1 <= tpb <= lim["max_threads_per_block"]:',
            'if not 1 <= tpb <= lim["max_threads"]:',
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_hidden_test_fails_each_wrong_model(hidden, course, name):
    student = _student(_solution_occupancy(MUTANTS[name]))
    caught = 0
    for case in hidden.BOUNDARY:  # the fixed examples: every seed runs them
        try:
            hidden._check(student, course, *case)
        except (AssertionError, pytest.fail.Exception):
            caught += 1
    assert caught, f"no fixed example catches the mutant that {name}"
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        hidden.test_occupancy_random_launches(student=student, course=course, rng=_rng())


def _rng():
    return np.random.default_rng(20261202)


def test_the_hidden_test_passes_the_reference(hidden, course):
    student = _student(_solution_occupancy())
    hidden.test_occupancy_random_launches(student=student, course=course, rng=_rng())


def test_the_drawn_launches_cover_every_outcome(hidden, course):
    """The thousand draws reach every limit that can bind and both sides of the refusal."""
    rng = _rng()
    launches = [hidden._draw_launch(rng) for _ in range(hidden.DRAWN_LAUNCHES)]
    wants = [hidden.expected(course.hardware[g], t, r, m) for g, t, r, m in launches]
    refused = sum(w is None for w in wants)
    assert 0.2 * len(wants) < refused < 0.8 * len(wants)
    assert {w["limited_by"] for w in wants if w} == set(hidden.ORDER)
    assert {g for g, *_ in launches} == set(hidden.GPUS)
    assert any(t > 1024 for _, t, _, _ in launches) and any(m > 227 * 1024 for *_, m in launches)


def test_a_wrong_answer_among_the_draws_fails_with_its_launch(hidden, course):
    """One wrong answer, on one drawn launch only, fails the test and names that launch."""
    rng = _rng()
    launches = [hidden._draw_launch(rng) for _ in range(hidden.DRAWN_LAUNCHES)]
    target = next(x for x in launches[::-1] if hidden.expected(course.hardware[x[0]], *x[1:]))
    right = _solution_occupancy()

    def occupancy(tpb, regs, smem, sm):
        got = right(tpb, regs, smem, sm)
        if (tpb, regs, smem) == target[1:] and sm == course.hardware[target[0]].sm.as_dict():
            return {**got, "blocks_per_sm": got["blocks_per_sm"] + 1}
        return got

    call = rf"occupancy\({target[1]}, {target[2]}, {target[3]}, sm_limits\('{target[0]}'\)\)"
    with pytest.raises(AssertionError, match=call):
        hidden.test_occupancy_random_launches(
            student=_student(occupancy), course=course, rng=_rng()
        )


def test_the_occupancy_plot_drops_where_the_rules_say(hidden, course, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(ROOT)  # sm_limits reads course.toml from here
    nb = read_notebook(SOLUTION)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "register_counts" in c.source)
    text = SOLUTION.read_text(encoding="utf-8")
    helpers = text[text.index("def find_course_root(") : text.index("# %% [markdown]\n# ## §1")]
    import numpy as np

    namespace = {"np": np, "os": __import__("os"), "tomllib": __import__("tomllib")}
    exec(helpers, namespace)  # noqa: S102 - the notebook's own helpers
    namespace["occupancy"] = _solution_occupancy()
    monkeypatch.setattr(plt, "show", lambda: None)
    exec(cell.source, namespace)  # noqa: S102 - the notebook's demo cell
    lines = namespace["ax"].get_lines()
    assert len(lines) == 2
    for line, gpu in zip(lines, ("T4", "H100_SXM"), strict=True):
        assert line.get_drawstyle() == "steps-post"
        x, y = list(line.get_xdata()), list(line.get_ydata())
        drawn = [int(x[i]) for i in range(1, len(x)) if y[i] < y[i - 1]]
        hw = course.hardware[gpu]
        fraction = {r: hidden.expected(hw, 256, r, 0)["occupancy"] for r in range(1, 256)}
        computed = [r for r in range(2, 256) if fraction[r] < fraction[r - 1]]
        assert drawn == computed, (gpu, drawn, computed)
    t4 = [int(v) for v in lines[0].get_xdata()]
    assert 65 in t4 and lines[0].get_ydata()[t4.index(64)] == 1.0
    assert lines[0].get_ydata()[t4.index(65)] == 0.75
    plt.close("all")

"""course.toml loads into typed objects, and every kind of mistake names its key."""

from __future__ import annotations

import shutil
import tomllib
from datetime import UTC
from pathlib import Path

import pytest
from factories import ROOT

from grader.core.course import CourseError, find_root, load_course


def test_real_manifest_loads_with_the_design_figures():
    c = load_course(ROOT)
    assert c.course_gpu == "T4"
    assert c.gpu.ridge == pytest.approx(65e12 / 320e9)
    assert c.hardware["H100_SXM"].ridge == pytest.approx(295.2, rel=1e-3)
    assert c.hardware["H200"].bandwidth_gbs == 4800
    assert c.gpu.compute_capability == (7, 5)
    listed = tomllib.loads((ROOT / "course.toml").read_text())["assignments"]
    assert c.assignment_ids == [a["id"] for a in listed]  # every [[assignments]], in order
    assert all(c.assignment(a).due.tzinfo == UTC for a in c.assignment_ids)
    assert c.limits.call_timeout_s > 0
    t4, h100 = c.gpu, c.hardware["H100_SXM"]
    assert (t4.memory_mib, t4.sm_count, h100.memory_mib, h100.sm_count) == (15360, 40, 81559, 132)
    # Real bytes, as nvidia-smi counts them: a "16 GB" T4 with ECC on is 15 GiB, not 16e9 bytes.
    assert t4.memory_bytes == 15 * 2**30 and type(t4.memory_bytes) is int
    assert {h.usable_memory_fraction for h in c.hardware.values()} == {0.9}
    assert (t4.int8_tensor_tops, t4.fp8_tensor_tflops) == (130, None)
    assert h100.fp8_tensor_tflops == 1979
    assert round(h100.fp8_tensor_tflops * 1e12 / h100.peak_bandwidth) == 591  # the FP8 ridge
    assert t4.sm.as_dict() == {
        "max_threads": 1024,
        "max_blocks": 16,
        "max_warps": 32,
        "registers": 65536,
        "shared_memory_bytes": 64 * 1024,
        "register_granularity": 256,
        "max_threads_per_block": 1024,
        "max_registers_per_thread": 255,
        "max_registers_per_block": 65536,
        "register_sub_partitions": 4,
        "shared_memory_granularity": 256,
        "reserved_shared_memory_per_block": 0,
        "max_shared_memory_per_block": 65536,
    }
    assert h100.sm.reserved_shared_memory_per_block == 1024
    assert h100.sm.max_shared_memory_per_block == 227 * 1024
    assert h100.sm.shared_memory_bytes == 228 * 1024 and h100.sm.max_warps == 64
    a100 = c.hardware["A100_SXM"]  # the SXM module (2,039 GB/s), not the PCIe card (1,935)
    assert (a100.sm.shared_memory_kib, a100.bandwidth_gbs, a100.memory_mib) == (164, 2039, 81920)
    assert "SXM" in a100.name


def test_sustained_rate_is_optional(tmp_path):
    """M9's practical roof: the T4 quotes a sustained fp16 rate, the other GPUs leave it out."""
    c = load_course(ROOT)
    assert c.gpu.sustained_fp16_tflops == 24.0
    assert c.hardware["H100_SXM"].sustained_fp16_tflops is None
    gone = load_course(_write(tmp_path, "sustained_fp16_tflops = 24.0", ""))
    assert gone.gpu.sustained_fp16_tflops is None


def test_nvlink_is_optional(tmp_path):
    """M10's all-reduce link: NVLink per GPU on the SXM cards, none on the T4 (PCIe only)."""
    c = load_course(ROOT)
    found = {k: h.nvlink_gbs for k, h in c.hardware.items()}
    assert found == {"T4": None, "A100_SXM": 600.0, "H100_SXM": 900.0, "H200": 900.0}
    gone = load_course(_write(tmp_path, "nvlink_gbs = 600.0", ""))
    assert gone.hardware["A100_SXM"].nvlink_gbs is None


def test_find_root_walks_up(tmp_path):
    shutil.copy(ROOT / "course.toml", tmp_path)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_root(deep) == tmp_path.resolve()


def _write(tmp_path: Path, old: str, new: str) -> Path:
    text = (ROOT / "course.toml").read_text()
    assert old in text, old
    p = tmp_path / "course.toml"
    p.write_text(text.replace(old, new, 1))
    return p


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("points = 81", "points = 81\npionts = 3", "pionts"),
        ("bandwidth_gbs = 320.0", 'bandwidth_gbs = "fast"', "hardware.T4.bandwidth_gbs"),
        ("memory_mb = 4096", "", "memory_mb"),
        ('due = "2026-12-14T23:59:00+00:00"', 'due = "2026-12-14T23:59:00"', "assignments[0].due"),
        ('course_gpu = "T4"', 'course_gpu = "V100"', "course_gpu"),
        ("needs_gpu = false", "needs_gpu = 0", "needs_gpu"),
        ("compute_capability = [7, 5]", "compute_capability = 7.5", "compute_capability"),
        ("penalty_per_day = 0.1", "penalty_per_day = 3", "late_policy"),
        ("[limits]", "[limit]", "limit"),
        ("memory_mib = 15360", "", "[hardware.T4] missing key 'memory_mib'"),
        ("memory_mib = 15360", "memory_mib = 15.0", "hardware.T4.memory_mib: expected int"),
        ("memory_mib = 15360", "memory_gb = 16.0", "[hardware.T4] unknown key 'memory_gb'"),
        (
            "usable_memory_fraction = 0.9",
            "usable_memory_fraction = 1.5",
            "hardware.T4.usable_memory_fraction must be a fraction in",
        ),
        ("int8_tensor_tops = 130.0", "int8_tensor_tops = 0", "int8_tensor_tops must be positive"),
        (
            "fp8_tensor_tflops = 1979.0",
            "fp8_tensor_tflops = -1.0",
            "hardware.H100_SXM.fp8_tensor_tflops must be positive",
        ),
        ("nvlink_gbs = 600.0", "nvlink_gbs = 0.0", "hardware.A100_SXM.nvlink_gbs must be positive"),
        ("nvlink_gbs = 600.0", 'nvlink_gbs = "600"', "hardware.A100_SXM.nvlink_gbs: expected"),
        ("sm_count = 40", "sm_count = 0", "hardware.T4.sm_count must be positive"),
        ("max_blocks = 16", "max_blocks = 16\nmax_blok = 3", "hardware.T4.sm.*max_blok"),
        ("max_warps = 32", "max_warps = 31", "hardware.T4.sm: max_threads"),
        ("registers = 65536", 'registers = "64K"', "hardware.T4.sm.registers"),
        ("register_granularity = 256", "register_granularity = 0", "sm.register_granularity"),
        ("[hardware.T4.sm]", "[hardware.T4.sms]", "hardware.T4"),
        ("max_threads_per_block = 1024", "max_threads_per_block = 2048", "max_threads_per_block"),
        (
            "reserved_shared_memory_per_block = 0",
            "reserved_shared_memory_per_block = -1",
            "reserved_shared_memory_per_block must be >= 0",
        ),
        (
            "max_shared_memory_per_block = 65536",
            "max_shared_memory_per_block = 65537",
            "max_shared_memory_per_block must not exceed",
        ),
        (
            "sustained_fp16_tflops = 24.0",
            'sustained_fp16_tflops = "24"',
            "hardware.T4.sustained_fp16_tflops: expected float",
        ),
        (
            "sustained_fp16_tflops = 24.0",
            "sustained_fp16_tflops = 70.0",
            "sustained_fp16_tflops must be positive and at most fp16_tensor_tflops",
        ),
        ('assignment = "m9_roofline"', 'assignment = "m10"', "metrics.assignment 'm10' is not"),
        ('function = "m9_record"', 'function = "m9 record"', "metrics.function must be a Python"),
        (
            'function = "m9_record"',
            'function = "m9_record"\nfunc = 1',
            "[metrics] unknown key 'func'",
        ),
        ('function = "m9_record"', "", "[metrics] missing key 'function'"),
        ('"COURSE_MODEL", "course_gpu"', '"COURSE_MODEL", 3', "metrics.arguments[1] must be"),
        ('intensity_b8 = "batch 8"', "intensity_b8 = 8", "metrics.roofline.intensity_b8 must be"),
        ("[metrics.roofline]", "[metrics.rooflines]", "[metrics] unknown key 'rooflines'"),
    ],
)
def test_mistakes_name_the_key(tmp_path, old, new, named):
    with pytest.raises(CourseError, match=named.replace("[", r"\[").replace("]", r"\]")):
        load_course(_write(tmp_path, old, new))


def test_not_toml(tmp_path):
    p = tmp_path / "course.toml"
    p.write_text("[course\n")
    with pytest.raises(CourseError, match="not valid TOML"):
        load_course(p)


def test_unknown_assignment_lists_the_known_ones():
    course = load_course(ROOT)
    with pytest.raises(CourseError, match=", ".join(course.assignment_ids)):
        course.assignment("no_such_assignment")


def test_metrics_record_from_course_toml():
    metrics = load_course(ROOT).metrics
    assert metrics is not None
    assert (metrics.assignment, metrics.function) == ("m9_roofline", "m9_record")
    assert metrics.arguments == ("COURSE_MODEL", "course_gpu", "CONTEXT_LEN")
    assert list(metrics.roofline) == ["intensity_b1", "intensity_b8", "intensity_b32"]


def test_a_course_without_metrics_has_no_record(tmp_path):
    text = (ROOT / "course.toml").read_text()
    start, end = text.index("[metrics]"), text.index("[limits]")
    (tmp_path / "course.toml").write_text(text[:start] + text[end:])
    assert load_course(tmp_path).metrics is None

"""`grader profile` and `grader check`'s memory lines, on the reference and on the release.

The reference's kernels are profiled at the course's shapes (tests/public/gpu_fundamentals/
profiles.py): the tiled transpose reads and writes at the ideal sectors, the naive one writes
32 sectors per request, and where this machine can link a cubin the compiled kernel's resources
come with the occupancy the notebook's own `occupancy()` gives for them. The release's stubs are
not profiled and say why; an unknown kernel is a usage error naming the profiles file.
"""

from __future__ import annotations

import shutil

import pytest
from factories import ROOT

from grader.core import cubin
from grader.core.errors import UsageError
from grader.grading.check import check
from grader.grading.profile import profile
from grader.reports.memory import profile_report, summary
from grader.simt.memmodel import GLOBAL, LOAD, STORE

GF = "gpu_fundamentals"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("profile") / "exercises"
    (folder / GF).mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / GF / f"{GF}.py", folder / GF / f"{GF}.py")
    return folder


def test_the_reference_transposes_profile_as_the_lesson_says(reference):
    found = profile(ROOT, GF, ["transpose_naive", "transpose_tiled"], submission=reference)
    by_kernel = {k.kernel: k for k in found.kernels}
    assert set(by_kernel) == {"transpose_naive", "transpose_tiled"}
    naive, tiled = by_kernel["transpose_naive"].profile, by_kernel["transpose_tiled"].profile
    assert naive is not None and tiled is not None
    assert [s.max_sectors for s in naive.where(GLOBAL, STORE)] == [32]
    assert all(s.sectors == s.ideal_sectors for s in tiled.where(GLOBAL))
    assert tiled.global_bytes == 2 * 64 * 96 * 4 and naive.global_bytes == 221_184
    k = by_kernel["transpose_tiled"]
    if cubin.available(disassemble=False) is None:  # nvJitLink: the resources
        assert k.resources is not None and k.resources.shared_bytes == 32 * 33 * 4
        assert k.occupancy is not None and k.occupancy["limited_by"] == "shared_memory"
    else:
        assert k.resources is None and "nvJitLink" in k.launch_note
    text = profile_report(found, 320.0, "NVIDIA T4")
    assert "sectors/req" in text and "lower bound on the NVIDIA T4" in text
    assert "line " in text and f"of {GF}.py" in text


def test_the_release_stubs_are_not_profiled_and_say_why():
    found = profile(ROOT, GF, ["transpose_tiled"])
    assert len(found.kernels) == 2  # its graded shape (partial edge tiles) and the table's
    for k in found.kernels:
        assert k.profile is None and "still the stub" in (k.error or "")
        assert summary(k).startswith("transpose_tiled: not profiled")


def test_an_unknown_kernel_names_the_profiles_file():
    with pytest.raises(UsageError, match=r"no kernel named matmul_fancy.*profiles\.py"):
        profile(ROOT, GF, ["matmul_fancy"])


def test_check_prints_one_line_per_profiled_kernel(reference):
    (checked,) = check(ROOT, [GF], reference)
    names = [k.kernel for k in checked.memory]
    assert "transpose_tiled" in names and "matmul_naive" not in names  # brief launches only
    line = summary(next(k for k in checked.memory if k.kernel == "transpose_naive"))
    assert "loads 100%, stores 12%" in line, line
    assert all(k.profile is not None for k in checked.memory)
    assert not any(k.profile.where(GLOBAL, LOAD) == () for k in checked.memory)


def test_without_a_compiler_the_compile_note_is_said_once(reference, monkeypatch):
    """A machine without the CUDA compiler (the compile worker runs the simulator, as on the
    student profile): `grader profile` says the compile check is deferred once, with how to run
    it here (the student-compile extra), not again as every kernel's missing figures."""
    import os

    from grader.core import compiler
    from grader.grading import profile as profile_module
    from grader.suites.inprocess import ChildWorker, InProcessBackend

    class NoCompiler(InProcessBackend):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.compiler.close()
            self.compiler = ChildWorker(["--kernels"], {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})

    monkeypatch.setattr(profile_module, "InProcessBackend", NoCompiler)
    found = profile(ROOT, GF, ["vector_add"], submission=reference)
    text = profile_report(found, 320.0, "T4")
    assert text.count("the compile check for the course GPU runs when your PR is graded") == 1
    assert compiler.STUDENT_COMPILE in text
    assert all(k.profile is not None for k in found.kernels)

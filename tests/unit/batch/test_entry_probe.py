"""grade-all runs the isolation probe once per batch and hands it to every child."""

from __future__ import annotations

from factories import ROOT

from grader.batch import entry
from grader.sandbox import isolation


def test_run_class_hands_its_probe_to_the_children(monkeypatch, tmp_path):
    seen = {}

    def fake_grade_all(submissions, out_dir, **kw):
        seen.update(kw)

        class Outcome:
            failed = []
            audit = []

        return Outcome()

    monkeypatch.setattr(entry, "grade_all", fake_grade_all)
    monkeypatch.setattr(entry, "reference_record", lambda course: {})
    monkeypatch.setattr(entry.device, "has_gpu", lambda: False)
    assert entry.run_class(tmp_path, tmp_path / "out", root=ROOT) == 0
    assert seen["grade_one"].keywords["probe"] is isolation.probe()
    adopted = []
    monkeypatch.setattr(entry, "adopt", adopted.append)
    monkeypatch.setattr(entry, "grade_submission", lambda *a, **k: "graded")
    one = seen["grade_one"]
    assert one(tmp_path, "ada", tmp_path) == "graded"
    assert adopted == [isolation.probe()]

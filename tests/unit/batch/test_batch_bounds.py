"""grade-all records a row for every submission whatever its files hold or its reports do (issue
12): hostile metrics.json beside ordinary ones, and a report that cannot be written."""

from __future__ import annotations

import json

from test_batch import DRIVER, make_class, run_driver, state_students

BOMBS = {
    "deep": "[" * 100_000 + "]" * 100_000,  # 200 kB: RecursionError in json.loads before
    "wide": "[" + "[]," * 300_000 + "[]]",
    "deep_dict": '{"a": ' * 20_000 + "1" + "}" * 20_000,
}
# The parent's report writer raises for students named "badreport*" (after the others' reports).
BAD_REPORT = DRIVER.replace(
    'if __name__ == "__main__":\n',
    'if __name__ == "__main__":\n'
    "    import grader.batch.schedule as _schedule\n"
    "    _write = _schedule.write_reports\n"
    "    def _bad(result, course, out_dir, *a, **k):\n"
    '        if result.student.startswith("badreport"):\n'
    '            raise RecursionError("maximum recursion depth exceeded")\n'
    "        return _write(result, course, out_dir, *a, **k)\n"
    "    _schedule.write_reports = _bad\n",
)
assert BAD_REPORT != DRIVER


def test_hostile_metrics_do_not_stop_the_batch(tmp_path, db_rows):
    students = ["alice", *BOMBS, "zoe"]
    subs, driver = make_class(tmp_path, students)
    for name, text in BOMBS.items():
        (subs / name / "metrics.json").write_text(text)
    out = tmp_path / "out"
    res = run_driver(tmp_path, driver, subs, out)
    assert res.returncode == 0, res.stderr
    assert "FAILED=\n" in res.stdout  # the bombs cost no one a grade
    assert sorted(state_students(out)) == sorted(students)
    for s in students:
        assert (out / s / "result.json").is_file() and (out / s / "report.html").is_file(), s
    assert db_rows(out / "gradebook.db", "select count(*) from student") == [(len(students),)]


def test_a_report_that_cannot_be_written_is_an_error_row(tmp_path, db_rows):
    students = ["alice", "badreport1", "zoe"]
    subs, driver = make_class(tmp_path, students)
    driver.write_text(BAD_REPORT)
    out = tmp_path / "out"
    res = run_driver(tmp_path, driver, subs, out)
    assert res.returncode == 0, res.stderr
    assert "FAILED=badreport1\n" in res.stdout
    rows = {
        json.loads(x)["student"]: json.loads(x)
        for x in (out / "state.jsonl").read_text().splitlines()
        if x.strip()
    }
    assert set(rows) == set(students)
    assert rows["badreport1"]["status"] == "error"
    assert rows["alice"]["status"] == rows["zoe"]["status"] == "ok"
    assert "report could not be written (RecursionError" in res.stderr  # the cause, named
    assert (out / "zoe" / "report.html").is_file()
    assert db_rows(out / "gradebook.db", "select count(*) from student") == [(3,)]

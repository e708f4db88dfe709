"""`grader merge-shards`: a sharded class grading merged back into one, every student once."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from test_batch import ROOT, make_class, run_driver

from grader import cli
from grader.batch.merge import MergeError, merge_shards
from grader.batch.state import STATE, StateFile
from grader.core.course import load_course

STUDENTS = ["ada", "bo", "cy", "di", "ed", "flo", "gus"]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """The class graded as three shards, each into its own folder (as three machines would)."""
    tmp = tmp_path_factory.mktemp("shards")
    subs, driver = make_class(tmp, STUDENTS)
    outs = []
    for i in (1, 2, 3):
        out = tmp / f"shard-{i}"
        proc = run_driver(tmp, driver, subs, out, f"{i}/3")
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(out)
    return subs, outs


def test_three_shards_merge_into_one_class_with_every_student_once(shards, tmp_path):
    subs, outs = shards
    assert sum(len(StateFile(o / STATE).read()) for o in outs) == len(STUDENTS)
    merged = merge_shards(outs, tmp_path / "merged", load_course(ROOT), expect=subs)
    assert merged.students == sorted(STUDENTS)
    lines = (tmp_path / "merged" / STATE).read_text().splitlines()
    assert sorted(json.loads(x)["student"] for x in lines) == sorted(STUDENTS)
    for s in STUDENTS:
        assert json.loads((tmp_path / "merged" / s / "result.json").read_text())["student"] == s
    with merged.csv.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(r["student_id"] for r in rows) == sorted(STUDENTS)
    assert merged.class_report["html"].is_file()


def test_a_student_in_two_shards_is_refused(shards, tmp_path):
    subs, outs = shards
    twice = tmp_path / "copy"
    shutil.copytree(outs[0], twice)
    with pytest.raises(MergeError) as err:
        merge_shards([*outs, twice], tmp_path / "merged", load_course(ROOT))
    student = sorted(StateFile(outs[0] / STATE).read())[0]
    assert f"{student}: graded in both {outs[0]} and {twice}" in err.value.problems
    assert not (tmp_path / "merged").exists()


def test_a_missing_shard_names_every_student_left_out(shards, tmp_path):
    subs, outs = shards
    left_out = sorted(StateFile(outs[2] / STATE).read())
    with pytest.raises(MergeError) as err:
        merge_shards(outs[:2], tmp_path / "merged", load_course(ROOT), expect=subs)
    assert err.value.problems == [f"{s}: in the class but graded by no shard" for s in left_out]


def test_shards_graded_against_other_suites_are_refused(shards, tmp_path):
    subs, outs = shards
    other = tmp_path / "other"
    shutil.copytree(outs[1], other)
    entries = StateFile(other / STATE).read()
    (other / STATE).write_text(
        "".join(json.dumps({**e, "inputs": {"suites": "sha256:other"}}) + "\n"
                for e in entries.values())
    )  # fmt: skip
    with pytest.raises(MergeError, match="graded against different suites"):
        merge_shards([outs[0], other, outs[2]], tmp_path / "merged", load_course(ROOT))


def test_a_state_line_without_its_result_and_a_folder_without_state(shards, tmp_path, capsys):
    subs, outs = shards
    broken = tmp_path / "broken"
    shutil.copytree(outs[0], broken)
    gone = sorted(StateFile(broken / STATE).read())[0]
    (broken / gone / "result.json").unlink()
    empty = tmp_path / "empty"
    empty.mkdir()
    rc = cli.main(["--root", str(ROOT), "merge-shards", str(broken), str(empty),
                   "--out", str(tmp_path / "merged")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert f"{gone} has a state line but no result.json" in err and f"{empty}: no {STATE}" in err

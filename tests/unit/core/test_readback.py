"""Read-back by the trusted process: regular files only, no links followed, size-capped."""

from __future__ import annotations

import os

import pytest

from grader.core.readback import ReadBackError, list_dir, read_file


def test_reads_a_regular_file_and_lists_names(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.json").write_bytes(b'{"a": 1}')
    assert read_file(tmp_path, "sub/m.json") == b'{"a": 1}'
    assert read_file(tmp_path, "absent.json") is None
    assert list_dir(tmp_path, ".") == ["sub"]


def test_symlinks_are_not_followed_anywhere_on_the_path(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("grader secret")
    work = tmp_path / "work"
    work.mkdir()
    (work / "link.json").symlink_to(secret)
    (work / "dir").symlink_to(tmp_path)
    with pytest.raises(ReadBackError, match="not a regular file"):
        read_file(work, "link.json")
    with pytest.raises(ReadBackError, match="not a plain folder"):
        read_file(work, "dir/secret.txt")


def test_special_files_and_big_files_are_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ReadBackError, match="FIFO"):
        read_file(tmp_path, "fifo")  # O_NONBLOCK: never hangs waiting for a writer
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(ReadBackError, match="larger than 100 bytes"):
        read_file(tmp_path, "big", max_bytes=100)


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../../x", ""])
def test_paths_outside_the_directory_are_refused(tmp_path, path):
    with pytest.raises(ReadBackError):
        read_file(tmp_path, path)

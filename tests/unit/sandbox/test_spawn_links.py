"""A venv whose interpreter is reached through links (a runner's toolcache) starts in the sandbox:
every link on the way to the real binary that no bind holds is recreated inside."""

from __future__ import annotations

import os
from pathlib import Path

from grader.sandbox import spawn


def toolcache(tmp_path: Path):
    real = tmp_path / "hostedtoolcache" / "Python" / "3.11.9" / "x64"
    (real / "bin").mkdir(parents=True)
    (real / "bin" / "python3.11").write_text("")
    (real / "bin" / "python3").symlink_to("python3.11")
    alias = tmp_path / "hostedtoolcache" / "Python" / "3.11"
    alias.symlink_to("3.11.9")  # what setup-python's venv records: 3.11/x64/bin/python3
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(alias / "x64" / "bin" / "python3")
    return real, alias, venv


def test_a_link_on_the_way_to_the_interpreter_is_recreated(tmp_path):
    real, alias, venv = toolcache(tmp_path)
    binds = [real, venv]
    args = spawn._chain_links(binds, made=set(), exe=venv / "bin" / "python")
    assert args == ["--symlink", "3.11.9", str(alias)]
    # every path setpriv will exec through now resolves inside: the alias leads to a bind
    assert (alias / "x64" / "bin" / "python3").resolve() == real / "bin" / "python3.11"
    assert spawn.inside((alias.parent / os.readlink(alias)).resolve() / "x64", real)


def test_links_inside_a_bind_and_ones_already_made_are_left_alone(tmp_path):
    real, alias, venv = toolcache(tmp_path)
    assert spawn._chain_links([real, venv], made={str(alias)}, exe=venv / "bin" / "python") == []
    whole = tmp_path / "hostedtoolcache"
    assert spawn._chain_links([whole, venv], made=set(), exe=venv / "bin" / "python") == []


def test_a_plain_interpreter_needs_no_link(tmp_path):
    exe = tmp_path / "bin" / "python"
    exe.parent.mkdir()
    exe.write_text("")
    assert spawn._chain_links([tmp_path], made=set(), exe=exe) == []


def test_links_in_the_system_folders_bwrap_binds_are_left_alone(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")  # python3 -> python3.11 in /usr
    system = [Path("/usr"), Path("/bin"), Path("/lib")]
    assert spawn._chain_links([venv, *system], made=set(), exe=venv / "bin" / "python") == []

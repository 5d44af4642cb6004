"""gpuadvise.fileio: what a write keeps (mode, owner, links, the old file when it fails) and the
checks of a target path (issue 21: data loss through links, modes, full disks, long names)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from gpuadvise import fileio
from gpuadvise.fileio import path_name_problem, rewrite_file, target_problem, write_atomic


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def _no_space(monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)


# --- write_atomic ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o600, 0o755, 0o640])
def test_write_atomic_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path, mode: int) -> None:
    p = tmp_path / "report.json"
    p.write_text("old\n")
    p.chmod(mode)
    write_atomic(p, "new\n")
    assert p.read_text() == "new\n" and _mode(p) == mode


def test_write_atomic_gives_a_new_file_the_umask_mode(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    assert fileio._umask() == umask
    p = tmp_path / "new.json"
    write_atomic(p, "x")
    assert _mode(p) == 0o666 & ~umask  # as open() makes it (was 0644 whatever the umask)


def test_write_atomic_replaces_a_link_and_never_follows_it(tmp_path: Path) -> None:
    mine = tmp_path / "mine.cu"
    mine.write_text("mine\n")
    link = tmp_path / "report.html"
    link.symlink_to(mine)
    write_atomic(link, "<html>")
    assert mine.read_text() == "mine\n"
    assert not link.is_symlink() and link.read_text() == "<html>"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner needs root")
def test_write_atomic_keeps_owner_and_group(tmp_path: Path) -> None:
    p = tmp_path / "b.json"
    p.write_text("old")
    os.chown(p, 1234, 5678)
    write_atomic(p, "new")
    assert (p.stat().st_uid, p.stat().st_gid) == (1234, 5678)


def test_write_atomic_on_a_full_disk_leaves_the_old_file(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "out" / "report.json"
    p.parent.mkdir()
    p.write_text("old\n")
    _no_space(monkeypatch)
    with pytest.raises(OSError) as e:
        write_atomic(p, "new\n")
    assert e.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert p.read_text() == "old\n" and sorted(os.listdir(p.parent)) == ["report.json"]


# --- rewrite_file (--fix) ----------------------------------------------------------------------


def test_rewrite_file_writes_the_target_of_a_link(tmp_path: Path) -> None:
    real = tmp_path / "src" / "k.cu"
    real.parent.mkdir()
    real.write_bytes(b"old\n")
    link = tmp_path / "k.cu"
    link.symlink_to(real)
    assert rewrite_file(link, b"new\n") == real
    assert link.is_symlink() and real.read_bytes() == b"new\n"


def test_rewrite_file_writes_a_hard_linked_file_in_place(tmp_path: Path) -> None:
    a = tmp_path / "a.cu"
    a.write_bytes(b"old contents\n")
    b = tmp_path / "b.cu"
    os.link(a, b)
    inode = a.stat().st_ino
    rewrite_file(a, b"new, longer contents\n")
    assert a.stat().st_ino == b.stat().st_ino == inode
    assert b.read_bytes() == b"new, longer contents\n"
    rewrite_file(b, b"short\n")
    assert a.read_bytes() == b"short\n"


@pytest.mark.parametrize("mode", [0o755, 0o600, 0o640, 0o2755])
def test_rewrite_file_keeps_the_mode(tmp_path: Path, mode: int) -> None:
    p = tmp_path / "k.cu"
    p.write_bytes(b"old\n")
    p.chmod(mode)
    rewrite_file(p, b"new\n")
    assert _mode(p) == mode and p.read_bytes() == b"new\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner needs root")
def test_rewrite_file_keeps_owner_and_group(tmp_path: Path) -> None:
    p = tmp_path / "k.cu"
    p.write_bytes(b"old\n")
    p.chmod(0o640)
    os.chown(p, 1234, 5678)
    rewrite_file(p, b"new\n")
    st = p.stat()
    assert (st.st_uid, st.st_gid, _mode(p)) == (1234, 5678, 0o640)


def test_rewrite_file_refuses_a_read_only_file(tmp_path: Path) -> None:
    p = tmp_path / "k.cu"
    p.write_bytes(b"old\n")
    p.chmod(0o444)
    with pytest.raises(OSError, match="read-only"):
        rewrite_file(p, b"new\n")
    assert p.read_bytes() == b"old\n" and _mode(p) == 0o444


@pytest.mark.parametrize("linked", [False, True], ids=["atomic", "in place"])
def test_rewrite_file_on_a_full_disk_leaves_the_old_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linked: bool
) -> None:
    p = tmp_path / "k.cu"
    p.write_bytes(b"old\n")
    if linked:
        os.link(p, tmp_path / "other.cu")
    _no_space(monkeypatch)
    with pytest.raises(OSError) as e:
        rewrite_file(p, b"a much longer new text\n")
    monkeypatch.undo()
    assert e.value.errno == errno.ENOSPC
    assert p.read_bytes() == b"old\n"
    assert sorted(os.listdir(tmp_path)) == sorted(["k.cu"] + (["other.cu"] if linked else []))


# --- path checks -------------------------------------------------------------------------------


def test_path_name_problem_names_overlong_names(tmp_path: Path) -> None:
    assert path_name_problem(tmp_path / "report.json") is None
    long_name = path_name_problem(tmp_path / ("a" * 300 + ".json"))
    assert long_name is not None and "305 bytes long" in long_name and "255" in long_name
    long_path = path_name_problem("/".join(["b" * 200] * 25))
    assert long_path is not None and "path too long" in long_path


def test_target_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.cu").write_text("mine\n")
    Path("report.html").symlink_to("mine.cu")
    Path("dangling.json").symlink_to("elsewhere/new.json")
    Path(".git").mkdir()
    Path("real").mkdir()
    Path("out").symlink_to("real")
    assert target_problem("plain.json") is None
    assert target_problem("/dev/null") is None and target_problem("/dev/stdout") is None
    for link in ("report.html", "dangling.json"):
        what, fix = target_problem(link) or ("", "")
        assert what.startswith("is a symbolic link") and "never writes through a link" in fix
    assert (target_problem(".git/config") or ("",))[0] == "is inside a .git folder"
    assert (target_problem("sub/.GIT/x") or ("",))[0] == "is inside a .git folder"
    what, fix = target_problem("out/report.json") or ("", "")
    assert "out, a symbolic link (to real)" in what and fix.endswith("real/report.json")
    # a link outside the current folder (the system's /tmp, a home folder) is followed
    monkeypatch.chdir(tmp_path / "real")
    assert target_problem(tmp_path / "out" / "x.json") is None

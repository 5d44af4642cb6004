"""The toolchain probe kept in the cache folder (gpuadvise.toolchain.find._probe_stored): reused
across processes while nvcc, its environment and every tool it named are unchanged."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpuadvise.toolchain import find as findmod
from gpuadvise.toolchain.find import find_toolchain


def _fake_nvcc(tmp_path: Path) -> tuple[Path, Path]:
    """An nvcc script that logs each run (to ``$FAKE_NVCC_LOG``: a path the script named would
    be stamped, and change), with a ptxas and a cicc next to it."""
    bin_dir = tmp_path / "cuda" / "bin"
    cicc_dir = tmp_path / "cuda" / "nvvm" / "bin"
    cicc_dir.mkdir(parents=True)
    bin_dir.mkdir(parents=True)
    (cicc_dir / "cicc").write_text("#!/bin/sh\n")
    log = tmp_path / "runs.log"
    script = bin_dir / "nvcc"
    script.write_text(
        "#!/bin/sh\n"
        'echo "$*" >> "$FAKE_NVCC_LOG"\n'
        'case "$*" in\n'
        '  *--version*) echo "Cuda compilation tools, release 13.2, V13.2.86";;\n'
        f'  *--dryrun*) echo "#\\$ _HERE_={bin_dir}"; echo "#\\$ CICC_PATH={cicc_dir}";;\n'
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (bin_dir / "ptxas").write_text("#!/bin/sh\n")
    (bin_dir / "ptxas").chmod(0o755)
    return script, log


def _runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("GPUADVISE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_NVCC_LOG", str(tmp_path / "runs.log"))
    findmod._probe_stored.cache_clear()
    findmod._probe_toolchain.cache_clear()
    yield tmp_path
    findmod._probe_stored.cache_clear()
    findmod._probe_toolchain.cache_clear()


def _again(nvcc: Path) -> findmod.Toolchain:
    """find_toolchain as a new process would call it (the in-process memos cleared)."""
    findmod._probe_stored.cache_clear()
    findmod._probe_toolchain.cache_clear()
    return find_toolchain(nvcc)


def test_probe_is_reused_until_a_tool_changes(fresh: Path) -> None:
    nvcc, log = _fake_nvcc(fresh)
    first = find_toolchain(nvcc)
    assert _runs(log) == 2  # --version and --dryrun
    assert list((fresh / "cache" / "toolchain").glob("*.json"))
    assert _again(nvcc) == first
    assert _runs(log) == 2  # read back, nvcc not run
    ptxas = nvcc.parent / "ptxas"
    ptxas.write_text("#!/bin/sh\n# a new ptxas\n")
    st = ptxas.stat()
    os.utime(ptxas, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert _again(nvcc) == first
    assert _runs(log) == 4  # probed again: a tool it named changed
    (nvcc.parent / "nvdisasm").write_text("#!/bin/sh\n")
    (nvcc.parent / "nvdisasm").chmod(0o755)
    os.utime(nvcc.parent, ns=(0, nvcc.parent.stat().st_mtime_ns + 10**9))
    tc = _again(nvcc)
    assert _runs(log) == 6  # a tool added next to nvcc: its folder changed
    assert tc.nvdisasm == nvcc.parent / "nvdisasm"


def test_environment_and_damage_make_a_new_probe(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvcc, log = _fake_nvcc(fresh)
    find_toolchain(nvcc)
    monkeypatch.setenv("NVCC_PREPEND_FLAGS", "-O2")
    _again(nvcc)
    assert _runs(log) == 4  # another environment: another entry
    for entry in (fresh / "cache" / "toolchain").glob("*.json"):
        entry.write_text("{not json")
    tc = _again(nvcc)
    assert _runs(log) == 6 and tc.version == "13.2.86"  # a damaged entry is a miss
    assert _again(nvcc) == tc and _runs(log) == 6  # and is written again


def test_failed_probe_is_not_stored(fresh: Path) -> None:
    nvcc, log = _fake_nvcc(fresh)
    cicc = fresh / "cuda" / "nvvm" / "bin" / "cicc"
    cicc.unlink()
    with pytest.raises(findmod.ToolchainError, match="cicc"):
        find_toolchain(nvcc)
    assert not list((fresh / "cache" / "toolchain").glob("*.json"))


def test_the_cccl_wheel_is_looked_for_only_when_nvcc_s_own_folders_lack_it(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wheel's CCCL folder is found through cuda.pathfinder, whose import runs ``ldconfig
    -p``: not on the way to a first compile when nvcc's own include folders hold CCCL."""
    looked: list[int] = []
    monkeypatch.setattr(findmod, "_wheel_cccl_dir", lambda: looked.append(1))
    nvcc, _ = _fake_nvcc(fresh)
    own = fresh / "cuda" / "include"
    (own / "cub").mkdir(parents=True)
    (own / "cub" / "cub.cuh").write_text("")
    text = nvcc.read_text().replace(
        "  *--dryrun*) ", f'  *--dryrun*) echo "#\\$ INCLUDES=\\"-I{own}\\""; '
    )
    nvcc.write_text(text)
    assert find_toolchain(nvcc).cccl_include_dir == own
    assert looked == []

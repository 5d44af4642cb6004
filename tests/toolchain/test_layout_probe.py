"""A struct layout probe runs once a process for what it is made of (toolchain/layout.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpuadvise.toolchain.layout as L
from gpuadvise.toolchain import CompileOptions, struct_layouts


@pytest.mark.toolkit
def test_the_same_probe_runs_nvcc_once_and_a_changed_file_probes_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An analysis binds the launch of the kernel, of its traced variants and of both kernels
    of each layout proxy (one file), each probing the same types again (issue 31: HeCBench
    interleave ran five probes, 0.4-1 CPU-s of nvcc each): the second probe of the same file,
    names, flags and namespaces is the first's answer; another file's bytes, another name or
    other flags run nvcc again."""
    runs: list[list[str]] = []
    real = L.run_tool

    def counted(cmd, *a, **kw):  # type: ignore[no-untyped-def]
        runs.append(list(cmd))
        return real(cmd, *a, **kw)

    monkeypatch.setattr(L, "run_tool", counted)
    src = tmp_path / "cells.cu"
    src.write_text("namespace sim { struct Cell { double x; int n; }; }\n")
    opts = CompileOptions(arch="sm_90")
    first = struct_layouts(src, ["Cell"], opts, namespaces=("sim",))
    assert first == {"Cell": (16, 8)} and len(runs) == 1
    again = struct_layouts(src, ["Cell"], opts, namespaces=("sim",))
    assert again == first and len(runs) == 1
    again["Cell"] = (0, 0)  # the caller's copy: the memo keeps its own
    assert struct_layouts(src, ["Cell"], opts, namespaces=("sim",)) == first
    assert len(runs) == 1
    struct_layouts(src, ["sim::Cell"], opts)  # another name
    struct_layouts(src, ["Cell"], CompileOptions(arch="sm_80"), namespaces=("sim",))  # flags
    assert len(runs) == 3
    src.write_text("namespace sim { struct Cell { double x; int n[3]; }; }\n")  # other bytes
    assert struct_layouts(src, ["Cell"], opts, namespaces=("sim",)) == {"Cell": (24, 8)}
    assert len(runs) == 4

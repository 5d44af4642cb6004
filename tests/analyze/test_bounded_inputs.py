"""Inputs that used to cost memory or hide as notes (gate-inputs review, items 5 and 7): a grid of
2**31 CTAs, a 512 MB data file of which a trace reads a few pages, and data files or buffer types
that are wrong: input errors (exit 2, one line) found before the trace, not a note beside exit 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from clikit import PEAK_WRAPPER, cli, one_error

pytestmark = [pytest.mark.toolkit, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
KERNEL = """\
struct Cell { float a; int b; short c; };
__global__ void k(float* o, const float* x, const Cell* cells)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    o[i] = x[i] + cells[i].a;
}
"""
LAUNCH = ("--grid", "2", "--block", "32", "--gpu", "H100", "--no-measure")


def measured(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``gpuadvise ARGS`` in a child process: its result and its peak resident memory in MB."""
    env = {**os.environ, "GPUADVISE_CACHE_DIR": str(cwd / "cache"), "PYTHONWARNINGS": "ignore"}
    r = subprocess.run(
        [sys.executable, "-c", PEAK_WRAPPER, sys.executable, "-m", "gpuadvise", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    lines = r.stderr.rstrip().splitlines()
    peak_kb = int(lines[-1])  # ru_maxrss of the wrapper's one child, in KB
    r.stderr = "\n".join(lines[:-1]) + ("\n" if len(lines) > 1 else "")
    return r, peak_kb / 1024


def test_a_grid_of_2_31_ctas_keeps_to_the_memory_budget(tmp_path: Path) -> None:
    (tmp_path / "w.cu").write_text("__global__ void w(float* o) { o[blockIdx.x] = 1.0f; }\n")
    r, peak_mb = measured(
        tmp_path, "analyze", "w.cu", "--grid", "2147483647", "--block", "1", "--gpu", "H100",
        "--no-measure", "--no-cache",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    # the L2 model replays every CTA (about 200 bytes each): skipped, and said why
    assert "no L2 model: the L2 model's replay of 2147483647 CTAs needs" in r.stdout
    assert peak_mb < 1024, peak_mb  # was 6 GB after 15 s, and growing


def test_the_l2_replay_takes_at_most_a_gigabyte_on_any_machine(tmp_path: Path) -> None:
    # HeCBench epistasis: 490 x 31,360 CTAs, whose replays (about 250 bytes a CTA and order) a
    # share of a 64 GB machine's budget allowed: 6 GB. 4096 x 4096 CTAs need 4 GB for one order,
    # within a quarter of most machines' memory but not within the L2 model's fixed ceiling
    (tmp_path / "w.cu").write_text(
        "__global__ void w(float* o) { o[blockIdx.y * gridDim.x + blockIdx.x] = 1.0f; }\n"
    )
    r, peak_mb = measured(
        tmp_path, "analyze", "w.cu", "--grid", "4096x4096", "--block", "1", "--gpu", "H100",
        "--no-measure", "--no-cache",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "no L2 model: " in r.stdout and "16777216 CTAs needs" in r.stdout, r.stdout
    assert peak_mb < 1024, peak_mb


def test_a_data_file_is_read_only_where_the_trace_reads(tmp_path: Path) -> None:
    # 512 MB of float32, sparse: no disk used. The analysis maps it and reads the pages its
    # trace reads; the result cache's key reads it all, in 1 MB chunks (a hash). Its size is
    # what the peak is held against, not what is tested: the analysis alone peaks at about
    # 95 MB, so a whole read, in any form, passes the bound by 300 MB (1.5 GB until 2026-12-01:
    # the same bound on the same share of the file, the hash and the reads three times over)
    n = 128 << 20
    with (tmp_path / "x.npy").open("wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": (n,)}
        )
        f.truncate(f.tell() + 4 * n)
    (tmp_path / "r.cu").write_text(
        "__global__ void r(float* o, const float* x) { o[threadIdx.x] = x[threadIdx.x]; }\n"
    )
    (tmp_path / "r.toml").write_text(
        'grid = 1\nblock = 32\n[buffers]\nx = "x.npy"\no = "float[32]"\n'
    )
    r, peak_mb = measured(tmp_path, "analyze", "r.cu", "--gpu", "H100", "--no-measure")
    assert r.returncode == 0, r.stderr
    assert peak_mb < 300, peak_mb  # the whole file was read: 512 MB


@pytest.fixture
def case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "k.cu").write_text(KERNEL)
    x = np.ones(64, np.float32)
    np.save(tmp_path / "x.npy", x)
    whole = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(whole[:-40])
    (tmp_path / "cells.bin").write_bytes(bytes(12 * 64))
    (tmp_path / "cells_odd.bin").write_bytes(bytes(12 * 64 + 5))
    monkeypatch.setenv("GPUADVISE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


GOOD = ("--buffer", "x=float[64]:x.npy", "--buffer", "cells=Cell[64]:cells.bin")


@pytest.mark.parametrize(
    "buffers,needle",
    [
        (("--buffer", "x=cut.npy", "--buffer", "cells=Cell[64]:cells.bin"), "is cut short"),
        (
            ("--buffer", "x=float[64]:x.npy", "--buffer", "cells=Cell[64]:cells_odd.bin"),
            "not a whole number of 12-byte elements",
        ),
        (
            ("--buffer", "x=double[64]", "--buffer", "cells=Cell[64]:cells.bin"),
            "x is double (8 bytes an element), but the kernel's parameter x points to float",
        ),
    ],
)
@pytest.mark.parametrize("trace", [True, False])
def test_bad_data_is_an_input_error(
    capsys: pytest.CaptureFixture[str], case: Path, buffers: tuple[str, ...], needle: str, trace
) -> None:
    extra = () if trace else ("--no-trace",)
    code, out, err = cli(capsys, "analyze", "k.cu", *LAUNCH, "--buffer", "o=float[64]", *buffers,
                         *extra)  # fmt: skip
    if not trace and "cells_odd" in " ".join(buffers):
        # a struct's size is the compiler's: without a trace it is not bound, nor read
        assert code == 0, err
        return
    assert code == 2 and needle in one_error(err), err


@pytest.mark.skipif(os.geteuid() == 0, reason="permissions do not stop root")
def test_an_unreadable_data_file_is_an_input_error(
    capsys: pytest.CaptureFixture[str], case: Path
) -> None:
    (case / "cells.bin").chmod(0)
    code, _, err = cli(capsys, "analyze", "k.cu", *LAUNCH, "--buffer", "o=float[64]", *GOOD)
    assert code == 2 and "cannot be read" in one_error(err)


def test_buffer_types_of_the_same_size_or_lanes_are_accepted(
    capsys: pytest.CaptureFixture[str], case: Path
) -> None:
    code, out, err = cli(
        capsys, "analyze", "k.cu", *LAUNCH, "--buffer", "o=int[64]", *GOOD, "--format", "json"
    )
    assert code == 0, err
    assert "buffer o holds int but the parameter points to float" in out
    assert "reads their bytes as float" in out
    code, out, err = cli(
        capsys, "analyze", "k.cu", *LAUNCH, "--buffer", "o=float4[16]", *GOOD, "--no-trace"
    )
    assert code == 0, err

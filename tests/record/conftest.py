"""Fixtures of the recorder's tests: kernels compiled with nvcc (the toolkit wheels) into cubins
with line information, as a program built with -lineinfo loads them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

DATA = Path(__file__).with_name("data")


@pytest.fixture(scope="session")
def saxpy_cubin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.toolchain import find_toolchain

    try:
        tc = find_toolchain()
    except GpuAdviseError as exc:
        pytest.skip(f"no CUDA toolkit (pip install .[toolkit]): {exc.one_line()}")
    out = tmp_path_factory.mktemp("cubin") / "saxpy.cubin"
    subprocess.run(
        [
            str(tc.nvcc),
            "-cubin",
            "-arch=sm_90",
            "-lineinfo",
            "-o",
            str(out),
            str(DATA / "saxpy.cu"),
        ],
        check=True,
        capture_output=True,
    )
    return out

"""`gpuadvise bench` on the CPU side: what is prepared for the GPU worker, and clear errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from clikit import cli_run

from gpuadvise.analyze.options import KernelOptions
from gpuadvise.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "tests" / "cuda" / "runner"

try:
    from gpuadvise.toolchain import find_toolchain

    find_toolchain()
    HAVE_NVCC = True
except Exception:
    HAVE_NVCC = False

pytestmark = [
    pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit"),
    pytest.mark.usefixtures("compile_cache"),
]


def prep(src: str, **kw: object):
    from gpuadvise.analyze.prepare import prepare

    return prepare(KernelOptions(source=str(RUN / src), gpu="H100", **kw), "A")  # type: ignore[arg-type]


def test_split_source():
    from gpuadvise.analyze.prepare import split_source

    assert split_source("a.cu") == ("a.cu", None)
    assert split_source("dir/a.cu:ns::k<256, true>") == ("dir/a.cu", "ns::k<256, true>")


def test_copy_params_and_buffers():
    p = prep("copy.cu", kernel="copy", grid="ceil_div(n,256)", block="256", args=("n=1000",))
    assert p.launch.grid == (4, 1, 1) and p.launch.block == (256, 1, 1)
    assert [(q.kind, q.fmt) for q in p.launch.params] == [
        ("buffer", "P"),
        ("buffer", "P"),
        ("scalar", "i"),
    ]
    assert p.launch.params[2].value == 1000
    inb, outb = p.buffers
    assert (inb.name, inb.is_output, inb.poison) == ("in", False, False)
    assert (outb.name, outb.is_output, outb.poison) == ("out", True, True)
    # no --buffer given: one element per launched thread, and the notes say so
    assert inb.count == 4 * 256 and any("assum" in n for n in p.notes)


def test_explicit_fill_makes_an_inout_buffer_not_poisoned():
    p = prep(
        "copy.cu",
        kernel="copy",
        grid="4",
        block="256",
        args=("n=1024",),
        buffers=("in=float[n]", "out=float[n]:zeros"),
    )
    out = p.buffers[1]
    assert out.count == 1024 and out.is_output and not out.poison and out.fill == "zeros"


def test_struct_buffer_gets_the_compilers_layout():
    p = prep(
        "kinds.cu",
        kernel="age_cells",
        grid="4",
        block="256",
        args=("n=1024",),
        buffers=("in=Cell[n]", "out=Cell[n]"),
    )
    inb = p.buffers[0]
    assert np.dtype(inb.dtype).itemsize == 12  # int, short, uchar (+pad), float
    assert inb.nbytes == 12 * 1024


def test_dynamic_smem_above_48k_is_noted_and_above_the_optin_refused():
    p = prep(
        "kinds.cu", kernel="big_smem", grid="4", block="256", args=("n=1024",), dynamic_smem="100k"
    )
    assert p.launch.dynamic_smem_bytes == 100 * 1024
    assert any("cudaFuncAttributeMaxDynamicSharedMemorySize" in n for n in p.notes)
    with pytest.raises(UsageError, match="shared memory"):
        prep(
            "kinds.cu",
            kernel="big_smem",
            grid="4",
            block="256",
            args=("n=1024",),
            dynamic_smem="300k",
        )


def test_templated_kernel():
    p = prep("kinds.cu", kernel="scale<3>", grid="4", block="256", args=("n=1024",))
    assert p.kernel_name.startswith("scale<3") and p.launch.symbol.startswith("_Z")


def test_missing_scalar_is_a_clear_error():
    with pytest.raises(UsageError, match="n"):
        prep("copy.cu", kernel="copy", grid="4", block="256")


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None, reason="PyCUDA is installed")
def test_no_pycuda_says_what_is_missing_and_exits_2():
    r = cli_run(
        "bench",
        str(RUN / "copy.cu"),
        "-k",
        "copy",
        "--grid",
        "4",
        "--block",
        "256",
        "--arg",
        "n=1024",
    )
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "PyCUDA is not installed" in r.stderr

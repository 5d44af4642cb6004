"""nvcc's failures in one line that says what to do (issue 18).

A missing header names the package that provides it (CUB/Thrust -> nvidia-cuda-cccl, cuBLAS ->
nvidia-cublas, ...); texture references say they were removed in CUDA 12 and to use texture
objects; a template instance that does not compile shows nvcc's first error in the user's file
(or ptxas's) and the instance asked for; a corrupt cubin is called corrupt, with --no-cache as
the fix; the CCCL headers come with the toolkit extra.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
from pathlib import Path

import pytest
from clikit import cli_run
from toolchainkit import toolchain_or_none

from gpuadvise.errors import CompileError, KernelNotFoundError, ToolchainError
from gpuadvise.toolchain import (
    CompileOptions,
    Toolchain,
    compile_source,
    find_toolchain,
    select_compiled_kernel,
)
from gpuadvise.toolchain import find as findmod
from gpuadvise.toolchain.compile import effective_flags
from gpuadvise.toolchain.diagnostics import compile_error, header_source
from gpuadvise.toolchain.find import cccl_dirs
from gpuadvise.toolchain.sass import disassemble_all

ROOT = Path(__file__).resolve().parents[2]


TC = toolchain_or_none()
needs_nvcc = pytest.mark.skipif(TC is None, reason="no CUDA toolchain (nvcc) found")

TEXTURE = """\
texture<float, 1, cudaReadModeElementType> tex;

__global__ void gather(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch(tex, i);
}
"""

REDUCE = """\
template <int B, bool F>
__global__ void reduce(float* p) {
  static_assert(B % 32 == 0, "B must be a multiple of 32");
  __shared__ float s[B * 64];
  s[threadIdx.x] = p[threadIdx.x];
  __syncthreads();
  p[threadIdx.x] = F ? s[B - 1 - threadIdx.x] : s[0];
}
template __global__ void reduce<64, true>(float*);
"""


def _fake_tc(**changes: object) -> Toolchain:
    tc = Toolchain(
        nvcc=Path("/site-packages/nvidia/cu13/bin/nvcc"),
        ptxas=Path("/site-packages/nvidia/cu13/bin/ptxas"),
        nvdisasm=None,
        cuobjdump=None,
        version="13.2.86",
        include_dir=None,
        bin_dir=Path("/venv/lib/python3.11/site-packages/nvidia/cu13/bin"),
    )
    return dataclasses.replace(tc, **changes)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Missing headers


GCC_MISSING = """\
/src/k.cu:1:10: fatal error: {header}: No such file or directory
    1 | #include <{header}>
      |          ^~~~~~~~~~~~~
compilation terminated."""


@pytest.mark.parametrize(
    ("header", "package"),
    [
        ("cub/cub.cuh", "nvidia-cuda-cccl"),
        ("thrust/device_vector.h", "nvidia-cuda-cccl"),
        ("cuda/std/atomic", "nvidia-cuda-cccl"),
        ("cublas_v2.h", "nvidia-cublas"),
        ("cufft.h", "nvidia-cufft"),
        ("curand_kernel.h", "nvidia-curand"),
        ("cusparse.h", "nvidia-cusparse"),
    ],
)
def test_missing_header_names_its_package(header: str, package: str) -> None:
    err = compile_error(
        Path("/src/k.cu"), "sm_90", 1, GCC_MISSING.format(header=header), _fake_tc()
    )
    assert isinstance(err, CompileError)
    line = err.one_line()
    assert "\n" not in err.message
    assert line.startswith(f"/src/k.cu:1: cannot find the header {header}")
    assert f"pip install {package}" in line
    if package == "nvidia-cuda-cccl":
        assert "nvidia-cuda-cccl==13.2.86" in line and "gpuadvise[toolkit]" in line
    else:
        assert "not of gpuadvise[toolkit]" in line


def test_missing_header_of_an_unknown_library_asks_for_an_include_dir() -> None:
    err = compile_error(Path("/src/k.cu"), "sm_90", 1, GCC_MISSING.format(header="mylib.h"))
    assert "-I DIR" in (err.hint or "") and "mylib.h" in err.message
    assert header_source("mylib.h") is None


def test_missing_cccl_header_with_cccl_installed_is_a_name_problem() -> None:
    tc = _fake_tc(cccl_include_dir=Path("/cccl"))
    err = compile_error(Path("/k.cu"), "sm_90", 1, GCC_MISSING.format(header="cub/nope.cuh"), tc)
    assert "CCCL is installed (/cccl) but has no cub/nope.cuh" in (err.hint or "")


@needs_nvcc
def test_missing_library_header_from_nvcc(tmp_path: Path) -> None:
    """cuDNN is never part of the CUDA toolkit: its header is missing unless installed apart."""
    src = tmp_path / "k.cu"
    src.write_text("#include <cudnn.h>\n__global__ void k() {}\n")
    try:
        compile_source(src, CompileOptions(use_cache=False), TC)
    except CompileError as exc:
        assert exc.message == f"{src}:1: cannot find the header cudnn.h (#include)"
        assert "pip install nvidia-cudnn-cu13" in (exc.hint or "")
    else:
        pytest.skip("cuDNN is installed here")


# --------------------------------------------------------------------------------------------
# CCCL with the toolkit extra


def test_toolkit_extra_pins_cccl_to_the_nvcc_version() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    extra = text[text.index("toolkit = [") : text.index("]", text.index("toolkit = ["))]
    pins = dict(re.findall(r'"([\w-]+)==([\d.]+)"', extra))
    assert pins["nvidia-cuda-cccl"] == pins["nvidia-cuda-nvcc"]


def test_cccl_dirs_prefers_nvccs_own_then_the_wheel(tmp_path: Path) -> None:
    own, wheel, empty = tmp_path / "own", tmp_path / "wheel", tmp_path / "empty"
    for d in (own, wheel):
        (d / "cub").mkdir(parents=True)
        (d / "cub" / "cub.cuh").write_text("")
    empty.mkdir()
    assert cccl_dirs([empty, own], wheel) == (own, ())
    assert cccl_dirs([empty], wheel) == (wheel, (wheel,))
    assert cccl_dirs([empty], None) == (None, ())


@needs_nvcc
def test_cccl_folder_apart_from_nvcc_is_passed_with_isystem(tmp_path: Path) -> None:
    assert TC is not None
    tc = dataclasses.replace(TC, extra_include_dirs=(tmp_path / "cccl",))
    flags = effective_flags(CompileOptions(), tc)
    assert flags[-2:] == ("-isystem", str(tmp_path / "cccl"))
    again = effective_flags(CompileOptions(extra_flags=flags[-2:]), tc)
    assert again.count("-isystem") == 1


def _wheel_nvcc() -> Path | None:
    tool = findmod._wheel_tool("nvcc")
    return tool if tool is not None and "site-packages" in str(tool) else None


@pytest.mark.toolkit
@pytest.mark.skipif(_wheel_nvcc() is None, reason="the CUDA pip wheels are not installed")
def test_cub_and_thrust_compile_with_the_wheels_alone(tmp_path: Path) -> None:
    """With the toolkit extra alone (nvidia-cuda-cccl in it), CUB and Thrust kernels compile."""
    tc = find_toolchain(_wheel_nvcc())
    assert tc.cccl_include_dir is not None, "pip install nvidia-cuda-cccl (the toolkit extra)"
    src = tmp_path / "cub_reduce.cu"
    src.write_text(
        "#include <cub/cub.cuh>\n#include <thrust/functional.h>\n"
        "__global__ void block_sum(const float* in, float* out) {\n"
        "  using R = cub::BlockReduce<float, 128>;\n"
        "  __shared__ typename R::TempStorage tmp;\n"
        "  float v = R(tmp).Reduce(in[threadIdx.x], thrust::plus<float>());\n"
        "  if (threadIdx.x == 0) *out = v;\n"
        "}\n"
    )
    module = compile_source(src, CompileOptions(use_cache=False), tc)
    assert module.kernels[0].name == "block_sum"  # the user's kernel first (CUB adds its own)
    assert select_compiled_kernel(module, "block_sum").resources.static_smem_bytes > 0


# --------------------------------------------------------------------------------------------
# Texture references


@needs_nvcc
def test_texture_reference_is_one_line_with_the_fix(tmp_path: Path) -> None:
    src = tmp_path / "tex.cu"
    src.write_text(TEXTURE)
    with pytest.raises(CompileError) as exc:
        compile_source(src, CompileOptions(use_cache=False), TC)
    line = exc.value.one_line()
    assert exc.value.message.count("\n") == 0 and len(line) < 400
    assert line.startswith(f"{src}:1: texture references")
    assert "removed in CUDA 12" in line
    assert "cudaTextureObject_t" in line and "cudaCreateTextureObject" in line
    assert "tex1Dfetch<float>(obj, i)" in line


@needs_nvcc
def test_texture_reference_through_the_cli(tmp_path: Path) -> None:
    (tmp_path / "tex.cu").write_text(TEXTURE)
    with contextlib.chdir(tmp_path):  # in this process, the run's compile cache
        p = cli_run("analyze", "tex.cu", "--grid", "1", "--block", "32")
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "texture references" in lines[0] and "cudaTextureObject_t" in lines[0]


def test_surface_reference_says_surface_objects() -> None:
    log = "/k.cu(1): error: surface is not a template\n  surface<void, 2> s;\n  ^\n"
    err = compile_error(Path("/k.cu"), "sm_90", 1, log)
    assert err.message.startswith("/k.cu:1: surface references")
    assert "cudaSurfaceObject_t" in (err.hint or "")


# --------------------------------------------------------------------------------------------
# Template instances


@needs_nvcc
@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ("reduce<7, true>", r'r\.cu:3: static assertion failed with "B must be a multiple of 32"'),
        ("reduce<64, 3.5>", r"from r\.cu: expression must have integral or enum type; check"),
        (
            "reduce<4096, true>",
            r"ptxas: Entry function 'reduce<4096, true>' uses too much shared data",
        ),
    ],
)
def test_template_instance_errors_show_the_first_error(
    asked: str, expected: str, tmp_path: Path
) -> None:
    src = tmp_path / "r.cu"
    src.write_text(REDUCE)
    with pytest.raises(KernelNotFoundError) as exc:
        compile_source(src, CompileOptions(cache_dir=tmp_path / "c"), TC, kernels=[asked])
    line = exc.value.one_line()
    assert "nvcc failed" not in line
    assert line.startswith(f"cannot instantiate kernel {asked} from r.cu: ")
    assert re.search(expected, line), line
    assert "\n" not in line


# --------------------------------------------------------------------------------------------
# Corrupt cubins


@needs_nvcc
@pytest.mark.skipif(TC is not None and TC.nvdisasm is None, reason="no nvdisasm")
@pytest.mark.parametrize("data", [b"not an ELF file at all", b"\x7fELF\x02\x01" + b"\x00" * 200])
def test_corrupt_cubin_is_called_corrupt(data: bytes, tmp_path: Path) -> None:
    cubin = tmp_path / "module.cubin"
    cubin.write_bytes(data)
    with pytest.raises(ToolchainError) as exc:
        disassemble_all(cubin, TC)
    line = exc.value.one_line()
    assert "corrupt" in line and "--no-cache" in line
    assert "matches" not in line


# --- a full disk is a full disk, not a kernel that "does not compile" ---------------------------


@pytest.mark.parametrize(
    "log",
    [
        "<built-in>: fatal error: when writing output to /tmp/c/tmp/build-x/nvcc/k.cpp1.ii: "
        "No space left on device\ncompilation terminated.",
        "nvcc error   : 'cicc' died: could not write to /tmp/c/tmp/k.ptx: Disk quota exceeded",
    ],
)
def test_a_full_disk_says_so(log: str) -> None:
    err = compile_error(Path("/src/k.cu"), "sm_90", 1, log)
    assert not isinstance(err, CompileError) and isinstance(err, ToolchainError)
    line = err.one_line()
    assert "is full" in line and "does not compile" not in line and "GPUADVISE_CACHE_DIR" in line


def _mount_tmpfs(folder: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                       capture_output=True, check=False)  # fmt: skip
    return r.returncode == 0


@pytest.mark.toolkit
def test_a_full_cache_disk_end_to_end(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _mount_tmpfs(disk, "256k"):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        src = tmp_path / "k.cu"
        src.write_text((ROOT / "kernels" / "reduction" / "reduce.cu").read_text())
        with pytest.raises(ToolchainError) as e:
            compile_source(src, CompileOptions(cache_dir=disk / "cache"))
        line = e.value.one_line()
        assert f"the disk mounted at {disk} is full" in line and "does not compile" not in line
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True, check=False)

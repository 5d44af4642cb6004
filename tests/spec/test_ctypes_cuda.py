"""CUDA element types: sizes, alignments, spellings; checked against nvcc where there is one."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpuadvise.errors import UsageError
from gpuadvise.spec.cuda_types import (
    CudaType,
    StructType,
    all_spellings,
    all_types,
    encode_bfloat16,
    encode_fp8,
    lookup,
    lookup_elem,
    normalize_type_name,
)


@pytest.mark.parametrize(
    ("name", "size", "align"),
    [
        ("char", 1, 1),
        ("unsigned char", 1, 1),
        ("short", 2, 2),
        ("int", 4, 4),
        ("unsigned int", 4, 4),
        ("long", 8, 8),
        ("long long", 8, 8),
        ("float", 4, 4),
        ("double", 8, 8),
        ("half", 2, 2),
        ("__nv_bfloat16", 2, 2),
        ("char2", 2, 2),
        ("char3", 3, 1),
        ("uchar4", 4, 4),
        ("short2", 4, 4),
        ("short3", 6, 2),
        ("short4", 8, 8),
        ("int2", 8, 8),
        ("int3", 12, 4),
        ("int4", 16, 16),
        ("uint4", 16, 16),
        ("float2", 8, 8),
        ("float3", 12, 4),
        ("float4", 16, 16),
        ("double2", 16, 16),
        ("double3", 24, 8),
        ("double4", 32, 16),
        ("double4_32a", 32, 32),
        ("longlong2", 16, 16),
        ("longlong4_16a", 32, 16),
        ("half2", 4, 4),
        ("__nv_bfloat162", 4, 4),
    ],
)
def test_sizes_and_alignments(name: str, size: int, align: int) -> None:
    t = lookup(name)
    assert t is not None
    assert (t.size_bytes, t.align_bytes) == (size, align)
    assert t.dtype.itemsize == size


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("float32", "float"),
        ("float64", "double"),
        ("float16", "__half"),
        ("__half", "__half"),
        ("bfloat16", "__nv_bfloat16"),
        ("nv_bfloat16", "__nv_bfloat16"),
        ("int8", "signed char"),
        ("uint8", "unsigned char"),
        ("int32", "int"),
        ("uint32", "unsigned int"),
        ("int64_t", "long"),
        ("uint32_t", "unsigned int"),
        ("std::uint32_t", "unsigned int"),
        ("size_t", "unsigned long"),
        ("unsigned", "unsigned int"),
        ("signed", "int"),
        ("long int", "long"),
        ("long unsigned int", "unsigned long"),
        ("unsigned long long int", "unsigned long long"),
        ("short int", "short"),
        ("unsigned  short", "unsigned short"),
        ("ushort", "unsigned short"),
        ("uint", "unsigned int"),
        ("const float", "float"),
        ("volatile int", "int"),
        ("half2", "__half2"),
    ],
)
def test_spellings(alias: str, canonical: str) -> None:
    t = lookup(alias)
    assert t is not None and t.name == canonical


def test_kinds_and_flags() -> None:
    f4 = lookup("float4")
    assert f4 is not None and f4.is_float and f4.lanes == 4 and f4.scalar == "float"
    assert f4.dtype.names == ("x", "y", "z", "w")
    u = lookup("unsigned int")
    assert u is not None and not u.is_float and not u.is_signed and u.int_range() == (0, 2**32 - 1)
    i8 = lookup("char")
    assert i8 is not None and i8.int_range() == (-128, 127)
    bf = lookup("bfloat16")
    assert bf is not None and bf.is_float and bf.kind == "bfloat16" and bf.dtype == np.uint16
    b = lookup("bool")
    assert b is not None and b.int_range() == (0, 1)
    assert lookup("float").int_range() is None  # type: ignore[union-attr]


def test_vector_dtype_layout_matches_cuda() -> None:
    f3 = lookup("float3")
    assert f3 is not None
    arr = np.zeros(2, f3.dtype)
    arr[1]["z"] = 1.5
    assert arr.view(np.float32).tolist() == [0, 0, 0, 0, 0, 1.5]


def test_structs_become_placeholders() -> None:
    for name in ("Cell", "ns::Cell", "struct Cell", "Vec<float, 3>", "const Particle"):
        elem = lookup_elem(name)
        assert isinstance(elem, StructType) and not elem.is_resolved
    assert lookup_elem("struct Cell") == StructType("Cell")
    sized = StructType("Cell").with_layout(12, 4)
    assert (sized.size_bytes, sized.align_bytes, sized.is_resolved) == (12, 4, True)
    with pytest.raises(UsageError):
        StructType("Cell").with_layout(12, 3)


@pytest.mark.parametrize("bad", ["", "float*", "void", "3d", "unsigned float", "long char", "a b"])
def test_not_element_types(bad: str) -> None:
    with pytest.raises(UsageError):
        lookup_elem(bad)


def test_normalize() -> None:
    assert normalize_type_name("  const  std :: int32_t ") == "int32_t"
    assert normalize_type_name("Vec < float ,3 >") == "Vec<float, 3>"


def test_table_is_consistent() -> None:
    for name, t in all_types().items():
        assert t.name == name
        assert t.size_bytes % t.lanes == 0
        assert t.align_bytes & (t.align_bytes - 1) == 0
        assert t.size_bytes % t.align_bytes == 0 or t.lanes == 3
        assert lookup(name) is t
    for alias, t in all_spellings().items():
        assert lookup(alias) is t


def test_encoders() -> None:
    bits = encode_bfloat16(np.array([1.0, -2.0, 0.0, 1.00390625], dtype=np.float32))
    assert bits.tolist() == [0x3F80, 0xC000, 0x0000, 0x3F80]  # last one rounds to even
    assert encode_fp8(np.array([1.0, -1.0, 448.0, 1e6]), "fp8_e4m3").tolist() == [
        0x38,
        0xB8,
        0x7E,
        0x7E,  # saturates at the largest finite value
    ]
    assert encode_fp8(np.array([1.0, 0.0]), "fp8_e5m2").tolist() == [0x3C, 0x00]


# --- against the real compiler -------------------------------------------------------------------


def _nvcc() -> str | None:
    try:
        from gpuadvise.toolchain import find_toolchain

        return str(find_toolchain().nvcc)
    except Exception:
        pass
    for candidate in (
        shutil.which("nvcc"),
        os.path.join(os.environ.get("CUDA_HOME", "/nonexistent"), "bin", "nvcc"),
        "/usr/local/cuda/bin/nvcc",
    ):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


# Our spellings that are not C++ ones (numpy names, shorthands, POSIX ssize_t).
_NOT_CXX = {
    "float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
    "int64", "uint64", "bfloat16", "bfloat162", "fp8_e4m3", "fp8_e5m2", "float8_e4m3",
    "float8_e5m2", "uchar", "ushort", "ulong", "longlong", "ulonglong", "ssize_t",
}  # fmt: skip


@pytest.mark.toolkit
def test_against_nvcc(tmp_path: Path) -> None:
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("no nvcc (install gpuadvise[toolkit] or set CUDA_HOME)")
    lines = [
        "#include <cstdint>",
        "#include <cstddef>",
        "#include <cuda_fp16.h>",
        "#include <cuda_bf16.h>",
        "#include <cuda_fp8.h>",
        "#define CHECK(T, S, A) static_assert(sizeof(T) == S && alignof(T) == A, #T);",
    ]
    checked: set[str] = set()
    spellings: dict[str, CudaType] = all_spellings()
    for spelling, t in spellings.items():
        if spelling in _NOT_CXX:
            continue
        lines.append(f"CHECK({spelling}, {t.size_bytes}, {t.align_bytes})")
        checked.add(t.name)
    assert checked == set(all_types())  # every canonical type is checked under some spelling
    src = tmp_path / "sizes.cu"
    src.write_text("\n".join(lines) + "\n")
    proc = subprocess.run(
        [nvcc, "-std=c++17", "-c", str(src), "-o", os.devnull],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]

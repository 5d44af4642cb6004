"""Issue 18 at the spec layer: the memory budget, fills (explicit ones honoured, random ranges,
data files), checks of names/values/counts before the compile, and the messages for grids,
sources and block shapes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.devices import check_block_shape
from gpuadvise.errors import UsageError
from gpuadvise.runner.data import make_host_buffer
from gpuadvise.runner.params import buffer_init
from gpuadvise.source.signature import parse_signature
from gpuadvise.spec import budget
from gpuadvise.spec.budget import TooLargeError, check_fits, format_bytes, memory_budget
from gpuadvise.spec.cuda_types import lookup
from gpuadvise.spec.fills import Fill, parse_fill
from gpuadvise.spec.kernel_spec import (
    BufferSpec,
    ResolvedBuffer,
    build_kernel_spec,
    parse_buffer,
    parse_launch_dims,
    resolve,
)
from gpuadvise.spec.units import parse_dims

KERNELS = r"""
struct Cell { float t; int tag; };
__global__ void hist(unsigned int* out, unsigned int* data, unsigned int n) {}
__global__ void saxpy(int n, float a, const float* x, float* y) {}
__global__ void life(const Cell* cells, Cell* next, int w, int h) {}
__global__ void vec(const float4* v, float* out, int n) {}
"""


@pytest.fixture
def cu(tmp_path: Path) -> Path:
    p = tmp_path / "k.cu"
    p.write_text(KERNELS)
    return p


def params(kernel: str):  # type: ignore[no-untyped-def]
    return parse_signature(KERNELS, kernel)


def spec(cu: Path, kernel: str, **kw):  # type: ignore[no-untyped-def]
    return build_kernel_spec(cu, kernel, grid="4", block="256", discover=False, **kw)


# --- the memory budget ----------------------------------------------------------------------------


def test_budget_env_cap_and_check_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUADVISE_MEMORY_BUDGET", "64M")
    b = memory_budget()
    assert b.bytes <= 64 << 20 and "GPUADVISE_MEMORY_BUDGET" in b.source
    check_fits(1 << 20, "a small thing", "fine")
    with pytest.raises(TooLargeError) as info:
        check_fits(1 << 30, "buffer x", "give it fewer elements")
    assert "buffer x needs 1.0 GiB" in info.value.one_line()
    assert "give it fewer elements" in info.value.one_line()
    assert isinstance(info.value, UsageError)  # exit 2 like any input mistake


def test_budget_reads_the_cgroup_limit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "memory.max").write_text("268435456\n")
    (tmp_path / "memory.current").write_text("67108864\n")
    monkeypatch.setattr(budget, "_CGROUP_ROOT", tmp_path)
    monkeypatch.delenv("GPUADVISE_MEMORY_BUDGET", raising=False)
    b = memory_budget()
    assert b.bytes == 256 * 2**20 - 64 * 2**20 and "memory.max" in b.source
    (tmp_path / "memory.max").write_text("max\n")
    assert "memory.max" not in memory_budget().source


def test_budget_reads_rlimit_as() -> None:
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (6_000_000 * 1024, "
        "resource.RLIM_INFINITY)); from gpuadvise.spec.budget import memory_budget; "
        "b = memory_budget(); print(b.bytes, b.source)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    size, source = out.stdout.split(" ", 1)
    assert int(size) < 6_000_000 * 1024 and "RLIMIT_AS" in source


def test_format_bytes() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 << 30) == "3.0 GiB"
    assert format_bytes(1 << 70) == "over 8 EiB"


def test_host_buffers_are_checked_before_numpy_allocates() -> None:
    for count in (10**12, 10**30):  # 4 TiB, and more than numpy's largest dimension
        with pytest.raises(TooLargeError, match="buffer x"):
            make_host_buffer(np.dtype(np.float32), count, "random", 0, "x")


# --- fills -----------------------------------------------------------------------------------------


def test_parse_fill(tmp_path: Path) -> None:
    assert parse_fill("random") == Fill("random")
    assert parse_fill(" Zeros ") == Fill("zeros")
    assert parse_fill("random(0,255)") == Fill("random", 0, 255)
    assert parse_fill("random( -0.5 , 0.5 )") == Fill("random", -0.5, 0.5)
    assert parse_fill("random(0x10,0xff)") == Fill("random", 16, 255)
    assert str(parse_fill("random(0, 255)")) == "random(0,255)"
    data = tmp_path / "d.npy"
    np.save(data, np.arange(3, dtype=np.int32))
    f = parse_fill("d.npy", tmp_path)
    assert f.kind == "file" and f.path == data.resolve() and str(f) == str(data.resolve())
    for bad, needle in [
        ("random(2,1)", "LOW"),
        ("random(1)", r"random\(LOW,HIGH\)"),
        ("random(a,b)", r"random\(LOW,HIGH\)"),
        ("gaussian", "unknown fill"),
        ("missing.npy", "does not exist"),
    ]:
        with pytest.raises(UsageError, match=needle):
            parse_fill(bad, tmp_path)
    (tmp_path / "dir.bin").mkdir()
    with pytest.raises(UsageError, match="not a regular file"):
        parse_fill("dir.bin", tmp_path)


def _resolved(cu: Path, kernel: str, **kw) -> dict[str, ResolvedBuffer]:  # type: ignore[no-untyped-def]
    r = resolve(spec(cu, kernel, **kw), params(kernel))
    return {b.name: b for b in r.buffers}


def test_explicit_fills_are_honoured_and_defaults_poisoned(cu: Path) -> None:
    bufs = _resolved(
        cu,
        "hist",
        args=["n=1024"],
        buffers=["data=uint32[n]:random", "out=uint32[256]"],
    )
    data, out = bufs["data"], bufs["out"]
    # explicit random on a non-const pointer: kept, and over uint32's full range
    assert data.is_output and data.fill_given and not data.poisoned
    assert data.fill == "random(0,4294967295)"
    assert not buffer_init(data).poison
    # no fill: the output starts poisoned, as before
    assert out.is_output and not out.fill_given and out.poisoned and buffer_init(out).poison
    arr = make_host_buffer(np.dtype(np.uint32), 4096, data.fill, 0, "data")
    assert arr.max() > 2**31 and len(np.unique(arr & 0xFF)) > 200


def test_default_data_is_unchanged() -> None:
    ints = make_host_buffer(np.dtype(np.int32), 4096, "random", 0, "in")
    assert 0 <= ints.min() and ints.max() < 64
    floats = make_host_buffer(np.dtype(np.float32), 4096, "random", 0, "in")
    assert -1 <= floats.min() and floats.max() < 1


def test_random_ranges(cu: Path) -> None:
    bufs = _resolved(cu, "saxpy", args=["n=4096", "a=1"], buffers=["x=float[n]:random(2,3)"])
    x = bufs["x"]
    arr = make_host_buffer(np.dtype(np.float32), x.count, x.fill, 0, "x")
    assert 2 <= arr.min() and arr.max() < 3
    ints = make_host_buffer(np.dtype(np.uint8), 10000, "random(250,255)", 0, "b")
    assert set(np.unique(ints)) == {250, 251, 252, 253, 254, 255}
    v = make_host_buffer(lookup("uchar4").dtype, 1000, "random(1,2)", 0, "v")  # type: ignore[union-attr]
    assert {int(v[f].min()) for f in "xyzw"} == {1} and {int(v[f].max()) for f in "xyzw"} == {2}
    with pytest.raises(UsageError, match="outside the range"):
        _resolved(cu, "hist", args=["n=4"], buffers=["data=uint32[n]:random(-1,5)"])
    with pytest.raises(UsageError, match="numeric type"):
        resolve(
            spec(cu, "life", args=["w=4", "h=4"], buffers=["next=Cell[w*h]:random(0,1)"]),
            params("life"),
            lambda name: (8, 4),
        )


def test_data_files(cu: Path, tmp_path: Path) -> None:
    x = np.linspace(-1, 1, 1024, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    y = np.arange(1024, dtype=np.float32)
    y.tofile(tmp_path / "y.bin")
    b = parse_buffer("x=x.npy", tmp_path)
    assert (b.elem_type, b.count_expr, b.fill_given) == (lookup("float"), "1024", True)
    assert parse_buffer(str(b)) == b
    bufs = _resolved(
        cu,
        "saxpy",
        args=["n=1024", "a=1"],
        buffers=[b, parse_buffer("y=float[n]:y.bin", tmp_path)],
    )
    got_x = make_host_buffer(np.dtype(np.float32), 1024, bufs["x"].fill, 0, "x")
    got_y = make_host_buffer(np.dtype(np.float32), 1024, bufs["y"].fill, 0, "y")
    assert np.array_equal(got_x, x) and np.array_equal(got_y, y)
    assert not bufs["y"].poisoned  # real data on an output: in/out
    # float4 from an (n, 4) float32 array
    np.save(tmp_path / "v.npy", np.ones((256, 4), np.float32))
    v = _resolved(cu, "vec", args=["n=256"], buffers=[parse_buffer("v=float4[n]:v.npy", tmp_path)])[
        "v"
    ]
    assert v.count == 256 and v.size_bytes == 4096
    arr = make_host_buffer(lookup("float4").dtype, 256, v.fill, 0, "v")  # type: ignore[union-attr]
    assert float(arr["w"].sum()) == 256


def test_data_files_are_checked(cu: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "d64.npy", np.zeros(1024, np.float64))
    np.save(tmp_path / "short.npy", np.zeros(10, np.float32))
    np.save(tmp_path / "obj.npy", np.array([object()], dtype=object), allow_pickle=True)
    np.zeros(10, np.uint8).tofile(tmp_path / "odd.bin")
    (tmp_path / "bad.npy").write_text("not numpy")
    args = ["n=1024", "a=1"]
    cases = [
        (["x=d64.npy"], "points to float"),  # type from the file, not the kernel's
        (["x=double[n]:d64.npy"], "points to float"),
        (["x=float[n]:d64.npy"], "float64"),
        (["x=float[n]:short.npy"], "holds 10 elements"),
        (["x=float[n]:odd.bin"], "not a whole number"),
        (["x=float[n]:obj.npy"], "Python objects"),
        (["x=float[n]:bad.npy"], "not a .npy file"),
        (["x=odd.bin"], "does not say what it holds"),
    ]
    for buffers, needle in cases:
        with pytest.raises(UsageError, match=needle):
            spec(cu, "saxpy", args=args, buffers=[parse_buffer(t, tmp_path) for t in buffers])


def test_spec_file_data_paths_are_relative_to_the_spec(tmp_path: Path, cu: Path) -> None:
    sub = tmp_path / "case"
    sub.mkdir()
    np.save(sub / "x.npy", np.zeros(64, np.float32))
    s = sub / "s.toml"
    s.write_text(
        f'source = "{cu}"\nkernel = "saxpy"\ngrid = 1\nblock = 64\n[args]\nn = 64\na = 1.0\n'
        '[buffers]\nx = "x.npy"\ny = { type = "float", count = "n", fill = "random(0,1)" }\n'
    )
    built = build_kernel_spec(spec=s)
    x, y = built.buffer("x"), built.buffer("y")
    assert x is not None and x.fill == str((sub / "x.npy").resolve()) and x.count_expr == "64"
    assert y is not None and y.fill == "random(0,1)" and y.fill_given


def test_buffer_records_round_trip_the_given_flag() -> None:
    given = parse_buffer("a=int[4]:random")
    default = parse_buffer("a=int[4]")
    assert given.fill == default.fill == "random" and given.fill_given != default.fill_given
    assert str(default) == "a=int[4]" and str(given) == "a=int[4]:random"
    for b in (given, default):
        assert BufferSpec.from_dict(b.to_dict()) == b
    old = {"name": "a", "elem_type": {"cuda": "int"}, "count_expr": "4", "fill": "zeros"}
    assert BufferSpec.from_dict(old).fill_given  # saved before fill_given existed


# --- checks before the compile ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"args": ["n=4", "a=1", "bogus=1"]}, "scalar parameters: n, a; pointer parameters: x, y"),
        ({"args": ["n=4", "a=1"], "buffers": ["zz=float[n]"]}, "pointer parameters: x, y"),
        ({"args": ["n=4", "a=1"], "buffers": ["x=float[0]"]}, "0 elements"),
        ({"args": ["n=4", "a=1"], "buffers": ["x=float[-1]"]}, "-1 elements"),
        ({"args": ["n=4", "a=1"], "buffers": ["x=quux[n]"]}, "unknown element type 'quux'"),
        ({"args": ["n=2.5", "a=1"]}, "whole number"),
        ({"args": ["n=99999999999999999999999", "a=1"]}, "does not fit"),
        ({"args": ["n=4", "a=1e39"]}, "does not fit"),
    ],
)
def test_bad_input_fails_when_the_spec_is_built(cu: Path, kw: dict, needle: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(UsageError) as info:
        spec(cu, "saxpy", **kw)
    assert needle in info.value.one_line()


def test_checks_leave_missing_values_and_known_structs_alone(cu: Path) -> None:
    spec(cu, "saxpy")  # no args: the static analysis needs none; resolve() names them later
    spec(cu, "life", buffers=["cells=Cell[64]"])  # a struct the source defines
    macro = cu.parent / "m.cu"
    macro.write_text("#define K(name) __global__ void name(float* p)\nK(k) {}\n")
    build_kernel_spec(macro, "k", grid="1", block="32", discover=False, buffers=["p=foo[4]"])


def test_long_values_are_not_echoed_in_full(cu: Path) -> None:
    with pytest.raises(UsageError) as info:
        spec(cu, "saxpy", args=["n=" + "9" * 5000, "a=1"])
    assert len(info.value.one_line()) < 400


# --- grids, sources, blocks ------------------------------------------------------------------------


def test_grid_0x10_is_explained() -> None:
    with pytest.raises(UsageError) as info:
        parse_dims("0x10", "grid")
    line = info.value.one_line()
    assert "0 by 10" in line and ">= 1" in line and "16" in line


def test_x_between_expressions_asks_for_a_comma() -> None:
    for text, fixed in [("ceil_div(n,256)x2", "ceil_div(n,256), 2"), ("n/16 x 4", "n/16, 4")]:
        with pytest.raises(UsageError) as info:
            parse_launch_dims(text, {"n": 1024}, "grid")
        assert "comma" in info.value.one_line() and fixed in info.value.one_line()
    assert parse_launch_dims("ceil_div(n,256), 2", {"n": 1024})[0].as_tuple() == (4, 2, 1)
    assert parse_launch_dims("nx", {"nx": 3})[0].x == 3  # a name with an x is still a name


def test_sources_that_are_not_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="character device"):
        build_kernel_spec("/dev/null", "k", grid="1", block="1", discover=False)
    with pytest.raises(UsageError, match="is a folder"):
        build_kernel_spec(tmp_path, "k", grid="1", block="1", discover=False)
    with pytest.raises(UsageError, match="empty"):
        build_kernel_spec("", "k", grid="1", block="1", discover=False)
    with pytest.raises(UsageError, match="does not exist"):
        build_kernel_spec(tmp_path / "nope.cu", "k", grid="1", block="1", discover=False)


@pytest.mark.parametrize(
    ("dims", "needle"),
    [
        ((1, 1, 65), "z = 65"),
        ((1025, 1, 1), "x = 1025"),
        ((1, 1025, 1), "y = 1025"),
        ((32, 32, 2), "2048 threads"),
        ((0, 1, 1), "x = 0"),
    ],
)
def test_block_shape(dims: tuple[int, int, int], needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        check_block_shape(dims)


def test_valid_block_shapes() -> None:
    for dims in ((1, 1, 64), (1024, 1, 1), (1, 1024, 1), (16, 16, 4)):
        check_block_shape(dims)


# --- property-based: the fill parser never fails other than with a UsageError --------------------


@settings(max_examples=examples(300), deadline=None)
@given(text=st.text(max_size=30) | st.sampled_from(["random(", "x.npy", "a\x00.bin", "random()"]))
def test_fill_garbage_only_raises_usage_error(text: str) -> None:
    try:
        fill = parse_fill(text, Path("/nonexistent-dir"))
    except UsageError:
        return
    assert parse_fill(str(fill)) == fill


@settings(max_examples=examples(200), deadline=None)
@given(
    low=st.integers(-(2**31), 2**31 - 1),
    span=st.integers(0, 2**20),
    count=st.integers(1, 64),
)
def test_random_ranges_stay_in_range(low: int, span: int, count: int) -> None:
    high = min(low + span, 2**31 - 1)
    fill = parse_fill(f"random({low}, {high})")
    assert parse_fill(str(fill)) == fill
    arr = make_host_buffer(np.dtype(np.int32), count, str(fill), 1, "r")
    assert arr.dtype == np.int32 and low <= arr.min() and arr.max() <= high

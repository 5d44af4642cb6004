"""Launch specs: CLI strings, spec files, merging, discovery and binding to parameters."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.errors import ConfigError, UsageError
from gpuadvise.source.signature import parse_signature
from gpuadvise.spec.cuda_types import StructType, lookup
from gpuadvise.spec.kernel_spec import (
    ArgSpec,
    BufferSpec,
    KernelSpec,
    LaunchConfig,
    ResolvedArg,
    ResolvedBuffer,
    ResolvedLaunch,
    arg_env,
    build_kernel_spec,
    find_spec_for,
    load_spec,
    parse_arg,
    parse_buffer,
    parse_launch_dims,
    parse_smem,
    resolve,
)
from gpuadvise.spec.units import Dim3

KERNELS = r"""
struct Cell { float t; int tag; };

__global__ void saxpy(int n, float a, const float* __restrict__ x, float* y) {}

template <int BLOCK, bool ATOMIC>
__global__ void reduce(const float* in, float* out, int n) {}

__global__ void life(const Cell* cells, Cell* next, int w, int h) {}

__global__ void raw(void* p, int n) {}

__global__ void flags(bool on, unsigned char c, double d, int stride = 2) {}

__global__ void byval(Cell c, float* out) {}
"""

CASE_TOML = """
kernel = "reduce<256, true>"
grid = "240x135"
block = "16x16"
dynamic_smem = "4k"
nvcc_flags = ["-DTILE=16"]
seed = 1
[args]
n = 4194304
[buffers]
in = "float32[n]"
out = { type = "float", count = "(n+255)/256", fill = "zeros" }
"""


@pytest.fixture
def cu(tmp_path: Path) -> Path:
    path = tmp_path / "kernels.cu"
    path.write_text(KERNELS)
    return path


def params(kernel: str):  # type: ignore[no-untyped-def]
    return parse_signature(KERNELS, kernel)


# --- CLI strings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "value"),
    [
        ("n=4194304", "n", 4194304),
        ("n = 0x400", "n", 1024),
        ("k=-3", "k", -3),
        ("alpha=0.5", "alpha", 0.5),
        ("eps=1e-3", "eps", 1e-3),
        ("x=2.5f", "x", 2.5),
        ("on=true", "on", True),
        ("on=False", "on", False),
        ("m=n/2", "m", "n/2"),
        ("m=4*256", "m", 1024),
    ],
)
def test_parse_arg(text: str, name: str, value: object) -> None:
    a = parse_arg(text)
    assert (a.name, a.value) == (name, value)
    assert type(a.value) is type(value)


@pytest.mark.parametrize("text", ["n", "=4", "n=", "1n=4", "n=4M", "n=(", "a-b=1", "n=1e999"])
def test_parse_arg_errors(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_arg(text)
    assert info.value.hint


def test_parse_buffer() -> None:
    b = parse_buffer("in=float32[n]")
    assert (b.name, b.elem_type, b.count_expr, b.fill, b.assumed, b.is_output) == (
        "in",
        lookup("float"),
        "n",
        "random",
        False,
        None,
    )
    c = parse_buffer("cells=Cell[w*h]:zeros")
    assert c.elem_type == StructType("Cell") and c.count_expr == "w*h" and c.fill == "zeros"
    u = parse_buffer(" idx = unsigned int [ (n+255)/256 ] : iota ")
    assert u.elem_type == lookup("unsigned int") and u.count_expr == "(n+255)/256"
    assert u.fill == "iota"
    assert parse_buffer("p=ns::Particle[n]:ones").elem_type == StructType("ns::Particle")
    assert str(c) == "cells=Cell[w*h]:zeros"


@pytest.mark.parametrize(
    "text",
    [
        "in",
        "in=float32",
        "in=float32[]",
        "in=[n]",
        "in=float32[n]:sparkly",
        "in=float32[n*]",
        "in=float*[n]",
        "1in=float[n]",
        "in=float[n]extra",
    ],
)
def test_parse_buffer_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_buffer(text)


def test_launch_dims_and_smem() -> None:
    assert parse_launch_dims("240x135", {}) == (Dim3(240, 135), frozenset())
    assert parse_launch_dims([16, 16], {}, "block")[0] == Dim3(16, 16)
    dims, used = parse_launch_dims("ceil_div(n, 256)", {"n": 1000})
    assert dims == Dim3(4) and used == {"n"}
    assert parse_launch_dims(["ceil_div(w,16)", "h/16"], {"w": 64, "h": 32})[0] == Dim3(4, 2)
    with pytest.raises(UsageError):
        parse_launch_dims("0x4", {})
    with pytest.raises(UsageError, match="zero or negative"):
        parse_launch_dims("n-n", {"n": 3})
    assert parse_smem("4k", {}) == (4096, frozenset())
    assert parse_smem("n*4", {"n": 256}) == (1024, frozenset({"n"}))
    with pytest.raises(UsageError):
        parse_smem("4q", {})


def test_arg_env_orders_expressions() -> None:
    env = arg_env([ArgSpec("c", "b*2"), ArgSpec("b", "a+1"), ArgSpec("a", 4), ArgSpec("f", 0.5)])
    assert env == {"a": 4, "b": 5, "c": 10}
    with pytest.raises(UsageError, match="each other"):
        arg_env([ArgSpec("a", "b"), ArgSpec("b", "a")])
    with pytest.raises(UsageError, match="'zz'"):
        arg_env([ArgSpec("a", "zz+1")])


def test_launch_limits() -> None:
    with pytest.raises(UsageError, match="1024"):
        LaunchConfig(Dim3(1), Dim3(2048))
    with pytest.raises(UsageError, match="65535"):
        LaunchConfig(Dim3(1, 70000), Dim3(32))
    assert LaunchConfig(Dim3(2**31 - 1), Dim3(1024)).total_threads == (2**31 - 1) * 1024


# --- spec files ----------------------------------------------------------------------------------


def test_load_spec_example(tmp_path: Path) -> None:
    path = tmp_path / "case.toml"
    path.write_text(CASE_TOML + '\n[[variants]]\nname = "v1"\n[expect]\nrules = ["GA201"]\n')
    d = load_spec(path)
    assert d["kernel"] == "reduce<256, true>"
    assert d["grid"] == "240x135" and d["block"] == "16x16" and d["dynamic_smem"] == "4k"
    assert d["nvcc_flags"] == ("-DTILE=16",) and d["seed"] == 1
    assert d["args"]["n"] == ArgSpec("n", 4194304)
    assert d["buffers"]["out"].fill == "zeros" and d["buffers"]["out"].count_expr == "(n+255)/256"
    assert d["extra"] == {"variants": [{"name": "v1"}], "expect": {"rules": ["GA201"]}}
    assert d["path"] == path


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ('blocks = "256"', "'blocks'"),
        ('grid = "1"\n[buffers]\nout = { type = "float", count = "n", size = 4 }', "'size'"),
        ("seed = -1", "seed"),
        ("seed = true", "seed"),
        ("repeat = 0", "repeat"),
        ('nvcc_flags = "-O3"', "nvcc_flags"),
        ("nvcc_flags = [1]", "nvcc_flags"),
        ("rtol = -1.0", "rtol"),
        ("args = 3", "args"),
        ("[buffers]\nout = 3", "out"),
        ('[buffers]\nout = "float"', "out"),
        ('[buffers]\nout = { type = "float" }', "'count'"),
        ('[buffers]\nout = { type = "float", count = "n", output = "yes" }', "output"),
        ("[args]\nn = [1, 2]", "n"),
        ("kernel = ", "TOML"),
        ("grid = [true]", "grid"),
    ],
)
def test_load_spec_errors(tmp_path: Path, body: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body + "\n")
    with pytest.raises(UsageError) as info:
        load_spec(path)
    assert needle in info.value.message
    assert info.value.hint


def test_load_spec_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec(tmp_path / "nope.toml")


def test_build_from_spec_file(tmp_path: Path, cu: Path) -> None:
    spec_path = tmp_path / "mine.toml"
    spec_path.write_text(CASE_TOML)
    spec = build_kernel_spec(cu, spec=spec_path)
    assert spec.kernel == "reduce<256, true>"
    assert spec.launch == LaunchConfig(Dim3(240, 135), Dim3(16, 16), 4096)
    assert spec.nvcc_flags == ("-DTILE=16",)
    assert spec.seed == 1 and spec.repeat == 1 and spec.spec_path == spec_path
    r = resolve(spec, params(spec.kernel))
    inp, out, n = r.params
    assert isinstance(inp, ResolvedBuffer) and isinstance(out, ResolvedBuffer)
    assert (inp.count, inp.size_bytes, inp.is_output, inp.fill) == (
        4194304,
        16777216,
        False,
        "random",
    )
    assert (out.count, out.size_bytes, out.is_output, out.fill) == (16384, 65536, True, "zeros")
    assert isinstance(n, ResolvedArg) and n.value == 4194304 and n.ctype == lookup("int")
    assert r.inputs == (inp,) and r.outputs == (out,) and r.scalars == (n,)
    assert r.notes == ()


def test_cli_overrides_file(tmp_path: Path, cu: Path) -> None:
    spec_path = tmp_path / "mine.toml"
    spec_path.write_text(CASE_TOML)
    spec = build_kernel_spec(
        cu,
        "reduce<128, false>",
        spec=spec_path,
        grid="100",
        args=["n=1000"],
        buffers=["out=float[1]:ones"],
        nvcc_flags=["-O3"],
        seed=7,
        repeat=5,
        rtol=0.0,
    )
    assert spec.kernel == "reduce<128, false>"
    assert spec.launch.grid == Dim3(100) and spec.launch.block == Dim3(16, 16)
    assert spec.arg("n") == ArgSpec("n", 1000)
    assert spec.buffer("out") == parse_buffer("out=float[1]:ones")
    assert spec.buffer("in") == parse_buffer("in=float32[n]")
    assert spec.nvcc_flags == ("-DTILE=16", "-O3")
    assert (spec.seed, spec.repeat, spec.rtol) == (7, 5, 0.0)


def test_discovery(tmp_path: Path) -> None:
    cu = tmp_path / "reduce.cu"
    cu.write_text(KERNELS)
    assert find_spec_for(cu, "reduce<256, true>") is None
    # <cu stem>.toml, used unless it names another kernel
    stem = tmp_path / "reduce.toml"  # also the kernel's base name
    stem.write_text(CASE_TOML)
    assert find_spec_for(cu, "reduce<256, true>") == stem
    assert find_spec_for(cu) == stem
    spec = build_kernel_spec(cu)
    assert spec.kernel == "reduce<256, true>" and spec.spec_path == stem
    # a <kernel>.toml beside the .cu
    (tmp_path / "saxpy.toml").write_text("grid = 4\nblock = 256\n[args]\nn = 1024\na = 2.0\n")
    assert find_spec_for(cu, "saxpy") == tmp_path / "saxpy.toml"
    spec = build_kernel_spec(cu, "saxpy")
    assert spec.launch.grid == Dim3(4) and spec.arg("a") == ArgSpec("a", 2.0)
    assert build_kernel_spec(cu, "saxpy", discover=False, grid="1", block="1").args == ()


def test_discovery_skips_other_kernels_and_foreign_case_files(tmp_path: Path) -> None:
    cu = tmp_path / "k.cu"
    cu.write_text(KERNELS)
    (tmp_path / "k.toml").write_text('kernel = "saxpy"\ngrid = 1\nblock = 1\n')
    assert find_spec_for(cu, "life") is None
    assert find_spec_for(cu, "saxpy") == tmp_path / "k.toml"
    (tmp_path / "case.toml").write_text('source = "other.cu"\ngrid = 1\nblock = 1\n')
    assert find_spec_for(cu, "life") is None
    (tmp_path / "case.toml").write_text('source = "k.cu"\ngrid = 1\nblock = 1\n')
    assert find_spec_for(cu, "life") == tmp_path / "case.toml"


def test_source_from_spec_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "k.cu").write_text(KERNELS)
    spec_path = tmp_path / "case.toml"
    spec_path.write_text('source = "sub/k.cu"\nkernel = "saxpy"\ngrid = 1\nblock = 32\n')
    spec = build_kernel_spec(spec=spec_path, args=["n=32", "a=1"])
    assert spec.source == (tmp_path / "sub" / "k.cu").resolve()


def test_build_errors(tmp_path: Path, cu: Path) -> None:
    with pytest.raises(UsageError, match="no CUDA source"):
        build_kernel_spec()
    with pytest.raises(UsageError, match="does not exist"):
        build_kernel_spec(tmp_path / "missing.cu", "k", grid="1", block="1")
    with pytest.raises(UsageError, match="several kernels"):
        build_kernel_spec(cu, grid="1", block="1")
    with pytest.raises(UsageError, match="no grid"):
        build_kernel_spec(cu, "saxpy", block="1")
    with pytest.raises(UsageError, match="no block"):
        build_kernel_spec(cu, "saxpy", grid="1")
    with pytest.raises(UsageError, match="seed"):
        build_kernel_spec(cu, "saxpy", grid="1", block="1", seed=-1)
    with pytest.raises(UsageError, match="repeat"):
        build_kernel_spec(cu, "saxpy", grid="1", block="1", repeat=0)


def test_single_kernel_source_needs_no_name(tmp_path: Path) -> None:
    cu = tmp_path / "one.cu"
    cu.write_text("__global__ void only(float* x) {}")
    spec = build_kernel_spec(cu, grid="2", block="64")
    assert spec.kernel == "only"


# --- resolve -------------------------------------------------------------------------------------


def _spec(cu: Path, kernel: str, *, grid: str = "4", block: str = "256", **kw) -> KernelSpec:  # type: ignore[no-untyped-def]
    return build_kernel_spec(cu, kernel, grid=grid, block=block, discover=False, **kw)


def test_default_buffers_are_assumed(cu: Path) -> None:
    spec = _spec(cu, "saxpy", args=["n=1024", "a=2"])
    r = resolve(spec, params("saxpy"))
    n, a, x, y = r.params
    assert isinstance(a, ResolvedArg) and a.value == 2.0 and isinstance(a.value, float)
    assert isinstance(x, ResolvedBuffer) and isinstance(y, ResolvedBuffer)
    assert (x.count, x.size_bytes, x.assumed, x.is_output, x.fill) == (
        1024,
        4096,
        True,
        False,
        "random",
    )
    assert (y.count, y.assumed, y.is_output) == (1024, True, True)
    assert len(r.notes) == 2 and "assumed" in r.notes[0]


def test_missing_scalars_are_named(cu: Path) -> None:
    with pytest.raises(UsageError) as info:
        resolve(_spec(cu, "saxpy"), params("saxpy"))
    assert "n, a" in info.value.message
    assert "--arg n=... --arg a=..." in (info.value.hint or "")


def test_unknown_and_misplaced_names(cu: Path) -> None:
    with pytest.raises(UsageError, match="matches no parameter"):
        resolve(_spec(cu, "saxpy", args=["n=1", "a=1", "nn=3"]), params("saxpy"))
    with pytest.raises(UsageError, match="matches no parameter"):
        resolve(_spec(cu, "saxpy", args=["n=1", "a=1"], buffers=["z=float[n]"]), params("saxpy"))
    with pytest.raises(UsageError, match="pointer parameter"):
        resolve(_spec(cu, "saxpy", args=["n=1", "a=1", "x=3"]), params("saxpy"))
    with pytest.raises(UsageError, match="scalar parameter"):
        resolve(_spec(cu, "saxpy", args=["n=1", "a=1"], buffers=["n=int[1]"]), params("saxpy"))


def test_args_used_only_in_expressions_are_fine(cu: Path) -> None:
    spec = _spec(
        cu,
        "life",
        grid="ceil_div(cols,16), ceil_div(rows,16)",
        block="16x16",
        args=["cols=64", "rows=32", "w=cols", "h=rows", "unused_but_in_buffer=2"],
        buffers=["cells=Cell[w*h]", "next=Cell[w*h*unused_but_in_buffer]:zeros"],
    )
    assert spec.launch.grid == Dim3(4, 2) and spec.launch_names == {"cols", "rows"}
    calls: list[str] = []

    def sizes(name: str) -> tuple[int, int]:
        calls.append(name)
        return (8, 4)

    r = resolve(spec, params("life"), sizes)
    cells, nxt, w, h = r.params
    assert isinstance(cells, ResolvedBuffer) and isinstance(nxt, ResolvedBuffer)
    assert cells.elem == StructType("Cell", 8, 4)
    assert (cells.count, cells.size_bytes, cells.is_output) == (2048, 16384, False)
    assert (nxt.count, nxt.fill, nxt.is_output) == (4096, "zeros", True)
    assert calls == ["Cell"]  # asked once per struct
    assert dict(r.env)["w"] == 64
    assert isinstance(w, ResolvedArg) and w.value == 64


def test_structs_need_the_compiler(cu: Path) -> None:
    spec = _spec(cu, "life", args=["w=4", "h=4"])
    with pytest.raises(UsageError, match="compiler"):
        resolve(spec, params("life"))


def test_void_pointers_need_a_buffer(cu: Path) -> None:
    with pytest.raises(UsageError, match="cannot assume"):
        resolve(_spec(cu, "raw", args=["n=4"]), params("raw"))
    r = resolve(_spec(cu, "raw", args=["n=4"], buffers=["p=uchar4[n]"]), params("raw"))
    p = r.buffers[0]
    assert (p.count, p.size_bytes, p.align_bytes, p.is_output) == (4, 16, 4, True)


def test_counts_must_be_positive(cu: Path) -> None:
    # checked when the spec is built (before the compile, with or without a trace) ...
    with pytest.raises(UsageError, match="0 elements"):
        _spec(cu, "saxpy", args=["n=0", "a=1"], buffers=["x=float[n]"])
    # ... and again when it is bound to the parameters
    spec = _spec(cu, "saxpy", args=["n=1", "a=1"], buffers=["x=float[n]"])
    spec = dataclasses.replace(spec, args=(ArgSpec("n", 0), ArgSpec("a", 1)))
    with pytest.raises(UsageError, match="0 elements"):
        resolve(spec, params("saxpy"))


def test_scalar_types_are_checked(cu: Path) -> None:
    ok = _spec(cu, "flags", args=["on=true", "c=255", "d=3"])
    r = resolve(ok, params("flags"))
    on, c, d, stride = r.scalars
    assert (on.value, c.value, d.value, stride.value) == (True, 255, 3.0, 2)  # stride: default
    assert any("default argument" in note for note in r.notes)
    for bad, needle in [
        (["on=2", "c=1", "d=1"], "bool"),
        (["on=true", "c=256", "d=1"], "does not fit"),
        (["on=true", "c=-1", "d=1"], "does not fit"),
        (["on=true", "c=1.5", "d=1"], "whole number"),
        (["on=true", "c=1", "d=true"], "double"),
    ]:
        with pytest.raises(UsageError, match=needle):
            resolve(_spec(cu, "flags", args=bad), params("flags"))
    with pytest.raises(UsageError, match="does not fit"):
        resolve(_spec(cu, "saxpy", args=["n=4294967296", "a=1"]), params("saxpy"))


def test_by_value_structs_are_refused(cu: Path) -> None:
    with pytest.raises(UsageError, match="by value"):
        resolve(_spec(cu, "byval", args=["c=1"]), params("byval"))


def test_output_override_and_type_notes(tmp_path: Path, cu: Path) -> None:
    spec_path = tmp_path / "s.toml"
    spec_path.write_text(
        'kernel = "saxpy"\ngrid = 1\nblock = 32\n[args]\nn = 32\na = 1.0\n'
        '[buffers]\nx = { type = "float", count = "n", output = true }\n'
        'y = { type = "int", count = "n", output = false }\n'
    )
    r = resolve(build_kernel_spec(cu, spec=spec_path), params("saxpy"))
    x, y = r.buffers
    assert x.is_output and not y.is_output
    assert any("holds int" in note for note in r.notes)


def test_json_round_trips(tmp_path: Path, cu: Path) -> None:
    spec_path = tmp_path / "s.toml"
    spec_path.write_text(CASE_TOML)
    spec = build_kernel_spec(cu, spec=spec_path, args=["m=n/2"], buffers=["out=float[m]"])
    assert KernelSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    life = _spec(cu, "life", args=["w=8", "h=8"], buffers=["cells=Cell[w*h]:zeros"])
    assert KernelSpec.from_dict(json.loads(json.dumps(life.to_dict()))) == life
    r = resolve(life, params("life"), lambda name: (8, 4))
    assert ResolvedLaunch.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    r2 = resolve(spec, params(spec.kernel))
    assert ResolvedLaunch.from_dict(json.loads(json.dumps(r2.to_dict()))) == r2
    assert BufferSpec.from_dict(parse_buffer("a=float4[3]:iota").to_dict()).fill == "iota"


# --- property tests ------------------------------------------------------------------------------

idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)


@settings(max_examples=examples(200), deadline=None)
@given(name=idents, value=st.integers(min_value=-(2**62), max_value=2**62))
def test_parse_arg_round_trips_integers(name: str, value: int) -> None:
    assert parse_arg(f"{name}={value}") == ArgSpec(name, value)
    assert parse_arg(f"{name}={hex(value)}" if value >= 0 else f"{name}={value}").value == value


@settings(max_examples=examples(200), deadline=None)
@given(
    name=idents,
    elem=st.sampled_from(["float", "float32", "int", "uchar4", "double2", "Cell", "ns::Cell"]),
    count=st.sampled_from(["n", "w*h", "(n+255)/256", "ceil_div(n, 32)", "1024"]),
    fill=st.sampled_from(["random", "zeros", "ones", "iota", None]),
)
def test_parse_buffer_round_trips(name: str, elem: str, count: str, fill: str | None) -> None:
    text = f"{name}={elem}[{count}]" + (f":{fill}" if fill else "")
    b = parse_buffer(text)
    assert (b.name, b.count_expr, b.fill) == (name, count, fill or "random")
    assert parse_buffer(str(b)) == b


@settings(max_examples=examples(300), deadline=None)
@given(text=st.text(max_size=40))
def test_cli_garbage_only_raises_usage_error(text: str) -> None:
    for parser in (parse_arg, parse_buffer):
        try:
            parser(text)
        except UsageError:
            pass

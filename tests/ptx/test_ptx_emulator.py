"""The CPU emulator on kernels compiled by nvcc (tests/cuda/emu/*.cu), against numpy references.

Integer kernels must match exactly, float kernels closely; the traces are checked where the
expected records are known (masks after divergence and reconvergence, coalesced addresses, warp
formation in 2-D blocks, shared-memory offsets).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import suitekit

from gpuadvise.devices import preset
from gpuadvise.ptx.errors import InstructionBudgetError, MemoryAccessError
from gpuadvise.source.signature import parse_signature
from gpuadvise.spec.kernel_spec import build_kernel_spec, resolve
from gpuadvise.toolchain import CompiledModule, CompileOptions, compile_source
from gpuadvise.trace.access import Kind, Space
from gpuadvise.trace.emulate import Emulation, emulate

EMU = Path(__file__).resolve().parents[1] / "cuda" / "emu"
BASIC = EMU / "basic.cu"
MORE = EMU / "more.cu"


pytestmark = pytest.mark.toolkit


@pytest.fixture(scope="module", autouse=True)
def whole_cubin_sass() -> Iterator[None]:
    """The SASS of each module's whole cubin, one nvdisasm run for all of its kernels
    (``suitekit.whole_cubin_sass``); here the emulator is checked."""
    with suitekit.whole_cubin_sass():
        yield


@pytest.fixture(scope="module")
def modules(compile_cache: Path) -> dict[Path, CompiledModule]:
    opts = CompileOptions(arch="sm_90", cache_dir=compile_cache)  # the run's cache
    return {src: compile_source(src, opts) for src in (BASIC, MORE)}


def run(
    modules: dict[Path, CompiledModule],
    kernel: str,
    grid: str | int,
    block: str | int,
    buffers: Sequence[str],
    args: Sequence[str] = (),
    src: Path = BASIC,
    smem: int = 0,
    sample: int | str | None = "all",
    **kw: object,
) -> Emulation:
    mod = modules[src]
    spec = build_kernel_spec(
        src,
        kernel,
        grid=grid,
        block=block,
        dynamic_smem=smem,
        args=list(args),
        buffers=list(buffers),
        discover=False,
    )
    launch = resolve(spec, parse_signature(src.read_text(), kernel))
    return emulate(mod, mod.kernel(kernel), launch, preset("H100"), sample_ctas=sample, **kw)  # type: ignore[arg-type]


def records_of(e: Emulation, opcode_prefix: str, space: Space | None = None) -> np.ndarray:
    ids = [
        i.inst
        for i in e.trace.instructions
        if i.opcode.startswith(opcode_prefix) and (space is None or i.space == space)
    ]
    return e.trace.records[np.isin(e.trace.records["inst"], ids)]


# ---------------------------------------------------------------------------------------------
# one instruction family each


def test_vector_add_and_coalesced_trace(modules) -> None:
    e = run(
        modules, "vec_add", 4, 256, ["a=float[1024]", "b=float[1024]", "c=float[1024]"], ["n=1000"]
    )
    a, b, c = e.inputs["a"], e.inputs["b"], e.outputs["c"]
    np.testing.assert_array_equal(c[:1000], a[:1000] + b[:1000])
    assert np.isnan(c[1000:]).all()  # poisoned like the runner does, never written
    assert e.complete and e.trace.complete and e.trace.scale == 1.0
    loads = [i for i in e.trace.instructions if i.kind == Kind.LOAD]
    assert len(loads) == 2 and all(i.width == 4 and i.space == Space.GLOBAL for i in loads)
    assert all(i.file == str(BASIC) and i.line == 6 for i in e.trace.instructions)
    for name in ("a", "b"):
        base, size = e.trace.buffers[name]
        assert base % 256 == 0 and size == 4096
    recs = records_of(e, "ld.global")
    base = {e.trace.buffers[n][0] for n in ("a", "b")}
    first = recs[(recs["cta"] == 0) & (recs["warp"] == 0)]
    for r in first:
        start = int(r["addr"][0])
        assert start in base
        np.testing.assert_array_equal(r["addr"] - start, 4 * np.arange(32))
    last = recs[(recs["cta"] == 3) & (recs["warp"] == 7)]
    assert set(last["mask"]) == {0xFF}  # threads 992..999 of 1000
    assert e.lane_instructions > 0 and e.time_s > 0


def test_unexecuted_memory_instructions_are_listed(modules) -> None:
    e = run(modules, "vec_add", 1, 64, ["a=float[64]", "b=float[64]", "c=float[64]"], ["n=0"])
    assert len(e.trace.records) == 0
    assert sorted(i.opcode for i in e.trace.instructions) == [
        "ld.global.f32",
        "ld.global.f32",
        "st.global.f32",
    ]
    assert [i.inst for i in e.trace.instructions] == [0, 1, 2]


def test_saxpy_with_fma(modules) -> None:
    e = run(
        modules, "saxpy", 4, 256, ["x=float[1024]", "y=float[1024]:iota"], ["n=1024", "alpha=1.5"]
    )
    x, y0 = e.inputs["x"].astype(np.float64), e.inputs["y"].astype(np.float64)
    np.testing.assert_array_equal(e.outputs["y"], (1.5 * x + y0).astype(np.float32))


def test_integer_bit_intrinsics(modules) -> None:
    e = run(modules, "int_bits", 2, 128, ["a=uint32[256]", "o=uint32[1024]"], ["n=256"])
    a = [int(v) for v in e.inputs["a"]]
    o = e.outputs["o"].reshape(-1, 4)

    def byte_perm(x: int, y: int, sel: int) -> int:
        src = [(x >> (8 * k)) & 255 for k in range(4)] + [(y >> (8 * k)) & 255 for k in range(4)]
        return sum(src[(sel >> (4 * k)) & 7] << (8 * k) for k in range(4))

    m = 0xFFFFFFFF
    for i, x in enumerate(a):
        want0 = bin((x * 2654435761) & m).count("1") + ((32 - x.bit_length()) << 8)
        want1 = int(f"{x ^ i:032b}"[::-1], 2)
        want2 = byte_perm(x, (i * 977) & m, 0x5140) ^ ((x >> 3) & 0x1F)
        sx = x - 40
        want3 = (((x * 7) & m) // 13 + x % 11 + (abs(sx) // 3) * (-1 if sx > 0 else 1)) & m
        assert list(o[i]) == [want0 & m, want1, want2, want3], i


def test_shared_memory_tree_reduction(modules) -> None:
    e = run(modules, "reduce_smem", 8, 256, ["in=int[2048]", "out=int[8]"])
    np.testing.assert_array_equal(e.outputs["out"], e.inputs["in"].reshape(8, 256).sum(1))
    # the step "if (t < 2) s[t] += s[t + 2]" is one warp's access of 2 lanes
    shared = [i for i in e.trace.instructions if i.space == Space.SHARED]
    assert {i.opcode for i in shared} >= {"st.shared.u32", "ld.shared.u32"}
    masks = set(records_of(e, "ld.shared")["mask"])
    assert {0xFFFFFFFF, 0xFFFF, 0xFF, 0xF, 0x3, 0x1} <= masks
    st = records_of(e, "st.shared")
    first = st[(st["cta"] == 0) & (st["warp"] == 1)][0]
    np.testing.assert_array_equal(first["addr"], 0x400 + 4 * np.arange(32, 64))


def test_warp_shuffle_reduction(modules) -> None:
    e = run(modules, "warp_reduce", 4, 256, ["in=float[1024]", "out=float[32]"])
    ref = e.inputs["in"].reshape(32, 32).astype(np.float64).sum(1)
    np.testing.assert_allclose(e.outputs["out"], ref, rtol=1e-5, atol=1e-6)


def test_vote_and_ballot(modules) -> None:
    e = run(modules, "vote", 2, 128, ["in=int[256]", "ballots=uint32[8]", "anys=int[8]"])
    v = e.inputs["in"].reshape(8, 32)
    bits = (1 << np.arange(32)).astype(np.uint64)
    np.testing.assert_array_equal(e.outputs["ballots"], (v > 31).astype(np.uint64) @ bits)
    np.testing.assert_array_equal(e.outputs["anys"], (v == 7).any(1) + 2 * (v >= 0).all(1))


def test_atomic_histogram_global_and_shared(modules) -> None:
    e = run(modules, "histogram", 8, 256, ["in=int[2048]", "hist=int[64]:zeros"], ["n=2000"])
    want = np.bincount(e.inputs["in"][:2000] & 63, minlength=64)
    np.testing.assert_array_equal(e.outputs["hist"], want)
    kinds = {(i.space, i.kind) for i in e.trace.instructions if i.kind == Kind.ATOMIC}
    assert kinds == {(Space.SHARED, Kind.ATOMIC), (Space.GLOBAL, Kind.ATOMIC)}


def test_divergent_branches(modules) -> None:
    e = run(modules, "divergent", 2, 128, ["in=int[256]", "out=int[256]"])
    v = e.inputs["in"]
    odd = (np.arange(256) % 128) % 2 == 1
    np.testing.assert_array_equal(e.outputs["out"], np.where(odd, v * 3 + 1, v // 2 - 5))


def test_store_under_half_warp_condition_has_half_mask(modules) -> None:
    e = run(modules, "half_store", 2, 64, ["in=float[128]", "out=float[128]"])
    st = records_of(e, "st.global")
    assert len(st) == 2 and set(st["mask"]) == {0x0000FFFF}
    assert set(st["warp"]) == {0}
    base = e.trace.buffers["out"][0]
    np.testing.assert_array_equal(st[0]["addr"][:16] - base, 4 * np.arange(16))
    assert list(st[0]["addr"][16:]) == [0] * 16


def test_reconvergence_before_shared_store(modules) -> None:
    e = run(modules, "reconverge", 2, 256, ["in=int[512]", "out=int[512]"])
    v = e.inputs["in"]
    t = np.arange(512) % 256
    first = v[:256]
    vv = np.where(v & 1, v * 5 + first[(t * 7) % 256], v - first[(t * 3) % 256] * 2)
    np.testing.assert_array_equal(e.outputs["out"], vv.reshape(2, 256)[:, ::-1].reshape(-1))
    # inside the branches: partial masks; after the reconvergence point: one full record per warp
    inside = records_of(e, "ld.global")
    assert any(m != 0xFFFFFFFF for m in inside["mask"])
    st = records_of(e, "st.shared")
    assert len(st) == 16 and set(st["mask"]) == {0xFFFFFFFF}
    assert sorted(zip(st["cta"].tolist(), st["warp"].tolist(), strict=True)) == [
        (c, w) for c in range(2) for w in range(8)
    ]


def test_lanes_returning_early_do_not_split_the_join(modules) -> None:
    e = run(modules, "early_exit", 1, 64, ["in=int[128]:iota", "out=int[64]"])
    # in = iota: lane 0 has v == 0 and returns at k == 0; every other lane reaches the join
    st = records_of(e, "st.shared")
    assert sorted(zip(st["warp"].tolist(), st["mask"].tolist(), strict=True)) == [
        (0, 0xFFFFFFFE),
        (1, 0xFFFFFFFF),
    ]
    out = e.outputs["out"]
    assert out[0] == -1  # never written: the runner's poison
    v = np.arange(64)
    for t in range(1, 16):
        for k in range(4):
            v[t] += (t + k) & 127
    want = v[np.arange(64) ^ 1] + v  # lane 1 reads s[0], which lane 0 never wrote
    np.testing.assert_array_equal(out[2:], want[2:])


def test_sides_of_a_short_circuit_meet_at_its_then_block(modules) -> None:
    # bitonic_sort's swap at seq_len 2 in a loop: the even lanes swap, half of them through each
    # side of `(a[i] > a[j] && up) || (a[i] < a[j] && !up)`; the two sides meet at the swap before
    # the loop's latch (the branch's post-dominator), as ptxas's convergence barrier has them
    # (HeCBench bitonic_sort's SASS: one PLOP3 and two STGs a warp): one record a store a warp,
    # not one for each side
    e = run(
        modules,
        "swap_or",
        1,
        32,
        ["a=int[128]:random(0,1000)"],
        ["seq_len=2", "two_power=1", "rounds=4"],
        src=MORE,
    )
    a = e.inputs["a"].copy()
    for i in range(0, 128, 2):
        up = (i // 2) % 2 == 0
        if (a[i] > a[i + 1] and up) or (a[i] < a[i + 1] and not up):
            a[i], a[i + 1] = a[i + 1], a[i]
    np.testing.assert_array_equal(e.outputs["a"], a)
    moved = e.inputs["a"] != e.outputs["a"]
    want = []
    for r in range(4):  # lane t of round r has i = 32 r + t
        lanes = [t for t in range(0, 32, 2) if moved[32 * r + t]]
        if lanes:
            want += [sum(1 << t for t in lanes)] * 2
    st = records_of(e, "st.global")
    assert len(want) >= 6  # both sides swap lanes in most rounds (the data are random)
    assert sorted(st["mask"].tolist()) == sorted(want)


def test_half2_math_and_half_conversions(modules) -> None:
    e = run(
        modules,
        "half2_math",
        2,
        64,
        ["a=half2[128]", "b=half2[128]", "c=half2[128]", "f=float[128]", "g=float[128]:iota"],
    )
    a, b, c = e.inputs["a"], e.inputs["b"], e.outputs["c"]
    for f in ("x", "y"):
        want = (a[f].astype(np.float32) + b[f].astype(np.float32)).astype(np.float16)
        np.testing.assert_array_equal(c[f], want)
    g = e.inputs["g"]
    want_f = g.astype(np.float16).astype(np.float32) + a["x"].astype(np.float32)
    np.testing.assert_array_equal(e.outputs["f"], want_f)


def ptx_function(ptx: str, name: str) -> str:
    """The text of the .entry or .func ``name`` of a PTX module, up to the next one."""
    m = re.search(rf"^[^\n]*\.(?:entry|func)\b[^\n]*\b{re.escape(name)}\(", ptx, re.M)
    assert m is not None, f"{name} is not in the PTX"
    nxt = re.search(r"^[^\n]*\.(?:entry|func)\b", ptx[m.end() :], re.M)
    return ptx[m.start() : m.end() + nxt.start() if nxt else len(ptx)]


def test_noinline_device_function_call(modules) -> None:
    # the test is about the emulator's call and return: the kernel must really call the function
    mod = modules[BASIC]
    callee = "_Z9scale_addfi"  # scale_add(float, int)
    body = ptx_function(mod.ptx, mod.kernel("calls").mangled)
    assert re.search(rf"\bcall(?:\.uni)?\b[^;]*\b{callee}\b", body), "nvcc inlined scale_add"
    assert "ld.param.f32" in ptx_function(mod.ptx, callee)
    e = run(modules, "calls", 2, 64, ["a=float[128]:iota"])
    i = np.arange(128)
    np.testing.assert_array_equal(e.outputs["a"], (i * (i % 5) + 1).astype(np.float32))


def test_2d_block_forms_warps_from_rows(modules) -> None:
    e = run(
        modules, "block2d", "2x2", "16x16", ["in=float[1024]:iota", "out=float[1024]"], ["w=32"]
    )
    ty = (np.arange(1024) // 32) % 16
    np.testing.assert_array_equal(e.outputs["out"], e.inputs["in"] * 2 + ty)
    ld = records_of(e, "ld.global")
    warp0 = ld[(ld["cta"] == 0) & (ld["warp"] == 0)][0]
    base = e.trace.buffers["in"][0]
    # warp 0 = rows 0 and 1 of the 16x16 block: x 0..15 of y 0, then of y 1 (row pitch 32)
    want = np.concatenate([np.arange(16), 32 + np.arange(16)])
    np.testing.assert_array_equal((warp0["addr"] - base) // 4, want)
    assert set(ld["warp"]) == set(range(8))
    assert set(ld["cta"]) == {0, 1, 2, 3}


def test_dynamic_shared_memory(modules) -> None:
    e = run(modules, "dyn_smem", 2, 128, ["in=float[256]", "out=float[256]"], smem=512)
    np.testing.assert_array_equal(
        e.outputs["out"], e.inputs["in"].reshape(2, 128)[:, ::-1].reshape(-1)
    )
    st = records_of(e, "st.shared")[0]
    np.testing.assert_array_equal(st["addr"], 0x400 + 4 * np.arange(32))


def test_out_of_bounds_access_reports_line_buffer_and_offset(modules) -> None:
    with pytest.raises(MemoryAccessError) as err:
        run(modules, "oob", 2, 64, ["in=float[128]", "out=float[128]"], ["n=100"])
    ex = err.value
    line = next(i for i, t in enumerate(BASIC.read_text().splitlines(), 1) if "in[i + n]" in t)
    assert ex.where == f"basic.cu:{line}"
    assert ex.buffer == "in" and ex.offset == 512
    assert ex.cta == (0, 0, 0) and ex.thread == (28, 0, 0)
    assert f"basic.cu:{line}" in ex.one_line() and "'in'" in ex.one_line()


def test_runaway_kernel_hits_the_instruction_budget(modules) -> None:
    with pytest.raises(InstructionBudgetError, match="more than 20000 instructions"):
        run(modules, "spin", 1, 32, ["flag=int[2]:zeros"], max_instructions=20000)


def test_first_wave_sampling_is_extrapolated(modules) -> None:
    n = 1 << 20
    e = run(
        modules,
        "vec_add",
        n // 1024,
        1024,
        [f"a=float[{n}]", f"b=float[{n}]", f"c=float[{n}]"],
        [f"n={n}"],
        sample=None,
    )
    # H100: 2 blocks of 1024 threads per SM, 132 SMs
    assert len(e.ctas_run) == 264 and not e.complete
    assert e.trace.ctas == tuple(range(264)) and e.trace.total_ctas == 1024
    assert e.trace.scale == pytest.approx(1024 / 264)
    assert any("first wave" in n for n in e.notes)
    assert any("partial" in n for n in e.notes)
    done = 264 * 1024
    np.testing.assert_array_equal(
        e.outputs["c"][:done], e.inputs["a"][:done] + e.inputs["b"][:done]
    )
    assert set(records_of(e, "st.global")["cta"]) == set(range(264))


def test_batches_give_the_same_trace(modules) -> None:
    args = (["in=int[2048]", "out=int[2048]"],)
    one = run(modules, "reconverge", 8, 256, *args)
    many = run(modules, "reconverge", 8, 256, *args, batch_lanes=512)
    np.testing.assert_array_equal(one.outputs["out"], many.outputs["out"])
    key = ["inst", "cta", "warp"]
    a = np.sort(one.trace.records, order=key)
    b = np.sort(many.trace.records, order=key)
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# more.cu


def test_local_memory_array(modules) -> None:
    e = run(modules, "local_array", 1, 64, ["in=int[1024]", "out=int[64]"], ["k=5"], src=MORE)
    a = e.inputs["in"].reshape(64, 16)
    t = np.arange(64)
    np.testing.assert_array_equal(e.outputs["out"], a[t, 5] + a[t, (5 + t) & 15])
    local = [i for i in e.trace.instructions if i.space == Space.LOCAL]
    assert {i.width for i in local} == {4, 16}


def test_vector_loads_constant_and_device_variables(modules) -> None:
    e = run(modules, "vec4", 2, 64, ["in=float4[128]", "out=float4[128]"], ["s=2.5"], src=MORE)
    i, o = e.inputs["in"], e.outputs["out"]
    t = np.arange(128) % 64
    x = i["x"] * np.float32(2.5)
    y = i["y"] + ((t & 7) + 1).astype(np.float32)
    np.testing.assert_array_equal(o["x"], x)
    np.testing.assert_array_equal(o["y"], y)
    np.testing.assert_array_equal(o["z"], i["z"] - (0.5 + (t & 3)).astype(np.float32))
    np.testing.assert_array_equal(o["w"], x + y)
    widths = {(i.opcode, i.width) for i in e.trace.instructions}
    assert ("ld.global.v4.f32", 16) in widths and ("st.global.v4.f32", 16) in widths
    assert any(i.space == Space.CONST for i in e.trace.instructions)


def test_generic_pointer_to_shared_or_global(modules) -> None:
    for sel in (0, 1):
        e = run(modules, "generic", 1, 64, ["a=float[64]:iota"], [f"sel={sel}"], src=MORE)
        t = np.arange(64, dtype=np.float32)
        # sel: a[t] = iota + s[t] (s[t] = t); else a[t] = t + s[t] (s never written: zeros here)
        np.testing.assert_array_equal(e.outputs["a"], 2 * t if sel else t)
        st = next(i for i in e.trace.instructions if i.opcode == "st.f32")
        assert st.space == (Space.SHARED if sel else Space.GLOBAL)


def test_switch_and_nested_loops_with_break(modules) -> None:
    e = run(modules, "switchy", 1, 128, ["in=int[128]", "out=int[128]"], src=MORE)
    x = e.inputs["in"].astype(np.int64)
    want = [
        [5, v * 3, v ^ 7, -v, int(v / 3), int(np.fmod(v, 5)), v << 2, 99][v & 7] for v in x.tolist()
    ]
    np.testing.assert_array_equal(e.outputs["out"], want)
    e = run(modules, "nested", 1, 128, ["in=int[128]", "out=int[128]"], src=MORE)

    def ref(v: int) -> int:
        acc = 0
        for k in range(v & 7):
            if k & 1:
                acc += k * v
                if acc > 100:
                    break
            else:
                acc -= 1
        return acc

    np.testing.assert_array_equal(e.outputs["out"], [ref(int(v)) for v in e.inputs["in"]])


def test_atomics_cas_loop_and_syncthreads_count(modules) -> None:
    e = run(
        modules,
        "atomics",
        1,
        128,
        ["c=int[9]:zeros", "inc=uint32[1]:zeros", "cnt=int[1]:zeros"],
        src=MORE,
    )
    assert list(e.outputs["c"]) == [128, 127, -127, 5, 0, 0xFFFF, 0, -256, 64]
    assert list(e.outputs["inc"]) == [128 % 18]
    assert list(e.outputs["cnt"]) == [128]
    e = run(
        modules,
        "float_atomics",
        2,
        128,
        ["in=float[256]", "sum=float[1]:zeros", "dsum=double[1]:zeros"],
        src=MORE,
    )
    total = 2 * e.inputs["in"][:128].astype(np.float64).sum()  # both CTAs add in[0..127]
    np.testing.assert_allclose(e.outputs["sum"], [total], rtol=1e-5)
    np.testing.assert_allclose(e.outputs["dsum"], [total], rtol=1e-12)


def test_64bit_integers_and_doubles(modules) -> None:
    e = run(modules, "wide", 1, 64, ["a=int64[64]", "o=int64[128]", "d=double[64]"], src=MORE)
    xs = [int(v) * 1000003 - 5000000 for v in e.inputs["a"]]

    def tdiv(p: int, q: int) -> int:
        r = abs(p) // abs(q)
        return r if (p < 0) == (q < 0) else -r

    def s64(v: int) -> int:
        v &= 2**64 - 1
        return v - 2**64 if v >= 2**63 else v

    o = e.outputs["o"].reshape(64, 2)
    for k, x in enumerate(xs):
        u = x & (2**64 - 1)
        w0 = tdiv(x, 7) + (x - tdiv(x, 11) * 11) + (x >> 3) + ((x * 12345) >> 64)
        w0 += 64 - u.bit_length() + bin(u).count("1")
        w1 = (u // 13) ^ int(f"{u:064b}"[::-1], 2)
        assert (int(o[k, 0]), int(o[k, 1])) == (s64(w0), s64(w1)), k
    xd = np.array(xs, np.float64)
    want = xd * 1.5 + np.sqrt(np.abs(xd)) - 1.0 / np.array([v | 1 for v in xs], np.float64)
    np.testing.assert_allclose(e.outputs["d"], want, rtol=1e-15)


def test_bfloat16_and_half_conversions(modules) -> None:
    from gpuadvise.spec.cuda_types import encode_bfloat16

    e = run(
        modules,
        "halves",
        1,
        64,
        ["a=bfloat16[64]", "o=bfloat16[64]", "h=half[64]", "ho=half[64]", "f=float[64]"],
        src=MORE,
    )
    a = (e.inputs["a"].astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(e.outputs["o"], encode_bfloat16(a * 2 + 1))
    h = e.inputs["h"]
    p = (h.astype(np.float32) * 3).astype(np.float16)
    want = np.where(p > np.float16(0.25), (p.astype(np.float32) + h).astype(np.float16), -h)
    np.testing.assert_array_equal(e.outputs["ho"], want)


def test_fast_math_and_libm_are_close(modules) -> None:
    e = run(modules, "fastmath", 1, 64, ["a=float[64]", "o=float[512]"], src=MORE)
    x = e.inputs["a"].astype(np.float64)
    o = e.outputs["o"].reshape(64, 8)
    wants = [
        np.exp(x),
        np.log(np.abs(x) + 1),
        1 / np.sqrt(np.abs(x) + 1),
        x / 3,
        np.sin(x) + np.cos(x),
        np.sqrt(np.abs(x)) + 1 / (x + 2),
        np.floor(x * 10) + np.ceil(x * 3) + np.trunc(x * 7) + np.rint(x * 5),
        np.minimum(x, 0.25) + np.maximum(x, -0.25) + np.clip(x, 0, 1) + np.trunc(x * 100),
    ]
    for k, want in enumerate(wants):
        np.testing.assert_allclose(o[:, k], want, rtol=1e-5, atol=1e-5, err_msg=str(k))
    e = run(modules, "libm", 1, 64, ["a=float[64]", "o=float[256]"], src=MORE)
    o = e.outputs["o"].reshape(64, 4)
    wants = [
        np.exp(x),
        np.log(np.abs(x) + 0.5),
        np.sin(x * 3),
        (np.abs(x) + 0.1) ** 1.7 + np.tanh(x),
    ]
    for k, want in enumerate(wants):
        np.testing.assert_allclose(o[:, k], want, rtol=1e-5, atol=1e-6, err_msg=str(k))


def test_shuffle_variants_match_cuda_semantics(modules) -> None:
    e = run(modules, "shuffles", 2, 64, ["in=int[128]", "out=int[512]"], src=MORE)
    v = e.inputs["in"].reshape(4, 32)
    o = e.outputs["out"].reshape(4, 32, 4)
    lane = np.arange(32)
    np.testing.assert_array_equal(o[:, :, 0], np.where(lane >= 3, v[:, np.maximum(lane - 3, 0)], v))
    np.testing.assert_array_equal(o[:, :, 1], v[:, lane ^ 5])
    tid = (np.arange(128) % 64).reshape(4, 32)
    np.testing.assert_array_equal(o[:, :, 2], np.take_along_axis(v, (tid * 7) & 31, 1))
    within = (lane % 8) + 2 < 8
    np.testing.assert_array_equal(o[:, :, 3], np.where(within, v[:, np.minimum(lane + 2, 31)], v))


def test_activemask_match_and_reduce(modules) -> None:
    e = run(modules, "warp_misc", 2, 64, ["in=int[128]", "out=uint32[512]"], src=MORE)
    v = e.inputs["in"].reshape(4, 32).astype(np.int64)
    o = e.outputs["out"].reshape(4, 32, 4)
    bits = (1 << np.arange(32)).astype(np.int64)
    act = (v & 1) @ bits
    np.testing.assert_array_equal(o[:, :, 0], np.where(v & 1, act[:, None], 0))
    same = ((v[:, :, None] & 3) == (v[:, None, :] & 3)).astype(np.int64) @ bits
    np.testing.assert_array_equal(o[:, :, 1], same)
    np.testing.assert_array_equal(o[:, :, 2], np.repeat(v.sum(1)[:, None], 32, 1))
    np.testing.assert_array_equal(o[:, :, 3], np.repeat(v.max(1)[:, None], 32, 1))


def test_printf_is_ignored_and_cp_async_is_traced(modules) -> None:
    e = run(modules, "printer", 2, 32, ["out=int[32]"], src=MORE)
    np.testing.assert_array_equal(e.outputs["out"], np.arange(32))
    assert "printf calls are ignored" in e.notes
    e = run(modules, "async_copy", 2, 64, ["in=float[512]", "out=float[128]"], src=MORE)
    x = e.inputs["in"].reshape(2, 64, 4).astype(np.float64).sum(2)
    np.testing.assert_allclose(e.outputs["out"].reshape(2, 64), x[:, ::-1], rtol=1e-6)
    cp = {
        (i.space, i.kind, i.width) for i in e.trace.instructions if i.opcode.startswith("cp.async")
    }
    assert cp == {(Space.GLOBAL, Kind.LOAD, 16), (Space.SHARED, Kind.STORE, 16)}


def test_small_integers_and_selects(modules) -> None:
    e = run(
        modules,
        "ints16",
        1,
        64,
        ["a=int16[64]", "b=uint8[64]", "o=int16[64]", "w=int[64]"],
        src=MORE,
    )
    a = e.inputs["a"].astype(np.int64)
    b = e.inputs["b"].astype(np.int64)
    np.testing.assert_array_equal(e.outputs["o"], (a * 3 - b).astype(np.int16))
    w = a * b + e.inputs["b"].view(np.int8) + (a >> 2) + a.astype(np.uint16)
    np.testing.assert_array_equal(e.outputs["w"], w)
    e = run(
        modules,
        "selects",
        1,
        64,
        ["a=float[64]", "b=int[64]", "o=float[64]", "p=int[64]"],
        src=MORE,
    )
    x, y = e.inputs["a"], e.inputs["b"]
    o = np.where((x > 0.25) & (y < 40), x * 2, np.where(np.isnan(x), 1, -x))
    p = (y > 10) + (y >= 20) * 2 + (y == 33) * 4 + (y < 50) * 8 + (x <= 0) * 16
    np.testing.assert_array_equal(e.outputs["o"], o)
    np.testing.assert_array_equal(e.outputs["p"], p)

"""gpuadvise/proxy.py: struct layouts (against nvcc's offsetof), the demanded-bits analysis on
hand-written PTX, the lane-level trace metrics on hand-built traces (hand-derived numbers), the
access pattern of the cells kernels, and the synthesized proxies: each compiles with nvcc, and on
the CPU emulator the two kernels of a pair write what an independent Python reference of the
pattern computes (so they agree with each other), with every load the pattern asks for."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import rulekit

import gpuadvise.rules as rule_api
import gpuadvise.rules.demanded_bits as bits
import gpuadvise.rules.findings as rule_findings
import gpuadvise.rules.proxy as proxy_mod
import gpuadvise.rules.registry as rule_registry
import gpuadvise.rules.structs as structs
import gpuadvise.trace.view as tview
from gpuadvise.spec.cuda_types import StructType, lookup
from gpuadvise.spec.kernel_spec import BufferSpec
from gpuadvise.toolchain import find_toolchain
from gpuadvise.trace.access import RECORD, AccessTrace, InstrInfo, Kind, Space

try:
    find_toolchain()
    HAVE_NVCC = True
except Exception:
    HAVE_NVCC = False

needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit (pip install .[toolkit])")

_K = rule_registry.builtin_kernels_dir()
assert _K is not None
KERNELS: Path = _K
M32 = 0xFFFFFFFF


@pytest.fixture(scope="module", autouse=True)
def _cache(compile_cache: Path) -> Path:
    """The run's compile cache (conftest.py) for every test of the module."""
    return compile_cache


# ---------------------------------------------------------------------------------------------
# Struct layouts


STRUCTS = """
#define N 3
struct Inner { char c; double d; };
struct __align__(16) Outer {
    char tag;
    float3 pos;
    short s[N];
    Inner in;
    int* next;
    unsigned long long big;
};
typedef struct { int a, b; float c[2]; } Pair;
struct WithMethod {
    int a;
    __device__ int get() const;
    float b;
};
struct Bits { int a : 3; int b : 5; };
struct Unknown { Foo foo; };
"""


def test_cells_structs_as_the_source_lays_them_out():
    text = (KERNELS / "cells" / "cells.cu").read_text()
    cell = structs.parse_struct(text, "Cell")
    assert cell is not None and (cell.size, cell.align) == (44, 4)
    names = ["type", "gender", "moved", "age", "energy", "food", "lsa", "target_x", "target_y",
             "trait0", "trait1"]  # fmt: skip
    assert [(f.name, f.offset) for f in cell.fields] == [(n, 4 * i) for i, n in enumerate(names)]
    assert cell.describe(12) == "age" and cell.describe(40) == "trait1"
    packed = structs.parse_struct(text, "PackedCell")
    assert packed is not None and packed.size == 32
    assert packed.describe(0, 4) == "info" and packed.describe(1, 1) == "info.y"
    assert packed.describe(0, 2) == "info.x..y"
    half4 = structs.parse_struct(
        (KERNELS / "fp16_neighbourhood" / "moments.cu").read_text(), "half4"
    )
    assert half4 is not None and (half4.size, half4.align) == (8, 8)  # __align__(8)


def test_unsupported_structs_give_none():
    for name in ("Bits", "Unknown", "Missing"):
        assert structs.parse_struct(STRUCTS, name) is None, name


@needs_nvcc
def test_struct_layouts_match_nvcc_offsetof(tmp_path):
    outer = structs.parse_struct(STRUCTS, "Outer")
    pair = structs.parse_struct(STRUCTS, "Pair")
    meth = structs.parse_struct(STRUCTS, "WithMethod")
    assert outer is not None and pair is not None and meth is not None
    # by hand: tag 0, pos 4 (float3 aligned to 4), s 16 (3 shorts), in 24 (Inner: 16 bytes,
    # aligned to 8), next 40, big 48; 56 rounded up to the __align__(16): 64
    assert [f.offset for f in outer.fields] == [0, 4, 16, 24, 40, 48]
    assert (outer.size, outer.align) == (64, 16)
    assert outer.describe(8) == "pos.y" and outer.describe(18) == "s[1]"
    assert outer.describe(32, 8) == "in.d" and outer.describe(36) == "in.d (bytes 4..7)"
    assert outer.describe(2, 2) == "bytes 2..3"
    assert [f.offset for f in pair.fields] == [0, 4, 8] and pair.size == 16
    assert [f.offset for f in meth.fields] == [0, 4] and meth.size == 8
    probes = [("Outer", f.name) for f in outer.fields] + [("Pair", f.name) for f in pair.fields]
    probes += [("WithMethod", f.name) for f in meth.fields]
    got = nvcc_values(
        tmp_path,
        STRUCTS.replace("struct Bits", "struct BitsX").replace("Foo foo;", "int foo;"),
        [f"offsetof({s}, {f})" for s, f in probes]
        + [f"sizeof({s})" for s in ("Outer", "Pair", "WithMethod", "Inner")]
        + ["alignof(Outer)"],
    )
    want = [f.offset for f in outer.fields] + [f.offset for f in pair.fields]
    want += [f.offset for f in meth.fields] + [64, 16, 8, 16, 16]
    assert got == want


def nvcc_values(tmp: Path, text: str, exprs: list[str]) -> list[int]:
    """Compile-time values of ``exprs`` as nvcc computes them (read back from the PTX)."""
    tc = find_toolchain()
    src = tmp / "probe.cu"
    body = ", ".join(exprs)
    src.write_text(
        "#include <cstddef>\n" + text
        + f'\nextern "C" __device__ unsigned long long probe[{len(exprs)}] = {{{body}}};\n'
    )  # fmt: skip
    out = subprocess.run(
        [str(tc.nvcc), "-arch=sm_90", "-ptx", "-o", "-", str(src)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    m = re.search(r"probe\[\d+\]\s*=\s*\{([^}]*)\}", out)
    assert m, out[-2000:]
    data = [int(v, 0) for v in m.group(1).split(",")]
    if len(data) > len(exprs):  # emitted as bytes (trailing zeros left out)
        data += [0] * (8 * len(exprs) - len(data))
        return [int.from_bytes(bytes(data[8 * i : 8 * i + 8]), "little") for i in range(len(exprs))]
    return data


def test_packing_plans():
    seed = rule_api.plan_packing(
        [("age", 12, 8), ("type", 0, 2), ("gender", 4, 1), ("moved", 8, 1)]
    )
    assert seed is not None and seed.style == "bytes"
    assert [(f.name, f.shift, f.bits) for f in seed.fields] == [
        ("type", 0, 8), ("gender", 8, 8), ("moved", 16, 8), ("age", 24, 8)
    ]  # fmt: skip
    assert seed.layout_text().startswith("type bits 0..7, gender bits 8..15")
    assert seed.unpack_code("w").split("; ")[1] == "const unsigned gender = (w >> 8) & 0xffu"
    five = rule_api.plan_packing([(c, 4 * i, 3) for i, c in enumerate("abcde")])
    assert five is not None and five.style == "bits"
    assert [(f.shift, f.bits) for f in five.fields] == [(0, 3), (3, 3), (6, 3), (9, 3), (12, 3)]
    assert rule_api.plan_packing([("a", 0, 16), ("b", 4, 16), ("c", 8, 2)]) is None  # 34 bits
    assert rule_api.plan_packing([("a", 0, 3)]) is None
    # the pack and unpack code round-trip values of the used widths
    vals = {"a": 5, "b": 7, "c": 0, "d": 6, "e": 1}
    word = 0
    for f in five.fields:
        word |= (vals[f.name] & ((1 << f.bits) - 1)) << f.shift
    assert {f.name: (word >> f.shift) & ((1 << f.bits) - 1) for f in five.fields} == vals
    assert five.pack_code() == (
        "info = (a & 0x7u) | (b & 0x7u) << 3 | (c & 0x7u) << 6 | (d & 0x7u) << 9 | "
        "(e & 0x7u) << 12;"
    )


# ---------------------------------------------------------------------------------------------
# Demanded bits


PTX = """
.version 8.0
.target sm_90
.address_size 64

.visible .entry k(.param .u64 k_p, .param .u64 k_q)
{
    .reg .pred %p<3>;
    .reg .b16 %rs<4>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [k_p];
    ld.param.u64 %rd2, [k_q];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    ld.global.u32 %r1, [%rd3];
    ld.global.u32 %r2, [%rd3+4];
    ld.global.u32 %r3, [%rd3+8];
    ld.global.u32 %r4, [%rd3+12];
    ld.global.u32 %r5, [%rd3+16];
    ld.global.u32 %r6, [%rd3+20];
    ld.global.u32 %r7, [%rd3+24];
    ld.global.u32 %r8, [%rd3+28];
    ld.global.u32 %r9, [%rd3+32];
    ld.global.u32 %r20, [%rd3+36];
    and.b32 %r10, %r1, 3;
    shr.u32 %r11, %r2, 4;
    and.b32 %r12, %r11, 1;
    cvt.u16.u32 %rs1, %r3;
    and.b16 %rs2, %rs1, 255;
    add.s32 %r13, %r4, %r10;
    and.b32 %r14, %r13, 15;
    setp.gt.s32 %p1, %r5, 7;
    selp.u32 %r15, 1, 0, %p1;
    xor.b32 %r16, %r6, %r1;
    and.b32 %r17, %r16, 1;
    bfe.u32 %r18, %r7, 8, 4;
    prmt.b32 %r19, %r20, %r9, 0x0040;
    and.b32 %r21, %r19, 65280;
    st.global.u32 [%rd4], %r12;
    st.global.u16 [%rd4+4], %rs2;
    st.global.u32 [%rd4+8], %r14;
    st.global.u32 [%rd4+12], %r15;
    st.global.u32 [%rd4+16], %r17;
    st.global.u32 [%rd4+20], %r18;
    st.global.u32 [%rd4+24], %r21;
    ret;
}
"""


def test_demanded_bits_of_hand_written_ptx():
    from gpuadvise.ptx.cfg import build_program
    from gpuadvise.ptx.parser import parse_ptx

    prog = build_program(parse_ptx(PTX), "k")
    dem = bits.demanded_bits(prog.instrs, prog.regs)
    assert dem["%r1"] == 0b11  # & 3 (and bit 0 again through the xor of %r6)
    assert dem["%r2"] == 0b10000  # (x >> 4) & 1
    assert dem["%r3"] == 0xFF  # truncated to 16 bits, then & 255
    assert dem["%r4"] == 0xF  # an add: the bits up to the highest one used (& 15)
    assert dem["%r5"] == M32  # a compare uses every bit
    assert dem["%r6"] == 1  # xor then & 1
    assert dem["%r7"] == 0xF00  # bfe 8, 4
    assert dem.get("%r8", 0) == 0  # never used
    assert dem["%r9"] == 0xFF and dem.get("%r20", 0) == 0  # prmt: byte 1 comes from %r9's byte 0
    assert dem["%rd3"] == 2**64 - 1  # an address


# ---------------------------------------------------------------------------------------------
# Lane-level metrics on hand-built traces


BASE = 0x7000_0000_0000
B2 = BASE + 2**36


def _trace(records: list[tuple[int, int, int, list[int], int]], insts: list[tuple[int, Kind]],
           grid=(1, 1, 1), block=(64, 1, 1)) -> AccessTrace:  # fmt: skip
    """records: (inst, cta, warp, 32 addresses (None: inactive), width)."""
    recs = np.zeros(len(records), RECORD)
    for i, (inst, cta, warp, addrs, width) in enumerate(records):
        mask = 0
        for lane, a in enumerate(addrs):
            if a is not None:
                mask |= 1 << lane
                recs[i]["addr"][lane] = a
        recs[i]["inst"], recs[i]["cta"], recs[i]["warp"] = inst, cta, warp
        recs[i]["mask"], recs[i]["width"] = mask, width
        recs[i]["space"], recs[i]["kind"] = int(Space.GLOBAL), int(insts[inst][1])
    infos = tuple(
        InstrInfo(i, "/k.cu", line, "ld.global.u32", Space.GLOBAL, kind, 4)
        for i, (line, kind) in enumerate(insts)
    )
    ctas = sorted({r[1] for r in records})
    return AccessTrace(
        recs, infos, tuple(ctas), grid[0] * grid[1] * grid[2], grid, block, "emulator",
        {"a": (BASE, 44 * 64), "b": (B2, 4 * 256)},
    )  # fmt: skip


def _spec() -> Any:
    bufs = {"a": BufferSpec("a", StructType("S"), "64"), "b": BufferSpec("b", lookup("int"), "256")}
    return SimpleNamespace(env=lambda: {}, buffer=bufs.get)


def test_array_of_structures_footprint_stride_and_fields():
    # one warp reads two fields (offsets 0 and 4) of 32 consecutive 44-byte structs
    t = _trace(
        [(0, 0, 0, [BASE + 44 * ln for ln in range(32)], 4),
         (1, 0, 0, [BASE + 44 * ln + 4 for ln in range(32)], 4)],
        [(10, Kind.LOAD), (10, Kind.LOAD)],
    )  # fmt: skip
    view = tview.TraceView(t, tview.buffer_infos(t, _spec()))
    assert view.buffers["a"].elem_bytes == 44 and view.buffers["a"].is_struct
    assert view.lines(lambda f: True, [Kind.LOAD]) == [("/k.cu", 10, Kind.LOAD)]
    lanes, recs = view.access(view.insts_at("/k.cu", 10, Kind.LOAD), "a")
    assert len(lanes) == 64 and list(recs) == [0, 1]
    # each request: 32 sectors (44 > 32 bytes apart), ideal 4
    assert list(view.rec_sectors) == [32, 32] and list(view.rec_ideal) == [4, 4]
    # the warp's 8 bytes per struct: struct l starts at 12 l mod 32 in its sector; of 8
    # consecutive structs (0, 12, 24, 4, 16, 28, 8, 20) only the one at 28 crosses into the
    # next sector: 9 sectors per 8 structs, 36 for 32; ideal 32 x 8 / 32 = 8
    assert rule_api.warp_footprint(lanes) == (36, 8)
    assert rule_api.stride_mode(lanes) == 44
    assert rule_api.field_loads(lanes, 44) == {0: (0, 4, 32), 1: (4, 4, 32)}


def test_loads_that_complete_each_other_waste_nothing():
    # b[2l] and b[2l + 1] at the same line: each request touches 8 sectors for 4 ideal, the warp
    # together touches 8 sectors and uses all 256 bytes of them
    t = _trace(
        [(0, 0, 0, [B2 + 8 * ln for ln in range(32)], 4),
         (1, 0, 0, [B2 + 8 * ln + 4 for ln in range(32)], 4)],
        [(20, Kind.LOAD), (20, Kind.LOAD)],
    )  # fmt: skip
    view = tview.TraceView(t, tview.buffer_infos(t, _spec()))
    lanes, _ = view.access(np.array([0, 1]), "b")
    assert list(view.rec_sectors) == [8, 8] and list(view.rec_ideal) == [4, 4]
    assert rule_api.warp_footprint(lanes) == (8, 8)
    assert rule_api.stride_mode(lanes) == 8


def test_reuse_of_a_stencil_and_of_a_uniform_load():
    # 64 threads (2 warps) read b[t], b[t + 1], b[t + 2]: 192 thread-address pairs for 66
    # addresses; every request reads 32 distinct addresses
    recs = [(k, 0, w, [B2 + 4 * (32 * w + ln + k) for ln in range(32)], 4)
            for k in range(3) for w in range(2)]  # fmt: skip
    t = _trace(recs, [(30, Kind.LOAD)] * 3)
    view = tview.TraceView(t, tview.buffer_infos(t, _spec()))
    lanes, rr = view.access(np.array([0, 1, 2]), "b")
    ru = rule_api.cta_reuse(lanes, view.rec_sectors[rr])
    assert (ru.pairs, ru.addresses, ru.requests, ru.lanes) == (192, 66, 6, 192)
    assert ru.factor == pytest.approx(192 / 66) and ru.spread == 1.0
    # each request: 128 bytes in 4 or 5 sectors (offsets 0, 4, 8 in the sector); 66 words in
    # 9 distinct sectors (264 bytes)
    assert ru.requested_sectors == 4 + 4 + 5 + 5 + 5 + 5 and ru.unique_sectors == 9
    # a uniform load: all lanes of both warps read b[k], k = 0..7: spread 1/32, reuse 64
    uni = [(0, 0, w, [B2 + 4 * k] * 32, 4) for k in range(8) for w in range(2)]
    t2 = _trace(uni, [(31, Kind.LOAD)])
    v2 = tview.TraceView(t2, tview.buffer_infos(t2, _spec()))
    l2, r2 = v2.access(np.array([0]), "b")
    u = rule_api.cta_reuse(l2, v2.rec_sectors[r2])
    assert u.factor == 64.0 and u.spread == pytest.approx(1 / 32)


def test_view_samples_ctas_evenly_and_scales():
    recs = [(0, c, 0, [B2 + 4 * ln for ln in range(32)], 4) for c in range(10)]
    t = _trace(recs, [(5, Kind.LOAD)], grid=(100, 1, 1), block=(32, 1, 1))
    view = tview.TraceView(t, tview.buffer_infos(t, _spec()), max_ctas=4)
    assert list(view.ctas) == [0, 3, 6, 9] and view.scale == 25.0
    # one line, 4 sampled requests of 4 sectors: max(4, 16 / 4) cycles; 128 distinct bytes
    assert view.l1_total() == 4.0
    assert view.useful_bytes() == 128 * 25.0


# ---------------------------------------------------------------------------------------------
# The pattern of the cells kernels (the emulator's trace of the first 8 CTAs)


def _analysis(source: Path, kernel: str, args: tuple[str, ...] = (), ctas: int | str = 8) -> Any:
    from rulekit import analyze_lazily

    from gpuadvise.analyze.options import KernelOptions, build

    spec, choice, options = build(
        KernelOptions(source=str(source), kernel=kernel, gpu="H100", args=args)
    )
    return analyze_lazily(spec, choice.device, options, trace=True, sample_ctas=ctas)


NEIGHBOURS = [(dx, dy) for dy in range(-2, 3) for dx in range(-2, 3) if (dx, dy) != (0, 0)]


@needs_nvcc
def test_cells_pattern_and_field_widths():
    a = _analysis(KERNELS / "cells" / "cells.cu", "cells_fields")
    trace = a.memory.trace
    view = tview.trace_view(trace, a.spec)
    assert tview.trace_view(trace, a.spec) is view  # shared by the rules of a run
    file = str((KERNELS / "cells" / "cells.cu").resolve())
    insts = view.insts_at(file, 74, Kind.LOAD)
    lanes, _ = view.access(insts, "cells")
    names = {0: "type", 4: "gender", 12: "age"}
    pat = tview.infer_pattern(view, lanes, view.buffers["cells"], names, [1024], "here")
    assert isinstance(pat, tview.Pattern)
    assert (pat.pitch, pat.rows, pat.elem_bytes, pat.count) == (1024, 1024, 44, 1024 * 1024)
    assert list(pat.offsets) == NEIGHBOURS and pat.coverage == 1.0
    assert [(f.word, f.words, f.name) for f in pat.fields] == [
        (0, 1, "type"), (1, 1, "gender"), (3, 1, "age")
    ]  # fmt: skip
    # type is read at every visit; gender when the neighbour's type is the cell's (random
    # bytes: 1 in 4); age when the gender differs as well (1 in 2 of those)
    assert pat.fields[0].share == 1.0
    assert 0.2 < pat.fields[1].share < 0.3 and 0.09 < pat.fields[2].share < 0.16
    # the widths the kernel uses: type & 3, gender & 1, moved & 1, age & 255 (>= 16: & 0xf0)
    widths = rule_api.load_widths(a.module.ptx, a.kernel.mangled, trace)
    assert widths is not None
    fields = rule_api.field_loads(view.access(np.arange(len(trace.instructions)), "cells")[0], 44)
    per_offset: dict[int, set[int]] = {}
    for inst, (off, _w, _n) in fields.items():
        per_offset.setdefault(off, set()).add(widths[inst])
    assert per_offset == {0: {2}, 4: {1}, 8: {1}, 12: {8}}


@needs_nvcc
def test_a_gather_has_no_pattern(tmp_path):
    src = tmp_path / "gather.cu"
    src.write_text(
        'extern "C" __global__ void gather(const int* __restrict__ idx, '
        "const float* __restrict__ in, float* __restrict__ out, int n) {\n"
        "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) out[i] = in[idx[i] % n];\n"
        "}\n"
    )
    (tmp_path / "case.toml").write_text(
        'source = "gather.cu"\nkernel = "gather"\ngrid = "ceil_div(n, 128)"\nblock = 128\n'
        '[args]\nn = 4096\n[buffers]\nidx = { type = "int", count = "n", fill = "random(0,4095)" }\n'
        'in = "float[n]"\nout = "float[n]"\n'
    )
    a = _analysis(src, "gather")
    view = tview.trace_view(a.memory.trace, a.spec)
    insts = view.insts_at(str(src.resolve()), 3, Kind.LOAD)
    lanes, _ = view.access(insts, "in")
    why = tview.infer_pattern(view, lanes, view.buffers["in"], None, [4096])
    assert isinstance(why, str) and ("data-dependent" in why or "distinct element" in why)
    # while idx[i] itself is read at offset 0 from each thread's own element
    own = tview.infer_pattern(view, view.access(insts, "idx")[0], view.buffers["idx"], None, [])
    assert isinstance(own, tview.Pattern) and own.offsets == ((0, 0),) and own.one_d


# ---------------------------------------------------------------------------------------------
# Proxies: compiled with nvcc, run on the emulator, checked against a Python reference


def pick(first: int, salt: int, share: int) -> bool:
    h = (((first ^ ((salt * 0x9E3779B9) & M32)) * 0x85EBCA6B) & M32) >> 22
    return h < share


def reference(
    p: tview.Pattern, thresholds: list[int | None], scale: int = 1
) -> tuple[np.ndarray, int]:
    """What both kernels of a proxy must write: per thread, the fold of the logical indices
    (element x words + field word + component, times ``scale``) of every field read, visits in
    order, deeper fields read while their condition holds. Also the number of field loads."""
    out = np.zeros(p.threads, np.uint32)
    loads = 0
    size = p.count if p.one_d else p.pitch
    for y in range(p.grid[1] * p.block[1]):
        for x in range(p.threads_x):
            if x >= size or (not p.one_d and y >= p.rows):
                continue
            acc = 0
            for dx, dy in p.offsets:
                nx, ny = x + dx, y + dy
                if nx < 0 or nx >= size or ny < 0 or (not p.one_d and ny >= p.rows):
                    continue
                e = ny * p.pitch + nx
                first = ((e * p.words + p.fields[0].word) * scale) & M32
                for j, f in enumerate(p.fields):
                    if j and thresholds[j] is not None and not pick(first, j, thresholds[j]):
                        break
                    loads += 1
                    for c in range(f.words):
                        acc = (acc * proxy_mod.FOLD + (e * p.words + f.word + c) * scale) & M32
            out[y * p.threads_x + x] = acc
    return out, loads


def run_proxy(px: rule_findings.Proxy, tmp: Path) -> dict[str, Any]:
    """Both kernels of ``px`` on the emulator, every CTA: (out, global load lanes, smem)."""
    from gpuadvise.analyze.measure import write_proxy
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    src, before, after = write_proxy(px, tmp)
    got = {}
    for kernel, spec in ((px.before, before), (px.after, after)):
        an = rulekit.compiled(src, kernel, spec=str(spec))
        launch = resolve(an.spec, parse_signature(src.read_text(), kernel))
        e = emulate(an.module, an.kernel, launch, an.device, sample_ctas="all")
        r = e.trace.records
        glob = r[(r["space"] == int(Space.GLOBAL)) & (r["kind"] == int(Kind.LOAD))]
        lanes = int(sum(bin(int(m)).count("1") for m in glob["mask"]))
        got[kernel] = (e.outputs["out"], lanes, an.kernel.resources.static_smem_bytes)
    return got


PAT_2D = tview.Pattern(
    buffer="cells",
    elem_bytes=12,
    count=20 * 7,
    pitch=20,
    rows=7,
    grid=(3, 2, 1),
    block=(8, 4, 1),
    offsets=((-1, -1), (0, -1), (1, -1), (-1, 0), (0, 0), (1, 0), (-1, 1), (0, 1), (1, 1)),
    fields=(tview.FieldLoad(0, 1, 1.0, "a"), tview.FieldLoad(2, 1, 0.5, "c")),
    coverage=1.0,
    where="k at k.cu:7",
)
PAT_1D = tview.Pattern(
    buffer="p",
    elem_bytes=32,
    count=90,
    pitch=90,
    rows=1,
    grid=(3, 1, 1),
    block=(32, 1, 1),
    offsets=((-1, 0), (0, 0), (1, 0), (5, 0)),
    fields=(
        tview.FieldLoad(4, 4, 1.0, "v"),
        tview.FieldLoad(1, 1, 0.25, "n"),
        tview.FieldLoad(2, 2, 0.25, "w"),
    ),  # fmt: skip
    coverage=1.0,
    where="k at k.cu:9",
)


@needs_nvcc
@pytest.mark.parametrize("pattern", [PAT_2D, PAT_1D], ids=["2d", "1d-vector-fields"])
def test_soa_proxy_reads_the_same_words_in_both_layouts(pattern, tmp_path):
    px = rule_api.soa_proxy(pattern)
    assert (px.before, px.after) == ("ga301_aos", "ga301_soa")
    assert "PROXY" in px.source and "PROXY" in px.spec_before and "PROXY" in px.spec_after
    thresholds = [None, 512] if pattern is PAT_2D else [None, 256, None]
    want, loads = reference(pattern, thresholds)
    got = run_proxy(px, tmp_path)
    for kernel in (px.before, px.after):
        out, lanes, _ = got[kernel]
        np.testing.assert_array_equal(out, want, err_msg=kernel)
        assert lanes == loads, kernel  # every load the pattern asks for, none dropped
    assert (want != 0).sum() > 0


@needs_nvcc
def test_packed_proxy_reads_one_word_for_the_packed_fields(tmp_path):
    # 3-word elements, fields a (word 0) and c (word 2) packed: 2 words per element after
    packing = rule_api.plan_packing([("a", 0, 2), ("c", 8, 5)])
    assert packing is not None
    px = rule_api.packed_proxy(PAT_2D, packing)
    assert px is not None and "#define WORDS2 2u" in px.source
    want, loads = reference(PAT_2D, [None, 512], scale=2)
    got = run_proxy(px, tmp_path)
    out_b, lanes_b, _ = got["ga302_unpacked"]
    out_a, lanes_a, _ = got["ga302_packed"]
    np.testing.assert_array_equal(out_b, want)
    np.testing.assert_array_equal(out_a, want)
    visits = reference(dataclasses.replace(PAT_2D, fields=PAT_2D.fields[:1]), [None])[1]
    assert lanes_b == loads and lanes_a == visits  # one load per visit once packed
    assert 'packed = { type = "unsigned", count = 280, fill = "iota" }' in px.spec_after
    assert 'cells = { type = "unsigned", count = 420, fill = "iota" }' in px.spec_before
    # a packing none of whose fields the line reads has no proxy
    other = rule_api.plan_packing([("x", 4, 1), ("y", 16, 1)])
    assert other is not None and rule_api.packed_proxy(PAT_2D, other) is None


@needs_nvcc
def test_tile_proxy_stages_the_window_once(tmp_path):
    px = rule_api.tile_proxy(PAT_2D)
    assert isinstance(px, rule_findings.Proxy) and (px.before, px.after) == (
        "ga305_global",
        "ga305_tile",
    )
    want, loads = reference(PAT_2D, [None, 512])
    got = run_proxy(px, tmp_path)
    out_g, lanes_g, _ = got["ga305_global"]
    out_t, lanes_t, smem = got["ga305_tile"]
    np.testing.assert_array_equal(out_g, want)
    np.testing.assert_array_equal(out_t, want)
    assert lanes_g == loads
    # the tile: 8 + 2 by 4 + 2 elements per block (a halo of 1), both fields, rows padded to
    # 40 words (= 8 mod 32: the 4 rows of a warp in different banks): 2 x 6 x 40 x 4 bytes
    assert smem == 2 * 6 * 40 * 4
    inside = 0
    for by in range(2):
        for bx in range(3):
            for wy in range(6):
                for wx in range(10):
                    gx, gy = bx * 8 - 1 + wx, by * 4 - 1 + wy
                    inside += 0 <= gx < 20 and 0 <= gy < 7
    assert lanes_t == 2 * inside  # each window element's fields loaded once per block
    assert (
        rule_api.tile_pitch(10, 8) == 40
        and rule_api.tile_pitch(20, 16) == 48
        and rule_api.tile_pitch(40, 32) == 40
    )
    assert isinstance(rule_api.tile_proxy(PAT_1D), str)


# ---------------------------------------------------------------------------------------------
# Stores and read-modify-writes (GA301's `p[i].x += p[i].vx * dt`)

FL = tview.FieldLoad
# 32-byte elements, one thread per element (80 of 96 threads inside): loads x (word 0), vx
# (word 3), a uint2 `w` (words 4..5) for a quarter of the visits; stores x back, and a uint2 `ab`
# (words 6..7) that no load reads, for half of the visits
PAT_RMW = dataclasses.replace(
    PAT_1D,
    count=80,
    pitch=80,
    offsets=((0, 0),),
    fields=(FL(0, 1, 1.0, "x"), FL(3, 1, 1.0, "vx"), FL(4, 2, 0.25, "w")),
)
STORES_RMW = (FL(0, 1, 1.0, "x"), FL(6, 2, 0.5, "ab"))


def reference_stores(
    p: tview.Pattern, loads: list[int | None], stores: tuple[Any, ...]
) -> tuple[np.ndarray, dict[int, int], int]:
    """What both kernels of a store proxy must do: (out per thread, the value of each stored
    logical word, the number of stored fields) by the rules of gpuadvise.rules.proxy."""
    out = np.zeros(p.threads, np.uint32)
    stored: dict[int, int] = {}
    n_stores = 0
    ((dx, _),) = p.offsets
    for x in range(p.threads_x):
        e = x + dx
        if not 0 <= e < p.count:
            continue
        acc = 0
        first = e * p.words + p.fields[0].word if p.fields else 0
        for j, f in enumerate(p.fields):
            if j and loads[j] is not None and not pick(first, j, loads[j]):
                break
            for c in range(f.words):
                acc = (acc * proxy_mod.FOLD + e * p.words + f.word + c) & M32
        for j, f in enumerate(stores):
            share = round(f.share * 1024)
            if f.share < 0.98 and not pick(e, 16 + j, share):
                continue
            n_stores += 1
            value = acc
            for c in range(f.words):
                stored[e * p.words + f.word + c] = (value + c) & M32
                acc = (acc * proxy_mod.FOLD + e * p.words + f.word + c) & M32
        out[x] = acc
    return out, stored, n_stores


def run_store_proxy(px: rule_findings.Proxy, tmp: Path) -> dict[str, Any]:
    """Both kernels of a store proxy on the emulator, every CTA, the written buffer read back
    too: per kernel (out, written buffer, global load lanes, global store lanes)."""
    from gpuadvise.analyze.measure import write_proxy
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    assert "output = false" in px.spec_before and "output = false" in px.spec_after
    shown = dataclasses.replace(
        px,
        spec_before=px.spec_before.replace("output = false", "output = true"),
        spec_after=px.spec_after.replace("output = false", "output = true"),
    )
    src, before, after = write_proxy(shown, tmp)
    got = {}
    for kernel, spec, buf in ((px.before, before, "aos"), (px.after, after, "soa")):
        an = rulekit.compiled(src, kernel, spec=str(spec))
        launch = resolve(an.spec, parse_signature(src.read_text(), kernel))
        e = emulate(an.module, an.kernel, launch, an.device, sample_ctas="all")
        r = e.trace.records
        glob = r[r["space"] == int(Space.GLOBAL)]

        def lanes(kind: Kind, glob: Any = glob) -> int:
            return int(sum(bin(int(m)).count("1") for m in glob[glob["kind"] == int(kind)]["mask"]))

        got[kernel] = (e.outputs["out"], e.outputs[buf], lanes(Kind.LOAD), lanes(Kind.STORE))
    return got


@needs_nvcc
@pytest.mark.parametrize("case", ["rmw", "store-only"])
def test_soa_proxy_stores_the_same_values_in_both_layouts(case, tmp_path):
    if case == "rmw":
        merged = rule_api.merge_stores(PAT_RMW, dataclasses.replace(PAT_RMW, fields=STORES_RMW))
        loads_thr: list[int | None] = [None, None, 256]
    else:
        merged = rule_api.merge_stores(None, dataclasses.replace(PAT_RMW, fields=STORES_RMW))
        loads_thr = []
    assert not isinstance(merged, str)
    pattern, stores = merged
    assert stores == STORES_RMW and len(pattern.fields) == len(loads_thr)
    px = rule_api.soa_proxy(pattern, stores)
    assert "unsigned* __restrict__ aos" in px.source and "const unsigned* __restrict__ aos" not in (
        px.source
    )
    want_out, want_stored, n_stores = reference_stores(pattern, loads_thr, stores)
    n_loads = reference(pattern, loads_thr)[1] if pattern.fields else 0
    got = run_store_proxy(px, tmp_path)
    out_b, aos, loads_b, stores_b = got["ga301_aos"]
    out_a, soa, loads_a, stores_a = got["ga301_soa"]
    np.testing.assert_array_equal(out_b, want_out)
    np.testing.assert_array_equal(out_a, want_out)
    assert loads_b == loads_a == n_loads
    assert stores_b == stores_a == n_stores + 80  # the stores asked for, and `out`'s
    assert 0 < n_stores < 2 * 80  # x every time, ab for a share of the elements
    # the old layout: the stored words hold their values, every other word its index (iota)
    words = pattern.words
    want_aos = np.arange(80 * words, dtype=np.uint32)
    for logical, value in want_stored.items():
        want_aos[logical] = value
    np.testing.assert_array_equal(aos, want_aos)
    # the new layout: field by field, the same values in each field's array (256-byte aligned,
    # the loaded fields' arrays first: x, vx, w, then ab; the store-only case: x, ab)
    arrays = [(f.word, f.words) for f in pattern.fields]
    arrays += [(f.word, f.words) for f in stores if (f.word, f.words) not in arrays]
    at = 0
    for word, n in arrays:
        for e in range(80):
            for c in range(n):
                logical = e * words + word + c
                assert soa[at + e * n + c] == want_stored.get(logical, at + e * n + c), (word, e, c)
        at += -(-80 * n // 64) * 64
    assert len(soa) == at


def test_merge_stores_refuses_what_it_cannot_reproduce():
    store = dataclasses.replace(PAT_RMW, fields=STORES_RMW)
    # threads that store to several elements would write each other's
    why = rule_api.merge_stores(None, dataclasses.replace(store, offsets=((0, 0), (1, 0))))
    assert isinstance(why, str) and "several elements" in why
    why = rule_api.merge_stores(PAT_RMW, dataclasses.replace(store, offsets=((1, 0),)))
    assert isinstance(why, str) and "other elements" in why
    # a scalar store into the uint2 the line loads
    why = rule_api.merge_stores(PAT_RMW, dataclasses.replace(store, fields=(FL(5, 1, 1.0, "w1"),)))
    assert isinstance(why, str) and "overlaps the load of w" in why
    assert rule_api.merge_stores("a 3-D launch", store) == "a 3-D launch"
    assert rule_api.merge_stores(PAT_RMW, "a 3-D launch") == "stores: a 3-D launch"


def _ga301(source: Path, kernel: str, args: tuple[str, ...] = ()) -> list[rule_api.Finding]:
    from rulekit import run_rule

    return run_rule(_analysis(source, kernel, args), "GA301", 8)


def _field_words(
    px: rule_findings.Proxy, tmp: Path, word: int, count: int, name: str
) -> tuple[Any, Any]:
    """The stored words of field ``word`` (``name``; one per element) in both layouts, after
    both kernels of ``px`` ran on the emulator with equal outputs: (old layout, new layout)."""
    got = run_store_proxy(px, tmp)
    (out_b, aos, _, _), (out_a, soa, _, _) = got[px.before], got[px.after]
    np.testing.assert_array_equal(out_b, out_a)
    words = len(aos) // count
    store = rf"\(p \+ (\d+)u\)\[e\] = acc;  // {name} \(stored\)"
    at = int(re.search(store, px.source).group(1))
    return aos[word::words][:count], soa[at : at + count]


@needs_nvcc
def test_ga301_on_particles_measures_the_read_modify_write(tmp_path):
    found = _ga301(KERNELS / "particles" / "particles.cu", "particles_aos", ("n=4096",))
    # the loads and stores of one array of structures at lines 18-20 are one finding, at the
    # first line (issue 27: one finding per root cause, 4748ac6); its proxy holds every line's
    # read-modify-write (x, y and z loaded and stored), not only the first line's
    assert [(f.line, f.details.kind) for f in found] == [(18, "load")]
    (f,) = found
    assert "(with lines 19, 20: the same array of structures, one change for all)" in f.message
    assert f.variant is not None and f.variant.safety == "proxy", f.variant
    assert f.variant.label == "SoA" and f.variant.proxy is not None
    assert "lines 18, 19, 20 read x, y, z, vx, vy, vz and write x, y, z" in f.variant.description
    px = f.variant.proxy
    for word, name in enumerate("xyz"):
        assert f"p[e * WORDS + {word}u] = acc;  // {name} (stored)" in px.source
    assert 'aos = { type = "unsigned", count = 32768, fill = "iota", output = false }' in (
        px.spec_before
    )
    # x, y, z, vx, vy and vz: six arrays of 4096 words
    assert 'soa = { type = "unsigned", count = 24576, fill = "iota", output = false }' in (
        px.spec_after
    )
    for word, name in enumerate("xyz"):
        old, new = _field_words(px, tmp_path / name, word, 4096, name)
        np.testing.assert_array_equal(old, new)
        assert (old != np.arange(4096) * 8 + word).all()  # every one written


CELL_STORES = """\
struct Cell {
    int type, gender, moved, age;
    float energy, food, lsa;
    int target_x, target_y;
    float trait0, trait1;
};

extern "C" __global__ void cells_age(Cell* cells, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        cells[i].moved = 0;
        cells[i].age += 1;
    }
}
"""


@needs_nvcc
def test_ga301_on_stores_of_cells_carries_a_proxy(tmp_path):
    src = tmp_path / "age.cu"
    src.write_text(CELL_STORES)
    (tmp_path / "case.toml").write_text(
        'source = "age.cu"\nkernel = "cells_age"\ngrid = "ceil_div(n, 256)"\nblock = 256\n'
        '[args]\nn = 4096\n[buffers]\ncells = "Cell[n]"\n'
    )
    found = _ga301(src, "cells_age")
    # the store of `moved` (line 11) and the read-modify-write of `age` (line 12) walk one array
    # of structures: one finding at the first line (issue 27, 4748ac6), whose proxy stores
    # both fields and loads `age` before storing it
    assert [(f.line, f.details.kind) for f in found] == [(11, "store")]
    (f,) = found
    assert "(with line 12: the same array of structures, one change for all)" in f.message
    v = f.variant
    assert v is not None and v.safety == "proxy", v
    assert "lines 11, 12 read age and write moved, age" in v.description
    assert "const unsigned v0 = p[e * WORDS + 3u];  // age" in v.proxy.source
    assert "const unsigned v1" not in v.proxy.source  # `moved` is stored, never loaded
    # the 11-word cells; the arrays of `age` and `moved`
    assert f"count = {11 * 4096}," in v.proxy.spec_before
    assert f"count = {2 * 4096}," in v.proxy.spec_after
    for word, name in ((2, "moved"), (3, "age")):
        old, new = _field_words(v.proxy, tmp_path / name, word, 4096, name)
        np.testing.assert_array_equal(old, new)
        assert (old != np.arange(4096) * 11 + word).all()  # every one written

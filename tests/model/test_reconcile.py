"""Tests of gpuadvise.model.reconcile on synthetic traces and SASS memory summaries."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from gpuadvise.model.banks import analyze_banks, wavefronts
from gpuadvise.model.coalescing import analyze_coalescing
from gpuadvise.model.reconcile import ReconcileNote, Reconciliation, reconcile
from gpuadvise.toolchain.sass import SassMemLine
from gpuadvise.trace.access import WARP, AccessTrace, InstrInfo, Kind, Space, empty_records

FULL = 0xFFFFFFFF
LANES = range(WARP)
GBASE = 0x7F00_0000_0000

AddrFn = Callable[[int, int, int], int]  # (lane, warp index in the launch, iteration) -> address


def instr(
    i: int,
    line: int = 20,
    width: int = 4,
    space: Space = Space.SHARED,
    kind: Kind = Kind.LOAD,
    file: str = "k.cu",
) -> InstrInfo:
    sp = "shared" if space == Space.SHARED else "global"
    op = {Kind.LOAD: "ld", Kind.STORE: "st", Kind.ATOMIC: "atom"}[kind]
    return InstrInfo(i, file, line, f"{op}.{sp}.b{8 * width}", space, kind, width)


def make_trace(
    instructions: Sequence[InstrInfo],
    program: Sequence[tuple[int, AddrFn]],
    warps: int = 2,
    ctas: int = 2,
    iterations: int = 1,
    mask_of: Callable[[int, int, int], int] | None = None,
) -> AccessTrace:
    """Run ``program`` (inst, address function) the way the emulator records it: for each
    iteration and instruction in order, one record per warp of every CTA."""
    rows = []
    for it in range(iterations):
        for inst, fn in program:
            for cta in range(ctas):
                for warp in range(warps):
                    g = cta * warps + warp
                    mask = FULL if mask_of is None else mask_of(inst, g, it)
                    addr = [fn(lane, g, it) if (mask >> lane) & 1 else 0 for lane in LANES]
                    rows.append((inst, cta, warp, mask, addr))
    recs = empty_records(len(rows))
    for r, (inst, cta, warp, mask, addr) in enumerate(rows):
        info = instructions[inst]
        recs[r]["inst"], recs[r]["cta"], recs[r]["warp"], recs[r]["mask"] = inst, cta, warp, mask
        recs[r]["width"], recs[r]["space"], recs[r]["kind"] = info.width, info.space, info.kind
        recs[r]["addr"] = addr
    return AccessTrace(
        records=recs,
        instructions=tuple(instructions),
        ctas=tuple(range(ctas)),
        total_ctas=ctas,
        grid=(ctas, 1, 1),
        block=(32 * warps, 1, 1),
        source="emulator",
    )


def sass(
    width_bits: int,
    count: int,
    opcode: str,
    line: int = 20,
    space: str = "shared",
    kind: str = "load",
    file: str = "k.cu",
) -> SassMemLine:
    return SassMemLine(file, line, space, kind, width_bits, count, (opcode,))  # type: ignore[arg-type]


def only_note(rec: Reconciliation) -> ReconcileNote:
    assert len(rec.notes) == 1, rec.notes
    return rec.notes[0]


# --------------------------------------------------------------------------------------------


def test_sixteen_scalar_loads_become_four_lds128() -> None:
    """HARDWARE.md §2: 16 ld.shared.f32 in PTX became 4 LDS.128 (each thread reads its 16 floats)."""
    insts = [instr(i) for i in range(16)]
    program = [(j, lambda lane, g, it, j=j: 64 * lane + 4 * j) for j in range(16)]
    trace = make_trace(insts, program)
    rec = reconcile(trace, [sass(128, 4, "LDS.128")])
    note = only_note(rec)
    assert note.action == "merged" and rec.changed
    assert (note.records_before, note.records_after) == (64, 16)
    assert note.ptx == ((4, 16),) and note.sass == ((16, 4),) and note.opcodes == ("LDS.128",)
    out = rec.records
    assert len(out) == 16 and set(out["width"].tolist()) == {16}
    assert sorted(set(out["inst"].tolist())) == [0, 4, 8, 12]
    first = out[out["inst"] == 4][0]
    assert first["addr"].tolist() == [64 * lane + 16 for lane in LANES]
    # the bank model now sees 4 LDS.128 (16 wavefronts each) instead of 16 x 16-way LDS
    before = analyze_banks(trace).traced.load
    after = analyze_banks(trace, records=rec.records).traced.load
    assert (before.instructions, before.wavefronts) == (64, 64 * 16)
    lds128 = wavefronts([64 * lane for lane in LANES], width=16)
    assert (after.instructions, after.wavefronts) == (16, 16 * lds128)
    assert rec.apply(trace).records is rec.records


def test_loop_executions_and_interleaved_warps_pair_per_warp() -> None:
    insts = [instr(i) for i in range(4)]
    program = [
        (j, lambda lane, g, it, j=j: 4096 * it + 512 * g + 16 * lane + 4 * j) for j in range(4)
    ]
    trace = make_trace(insts, program, warps=3, ctas=2, iterations=3)
    rec = reconcile(trace, [sass(128, 1, "LDS.128")])
    assert only_note(rec).action == "merged"
    out = rec.records
    assert len(out) == 3 * 2 * 3
    assert (out["width"] == 16).all() and (out["inst"] == 0).all()
    # every warp's own address in every iteration
    for r in out:
        g = int(r["cta"]) * 3 + int(r["warp"])
        assert int(r["addr"][1]) % 4096 == 512 * g + 16


def test_counts_already_matching_are_left_alone() -> None:
    insts = [instr(0), instr(1, width=16)]
    program = [(0, lambda lane, g, it: 4 * lane), (1, lambda lane, g, it: 16 * lane)]
    trace = make_trace(insts, program)
    rec = reconcile(trace, [sass(32, 1, "LDS"), sass(128, 1, "LDS.128")])
    assert only_note(rec).action == "match" and not rec.changed
    assert np.array_equal(rec.records, trace.records)
    assert rec.records is trace.records  # nothing rewritten: the trace is not copied (issue 17)


def test_chain_cut_at_alignment_into_mixed_widths() -> None:
    # each thread reads floats 1, 2, 3, 4 of a 16-byte aligned row: ptxas can pair 2 and 3 only
    insts = [instr(i) for i in range(4)]
    program = [(j, lambda lane, g, it, j=j: 32 * lane + 4 + 4 * j) for j in range(4)]
    trace = make_trace(insts, program, ctas=1, warps=1)
    rec = reconcile(trace, [sass(32, 2, "LDS"), sass(64, 1, "LDS.64")])
    note = only_note(rec)
    assert note.action == "merged"
    assert rec.records["width"].tolist() == [4, 8, 4]
    assert rec.records["inst"].tolist() == [0, 1, 3]
    assert "insts 1+2 -> 8 B" in note.detail


def test_reversed_program_order_merges() -> None:
    # acc = row[3] + row[2] + row[1] + row[0]: ptxas still makes one LDS.128
    insts = [instr(i) for i in range(4)]
    program = [(j, lambda lane, g, it, j=j: 16 * lane + 4 * (3 - j)) for j in range(4)]
    trace = make_trace(insts, program)
    rec = reconcile(trace, [sass(128, 1, "LDS.128")])
    assert only_note(rec).action == "merged"
    out = rec.records
    assert len(out) == 4 and (out["inst"] == 3).all() and (out["width"] == 16).all()
    assert out["addr"][0][:2].tolist() == [0, 16]


def test_misaligned_chain_is_unresolved() -> None:
    insts = [instr(i) for i in range(4)]
    program = [(j, lambda lane, g, it, j=j: 32 * lane + 4 + 4 * j) for j in range(4)]
    trace = make_trace(insts, program)
    rec = reconcile(trace, [sass(128, 1, "LDS.128")])
    note = only_note(rec)
    assert note.action == "unresolved" and "aligned" in note.detail
    assert np.array_equal(rec.records, trace.records)


def test_different_masks_do_not_merge() -> None:
    insts = [instr(i) for i in range(2)]
    program = [(j, lambda lane, g, it, j=j: 8 * lane + 4 * j) for j in range(2)]

    def mask_of(inst: int, g: int, it: int) -> int:
        return 0xFFFF if (inst == 1 and g == 3) else FULL

    trace = make_trace(insts, program, mask_of=mask_of)
    rec = reconcile(trace, [sass(64, 1, "LDS.64")])
    assert only_note(rec).action == "unresolved"
    assert len(rec.records) == len(trace.records)


def test_stores_and_global_loads_merge_too() -> None:
    insts = [instr(i, space=Space.GLOBAL) for i in range(4)] + [
        instr(4 + i, line=21, kind=Kind.STORE) for i in range(2)
    ]
    program = [(j, lambda lane, g, it, j=j: GBASE + 16 * (32 * g + lane) + 4 * j) for j in range(4)]
    program += [(4 + j, lambda lane, g, it, j=j: 8 * lane + 4 * j) for j in range(2)]
    trace = make_trace(insts, program)
    rec = reconcile(
        trace,
        [
            sass(128, 1, "LDG.E.128", space="global"),
            sass(64, 1, "STS.64", line=21, kind="store"),
        ],
    )
    assert [n.action for n in rec.notes] == ["merged", "merged"]
    assert [(n.line, n.space, n.kind) for n in rec.notes] == [
        (20, "global", "load"),
        (21, "shared", "store"),
    ]
    before = analyze_coalescing(trace).traced.load
    after = analyze_coalescing(trace, records=rec.records).traced.load
    assert (before.requests, before.sectors) == (16, 4 * 16 * 4)  # 16 B apart: 16 sectors each
    assert (after.requests, after.sectors, after.ideal) == (4, 4 * 16, 4 * 16)


def test_vector_access_split_into_narrower_sass() -> None:
    insts = [instr(0, width=16)]
    trace = make_trace(insts, [(0, lambda lane, g, it: 16 * lane)], ctas=1, warps=1)
    trace.records["mask"][0] = 0x7FFFFFFF
    trace.records["addr"][0][31] = 0
    rec = reconcile(trace, [sass(64, 2, "LDS.64")])
    note = only_note(rec)
    assert note.action == "split" and (note.records_before, note.records_after) == (1, 2)
    out = rec.records
    assert out["width"].tolist() == [8, 8]
    assert out["addr"][0][:3].tolist() == [0, 16, 32]
    assert out["addr"][1][:3].tolist() == [8, 24, 40]
    assert out["addr"][1][31] == 0  # an inactive lane keeps 0


def test_unexecuted_instructions_count_in_the_totals() -> None:
    # 8 scalar loads at the line, only the first 4 executed (the others sit in a branch not taken)
    insts = [instr(i) for i in range(8)]
    program = [(j, lambda lane, g, it, j=j: 16 * lane + 4 * j) for j in range(4)]
    trace = make_trace(insts, program)
    rec = reconcile(trace, [sass(128, 2, "LDS.128")])
    assert only_note(rec).action == "merged"
    assert len(rec.records) == 4 and (rec.records["width"] == 16).all()


def test_no_sass_sass_only_and_byte_mismatch() -> None:
    insts = [instr(0, kind=Kind.ATOMIC, width=8), instr(1, line=30), instr(2, line=40)]
    program = [(i, lambda lane, g, it: 8 * lane) for i in range(3)]
    trace = make_trace(insts, program)
    rec = reconcile(
        trace,
        [
            # a 64-bit shared atomic add: ptxas's compare-and-swap loop
            sass(64, 1, "LDS.64"),
            sass(64, 1, "ATOMS.CAST.SPIN.64", kind="atomic"),
            sass(64, 1, "LDS.64", line=40),
        ],
    )
    got = {(n.line, n.kind): n.action for n in rec.notes}
    assert got == {
        (20, "atomic"): "match",
        (20, "load"): "sass-only",
        (30, "load"): "no-sass",
        (40, "load"): "unresolved",
    }
    assert not rec.changed and np.array_equal(rec.records, trace.records)


def test_generic_sass_stands_in_and_paths_are_normalized() -> None:
    insts = [instr(i, file="/home/u/proj/./src/k.cu") for i in range(2)]
    program = [(j, lambda lane, g, it, j=j: 8 * lane + 4 * j) for j in range(2)]
    trace = make_trace(insts, program)
    rec = reconcile(trace, [sass(64, 1, "LD.E.64", space="generic", file="src/k.cu")])
    note = only_note(rec)
    assert note.action == "merged" and note.file == "src/k.cu"
    # a base name shared by two SASS files is ambiguous: no match
    rec2 = reconcile(
        trace,
        [sass(64, 1, "LDS.64", file="a/k.cu"), sass(64, 1, "LDS.64", file="b/k.cu")],
    )
    assert {n.action for n in rec2.notes} == {"no-sass", "sass-only"}


def test_notes_round_trip_and_empty_trace() -> None:
    insts = [instr(i) for i in range(2)]
    program = [(j, lambda lane, g, it, j=j: 8 * lane + 4 * j) for j in range(2)]
    trace = make_trace(insts, program)
    note = only_note(reconcile(trace, [sass(64, 1, "LDS.64")]))
    assert ReconcileNote.from_dict(json.loads(json.dumps(note.to_dict()))) == note
    empty = AccessTrace(empty_records(), (), (0,), 1, (1, 1, 1), (32, 1, 1), "emulator")
    assert len(reconcile(empty, []).records) == 0


@pytest.mark.parametrize("n_floats, sass_bits, count", [(2, 64, 1), (4, 128, 1), (8, 128, 2)])
def test_reconciled_bank_counts_match_the_sass_widths(
    n_floats: int, sass_bits: int, count: int
) -> None:
    insts = [instr(i) for i in range(n_floats)]
    program = [(j, lambda lane, g, it, j=j: 4 * n_floats * lane + 4 * j) for j in range(n_floats)]
    trace = make_trace(insts, program, ctas=1, warps=1)
    rec = reconcile(trace, [sass(sass_bits, count, f"LDS.{sass_bits}")])
    res = analyze_banks(trace, records=rec.records)
    assert res.traced.load.instructions == count
    per = wavefronts([4 * n_floats * lane for lane in LANES], width=sass_bits // 8)
    assert res.traced.load.wavefronts == count * per


# --------------------------------------------------------------------------------------------
# With the SASS of a real compile (needs nvcc and nvdisasm; skipped without them)

ROWSUM_CU = """\
__global__ void rowsum(const float* in, float* out) {
  __shared__ __align__(16) float s[32 * 16];
  int t = threadIdx.x;
  for (int i = t; i < 32 * 16; i += 32) s[i] = in[i];
  __syncthreads();
  const float* row = s + t * 16;
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < 16; ++j) acc += row[j];
  out[t] = acc;
}
"""
ROWSUM_LINE = 1 + ROWSUM_CU.splitlines().index("  for (int j = 0; j < 16; ++j) acc += row[j];")


def _real_sass(tmp_path: Path) -> tuple[str, tuple[SassMemLine, ...]]:
    from gpuadvise.errors import ToolchainError
    from gpuadvise.toolchain import (
        CompileOptions,
        compile_source,
        find_toolchain,
        select_compiled_kernel,
    )
    from gpuadvise.toolchain.sass import disassemble, memory_summary

    try:
        tc = find_toolchain()
    except ToolchainError:
        pytest.skip("no CUDA toolchain")
    if tc.nvdisasm is None:
        pytest.skip("no nvdisasm")
    src = tmp_path / "rowsum.cu"
    src.write_text(ROWSUM_CU)
    module = compile_source(src, CompileOptions(arch="sm_90", cache_dir=tmp_path / "cache"), tc)
    sass_ = disassemble(module.cubin_path, select_compiled_kernel(module, "rowsum").mangled, tc)
    return str(src), memory_summary(sass_)


@pytest.mark.toolkit
def test_real_sass_lds128_line(tmp_path: Path) -> None:
    file, summary = _real_sass(tmp_path)
    line = ROWSUM_LINE
    here = [s for s in summary if s.line == line and s.space == "shared"]
    assert [(s.kind, s.width_bits, s.count) for s in here] == [("load", 128, 4)]
    key = (line, "shared", "load")
    # NVVM vectorized the loop itself (4 ld.shared.v4.f32): the trace already matches
    vec = [instr(i, line=line, width=16, file=file) for i in range(4)]
    program = [(j, lambda lane, g, it, j=j: 64 * lane + 16 * j) for j in range(4)]
    rec = reconcile(make_trace(vec, program), summary)
    assert {(n.line, n.space, n.kind): n.action for n in rec.notes}[key] == "match"
    # had the PTX held 16 scalar loads (HARDWARE.md §2's case), they merge into the 4 LDS.128
    scalar = [instr(i, line=line, width=4, file=file) for i in range(16)]
    program = [(j, lambda lane, g, it, j=j: 64 * lane + 4 * j) for j in range(16)]
    rec = reconcile(make_trace(scalar, program), summary)
    note = next(n for n in rec.notes if (n.line, n.space, n.kind) == key)
    assert note.action == "merged" and note.opcodes == ("LDS.128",)
    assert (note.records_before, note.records_after) == (64, 16)


# --------------------------------------------------------------------------------------------
# Shared atomics as ptxas compiles them: ATOMS.POPC.INC updates each distinct word once

ATOMS_CU = """\
extern "C" __global__ void atoms(unsigned* out) {
    __shared__ unsigned s;
    __shared__ unsigned h[64];
    const unsigned t = threadIdx.x;
    if (t == 0) s = 0;
    if (t < 64) h[t] = 0;
    __syncthreads();
    atomicAdd(&s, 1u);
    atomicAdd(&h[t % 32], 1u);
    atomicAdd(&h[(t % 2) * 32], 1u);
    atomicAdd(&h[(t % 2) * 32 + 1], t);
    __syncthreads();
    if (t < 64) out[t] = h[t] + s;
}
"""


@pytest.mark.toolkit
def test_same_address_shared_atomics_are_one_access_at_the_call_site(tmp_path: Path) -> None:
    """One CTA of 2 warps. By hand, per warp (H100, benchmarks/atomics_probe): ``atomicAdd(&s,
    1u)`` (ATOMS.POPC.INC, 32 lanes on one word) 1 wavefront; ``h[t % 32]`` (POPC.INC, 32
    words in 32 banks) 1; ``h[(t % 2) * 32]`` (POPC.INC, 2 words in one bank) 2; the ``+= t``
    on ``h[(t % 2) * 32 + 1]`` (ATOMS.ADD: one update per lane, 32 in one bank) 32. Each at its
    line of the kernel, not at device_atomic_functions.hpp."""
    from gpuadvise.errors import ToolchainError
    from gpuadvise.toolchain import (
        CompileOptions,
        compile_source,
        find_toolchain,
        select_compiled_kernel,
    )
    from gpuadvise.toolchain.sass import disassemble, memory_summary
    from gpuadvise.trace.emulate import emulate_ptx

    try:
        tc = find_toolchain()
    except ToolchainError:
        pytest.skip("no CUDA toolchain")
    if tc.nvdisasm is None:
        pytest.skip("no nvdisasm")
    src = tmp_path / "atoms.cu"
    src.write_text(ATOMS_CU)
    module = compile_source(src, CompileOptions(arch="sm_90", cache_dir=tmp_path / "cache"), tc)
    summary = memory_summary(disassemble(module.cubin_path, "atoms", tc))
    atoms = [s for s in summary if s.space == "shared" and s.kind == "atomic"]
    assert [s.sequence for s in atoms] == [("ATOMS.POPC.INC.32",) * 3 + ("ATOMS.ADD",)]
    emu = emulate_ptx(
        module.ptx,
        select_compiled_kernel(module, "atoms").mangled,
        1,
        64,
        [np.zeros(64, np.uint32)],
    )
    out = emu.outputs["arg0"]
    # h[t] + s: h[0] by t = 0, 32 and the 32 even t; h[1] by t = 1, 33 and += every even t
    assert (int(out[0]), int(out[1])) == (2 + 32 + 64, 2 + sum(range(0, 64, 2)) + 64)
    rec = reconcile(emu.trace, summary)
    assert [n.action for n in rec.notes if n.space == "shared" and n.kind == "atomic"] == [
        "aggregated"
    ]
    res = analyze_banks(emu.trace, rec.records)
    line = {text.strip(): n + 1 for n, text in enumerate(ATOMS_CU.splitlines())}
    got = {
        (ln.line, ln.instructions, ln.wavefronts, ln.ideal)
        for ln in res.lines
        if ln.kind == Kind.ATOMIC
    }
    assert got == {
        (line["atomicAdd(&s, 1u);"], 2, 2, 2),
        (line["atomicAdd(&h[t % 32], 1u);"], 2, 2, 2),
        (line["atomicAdd(&h[(t % 2) * 32], 1u);"], 2, 4, 2),
        (line["atomicAdd(&h[(t % 2) * 32 + 1], t);"], 2, 64, 2),
    }
    assert {ln.file for ln in res.lines} == {str(src)}
    # unreconciled (PTX-level) the same-address increments cost one update per lane
    raw = {
        ln.line: ln.wavefronts for ln in analyze_banks(emu.trace).lines if ln.kind == Kind.ATOMIC
    }
    assert raw[line["atomicAdd(&s, 1u);"]] == 64

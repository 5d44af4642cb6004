"""Issue 31: the default sample's first CTA has its long loops sampled once it has cost the
sample's CPU bound, but not a loop whose results steer the kernel (gpuadvise.ptx.steering):
HeCBench perplexity's sigmas_kernel sums two loops to decide its bisection and the epoch loop's
break; sampled, its lanes ran 47.5 M lane instructions against the full run's 29.4 M.
tests/cuda/loops/loops.cu holds one kernel of each kind."""

from __future__ import annotations

import pytest
from loopkit import compiled

from gpuadvise.ptx.cfg import build_program
from gpuadvise.ptx.loops import find_loops
from gpuadvise.ptx.parser import Reg, parse_ptx
from gpuadvise.ptx.steering import steering_loops, steers

pytestmark = [pytest.mark.usefixtures("compile_cache"), pytest.mark.toolkit]


def _program(kernel: str):  # type: ignore[no-untyped-def]
    args = ("m=128", "n=256") if kernel == "corr_kernel" else ("n=4096",)
    module, k, _launch, _device = compiled(kernel, "1", "64", *args)
    program = build_program(parse_ptx(module.ptx), k.mangled)
    return program, [lp for lp in find_loops(program) if lp.sampleable]


def _steered_line(kernel: str) -> set[int | None]:
    """The source lines of the instructions each sampleable loop's results reach (None: it
    steers nothing)."""
    program, loops = _program(kernel)
    out = set()
    for lp in loops:
        i = steers(program, lp)
        out.add(None if i is None else program.instrs[i].loc.line)  # type: ignore[union-attr]
    return out


def test_a_sum_that_decides_a_break_steers() -> None:
    # bisect's inner loop (line 72): its sum decides the break at line 75
    assert _steered_line("bisect") == {75}


def test_memory_a_loop_writes_steers_a_branch_that_reads_it() -> None:
    # tallied: the loop's atomic counts in shared memory, read by the branch at line 94 after a
    # barrier (no register of the loop reaches it)
    assert _steered_line("tallied") == {94}


def test_a_count_kept_where_the_data_says_is_not_a_counter() -> None:
    # counted: c++ under a data test moves by no fixed step; it reaches the branch at line 106
    assert _steered_line("counted") == {106}


def test_sums_stored_and_counters_moved_exactly_do_not_steer() -> None:
    # the sums only reach stores; the counters, and the pointers nvcc walks by chains of adds
    # (used as an address after the loop in walked), are moved on exactly by a skip
    for kernel in ("rowsum", "corr_kernel", "walked"):
        program, loops = _program(kernel)
        assert loops, kernel
        assert steering_loops(program, loops) == frozenset(), kernel


def _swept(program, loop):  # type: ignore[no-untyped-def]
    """The answer of :func:`steers` by the plain fixpoint it stands for: every instruction swept
    again until none changes what is wrong (the worklist's reference)."""
    from gpuadvise.ptx.dataflow import MEMORY_BASES, defs_uses
    from gpuadvise.ptx.loops import dominators
    from gpuadvise.ptx.steering import (
        _READS,
        _SPACES,
        _WRITES,
        _address,
        _carried,
        _every_iteration,
        _inductions,
        _Reach,
        _spaces,
    )

    instrs = program.instrs
    carried = _carried(program, loop)
    wrong = carried - _inductions(
        program, loop, carried, _every_iteration(loop, dominators(program))
    )
    block_of = {i: blk.index for blk in program.blocks for i in range(blk.start, blk.end)}
    after = _Reach(program)
    dirty: dict[str, set[int]] = {s: set() for s in _SPACES}
    for b in loop.blocks:
        for i in range(program.blocks[b].start, program.blocks[b].end):
            if instrs[i].base in _WRITES:
                for s in _spaces(instrs[i]):
                    dirty[s] |= after(b)
    changed = True
    while changed:
        changed = False
        for i, ins in enumerate(instrs):
            dest, srcs = defs_uses(ins)
            b = block_of[i]
            tainted = any(r in wrong for r in srcs) or (
                ins.base in _READS and any(b in dirty[s] for s in _spaces(ins))
            )
            if tainted and ins.base in _WRITES:
                for s in _spaces(ins):
                    if not after(b) <= dirty[s]:
                        dirty[s] |= after(b)
                        changed = True
            if tainted and not set(dest) <= wrong:
                wrong.update(dest)
                changed = True
    for i, ins in enumerate(instrs):
        regs = []
        if ins.guard is not None and (
            ins.base in ("bra", "brx", "ret", "exit", "bar", "barrier") or ins.base in MEMORY_BASES
        ):
            regs.append(ins.guard)
        if ins.base == "brx" and ins.operands and isinstance(ins.operands[0], Reg):
            regs.append(ins.operands[0].name)
        if ins.base in MEMORY_BASES:
            regs.append(_address(ins))
        if wrong & set(regs):
            return i
    return None


def test_the_worklist_finds_what_a_sweep_to_the_fixpoint_finds() -> None:
    # every sampleable loop of the kernels above, and steering_loops' tables shared by all the
    # loops of a kernel: the same first steered instruction as the plain sweep, loop by loop
    steered = 0
    for kernel in ("bisect", "tallied", "counted", "rowsum", "corr_kernel", "walked"):
        program, loops = _program(kernel)
        want = {lp.latch: _swept(program, lp) for lp in loops}
        assert {lp.latch: steers(program, lp) for lp in loops} == want, kernel
        assert steering_loops(program, loops) == {k for k, v in want.items() if v is not None}
        steered += sum(v is not None for v in want.values())
    assert steered == 3

"""gpuadvise.ptx.chains' if-conversion: the small blocks a forward branch skips are predicated by
ptxas, so an unrolled loop whose iterations each branch around one instruction (crossEntropy's
``loss_bwd``: ``if (i == idx) res = a; else res = b;`` 81 times) is one straight line whose
independent loads overlap, not one block per iteration each waiting for its load (issue 29: the
chain miscount behind GA102's and GA303's wrong warnings there). A side block with a memory
access, or a join reached from elsewhere, keeps the blocks apart."""

from __future__ import annotations

from gpuadvise.ptx.cfg import build_program
from gpuadvise.ptx.chains import block_costs
from gpuadvise.ptx.parser import parse_ptx
from gpuadvise.ptx.pipes import LATENCY_CLASSES

GLOBAL = LATENCY_CLASSES.index("global")

HEAD = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p, .param .u64 q)
{
  .reg .pred %p<8>;
  .reg .b32 %r<9>;
  .reg .f32 %f<32>;
  .reg .b64 %rd<9>;
  ld.param.u64 %rd1, [p];
  ld.param.u64 %rd2, [q];
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
"""


def _iteration(k: int, side: str) -> str:
    """One unrolled iteration: a load, a branch around ``side``, the join's use and store."""
    return f"""
  ld.global.nc.f32 %f{k}, [%rd1+{4 * k}];
  mov.f32 %f{k + 10}, 0f00000000;
  @%p1 bra $L_{k};
  {side.format(k=k)}
$L_{k}:
  add.f32 %f{k + 20}, %f{k}, %f{k + 10};
  st.global.f32 [%rd2+{4 * k}], %f{k + 20};
"""


def _global_links(side: str, n: int = 4) -> float:
    ptx = HEAD + "".join(_iteration(k, side) for k in range(1, n + 1)) + "  ret;\n}\n"
    program = build_program(parse_ptx(ptx), "k")
    costs = block_costs(program)
    # the links a warp that runs every block adds up
    return float(costs.chain[:, GLOBAL].sum())


def test_branches_around_one_move_are_predicated_into_one_chain():
    # four independent loads, each iteration branching around a move: one global link in all
    assert _global_links("mov.f32 %f{k}0, %f{k};".replace("%f{k}0", "%f1{k}")) == 1.0


def test_a_side_block_with_a_memory_access_keeps_the_blocks_apart():
    # a store in the skipped block: not predicated, each block waits for its own load
    side = "st.global.f32 [%rd2], %f{k};"
    assert _global_links(side) == 4.0


def test_a_side_block_with_a_guarded_load_is_predicated():
    # ``if (p) r = a[k];`` unrolled: ptxas guards the load (@P LDG) and issues the four back to
    # back (kmeans find_membership's hoist: 40 predicated LDG, no branch), so one global link for
    # the four iterations' loads at the head, not one block each waiting for its load
    side = "ld.global.nc.f32 %f1{k}, [%rd2+{k}];"
    assert _global_links(side) == 1.0

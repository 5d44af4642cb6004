"""GA301's thread-per-row walks over part of each row (jenkins-hash's jk3_hash_kernel: each
thread hashes the first bytes of its own 64-byte key, lanes 64 bytes apart): found in three
spellings (a pointer walk, a macro index, a lambda), the rows of a launch of more than a wave
staged through shared memory rather than given a warp each (whose estimate measured 0.92x on
an H200 for jk3: a note), and two lines of one walk one finding.
The staged and word-major kernels of kernels/row_walk stay silent. Needs nvcc, no GPU."""

from __future__ import annotations

import textwrap
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

# the module's analyses are kept per process (_analysis): its tests run on one xdist worker
pytestmark = [pytest.mark.toolkit, pytest.mark.xdist_group(__name__)]

ROWS = KERNELS / "row_walk" / "row_walk.cu"
TRACE_CTAS = 8


@cache
def _analysis(kernel: str) -> Any:
    spec = ROWS.parent / ("case.toml" if kernel == "hash_pointer" else f"{kernel}.toml")
    return analyze(ROWS, kernel, TRACE_CTAS, spec=str(spec))


@pytest.mark.parametrize("kernel", ["hash_pointer", "hash_macro", "hash_lambda"])
def test_a_thread_hashing_part_of_its_row_is_a_thread_per_row_walk(kernel):
    (f,) = run_rule(_analysis(kernel), "GA301", TRACE_CTAS)
    assert f.details.pattern == "thread-per-row" and f.details.buffer == "keys"
    e = ev(f)
    # 10 of the row's 16 words: its first two sectors, 40 of their 64 bytes used
    assert e["warp_footprint_used_pct"] == 62.5 and e["stride_bytes"] == 64
    assert e["sectors_per_request"] == 32.0
    # two waves of CTAs: staging the rows, not a warp per row (which only queues more warps)
    assert "stage each CTA's rows through shared memory" in f.message
    assert "through shared memory" in f.variant.description
    assert f.variant.safety == "display-only"
    est = f.estimated_speedup
    assert est.kind == "upper-bound" and est.speedup >= 1.0
    assert "rows staged through shared memory" in est.method
    assert "warps_factor" not in est.inputs and "resident_warps_after" not in est.inputs


@pytest.mark.parametrize("kernel", ["hash_staged", "hash_word_major"])
def test_staged_or_word_major_keys_are_silent(kernel):
    assert run_rule(_analysis(kernel), "GA301", TRACE_CTAS) == []


JK3 = """
__global__ void jk3_like(const unsigned* __restrict__ lengths, const unsigned* __restrict__ keys,
                         unsigned* __restrict__ out, int n) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n) return;
    unsigned length = lengths[id], a = 0x9e3779b9u + length, b = a, c = a;
    const uint3* k = (const uint3*)(keys + id * 16);
    while (length > 12) {
        uint3 v = *k++;  // loop
        a += v.x; b ^= v.y; c += v.z; a = (a << 7) ^ (c >> 3); length -= 12;
    }
    uint3 v = *k;  // tail
    out[id] = a ^ b ^ c ^ v.x ^ v.y ^ v.z;
}
"""


def test_the_loop_and_the_tail_of_one_key_walk_are_one_finding(tmp_path: Path):
    src = tmp_path / "k.cu"
    src.write_text(textwrap.dedent(JK3))
    (tmp_path / "case.toml").write_text(
        'source = "k.cu"\nkernel = "jk3_like"\ngrid = 2112\nblock = 256\nseed = 1\n\n'
        "[args]\nn = 540672\n\n[buffers]\n"
        'lengths = { type = "unsigned int", count = 540672, fill = "random(40,40)" }\n'
        'keys = "unsigned int[8650752]"\nout = "unsigned int[540672]"\n'
    )
    a = analyze(src, "jk3_like", TRACE_CTAS, spec=str(tmp_path / "case.toml"))
    (f,) = [f for f in run_rule(a, "GA301", TRACE_CTAS) if f.details.buffer == "keys"]
    assert f.line == source_line(src, "// loop")
    assert f.details.pattern == "thread-per-row"
    assert f"(with line {source_line(src, '// tail')}: the same walk" in f.message


ROWS34 = """
__global__ void row_sums34(const float* __restrict__ in, float* __restrict__ out, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float s = 0.0f;
#pragma unroll 1
    for (int i = 0; i < 34; i++) s += in[t * 34 + i];  // row
    out[t] = s;
}
"""


def test_rows_that_overflow_the_l1_are_refetched_from_the_l2(tmp_path: Path):
    # kmeans feature_transpose's reads: 2048 threads an SM, each row 136 bytes over two
    # 128-byte lines: 512 KB of rows for the H100's 256 KB L1, so about half of the sectors a
    # request touches beyond its own are read again from the L2 (1.54-1.62x measured for the
    # tile transpose on an H200); 64-byte rows (hash_macro: 256 KB) about fit: next to nothing
    from gpuadvise.analyze.evaluate import rule_context
    from gpuadvise.rules import walks
    from gpuadvise.rules.config import Config

    src = tmp_path / "k.cu"
    src.write_text(textwrap.dedent(ROWS34))
    (tmp_path / "case.toml").write_text(
        'source = "k.cu"\nkernel = "row_sums34"\ngrid = 2112\nblock = 256\nseed = 1\n\n'
        '[args]\nn = 540672\n\n[buffers]\nin = "float[18382848]"\nout = "float[540672]"\n'
    )
    a = analyze(src, "row_sums34", TRACE_CTAS, spec=str(tmp_path / "case.toml"))
    (f,) = [f for f in run_rule(a, "GA301", TRACE_CTAS) if f.details.buffer == "in"]
    assert f.line == source_line(src, "// row") and f.details.pattern == "thread-per-row"
    ctx = rule_context(a, Config(trace_ctas=TRACE_CTAS, select=("GA301",)))
    lanes, recs = f.details.access(ctx)
    view = ctx.trace_view
    waste = view.weighted(recs, view.rec_sectors) - view.weighted(recs, view.rec_ideal)
    got = walks.row_refetch(ctx, "in", lanes, recs)
    assert 0.3 * waste < got < 0.7 * waste
    assert f.estimated_speedup.inputs["point_speedup"] > 1.05  # a warning, not a note
    b = _analysis("hash_macro")
    ctx = rule_context(b, Config(trace_ctas=TRACE_CTAS, select=("GA301",)))
    (g,) = run_rule(b, "GA301", TRACE_CTAS)
    lanes, recs = g.details.access(ctx)
    view = ctx.trace_view
    waste = view.weighted(recs, view.rec_sectors) - view.weighted(recs, view.rec_ideal)
    assert walks.row_refetch(ctx, "keys", lanes, recs) < 0.05 * waste  # 256 KB: at the edge


def test_a_stencils_shared_window_is_held_once_not_per_reader():
    """kernels/cells cells_fields: each thread reads four fields of its own 44-byte cell and of
    its 24 neighbours'. Per thread (thread, line) pairs: about 30 lines, 2048 threads an SM,
    7.5 MB of "rows" for a 256 KB L1, which read every wasted sector again from the L2 (the
    model's L2 term 140 us on the H200 for a kernel measured at 43 us). A line many of the
    CTA's threads read is one line of the L1 for them all (counted as two rows' boundary):
    the CTA's 20 x 20 window of cells, about 150 lines, each counted twice: 1.2 a thread."""
    from gpuadvise.analyze.evaluate import rule_context
    from gpuadvise.rules import walks
    from gpuadvise.rules.config import Config

    src = KERNELS / "cells" / "cells.cu"
    a = analyze(src, "cells_fields", TRACE_CTAS, spec=str(src.parent / "case.toml"))
    ctx = rule_context(a, Config(trace_ctas=TRACE_CTAS, select=("GA301",)))
    (f,) = [f for f in run_rule(a, "GA301", TRACE_CTAS) if f.details.buffer == "cells"]
    assert f.details.pattern == "field-walk"
    lanes, recs = f.details.access(ctx)
    view = ctx.trace_view
    waste = view.weighted(recs, view.rec_sectors) - view.weighted(recs, view.rec_ideal)
    assert walks.row_refetch(ctx, "cells", lanes, recs) < 0.3 * waste

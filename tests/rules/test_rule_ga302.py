"""GA302 unpacked-fields on the cells kernels (the first 8 CTAs of the bundled launches; numbers
derived by hand), its option, kernels it leaves alone (full-width fields, packed words), a
bit-field packing, and its proxy: the unpacked and packed kernels compile and fold the same
logical indices on the CPU emulator. Needs nvcc (the toolkit wheels), no GPU."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rulekit
from rulekit import KERNELS, ev, isolated_cache, needs_toolkit, run_rule

import gpuadvise.rules as rule_api

pytestmark = needs_toolkit

CELLS = KERNELS / "cells" / "cells.cu"
TRACE_CTAS = 8

_cache = isolated_cache("ga302-cache")


def analyze(source: Path, kernel: str, args: tuple[str, ...] = ()) -> Any:
    return rulekit.analyze(source, kernel, TRACE_CTAS, args)


def ga302(a: Any, **options: Any) -> list[rule_api.Finding]:
    return run_rule(a, "GA302", TRACE_CTAS, **options)


@pytest.fixture(scope="module")
def fields_analysis() -> Any:
    return analyze(CELLS, "cells_fields")


def test_cells_fields_narrow_fields(fields_analysis):
    f67, f74 = ga302(fields_analysis)
    assert (f67.line, f74.line) == (67, 74)
    # the kernel uses type & 3, gender & 1, moved & 1, age & 255 (and (age & 255) >= 16)
    assert "type (2 bits), gender (1 bit), moved (1 bit), age (8 bits)" in f67.message
    assert "type (2 bits), gender (1 bit), age (8 bits)" in f74.message
    e67, e74 = ev(f67), ev(f74)
    assert (e67["narrow_fields_loaded"], e74["narrow_fields_loaded"]) == (4, 3)
    assert e67["max_used_bits"] == 8 and e67["loads_per_element"] == 4
    # 4 fields of 4 bytes become one word: 44 - 12 bytes
    assert (e67["element_bytes"], e67["packed_element_bytes"]) == (44, 32)
    # line 67: every thread reads all four of its own cell: 8 CTAs x 256 threads
    assert e67["visits_with_two_or_more"] == 2048
    layout = "type bits 0..7, gender bits 8..15, moved bits 16..23, age bits 24..31"
    assert layout in f67.message and layout in f74.message
    assert "44 to 32 bytes" in f67.message


def test_cells_fields_estimate(fields_analysis):
    f67, _ = ga302(fields_analysis)
    est = f67.estimated_speedup
    assert est is not None and est.kind == "upper-bound" and "roofline" in est.method
    # three of the four loads go: each 64 requests of 32 sectors in 12 lines (lanes 44 bytes
    # apart: 1,408 bytes from a 128-byte line's start), max(64, 2048 / 4, 64 x 12) = 768 cycles
    assert est.inputs["saved_cycles_sampled"] == 3 * 768
    i = est.inputs
    assert i["model"] == "execution" and i["after_l1_us"] < i["before_l1_us"]
    # The execution model (issue 29; since 36060ab a strided load waits for the L2 on its
    # chain, its L1 miss fraction that of its requests) finds this launch bound by its
    # dependent chains, which dropping loads at line 67 leaves as they are: the point is 1.00x.
    # The bound is 1.23x (1.075x before the bound allowed the model's error, 15% on the
    # launch before; 1.00x before issue 29's 2.5-norm; 1.09x on the launch roofline, l1-bound):
    # the launch before, its latency and throughput sides added in part, against the after
    # side at peak, their maximum. The gain the change does have is the line's,
    # which the per-line proxy carries and a proxy measurement is held against
    # (docs/accuracy.md: measured 1.22x on an H100).
    # Since the eleventh session (s11-fuse: a chain's L1 misses by its requests, not by the
    # sectors the L2 sends) the chains are shorter (25 us) and the launch is bound by its L1 on
    # both sides (72 -> 67 us on the H100 model; the kernel measures 48 us on an H200, so the L1
    # term is too long here: docs/accuracy.md); the chains stay as they are
    assert i["bound_by_before"] == i["bound_by_after"] == "l1"
    assert i["after_dependency_us"] == i["before_dependency_us"]
    # 1.405x from s8-est to the tenth session, with the launch dependency-bound; 1.295x until
    # the thirteenth session, whose SASS counts (fewer integer instructions than the PTX's)
    # shorten the issue side the L1 term partly overlaps: 1.277x (still over the 1.22x measured)
    assert est.speedup == pytest.approx(1.277, abs=0.005)
    # the L1's share of the before side (its throughput side, added in part) now moves: 1.06x
    assert i["point_speedup"] == pytest.approx(1.06, abs=0.005)
    assert i["proxy_bound_speedup"] > 1.0
    assert re.search(r"per-line proxy .*: point \d+\.\d\dx, bound \d+\.\d\dx", est.method)


def test_option_max_field_bits(fields_analysis):
    # at 1 bit only gender and moved are narrow: both are read at line 67, only gender at 74
    (f,) = ga302(fields_analysis, max_field_bits=1)
    assert f.line == 67 and "gender (1 bit), moved (1 bit)" in f.message
    assert "gender bits 0..7, moved bits 8..15" in f.message


@pytest.mark.parametrize("kernel", ["cells_packed", "cells_soa", "cells_soa_tiled"])
def test_packed_kernels_are_clean(kernel):
    assert ga302(analyze(CELLS, kernel)) == []


SRC = """
struct Part { int kind, flags, level, side, phase; float w; int total; };

extern "C" __global__ void parts(const Part* __restrict__ p, unsigned* __restrict__ out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Part& q = p[i];
    const unsigned small = (q.kind & 7) | (q.flags & 7) << 3 | (q.level & 7) << 6 | (q.side & 7) << 9 | (q.phase & 7) << 12;
    out[i] = small + (unsigned)q.total;
}

extern "C" __global__ void sums(const Part* __restrict__ p, unsigned* __restrict__ out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = (unsigned)(p[i].kind + p[i].flags * p[i].total);
}
"""  # noqa: E501


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SRC as ``parts.cu`` with each kernel's launch (``parts.toml``, ``sums.toml``) beside it,
    written once for the module: one compile for its two kernels' tests (a kernel written to a
    new folder compiles again: the path is in the compile cache's key)."""
    tmp = tmp_path_factory.mktemp("ga302-parts")
    src = tmp / "parts.cu"
    src.write_text(SRC)
    for kernel in ("parts", "sums"):
        (tmp / f"{kernel}.toml").write_text(
            f'source = "parts.cu"\nkernel = "{kernel}"\ngrid = "ceil_div(n, 128)"\nblock = 128\n'
            '[args]\nn = 8192\n[buffers]\np = "Part[n]"\nout = "unsigned[n]"\n'
        )
    return src


def test_five_fields_of_three_bits_pack_as_bit_fields(parts):
    (f,) = ga302(analyze(parts, "parts"))
    assert f.line == 8
    assert "kind (3 bits), flags (3 bits), level (3 bits), side (3 bits), phase (3 bits)" in (
        f.message
    )
    assert (
        "kind bits 0..2, flags bits 3..5, level bits 6..8, side bits 9..11, phase bits 12..14"
        in (f.message)
    )
    assert ev(f)["packed_element_bytes"] == 28 - 16
    v = f.variant
    assert v is not None and v.safety == "proxy" and v.proxy is not None
    assert "struct Part { unsigned info /* kind bits 0..2" in v.description
    assert "float w; int total; };" in v.description  # the full-width fields stay
    assert "const unsigned flags = (info >> 3) & 0x7u" in v.description


def test_full_width_fields_are_not_narrow(parts):
    # kind + flags * total: an add and a multiply use every bit
    assert ga302(analyze(parts, "sums")) == []


def test_the_proxy_compiles_and_folds_the_same_indices(fields_analysis, tmp_path):
    from gpuadvise.analyze.measure import write_proxy
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    _, f74 = ga302(fields_analysis)
    v = f74.variant
    assert v is not None and v.safety == "proxy" and v.label == "packed" and v.proxy is not None
    assert v.description.startswith("pack 4 narrow fields of `cells` into one 32-bit word, one")
    assert "struct Cell { unsigned info /* type bits 0..7" in v.description
    assert "const unsigned age = (info >> 24) & 0xffu" in v.description
    px = v.proxy
    assert (px.before, px.after) == ("ga302_unpacked", "ga302_packed")
    assert f"count = {11 * 1024 * 1024}" in px.spec_before  # 44-byte cells
    assert f"count = {8 * 1024 * 1024}" in px.spec_after  # 32-byte cells
    src, before, after = write_proxy(px, tmp_path)
    outs, loads = [], []
    for kernel, spec in ((px.before, before), (px.after, after)):
        an = rulekit.compiled(src, kernel, spec=str(spec))
        launch = resolve(an.spec, parse_signature(src.read_text(), kernel))
        e = emulate(an.module, an.kernel, launch, an.device, sample_ctas=70)
        outs.append(e.outputs["out"])
        r = e.trace.records
        loads.append(int(sum(bin(int(m)).count("1") for m in r[r["kind"] == 0]["mask"])))
    np.testing.assert_array_equal(outs[0], outs[1])
    assert np.count_nonzero(outs[0]) == 70 * 256
    # packed: one load per neighbour visit; unpacked: one more for each gender and age read
    visits = loads[1]
    assert 1.3 * visits < loads[0] < 1.45 * visits  # gender in 1/4 of the visits, age 1/8

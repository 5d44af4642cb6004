"""GA305 global-neighbour-reuse on the cells kernels (the first 8 CTAs of the bundled launches;
the thread and address counts derived by hand), its option, what it leaves alone (the tiled
kernel, uniform loads), its demotion to a note when the measured proxy shows no gain, and its
proxy: the global and shared-tile kernels compile and read the same words on the CPU emulator.
Needs nvcc (the toolkit wheels), no GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rulekit
from rulekit import KERNELS, ev, isolated_cache, needs_toolkit, run_rule

import gpuadvise.rules as rule_api
import gpuadvise.rules.findings as rule_findings
from gpuadvise.analyze import measure

pytestmark = needs_toolkit

CELLS = KERNELS / "cells" / "cells.cu"
TRACE_CTAS = 8

_cache = isolated_cache("ga305-cache")


def analyze(source: Path, kernel: str, args: tuple[str, ...] = ()) -> Any:
    return rulekit.analyze(source, kernel, TRACE_CTAS, args)


def ga305(a: Any, **options: Any) -> list[rule_api.Finding]:
    return run_rule(a, "GA305", TRACE_CTAS, **options)


@pytest.fixture(scope="module")
def soa_analysis() -> Any:
    return analyze(CELLS, "cells_soa")


# The first 8 CTAs are blocks (0..7, 0) of the 64x64 grid: rows 0..15 of the frame. A thread at
# (x, y) reads its neighbours (x + dx, y + dy), |dx|, |dy| <= 2, but itself, inside the frame.
# Neighbours in x per thread: 3, 4, then 5 (block 0: x = 0, 1, ...), 5 everywhere in blocks 1..7;
# in y: 3, 4, then 5 for y = 0, 1, 2.. 15. Pairs per block: (sum over x)(sum over y) - 256:
# block 0: 77 x 77 - 256 = 5673, blocks 1..7: 80 x 77 - 256 = 5904; all: 5673 + 7 x 5904 = 47001.
# Addresses per block: its 20x20 window clipped to the frame, rows 0..17: block 0 18 x 18 = 324,
# the others 20 x 18 = 360; all: 324 + 7 x 360 = 2844.
PAIRS, ADDRESSES = 47001, 2844


def test_cells_soa_neighbours(soa_analysis):
    (f,) = ga305(soa_analysis)
    assert f.line == 107 and f.severity == "warning"
    e = ev(f)
    assert (e["thread_address_pairs"], e["addresses"]) == (PAIRS, ADDRESSES)
    assert e["threads_per_address"] == round(PAIRS / ADDRESSES, 3)
    assert e["addresses_per_request_share"] == 1.0  # every lane its own neighbour
    assert f.recommend_only_if_faster is True
    assert rule_api.Finding.from_dict(f.to_dict()).recommend_only_if_faster is True  # survives JSON
    assert "recommended only if measured faster" in f.message


def test_cells_packed_and_fields():
    (f,) = ga305(analyze(CELLS, "cells_packed"))
    assert f.line == 90 and (ev(f)["thread_address_pairs"], ev(f)["addresses"]) == (
        PAIRS, ADDRESSES
    )  # fmt: skip
    (g,) = ga305(analyze(CELLS, "cells_fields"))
    # type is read for every neighbour; gender and age only for some (data-dependent): the
    # pairs and addresses count every field, each still read by several threads
    assert g.line == 74 and ev(g)["threads_per_address"] > 4.0


def test_the_tiled_kernel_and_uniform_loads_are_clean(tmp_path):
    assert ga305(analyze(CELLS, "cells_soa_tiled")) == []  # each window word loaded once
    src = tmp_path / "coef.cu"
    src.write_text(
        'extern "C" __global__ void taps(const float* __restrict__ coef, '
        "const float* __restrict__ in, float* __restrict__ out, int n) {\n"
        "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i >= n) return;\n"
        "    float acc = 0.0f;\n"
        "    for (int k = 0; k < 16; ++k) acc += coef[k] * in[i];\n"
        "    out[i] = acc;\n"
        "}\n"
    )
    (tmp_path / "case.toml").write_text(
        'source = "coef.cu"\nkernel = "taps"\ngrid = "ceil_div(n, 128)"\nblock = 128\n'
        '[args]\nn = 4096\n[buffers]\ncoef = "float[16]"\nin = "float[n]"\nout = "float[n]"\n'
    )
    # every thread of a CTA reads coef[k] (reuse 128), but as a uniform load, 1 address a request
    assert ga305(analyze(src, "taps")) == []
    assert len(ga305(analyze(src, "taps"), min_spread=0.0)) == 1


def test_option_min_reuse(soa_analysis):
    assert ga305(soa_analysis, min_reuse=16.5) != []
    assert ga305(soa_analysis, min_reuse=16.6) == []  # 47001 / 2844 = 16.53


def test_estimate(soa_analysis):
    (f,) = ga305(soa_analysis)
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound" and "shared tile" in est.method
    ru = f.details
    # before: max(requests, requested sectors / 4, 128-byte lines the requests touch); after: a
    # wavefront per request plus the staged sectors / 4
    lines = est.inputs["lines_sampled"]
    before = max(ru.requests, ru.requested_sectors / 4, lines)
    after = ru.requests + ru.unique_sectors / 4
    assert lines >= ru.requested_sectors / 4
    assert est.inputs["saved_cycles_sampled"] == pytest.approx(before - after)
    assert 1.0 < est.speedup < 2.0  # a packed SoA word: most of the requests' sectors are used


class Stage:
    """A measurement stage that measures every variant at ``speedup`` (interval +-1%)."""

    def __init__(self, speedup: float) -> None:
        self.speedup = speedup

    def run(self, v: rule_api.Variant) -> rule_findings.Trial:
        s = self.speedup
        m = rule_findings.Measurement(
            s, 1.0, 1 / s, "H100", s * 0.99, s * 1.01, True, 10, "proxy", v.label
        )
        return rule_findings.Trial(v.label, v.description, m, True, None)

    def run_all(self, variants: list[rule_api.Variant]) -> list[rule_findings.Trial]:
        return [self.run(v) for v in variants]


@pytest.mark.parametrize("speedup", [0.97, 1.003, 1.3])
def test_recommended_only_if_the_proxy_measures_faster(soa_analysis, speedup):
    (f,) = ga305(soa_analysis)
    g, notes = measure.measure_finding(Stage(speedup), f)  # type: ignore[arg-type]
    assert notes == [] and g.measured_speedup is not None
    assert g.measured_speedup.kind == "proxy"
    assert g.speedup_label().startswith(f"{speedup:.2f}x (proxy-measured on H100")
    if speedup * 0.99 > 1.0:
        assert g.severity == "warning" and g.message == f.message
    else:
        assert g.severity == "note" and "no gain, not recommended here" in g.message


def test_the_proxy_compiles_and_the_tile_reads_the_same_words(soa_analysis, tmp_path):
    from gpuadvise.analyze.measure import write_proxy
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    (f,) = ga305(soa_analysis)
    v = f.variant
    assert v is not None and v.safety == "proxy" and v.label == "shared tile"
    assert "20x20 window of `info`" in v.description and "rows padded to 48 words" in v.description
    px = v.proxy
    assert px is not None and (px.before, px.after) == ("ga305_global", "ga305_tile")
    src, before, after = write_proxy(px, tmp_path)
    got = []
    for kernel, spec in ((px.before, before), (px.after, after)):
        an = rulekit.compiled(src, kernel, spec=str(spec))
        launch = resolve(an.spec, parse_signature(src.read_text(), kernel))
        e = emulate(an.module, an.kernel, launch, an.device, sample_ctas=70)
        r = e.trace.records
        lanes = int(
            sum(bin(int(m)).count("1") for m in r[(r["kind"] == 0) & (r["space"] == 0)]["mask"])
        )
        got.append((e.outputs["out"], lanes, an.kernel.resources.static_smem_bytes))
    (out_g, loads_g, _), (out_t, loads_t, smem) = got
    np.testing.assert_array_equal(out_g, out_t)
    assert np.count_nonzero(out_g) == 70 * 256
    # 24 neighbours a thread from global memory, against each block's window once: the 64
    # blocks of row 0 see 18 rows of it, the 6 of row 1 all 20; in x, the first and the last
    # block of a row see 18 columns, the others 20
    assert loads_t == (2 * 18 * 18 + 62 * 20 * 18) + (18 * 20 + 5 * 20 * 20)
    # the global kernel: every (thread, neighbour) pair inside the frame, as counted above;
    # blocks 0 and 63 of row 0: 5673 each, 1..62: 5904; row 1 (5 rows of neighbours each):
    # block 0 77 x 80 - 256 = 5904, blocks 1..5 80 x 80 - 256 = 6144
    assert loads_g == 2 * 5673 + 62 * 5904 + 5904 + 5 * 6144
    assert smem == 20 * 48 * 4  # one field: the 20x20 window, rows padded to 48 words

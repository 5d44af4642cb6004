"""GA302 on small structs read or written field by field (HeCBench's gamma-correction: a 4-byte
BGRA pixel's .r, .g, .b are three byte loads and its four fields four byte stores, where one
32-bit access of the pixel would do): three spellings (fields of px[i], a macro, a pointer),
the loads and the stores each a finding with an upper-bound estimate and the whole-element
advice; a pixel accessed whole and the channels in planes of their own stay silent. Needs
nvcc, no GPU."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

pytestmark = pytest.mark.toolkit

PIXELS = KERNELS / "pixel_fields" / "pixels.cu"
TRACE_CTAS = 8


@cache
def _ga302(kernel: str) -> list[Any]:
    spec = PIXELS.parent / ("case.toml" if kernel == "grey_fields" else f"{kernel}.toml")
    return run_rule(analyze(PIXELS, kernel, TRACE_CTAS, spec=str(spec)), "GA302", TRACE_CTAS)


SPELLINGS = {
    "grey_fields": ("grey(px[i].r", "px[i].b = v;"),
    "grey_macro": ("grey(FIELD(px, i, r)", "FIELD(px, i, b) = v;"),
    "grey_pointer": ("grey(q->r", "q->b = v,"),
}


@pytest.mark.parametrize("kernel", sorted(SPELLINGS))
def test_a_pixel_read_and_written_field_by_field(kernel):
    loads, stores = _ga302(kernel)
    load_at, store_at = SPELLINGS[kernel]
    assert loads.line == source_line(PIXELS, load_at) and loads.details.kind == "load"
    assert stores.line == source_line(PIXELS, store_at) and stores.details.kind == "store"
    assert ev(loads)["accesses_per_element"] == 3 and ev(stores)["accesses_per_element"] == 4
    assert ev(loads)["element_bytes"] == 4 and ev(loads)["pattern"] == "whole-element"
    assert "3 narrow loads per element of `px`" in loads.message
    assert "partial-sector write" in stores.message
    for f in (loads, stores):
        assert f.severity == "warning"
        est = f.estimated_speedup
        assert est.kind == "upper-bound" and est.speedup >= 1.0
        assert f.variant.safety == "display-only"
        assert "__align__(4)" in f.variant.description


@pytest.mark.parametrize("kernel", ["grey_whole", "grey_planes"])
def test_a_pixel_accessed_whole_or_planes_are_silent(kernel):
    assert _ga302(kernel) == []

"""GA308 global-accumulation (nvcc, no GPU): kernels/accumulate/accumulate.cu, three spellings of
a thread accumulating into global memory in a loop (PolyBench's atax `tmp[i] += ...`, a while loop
`out[r] = out[r] + ...`, four outputs per thread in a template), reported at their
``// expect: GA308`` lines with the repeats counted by hand; the fixed kernel (the sum in a
register) and a plain element-wise store stay silent."""

from __future__ import annotations

import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "accumulate" / "accumulate.cu"
SPECS = {
    "atax_rows": "case.toml",
    "row_sums": "row_sums.toml",
    "tile_acc<4>": "tile_acc.toml",
    "row_sums_register": "row_sums_register.toml",
}


def ga308(kernel: str):
    a = analyze(SRC, kernel, 4, spec=str(SRC.parent / SPECS[kernel]))
    return run_rule(a, "GA308", trace_ctas=4)


@pytest.mark.parametrize(
    ("kernel", "marker", "repeats"),
    [
        ("atax_rows", "tmp[i] += A[i * ny + j] * x[j];", 64),  # ny iterations
        ("row_sums", "out[r] = out[r] + v[", 65),  # out[r] = 0.0, then len = 64 iterations
        ("tile_acc<4>", "acc[t * K + q] +=", 16),  # steps
    ],
)
def test_accumulation_in_global_memory_reported(kernel, marker, repeats):
    (f,) = ga308(kernel)
    assert f.line == source_line(SRC, marker)
    e = ev(f)
    assert e["stores_per_address"] == pytest.approx(repeats, rel=0.02)
    assert e["removable_store_requests"] > 0, e
    assert "register" in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "point" and est.speedup >= 1.0
    assert f.variant is not None and f.variant.safety == "display-only"


def test_the_sum_in_a_register_is_silent():
    assert ga308("row_sums_register") == []


def test_an_unrolled_body_is_one_finding(tmp_path):
    """Sixteen lines storing one buffer (HeCBench's interleave: an unrolled body adding into
    `dest_ptr->a`..`p`) are one problem: one finding, the other lines named."""
    src = tmp_path / "k.cu"
    body = "\n".join(f"            d[i].v[{q}] += s[j].v[{q}];" for q in range(16))
    src.write_text(
        "struct E { unsigned v[16]; };\n"
        "__global__ void fields(const E* s, E* d, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    for (int j = 0; j < n; j++) {\n" + body + "\n    }\n}\n"
    )
    (tmp_path / "case.toml").write_text(
        'source = "k.cu"\nkernel = "fields"\ngrid = 2\nblock = 64\n[args]\nn = 32\n'
        '[buffers]\ns = "uint[512]"\nd = "uint[2048]"\n'
    )
    (f,) = run_rule(analyze(src, "fields", 2), "GA308", trace_ctas=2)
    assert ev(f)["lines"] == 16 and "with lines" in f.message

"""GA308 global-accumulation (nvcc, no GPU): kernels/accumulate/accumulate.cu, three spellings of
a thread accumulating into global memory in a loop (PolyBench's atax `tmp[i] += ...`, a while loop
`out[r] = out[r] + ...`, four outputs per thread in a template), reported at their
``// expect: GA308`` lines with the repeats counted by hand; the fixed kernel (the sum in a
register) and a plain element-wise store stay silent."""

from __future__ import annotations

import pytest
from rulekit import KERNELS, analyze, compiled, ev, run_rule, source_line

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "accumulate" / "accumulate.cu"
SPECS = {
    "atax_rows": "case.toml",
    "row_sums": "row_sums.toml",
    "tile_acc<4>": "tile_acc.toml",
    "row_sums_register": "row_sums_register.toml",
    "count_positive": "count_positive.toml",
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
        ("count_positive", "do count[r] +=", 64),  # len iterations
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
    assert f.variant is not None
    # every one automatic: four outputs per thread, the address changing with q inside the
    # steps' loop, is not the kit's register rewrite but __restrict__ on the pointers
    assert f.variant.safety == "automatic-and-verified"
    if kernel == "tile_acc<4>":
        assert "`q` (in the index) changes in the loop" in f.variant.description
        assert "`__restrict__` on the kernel's pointer parameters" in f.variant.description


@pytest.mark.parametrize(
    ("kernel", "buffer", "has"),
    [
        ("atax_rows", "tmp", "+            tmp_acc += A[i * ny + j] * x[j];"),
        ("row_sums", "out", "+        out_acc = out_acc + v[(size_t)k * n + r];"),
        ("count_positive", "count", "+            do count_acc += v[k * n + r] > 0.0f;"),
    ],
)
def test_the_register_fix_writes_the_same_outputs(kernel, buffer, has, tmp_path):
    """Issue 28 item 1: the fix kit's accumulate_in_register on three spellings (a compound
    `+=` in a for loop under a guard, `x = x + ...` in a while loop, an increment in a do-while
    that is an unbraced if's body); the patched kernel, run over its whole launch on the CPU
    emulator, writes bit-identical outputs (the additions keep their order) and GA308 is
    silent on it."""
    import re

    import numpy as np

    from gpuadvise.source.patch import apply_unified_diff
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    (f,) = ga308(kernel)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v
    assert has in v.diff, v.diff
    assert re.search(rf"^\+\s+{buffer}\[\w+\] = {buffer}_acc;$", v.diff, re.M), v.diff
    new_dir = tmp_path / "new"
    new_dir.mkdir()
    for toml in SRC.parent.glob("*.toml"):
        (new_dir / toml.name).write_text(toml.read_text())
    new = new_dir / SRC.name
    new.write_text(apply_unified_diff(SRC.read_text(), v.diff))

    def run(src):
        a = compiled(src, kernel, spec=str(src.parent / SPECS[kernel]))
        launch = resolve(a.spec, parse_signature(src.read_text(), kernel))
        return emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False)

    want, got = run(SRC).outputs[buffer], run(new).outputs[buffer]
    assert np.count_nonzero(want) and want.tobytes() == got.tobytes()
    a = analyze(new, kernel, 4, spec=str(new_dir / SPECS[kernel]))
    assert run_rule(a, "GA308", trace_ctas=4) == []


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


def test_a_warp_load_of_32_rows_takes_the_l1_a_cycle_per_line(tmp_path):
    """Issue 29: PolyBench atax_kernel1's variant (the sum in a register) measured 0.64 ms on an
    H200 where 8 L1 cycles per load of A (its 32 sectors at 4 a cycle) made 0.15 ms: a warp's
    load of 32 rows, a float of each, takes the L1 a cycle per 128-byte line, 32. Counted by
    hand on 1024 x 1024 with 8 copies of each warp (block 32x8): per warp, the store of
    ``tmp[i] = 0`` (1 line), then per iteration the load of ``A[i * NY + j]`` (32 lines), of
    ``x[j]`` (1 sector) and the store of ``tmp[i]`` (1 line; ptxas keeps the value it stored in
    a register, no load: loads of A and x cannot change it)."""
    from gpuadvise.rules.estimates import view_traffic

    src = tmp_path / "k.cu"
    src.write_text(
        "#define NX 1024\n#define NY 1024\n"
        "__global__ void atax_kernel1(float* A, float* x, float* tmp) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < NX) {\n"
        "        tmp[i] = 0;\n"
        "        for (int j = 0; j < NY; j++) tmp[i] += A[i * NY + j] * x[j];\n"
        "    }\n}\n"
    )
    (tmp_path / "case.toml").write_text(
        'source = "k.cu"\nkernel = "atax_kernel1"\ngrid = "32"\nblock = "32x8"\n\n'
        '[buffers]\nA = "float[1024*1024]"\nx = "float[1024]"\n'
        'tmp = { type = "float", count = 1024, fill = "zeros" }\n'
    )
    a = analyze(src, "atax_kernel1", 2, spec=str(tmp_path / "case.toml"))
    from gpuadvise.trace.view import trace_view

    v = trace_view(a.memory.trace, a.spec)
    warps = 32 * 8
    assert view_traffic(a.device, v).l1_cycles == pytest.approx(warps * (1 + 1024 * 34), rel=1e-3)
    (f,) = run_rule(a, "GA308")
    est = f.estimated_speedup
    # A's loads keep the L1 busy on both sides: the register saves 1 of 34 cycles an iteration
    assert est.inputs["bound_by_before"] == "l1" == est.inputs["bound_by_after"]
    assert 1.0 <= est.speedup < 1.3


def test_accumulations_are_made_once_per_view_and_threshold():
    """GA308's detect and GA309's accumulation_reloads ask for the same accumulations of one
    view: made once (the same dict), again for another ``min_repeats``; the repeats are the
    stores over the distinct thread addresses (atax_rows: 64 iterations, tmp[i] = 0 first)."""
    from gpuadvise.rules.repeats import accumulations
    from gpuadvise.trace.view import trace_view

    a = analyze(SRC, "atax_rows", 4, spec=str(SRC.parent / SPECS["atax_rows"]))
    v = trace_view(a.memory.trace, a.spec)

    def mine(f: str | None) -> bool:
        return f is not None and f.endswith("accumulate.cu")

    got = accumulations(v, mine)
    assert accumulations(v, mine) is got
    ((b, (acc,)),) = got.items()
    assert acc.repeats >= 64 and len(acc.keys) == len(set(acc.keys.tolist()))
    st, _ = v.access(acc.store_insts, b)
    assert isinstance(acc.repeats, float) and acc.repeats == len(st) / len(acc.keys)
    assert accumulations(v, mine, 1000.0) == {} and accumulations(v, mine) is got

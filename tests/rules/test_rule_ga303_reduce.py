"""GA303's rewrite of a block-stride loop that reduces (issue 28; nvcc, no GPU): the narrow loads
of kernels/vectorize/reduce_rows.cu (a CTA per row of floats, one 4-byte load per iteration into
a count, a sum or a maximum the block combines) taken 4 at a time with one 16-byte load, the
reduction kept as the kernel wrote it (gpuadvise.source.fixkit_reduce). Three spellings (a macro
stride, an ``unsigned`` index and ``n++``; a one-line ``+=`` of a comparison at ``blockIdx.x *
d``; ``m = fmaxf(m, v)`` at ``row * d``) get an automatic variant whose patched kernel, run over
its whole launch on the CPU emulator with rows not a multiple of 4 long (odd rows unaligned: the
scalar path) and with aligned rows and a tail, writes bit-identical outputs. A float sum is
rewritten too, its outputs equal within the tolerance, unless the launch asks for exact ones. What is not an
order-free reduction (a running prefix, a value read in the loop, two kinds of update, a
grid-stride loop's partials, a change inside a larger expression, a shared variable) is refused
with the reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rulekit import KERNELS, analyze, run_rule

import gpuadvise.rules as rule_api

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "vectorize" / "reduce_rows.cu"


def narrow(src: Path, kernel: str) -> list[rule_api.Finding]:
    a = analyze(src, kernel, 8, spec=str(src.parent / f"{kernel}.toml"))
    found = run_rule(a, "GA303", trace_ctas=8)
    return [f for f in found if type(f.details).__name__ == "NarrowRun"]


def _outputs(src: Path, kernel: str, spec: Path) -> dict[str, bytes]:
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = analyze(src, kernel, None, trace=False, spec=str(spec))
    launch = resolve(a.spec, parse_signature(src.read_text(), kernel))
    run = emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False)
    return {k: v.tobytes() for k, v in run.outputs.items()}


@pytest.mark.parametrize(
    ("kernel", "has", "reduced"),
    [
        ("count_above", "c += ROW_STRIDE", "`n` (a sum, an integer)"),
        ("count_above_inline", "n += ga303_x[ga303_q] > t;", "`n` (a sum, an integer)"),
        ("row_max", "m = fmaxf(m, v);", "`m` (a maximum, float)"),
    ],
)
# d = 1003: rows 0, 4 aligned with a tail, odd rows not (the scalar path); 1028: all aligned
@pytest.mark.parametrize("d", [1003, 1028])
def test_a_reducing_loop_is_rewritten_with_the_same_outputs(kernel, has, reduced, d, tmp_path):
    from gpuadvise.source.patch import apply_unified_diff

    (f,) = narrow(SRC, kernel)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v
    assert v.label == "k=4" and v.launch is None, v
    assert has in v.diff and "% 16u == 0" in v.diff, v.diff
    assert reduced in v.description and "partial changes" in v.description, v.description
    new_dir = tmp_path / "new"
    new_dir.mkdir()
    new = new_dir / SRC.name
    new.write_text(apply_unified_diff(SRC.read_text(), v.diff))
    spec = (SRC.parent / f"{kernel}.toml").read_text()
    spec = re.sub(r"(?m)^d = \d+$", f"d = {d}", spec).replace("grid = 2048", "grid = 6")
    spec = spec.replace("2048 * d", "6 * d").replace("count = 2048", "count = 6")
    (tmp_path / "s.toml").write_text(spec)
    (new_dir / "s.toml").write_text(spec.replace('"reduce_rows.cu"', f'"{new}"'))
    want = _outputs(SRC, kernel, tmp_path / "s.toml")
    got = _outputs(new, kernel, new_dir / "s.toml")
    assert want.keys() == got.keys() and want
    for name in want:
        assert want[name] == got[name], name


def test_a_float_sum_is_rewritten_and_equal_within_the_tolerance(tmp_path):
    import numpy as np

    from gpuadvise.source.patch import apply_unified_diff

    (f,) = narrow(SRC, "row_energy")
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v
    assert "`s` (a sum, float)" in v.description and "but for rounding" in v.description
    new = tmp_path / SRC.name
    new.write_text(apply_unified_diff(SRC.read_text(), v.diff))
    spec = (SRC.parent / "row_energy.toml").read_text().replace("d = 10000", "d = 1003")
    spec = spec.replace("grid = 2048", "grid = 6").replace("2048", "6")
    (tmp_path / "a.toml").write_text(spec)
    (tmp_path / "b.toml").write_text(spec.replace('"reduce_rows.cu"', f'"{new}"'))
    want = np.frombuffer(_outputs(SRC, "row_energy", tmp_path / "a.toml")["energy"], np.float32)
    got = np.frombuffer(_outputs(new, "row_energy", tmp_path / "b.toml")["energy"], np.float32)
    assert want.shape == (6,) and np.allclose(got, want, rtol=1e-5, atol=0), (got, want)


def test_a_float_sum_stays_display_only_where_outputs_must_match_exactly(tmp_path):
    for name in ("reduce_rows.cu", "row_energy.toml"):
        (tmp_path / name).write_text((SRC.parent / name).read_text())
    spec = tmp_path / "row_energy.toml"
    spec.write_text(spec.read_text().replace("seed = 1", "seed = 1\nrtol = 0\natol = 0"))
    (f,) = narrow(tmp_path / "reduce_rows.cu", "row_energy")
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    assert "must match exactly" in v.description, v.description


def _fix(tmp_path: Path, body: str, k: int = 4):  # type: ignore[no-untyped-def]
    from gpuadvise.source.fixkit_vector import loop_vectors
    from gpuadvise.source.text import find_kernel_source

    cu = tmp_path / "k.cu"
    cu.write_text(
        "__global__ void k(const float* a, float* b, int* c, int n)\n{\n    " + body + "\n}\n"
    )
    ks = find_kernel_source(cu, "k")
    assert ks is not None
    at = ks.code.index("a[", ks.body_start)
    return loop_vectors(ks, str(cu), {"a": 4, "b": 4, "c": 4}, k, at, must="a")


LOOP = "for (int i = threadIdx.x; i < n; i += blockDim.x)"


@pytest.mark.parametrize(
    ("body", "op", "exact"),
    [
        (f"int s = 0;\n    {LOOP} if (a[i] > 0) ++s;\n    c[blockIdx.x] = s;", "add", True),
        (f"unsigned s = 0;\n    {LOOP} s -= a[i] < 0;\n    c[0] = s;", "add", True),
        (f"int s = 0;\n    {LOOP} {{ s = s + (a[i] > 1); }}\n    c[0] = s;", "add", True),
        (f"int s = 0;\n    {LOOP} s |= a[i] > 1;\n    c[0] = s;", "or", True),
        (f"float m = 0;\n    {LOOP} m = max(a[i], m);\n    b[0] = m;", "max", True),
        (f"float s = 0;\n    {LOOP} s += a[i];\n    b[0] = s;", "add", False),
    ],
)
def test_order_free_reductions_are_kept(body, op, exact, tmp_path):
    fix = _fix(tmp_path, body)
    assert fix.diff is not None, fix.why_not
    (r,) = fix.reductions
    assert (r.name, r.op, r.exact) == (body.split()[1], op, exact)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        # a running prefix: the value is read per element
        (f"int s = 0;\n    {LOOP} {{ s += a[i]; c[i] = s; }}", "carries a value"),
        (f"int s = 0;\n    {LOOP} {{ if (s < 9) s += a[i] > 0; }}", "carries a value"),
        (f"int s = 0;\n    {LOOP} s += a[i] > s;", "its update reads it"),
        (f"int s = 0;\n    {LOOP} {{ s += a[i] > 0; s |= 1; }}", "2 kinds of operation"),
        (f"int s = 0;\n    {LOOP} c[i] = s++ + (a[i] > 0);", "inside a larger expression"),
        (f"int s = 1;\n    {LOOP} s *= a[i] > 0;", "carries a value"),
        (f"float s = 0;\n    {LOOP} s = s * a[i];", "carries a value"),
        (
            "int s = 0;\n    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; "
            "i += blockDim.x * gridDim.x) s += a[i] > 0;\n    c[blockIdx.x] = s;",
            "grid-stride loop reduces `s`",
        ),
        (f"__shared__ int s;\n    {LOOP} s += a[i] > 0;", "not a local integer or floating"),
        (f"int s[1] = {{0}};\n    {LOOP} s[0] += a[i] > 0;", "`s` (declared outside) is written"),
        (
            f"float2 s;\n    {LOOP} {{ s.x += a[i]; b[i] = s.x; }}",
            "`s` (declared outside) is written",
        ),
        (f"float* s = b + 1;\n    {LOOP} *s = a[i];", "`s` (declared outside) is written"),
    ],
)
def test_what_is_not_an_order_free_reduction_is_refused(body, why, tmp_path):
    fix = _fix(tmp_path, body)
    assert fix.diff is None and why in fix.why_not, fix.why_not

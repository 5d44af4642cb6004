"""``__restrict__`` as an automatic fix (issue 28 items 1 and 2). GA309's: a reload the
compiler keeps because a store of the thread's may alias it gets ``__restrict__`` on the
kernel's pointer parameters, through the fix kit, in three spellings (AdamW's moments through
macros, a loop bound read through a pointer in a template, a helper function and ``float *p``
in a one-line body); the patched kernel writes the same outputs over its whole launch on the
CPU emulator, and GA309 is silent on it. A reload with no store in between (k-means' features,
already ``__restrict__``) keeps the advice. GA308's, where the kit's register rewrite does not
apply (fields of a struct, an index that changes in the inner loop): the same, after which nvcc
keeps the sums in registers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from patchkit import Patched
from rulekit import KERNELS, analyze, compiled, run_rule

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "redundant" / "reloads.cu"

HELPER = (
    "__device__ __forceinline__ float twice(const float *p, int i) { return 2.0f * p[i]; }\n"
    "__global__ void smooth(float *out, const float *in, int n) { int i = blockIdx.x * "
    "blockDim.x + threadIdx.x; if (i < n) { out[i] = twice(in, i); out[i] += in[i] * in[i]; } }\n"
)
HELPER_SPEC = """\
source = "helper.cu"
kernel = "smooth"
grid = 64
block = 128
seed = 1
[args]
n = 8192
[buffers]
out = { type = "float", count = 8192, fill = "zeros" }
in = "float[8192]"
"""


def _case(tmp_path, kernel):
    """The kernel's source and spec: kernels/redundant's own (read, never written: compiled in
    the run's cache under its path, once for the run, not copied into each test's folder and
    compiled there again), or the helper case written to ``tmp_path``."""
    if kernel == "smooth":
        (tmp_path / "helper.cu").write_text(HELPER)
        (tmp_path / "helper.toml").write_text(HELPER_SPEC)
        return tmp_path / "helper.cu", tmp_path / "helper.toml"
    spec = {"adam_step": "adam_step.toml", "scale_columns<1>": "scale_columns.toml",
            "membership": "case.toml"}[kernel]  # fmt: skip
    return SRC, SRC.parent / spec


RELOADS = ("adam_step", "scale_columns<1>")  # the fixed kernels of reloads.cu


class Fixed:
    """GA309's findings on each kernel of RELOADS (4 CTAs traced), and one copy of reloads.cu
    with every kernel's diff applied (:class:`patchkit.Patched`, its specs beside it): compiled
    and disassembled once for the two kernels, not once per kernel."""

    def __init__(self, folder: Path) -> None:
        self.found = {}
        for k in RELOADS:
            src, spec = _case(folder, k)
            self.found[k] = run_rule(analyze(src, k, 4, spec=str(spec)), "GA309", trace_ctas=4)
        diffs = {
            k: found[0].variant.diff
            for k, found in self.found.items()
            if len(found) == 1 and found[0].variant is not None and found[0].variant.diff
        }
        self.patched = Patched(folder / "patched", SRC, diffs)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> Fixed:
    return Fixed(tmp_path_factory.mktemp("reloads"))


@pytest.mark.parametrize(
    ("kernel", "buffer", "param"),
    [
        ("adam_step", "params", "const float* __restrict__ grads"),
        ("scale_columns<1>", "out", "const int* __restrict__ rows"),
        ("smooth", "out", "const float * __restrict__ in"),
    ],
)
def test_restrict_fix_writes_the_same_outputs_and_removes_the_reloads(
    tmp_path, kernel, buffer, param, fixed
):
    from gpuadvise.source.patch import apply_unified_diff
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    src, spec = _case(tmp_path, kernel)
    if kernel in fixed.found:
        (f,) = fixed.found[kernel]
    else:
        (f,) = run_rule(analyze(src, kernel, 4, spec=str(spec)), "GA309", trace_ctas=4)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v
    assert "__restrict__" in v.description and "every launch" in v.description
    if kernel in fixed.found:  # reloads.cu with every fixed kernel's diff
        new = fixed.patched.check(kernel, v.diff)
        patched = new.parent
    else:
        patched = tmp_path / "patched"
        patched.mkdir()
        for t in spec.parent.glob("*.toml"):
            shutil.copy(t, patched / t.name)
        new = patched / src.name
        new.write_text(apply_unified_diff(src.read_text(), v.diff))
    assert param in new.read_text().replace("float *__restrict__", "float * __restrict__")

    def run(path, spec_path):
        a = compiled(path, kernel, spec=str(spec_path))
        launch = resolve(a.spec, parse_signature(path.read_text(), kernel))
        return emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False)

    import numpy as np

    want = run(src, spec).outputs[buffer]
    got = run(new, patched / spec.name).outputs[buffer]
    # within float rounding: with the value in a register ptxas may fuse a multiply and an add
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    assert np.count_nonzero(want)
    assert run_rule(analyze(new, kernel, 4, spec=str(patched / spec.name)), "GA309",
                    trace_ctas=4) == []  # fmt: skip


def test_a_reload_without_a_store_in_between_is_no_restrict_fix(tmp_path):
    """No store forces it: the values loaded once into registers (test_rule_ga309_hoist.py)."""
    src, spec = _case(tmp_path, "membership")
    (f,) = run_rule(analyze(src, "membership", 4, spec=str(spec)), "GA309", trace_ctas=4)
    assert f.variant is not None and f.variant.diff and "__restrict__" not in f.variant.diff


STRUCT = """\
struct Quad { unsigned s0, s1, s2, s3; };
#define COUNT 16
__global__ void add_fields(Quad * const dest, const Quad * const src, const unsigned n)
{
  const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid < n)
    for (unsigned i = 0; i < COUNT; i++) {
      dest[tid].s0 += src[tid].s0;
      dest[tid].s1 += src[tid].s1;
      dest[tid].s2 += src[tid].s2;
      dest[tid].s3 += src[tid].s3;
    }
}
"""
STRUCT_SPEC = """\
source = "fields.cu"
kernel = "add_fields"
grid = 32
block = 128
seed = 1
[args]
n = 4096
[buffers]
dest = { type = "uint4", count = 4096, fill = "random(0,100)" }
src = { type = "uint4", count = 4096, fill = "random(0,100)" }
"""


@pytest.mark.parametrize("kernel", ["tile_acc<4>", "add_fields"])
def test_ga308_falls_back_to_restrict_where_the_register_rewrite_does_not_apply(tmp_path, kernel):
    """GA308 (accumulation in global memory) where the kit's register rewrite does not apply
    (four outputs a thread whose index changes in the inner loop; fields of a struct, as in
    HeCBench's interleave): ``__restrict__`` on the pointers, after which nvcc keeps the sums in
    registers (GA308 silent on the patched kernel), the outputs the same."""
    import numpy as np

    from gpuadvise.source.patch import apply_unified_diff
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    if kernel == "add_fields":
        src, spec = tmp_path / "fields.cu", tmp_path / "fields.toml"
        src.write_text(STRUCT)
        spec.write_text(STRUCT_SPEC)
        buffer = "dest"
    else:
        acc = KERNELS / "accumulate"
        src, spec = tmp_path / "accumulate.cu", tmp_path / "tile_acc.toml"
        shutil.copy(acc / "accumulate.cu", src)
        shutil.copy(acc / "tile_acc.toml", spec)
        buffer = "acc"
    (f,) = run_rule(analyze(src, kernel, 4, spec=str(spec)), "GA308", trace_ctas=4)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and "__restrict__" in v.diff
    patched = tmp_path / "patched"
    patched.mkdir()
    shutil.copy(spec, patched / spec.name)
    new = patched / src.name
    new.write_text(apply_unified_diff(src.read_text(), v.diff))

    def run(path, spec_path):
        a = compiled(path, kernel, spec=str(spec_path))
        launch = resolve(a.spec, parse_signature(path.read_text(), kernel))
        return emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False)

    want = run(src, spec).outputs[buffer]
    got = run(new, patched / spec.name).outputs[buffer]
    np.testing.assert_array_equal(got, want)
    assert run_rule(analyze(new, kernel, 4, spec=str(patched / spec.name)), "GA308",
                    trace_ctas=4) == []  # fmt: skip

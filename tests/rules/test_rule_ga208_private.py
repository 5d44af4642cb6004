"""GA208's automatic copy of the bins per CTA (nvcc, no GPU): kernels/global_bins's histograms
of integer bins in global memory (one element per thread, a macro bin count after an early
return, the bin count an argument in a grid-stride macro, a template's bins through a helper
function, a functor's) get the fix kit's privatising rewrite and a launch adding the bins'
bytes of dynamic shared memory (one wave of CTAs where the loop is grid-stride); over whole
small launches on the CPU emulator the bins equal the kernel's. An atomic whose result is used
and bins beyond 48 KB of shared memory stay display-only, with the reason."""

from __future__ import annotations

import pytest
from rulekit import KERNELS, analyze, compiled, run_rule

from gpuadvise.rules import HotAddress

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

BINS = KERNELS / "global_bins" / "bins.cu"


def _outputs(src, kernel, **opts):
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = compiled(src, kernel, **opts)
    launch = resolve(a.spec, parse_signature(src.read_text(), kernel.split("<")[0]))
    return emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False).outputs


@pytest.mark.parametrize(
    ("kernel", "spec", "args", "bytes_", "count"),
    [
        ("hist_direct", "case.toml", ("n=4096",), 2048, "gpuadvise_bins_dyn / sizeof(*hist)"),
        ("hist_macro", "hist_macro.toml", ("n=4000",), 1536, "gpuadvise_bins_dyn / sizeof(*hist)"),
        ("hist_counted", "hist_counted.toml", ("n=16384",), 4096, "static_cast<unsigned>(nbins)"),
        ("hist_helpers<768>", "hist_helpers.toml", ("n=16384",), 3072, "sizeof(*hist)"),
        # a functor's atomic, which the kit does not find: ptxas's RED says no result is used
        ("hist_bytes", "hist_bytes.toml", ("n=4096",), 1024, "sizeof(*hist)"),
    ],
)
def test_a_histogram_of_global_bins_gets_a_copy_per_cta_with_equal_outputs(
    kernel, spec, args, bytes_, count, tmp_path
):
    """16 CTAs traced whole (the grid kept: fewer than one wave): the variant is the fix kit's
    rewrite plus the bins' bytes of dynamic shared memory; the patched kernel's bins over the
    whole launch on the CPU emulator are the kernel's, bit for bit, and its atomics on `hist`
    are one per non-zero bin and CTA."""
    import numpy as np

    from gpuadvise.source.patch import apply_unified_diff

    a = analyze(BINS, kernel, 16, args=args, grid="16", spec=str(BINS.parent / spec))
    (f,) = run_rule(a, "GA208", trace_ctas=16, min_share=0.0)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified", v
    assert v.launch == {"dynamic_smem_bytes": bytes_}
    assert v.diff and "[&, hist = gpuadvise_bins]() {" in v.diff and count in v.diff
    assert "if (gpuadvise_bins[b] != 0) atomicAdd(&hist[b], gpuadvise_bins[b]);" in v.diff
    for toml in BINS.parent.glob("*.toml"):
        (tmp_path / toml.name).write_text(toml.read_text())
    new = tmp_path / BINS.name
    new.write_text(apply_unified_diff(BINS.read_text(), v.diff))
    want = _outputs(BINS, kernel, args=args, grid="16", spec=str(BINS.parent / spec))["hist"]
    got = _outputs(
        new, kernel, args=args, grid="16", spec=str(tmp_path / spec), dynamic_smem=str(bytes_)
    )["hist"]
    assert np.count_nonzero(want) and want.tobytes() == got.tobytes()
    est = f.estimated_speedup
    assert est is not None and est.inputs["fix"] == "private"
    # one flush of the hot bin per CTA that reaches it, the grid kept
    assert est.inputs["updates_after"] == f.details_as(HotAddress).hot_ctas <= 16


@pytest.mark.parametrize(
    ("kernel", "spec", "wave"),
    [("hist_counted", "hist_counted.toml", True), ("hist_helpers<768>", "hist_helpers.toml", True),
     ("hist_direct", "case.toml", False), ("hist_macro", "hist_macro.toml", False)],
)  # fmt: skip
def test_a_grid_stride_histogram_runs_one_wave(kernel, spec, wave):
    """The specs' launches (16,384 to 65,536 CTAs): a grid-stride loop runs one wave of
    1,056 CTAs (8 per SM on the H100 model, the bins' bytes keeping them), each flushing its
    bins once; one element per thread keeps its grid."""
    a = analyze(BINS, kernel, 8, spec=str(BINS.parent / spec))
    (f,) = run_rule(a, "GA208", trace_ctas=8)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.launch is not None
    assert (v.launch.get("grid") == [1056, 1, 1]) is wave
    assert ("one wave of 1056 CTAs" in v.description) is wave
    est = f.estimated_speedup
    assert est is not None and est.kind == "point" and est.speedup > 2.0


@pytest.mark.parametrize(
    ("kernel", "spec", "why"),
    [
        ("bucket_slots", "bucket_slots.toml", "the atomic's result is used"),
        ("hist_wide", "hist_wide.toml", "65536 bytes"),
    ],
)
def test_bins_it_cannot_copy_stay_display_only(kernel, spec, why):
    """Slots taken from each bucket (the atomic's old value used), 16,384 bins (64 KB: more
    than 48 KB of shared memory): described, with the reason."""
    a = analyze(BINS, kernel, 8, spec=str(BINS.parent / spec))
    (f,) = run_rule(a, "GA208", trace_ctas=8)
    v = f.variant
    assert v is not None and v.safety == "display-only"
    assert why in v.description and "many times" in v.description, v.description


_TWO_WAYS = """
#define LOOP(i, lim) for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < lim; \\
                          i += gridDim.x * blockDim.x)
template <int SHARED>
__global__ void counted(const int* in, int* out, int nbins, unsigned n) {
    extern __shared__ unsigned char raw[];
    if (SHARED) {
        int* sh = reinterpret_cast<int*>(raw);
        for (int b = threadIdx.x; b < nbins; b += blockDim.x) sh[b] = 0;
        __syncthreads();
        LOOP(i, n) atomicAdd(&sh[(in[i] & 0xffff) % nbins], 1);
        __syncthreads();
        for (int b = threadIdx.x; b < nbins; b += blockDim.x) atomicAdd(&out[b], sh[b]);
    } else {
        LOOP(i, n) atomicAdd(&out[(in[i] & 0xffff) % nbins], 1);
    }
}
template __global__ void counted<0>(const int*, int*, int, unsigned);
template __global__ void counted<1>(const int*, int*, int, unsigned);
"""


def test_a_kernel_with_dynamic_shared_memory_of_its_own_puts_the_copy_after_it(tmp_path):
    """HeCBench bincount's shape: one template, a shared-memory branch using the kernel's own
    `extern __shared__` and a global one (analysed). The bin count is the argument the spec
    sizes `out` by (`nbins`), the copy at the end of the dynamic shared memory: the global
    instantiation with the bins' bytes gives the kernel's bins, and the shared one, given its
    own bytes and the copy's, still gives its own."""
    import numpy as np

    from gpuadvise.source.patch import apply_unified_diff

    src = tmp_path / "k.cu"
    src.write_text(_TWO_WAYS)
    (tmp_path / "case.toml").write_text(
        'source = "k.cu"\nkernel = "counted<0>"\ngrid = 64\nblock = 256\nseed = 1\n\n'
        '[args]\nnbins = 768\nn = 32768\n\n[buffers]\nin = "int[n]"\n'
        'out = { type = "int", count = "nbins", fill = "zeros" }\n'
    )
    a = analyze(src, "counted<0>", 64)
    (f,) = run_rule(a, "GA208", trace_ctas=64, min_share=0.0)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified", v
    assert v.launch == {"dynamic_smem_bytes": 3072}
    assert v.diff and "static_cast<unsigned>(nbins)" in v.diff
    new_dir = tmp_path / "new"
    new_dir.mkdir()
    (new_dir / "case.toml").write_text((tmp_path / "case.toml").read_text())
    new = new_dir / "k.cu"
    new.write_text(apply_unified_diff(src.read_text(), v.diff))
    want = _outputs(src, "counted<0>")["out"]
    assert want.tobytes() == _outputs(new, "counted<0>", dynamic_smem="3072")["out"].tobytes()
    shared = _outputs(src, "counted<1>", dynamic_smem="3072")["out"]
    assert np.count_nonzero(want) and shared.tobytes() == want.tobytes()
    got = _outputs(new, "counted<1>", dynamic_smem="6144")["out"]
    assert got.tobytes() == want.tobytes()

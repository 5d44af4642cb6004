"""The fix kit's privatised histogram (gpuadvise/source/fixkit_privatise.py), without a
compiler: the body wrapped whole in a lambda whose capture gives the buffer the CTA's copy, the
zeroing and the flush around it, the bin count from a parameter or the dynamic shared memory;
and the cases it refuses."""

from __future__ import annotations

import textwrap

from gpuadvise.source import fixkit_privatise as FP
from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite


def _run(code: str, buffer: str = "hist", count: str | None = None) -> tuple[str | None, str]:
    st = T.parse(textwrap.dedent(code))
    (k,) = [k for k in T.kernels(st) if k.is_definition]
    rw = Rewrite(st.text)
    why = FP.privatise(st, rw, k, buffer, count)
    return why, rw.text()


def test_the_body_runs_in_a_lambda_between_the_zeroing_and_the_flush():
    why, text = _run(
        """
        __global__ void h(const int* x, int* hist, int n) {
            const int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i >= n) return;
            atomicAdd(&hist[x[i] & 255], 1);
        }
        """
    )
    assert why is None
    lines = [ln.strip() for ln in text.splitlines()]
    lam = lines.index("[&, hist = gpuadvise_bins]() {")
    assert lines[lam + 1 : lam + 4] == [
        "const int i = blockIdx.x * blockDim.x + threadIdx.x;",
        "if (i >= n) return;",
        "atomicAdd(&hist[x[i] & 255], 1);",
    ]
    assert lines[lam + 4 : lam + 6] == ["}();", "__syncthreads();"]
    assert "gpuadvise_bins_n = static_cast<unsigned>(gpuadvise_bins_dyn / sizeof(*hist));" in text
    assert lines.index("__syncthreads();") < lam  # the zeroing waits before the body
    assert "if (gpuadvise_bins[b] != 0) atomicAdd(&hist[b], gpuadvise_bins[b]);" in lines
    assert lines[-2:] == ["if (gpuadvise_bins[b] != 0) atomicAdd(&hist[b], gpuadvise_bins[b]);",
                          "}"]  # fmt: skip


def test_a_one_line_kernel_and_a_count_parameter():
    why, text = _run(
        "__global__ void h(const int* x, unsigned* out, int nb) { atomicAdd(out + x[0] % nb, 1u); }\n",
        buffer="out",
        count="nb",
    )
    assert why is None
    assert "const unsigned gpuadvise_bins_n = static_cast<unsigned>(nb);" in text
    assert "[&, out = gpuadvise_bins]() { atomicAdd(out + x[0] % nb, 1u);" in text
    assert text.rstrip().endswith("atomicAdd(&out[b], gpuadvise_bins[b]);\n}")


def test_what_it_refuses():
    body = "{ atomicAdd(&hist[x[0]], 1); }\n"
    assert "not a pointer parameter" in (_run(f"__global__ void h(int* x, int n) {body}")[0] or "")
    own = "__global__ void h(int* x, int* hist) { extern __shared__ int s[]; s[0] = 0; }\n"
    assert "dynamic shared memory of its own" in (_run(own)[0] or "")
    assert _run(own, count="n")[0] is None
    shadow = "__global__ void h(int* x, int* hist) { int* hist2 = hist; { int hist = 0; } }\n"
    assert "declares a `hist` of its own" in (_run(shadow)[0] or "")

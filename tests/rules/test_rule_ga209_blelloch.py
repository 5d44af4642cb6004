"""GA209's rewrite of Blelloch's work-efficient scan (the up-sweep, the last element cleared,
the down-sweep) as a scan in warp shuffles: each thread's two elements read back from the words
it filled, each warp's lanes scanned with ``__shfl_up_sync``, the warps' totals by the first
warp, the exclusive results stored back into the same words. Two layouts: elements ``2t, 2t + 1``
(kernels/scan/scans.cu's ``blelloch``, index macros) and ``t, t + N/2`` at bank-conflict-free
offsets in a grid-stride loop over tiles (kernels/scan/blelloch_halves.cu's ``tiles_bcao<512>``,
HeCBench scan_bcao's spelling; its element type a template parameter below). The diff replaces
the two loops and nothing else, applies, compiles, silences GA209 and keeps every output bit for
bit on the emulator; a float scan stays display-only (its additions regrouped)."""

from __future__ import annotations

import shutil
import textwrap

import numpy as np
import pytest
from rulekit import KERNELS, analyze, run_rule, source_line

from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

CASE = KERNELS / "scan"

# kernel: (its file, the up-sweep's store, the fill's first line, the line after the down-sweep)
REWRITTEN = {
    "blelloch": ("scans.cu", "temp[BI(offset, t)] += temp[AI(offset, t)];",
                 "temp[2 * t] = v2.x;", "if (2 * pair + 1 < n) reinterpret_cast"),
    "tiles_bcao<512>": ("blelloch_halves.cu", "temp[bi] += temp[ai];  // expect: GA209",
                        "temp[a + oa] = gi[a];", "go[a] = temp[a + oa];"),
}  # fmt: skip


@pytest.mark.parametrize("kernel", sorted(REWRITTEN))
def test_the_loops_become_a_shuffle_scan_and_keep_the_outputs(kernel, tmp_path):
    name, step, fill, after = REWRITTEN[kernel]
    src = CASE / name
    a = analyze(src, kernel, 4)
    (f,) = run_rule(a, "GA209", trace_ctas=4)
    assert f.line == source_line(src, step)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v.description
    text = src.read_text()
    new = apply_unified_diff(text, v.diff)
    old_lines, new_lines = text.splitlines(), new.splitlines()
    first, last = source_line(src, fill), source_line(src, after)
    assert new_lines[: first + 1] == old_lines[: first + 1]  # the fill kept
    tail = len(old_lines) - last + 2  # from the barrier after the down-sweep on
    assert new_lines[-tail:] == old_lines[-tail:]
    body = "\n".join(new_lines[first + 1 : -tail])
    assert body.count("__shfl_up_sync(0xffffffffu") == (3 if "2 * t" in fill else 4)
    assert "+= temp[" not in body and body.count("__syncthreads();") == 3
    work = tmp_path / "case"
    shutil.copytree(CASE, work)
    (work / name).write_text(new)
    b = analyze(work / name, kernel, 4)
    assert run_rule(b, "GA209", trace_ctas=4) == []
    want, got = a.memory.outputs["out"], b.memory.outputs["out"]
    assert np.count_nonzero(want) > 1000
    assert got.tobytes() == want.tobytes()


def test_a_float_scan_stays_display_only():
    (f,) = run_rule(analyze(CASE / "blelloch_halves.cu", "tiles_float", 2), "GA209")
    v = f.variant
    assert v is not None and v.safety == "display-only" and not v.diff
    assert "not integers" in v.description, v.description


TEMPLATE = """\
    template <typename T, int N>
    __global__ void k(T* out, const T* in) {
        __shared__ T s[N];
        int t = threadIdx.x;
        s[t] = in[blockIdx.x * N + t];
        s[t + N / 2] = in[blockIdx.x * N + t + N / 2];
        int off = 1;
        for (int d = N / 2; d > 0; d /= 2) {
            __syncthreads();
            if (t < d) s[off * (2 * t + 2) - 1] += s[off * (2 * t + 1) - 1];
            off *= 2;
        }
        if (t == 0) s[N - 1] = 0;
        for (int d = 1; d < N; d *= 2) {
            off >>= 1;
            __syncthreads();
            if (t < d) {
                T x = s[off * (2 * t + 1) - 1];
                s[off * (2 * t + 1) - 1] = s[off * (2 * t + 2) - 1];
                s[off * (2 * t + 2) - 1] += x;
            }
        }
        __syncthreads();
        out[blockIdx.x * N + t] = s[t];
        out[blockIdx.x * N + t + N / 2] = s[t + N / 2];
    }
    template __global__ void k<unsigned, 256>(unsigned*, const unsigned*);
"""


def test_a_template_element_type_bound_to_an_integer(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(textwrap.dedent(TEMPLATE))
    (tmp_path / "case.toml").write_text(
        'source = "k.cu"\nkernel = "k<unsigned, 256>"\ngrid = 4\nblock = 128\nseed = 1\n\n'
        '[buffers]\nin = { type = "unsigned int", count = 1024, fill = "random(0,9)" }\n'
        'out = { type = "unsigned int", count = 1024, fill = "zeros" }\n'
    )
    a = analyze(src, "k<unsigned, 256>", 4)
    (f,) = run_rule(a, "GA209", trace_ctas=4)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v.description
    assert "__shared__ T scan_totals[64];" in v.diff
    src.write_text(apply_unified_diff(src.read_text(), v.diff))
    b = analyze(src, "k<unsigned, 256>", 4)
    assert run_rule(b, "GA209", trace_ctas=4) == []
    assert b.memory.outputs["out"].tobytes() == a.memory.outputs["out"].tobytes()

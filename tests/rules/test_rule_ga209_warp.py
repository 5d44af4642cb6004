"""GA209's shuffle rewrite of a racy warp scan (HeCBench radixsort's ``scanwarp``: volatile
shared steps ``s[i] += s[i - d]`` over a zero window, no barrier, no ``__syncwarp``): in the
kernel (kernels/scan/scans.cu's one-liner ``warp_scan_racy``) or in the ``__device__`` helper the
steps lie in when only this kernel calls it, directly or through another helper
(kernels/scan/warp_helpers.cu: radixsort's spelling, exclusive, a macro'd warp size, each step
in ``if (k <= maxlevel) { ... }``, called twice through ``block_scan_excl``; a template helper,
inclusive, bare steps). The diff changes the function holding the steps and nothing else,
applies, compiles, silences GA209 and keeps every output bit for bit on the emulator. A helper
two kernels call, steps guarded per lane, a window that does not hold zeros stay display-only
and say why; a scan synchronised by ``__syncwarp`` is silent."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
from rulekit import KERNELS, analyze, run_rule, source_line

from gpuadvise.source.patch import apply_unified_diff
from gpuadvise.source.text import find_kernel_source

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

CASE = KERNELS / "scan"

# kernel: (its file, the function holding the steps (its definition line's text), the first step)
REWRITTEN = {
    "warp_scan_racy": ("scans.cu", "void warp_scan_racy(", "s[idx] += s[idx - 1];"),
    "scan_via_helpers": ("warp_helpers.cu", "unsigned warp_scan_excl(", "if (0 <= maxlevel)"),
    "warp_sums_tmpl": ("warp_helpers.cu", "T warp_inclusive(", "win[at] += win[at - 1];"),
}


def _function_lines(text: str, head: str) -> tuple[int, int]:
    """The 1-based first and last lines of the function whose definition line holds ``head``."""
    lines = text.splitlines()
    first = next(i for i, t in enumerate(lines, 1) if head in t)
    if first > 1 and lines[first - 2].startswith("template"):
        first -= 1
    depth, seen = 0, False
    for i, t in enumerate(lines[first - 1 :], first):
        depth += t.count("{") - t.count("}")
        seen = seen or "{" in t
        if seen and depth == 0:
            return first, i
    raise AssertionError(head)


@pytest.mark.parametrize("kernel", sorted(REWRITTEN))
def test_the_steps_become_shuffles_where_they_lie_and_keep_the_outputs(kernel, tmp_path):
    name, head, step = REWRITTEN[kernel]
    src = CASE / name
    a = analyze(src, kernel, 4)
    (f,) = run_rule(a, "GA209", trace_ctas=4)
    assert f.line == source_line(src, step) and "a race since Volta" in f.message
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v.description
    text = src.read_text()
    new = apply_unified_diff(text, v.diff)
    first, last = _function_lines(text, head)
    old_lines, new_lines = text.splitlines(), new.splitlines()
    tail = len(old_lines) - last
    assert new_lines[: first - 1] == old_lines[: first - 1]  # only that function changed
    assert new_lines[len(new_lines) - tail :] == old_lines[last:]
    body = "\n".join(new_lines[first - 1 : len(new_lines) - tail])
    assert body.count("__shfl_up_sync(0xffffffffu") == 5 and "+= s[idx -" not in body
    work = tmp_path / "case"
    shutil.copytree(CASE, work)
    (work / name).write_text(new)
    b = analyze(work / name, kernel, 4)
    assert run_rule(b, "GA209", trace_ctas=4) == []
    want, got = a.memory.outputs["out"], b.memory.outputs["out"]
    assert np.count_nonzero(want[: 4 * 256]) > 500
    assert got.tobytes() == want.tobytes()


def test_the_guards_and_the_store_back_are_kept():
    """radixsort's spelling: each shuffle stays in its `if (k <= maxlevel) { }` (the second
    call scans three steps), the register is stored back for the exclusive `s[idx] - val`."""
    src = CASE / "warp_helpers.cu"
    (f,) = run_rule(analyze(src, "scan_via_helpers", 2), "GA209")
    assert f.variant is not None and f.variant.diff
    added = [ln[1:].strip() for ln in f.variant.diff.splitlines() if ln.startswith("+ ")]
    assert added[0] == "unsigned scan_v = s[idx];  // the warp's scan in a register"
    assert added[1] == "const unsigned scan_lane = threadIdx.x & 31;"
    assert added[2].startswith("if (0 <= maxlevel) { unsigned scan_y = __shfl_up_sync(")
    assert added[2].endswith("if (scan_lane >= 1) scan_v += scan_y; }  // expect: GA209")
    assert added[-1] == "s[idx] = scan_v;"


@pytest.mark.parametrize("kernel", ["shared_wide", "shared_narrow"])
def test_a_helper_two_kernels_call_stays_display_only(kernel):
    (f,) = run_rule(analyze(CASE / "warp_helpers.cu", kernel, 2), "GA209")
    v = f.variant
    assert v is not None and v.safety == "display-only" and not v.diff
    assert "outside this kernel" in v.description and "shared_warp_scan" in v.description


def test_silent_on_a_warp_scan_synchronised_by_syncwarp():
    assert run_rule(analyze(CASE / "warp_helpers.cu", "synced_warp_scan", 2), "GA209") == []


def _case(folder: Path, code: str, kernel: str) -> Path:
    src = folder / "k.cu"
    src.write_text(textwrap.dedent(code))
    (folder / "case.toml").write_text(
        f'source = "k.cu"\nkernel = "{kernel}"\ngrid = 8\nblock = 128\nseed = 1\n\n'
        '[args]\nn = 1024\n\n[buffers]\nin = { type = "unsigned int", count = "n", fill = '
        '"random(0,100)" }\nout = { type = "unsigned int", count = "n", fill = "zeros" }\n'
    )
    return src


GUARDED = """\
    __global__ void lane_guarded(const unsigned* in, unsigned* out, unsigned n) {
        __shared__ unsigned s[128];
        volatile unsigned* vs = s;
        unsigned i = blockIdx.x * blockDim.x + threadIdx.x, t = threadIdx.x, lane = t & 31;
        vs[t] = i < n ? in[i] : 0u;
        if (lane >= 1) vs[t] += vs[t - 1];
        if (lane >= 2) vs[t] += vs[t - 2];
        if (lane >= 4) vs[t] += vs[t - 4];
        if (lane >= 8) vs[t] += vs[t - 8];
        if (lane >= 16) vs[t] += vs[t - 16];
        if (i < n) out[i] = vs[t];
    }
"""

ONES = """\
    __global__ void window_of_ones(const unsigned* in, unsigned* out, unsigned n) {
        __shared__ unsigned s[256];
        volatile unsigned* vs = s;
        unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        unsigned idx = 2 * threadIdx.x - (threadIdx.x & 31) + 32;
        vs[idx - 32] = 1;
        vs[idx] = i < n ? in[i] : 0u;
        vs[idx] += vs[idx - 1];
        vs[idx] += vs[idx - 2];
        vs[idx] += vs[idx - 4];
        vs[idx] += vs[idx - 8];
        vs[idx] += vs[idx - 16];
        if (i < n) out[i] = vs[idx];
    }
"""


@pytest.mark.parametrize(
    ("code", "kernel", "why"),
    [
        (GUARDED, "lane_guarded", "part of a warp"),
        (ONES, "window_of_ones", "not stored as zero"),
    ],
)
def test_what_the_shuffles_cannot_reproduce_stays_display_only(tmp_path, code, kernel, why):
    src = _case(tmp_path, code, kernel)
    (f,) = run_rule(analyze(src, kernel, 2, trace=False), "GA209")
    assert "a race since Volta" in f.message
    v = f.variant
    assert v is not None and v.safety == "display-only" and not v.diff
    assert why in v.description, v.description


CHAIN = """\
    __device__ unsigned steps(unsigned v, volatile unsigned* s) {
        unsigned idx = 2 * threadIdx.x - (threadIdx.x & 31) + 32;
        s[idx - 32] = 0;
        s[idx] = v;
        s[idx] += s[idx - 1];
        return s[idx];
    }
    __device__ unsigned middle(unsigned v, unsigned* s) { return steps(v, s) + steps(v, s); }
    __global__ void only(unsigned* s) { s[0] = middle(1u, s); }
    __global__ void other(unsigned* s) { s[0] = steps(1u, s); }
    __global__ void via_middle(unsigned* s) { s[1] = middle(2u, s); }
"""


def test_a_helper_called_through_helpers_of_this_kernel_alone(tmp_path):
    from gpuadvise.source.functions import helper_at

    src = tmp_path / "k.cu"
    src.write_text(textwrap.dedent(CHAIN))
    line = source_line(src, "s[idx] += s[idx - 1];")
    ks = find_kernel_source(src, "via_middle")
    assert ks is not None
    # `steps` is also called by `other`: refused, directly or through `middle`
    assert isinstance(helper_at(ks, line), str)
    why = helper_at(ks, line, through_helpers=True)
    assert isinstance(why, str) and "outside this kernel" in why
    src.write_text(textwrap.dedent(CHAIN.replace("s[0] = steps(1u, s);", "s[0] = 3u;")))
    ks = find_kernel_source(src, "via_middle")
    assert ks is not None
    assert isinstance(helper_at(ks, line), str)  # called from `middle`, not the kernel
    # `middle` is called by `only` too: the chain does not reach this kernel alone
    why = helper_at(ks, line, through_helpers=True)
    assert isinstance(why, str) and "`middle` is called by another function too" in why
    src.write_text(textwrap.dedent(CHAIN.replace("s[0] = steps(1u, s);", "s[0] = 3u;").replace(
        "s[0] = middle(1u, s);", "s[0] = 4u;")))  # fmt: skip
    ks = find_kernel_source(src, "via_middle")
    assert ks is not None
    h = helper_at(ks, line, through_helpers=True)
    assert not isinstance(h, str) and h.name == "steps" and len(h.calls) == 2

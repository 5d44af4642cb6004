"""GA309's register fix (issue 28 item 2: gpuadvise/source/fixkit_hoist.py) on
kernels/hoist/hoist.cu: a thread's values loaded again in each run of a loop with no store of its
own in between (a window compared with every offset of a query, a warp per row read by three
passes in a template through an ``auto`` row pointer, a column summed once per positive weight
with C-style loop variables and a guard) are loaded once into a register array; the patched
kernel, run on the CPU emulator, writes bit-identical outputs, also where the rows are longer
than the registers hold (the original loop does the rest), and GA309 reports the buffer no more. A loop
that breaks out at the first mismatch keeps the advice; the fix kit's refusals say why."""

from __future__ import annotations

import numpy as np
import pytest
from rulekit import (
    KERNELS,
    analyze,
    patched_folder,
    run_rule,
    source_line,
    whole_run_outputs,
)

from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite
from gpuadvise.source.fixkit_hoist import plan_hoist

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "hoist" / "hoist.cu"
SPECS = {
    "window_match": "case.toml",
    "row_softmax<4>": "row_softmax.toml",
    "contract_column": "contract_column.toml",
    "first_match": "first_match.toml",
    "row_softmax_registers<4, 10>": "row_softmax_registers.toml",
}
OUTPUT = {"window_match": "hits", "row_softmax<4>": "out", "contract_column": "out"}
CTAS = 4


def ga309(src, kernel):
    spec = str(src.parent / SPECS[kernel])
    return run_rule(analyze(src, kernel, CTAS, spec=spec), "GA309", trace_ctas=CTAS)


def outputs(src, kernel):
    """The kernel's output over its first 16 CTAs, run whole on the emulator."""
    got = whole_run_outputs(src, kernel, str(src.parent / SPECS[kernel]), "16")
    return got[OUTPUT[kernel]]


def patched(tmp_path, text):
    return patched_folder(tmp_path, SRC, text)


@pytest.mark.parametrize(
    ("kernel", "marker", "buffer", "has"),
    [
        ("window_match", "same += target[t + j]", "target", "if (j < width) same += target_r[k]"),
        ("row_softmax<4>", "s += __expf(row[j] - m)", "in", "if (j < len) s += __expf(row_r[k] - m);"),
        ("contract_column", "sum += tensor[c * cols + t]", "tensor", "sum += tensor_r[k] * wv;"),
    ],
)  # fmt: skip
def test_the_values_loaded_once_write_the_same_outputs(kernel, marker, buffer, has, tmp_path):
    """The patched kernel reloads the buffer no more (the window's query, a broadcast each
    thread re-reads at every offset, stays GA309's)."""
    from gpuadvise.source.patch import apply_unified_diff

    (f,) = ga309(SRC, kernel)
    assert f.line == source_line(SRC, marker)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v
    assert has in v.diff, v.diff
    assert "loaded once into registers" in v.description and "__restrict__" not in v.diff
    # whether it pays is the GPU's to say (0.72-1.12x measured): --fix without one leaves it
    assert v.needs_measurement and "only where a GPU measured it faster" in v.description
    from gpuadvise.analyze.fix import _not_a_fix

    assert "needs a GPU measurement" in (_not_a_fix(f, v, unsafe=False, measured=False) or "")
    new = patched(tmp_path, apply_unified_diff(SRC.read_text(), v.diff))
    want, got = outputs(SRC, kernel), outputs(new, kernel)
    assert np.count_nonzero(want) and want.tobytes() == got.tobytes()
    left = [x.buffer for f in ga309(new, kernel) for x in f.details.lines]
    assert buffer not in left and (kernel == "window_match" or not left), left


def _plan(text: str, kernel: str, marker: str, buffer: str, values: float):
    st = T.parse(text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if marker in s)
    k = T.find_kernel(st, kernel)
    assert k is not None
    return plan_hoist(st, (st.line_start(line), st.line_start(line + 1)), buffer, k, values)


def test_rows_longer_than_the_registers_hold_run_the_original_loop(tmp_path):
    """Planned for 8 values a lane where the rows hold 20: the unrolled loops read the first 8
    from registers, the original loops load the other 12, and the outputs do not change."""
    text = SRC.read_text()
    p = _plan(text, "row_softmax", "s += __expf(row[j] - m)", "row", 8)
    assert not isinstance(p, str) and p.cap == 8 and p.loops == 3 and p.shape == "passes"
    rw = Rewrite(text)
    p.apply(rw)
    assert "for (int j = lane + 256; j < len; j += 32)" in rw.text()
    new = patched(tmp_path, rw.text())
    want, got = outputs(SRC, "row_softmax<4>"), outputs(new, "row_softmax<4>")
    assert want.tobytes() == got.tobytes()


def test_a_loop_that_breaks_out_keeps_the_advice():
    (f,) = ga309(SRC, "first_match")
    assert f.variant is not None and f.variant.safety == "display-only"
    assert "breaks out of it" in f.variant.description


def test_the_row_in_registers_is_silent():
    assert ga309(SRC, "row_softmax_registers<4, 10>") == []


NESTED = """__global__ void k(const float* f, float* out, int n, int m, int p) {{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;
    int l;
    for (int i = 0; i < m; i++) {{
        {pre}
        for (l = 0; l < n; l++) s += f[l * p + t] * i;
    }}
    {post}
    out[t] = s;
}}
"""


@pytest.mark.parametrize(
    ("pre", "post", "values", "why"),
    [
        ("", "", 16, None),
        ("", "out[t + 1] = l;", 16, "`l` is read after the loop"),
        ("", "l = 0; out[t + 1] = l;", 16, None),
        ("t += 1;", "", 16, "runs once"),  # the index changes in the outer loop
        ("if (t < n)", "", 16, "runs once"),  # a guard on the index inside the outer loop
        ("f[t] = 0.0f;", "", 16, "stores to `f`"),
        ("", "", 65, "more than registers hold"),
    ],
)
def test_the_fix_kit_refuses_what_could_change_the_outputs(pre, post, values, why):
    text = NESTED.format(pre=pre, post=post)
    p = _plan(text, "k", "s += f[l * p + t]", "f", values)
    if why is None:
        assert not isinstance(p, str), p
        assert p.shape == "nested" and p.loads == ("f[l * p + t]",) and p.cap == 16
    else:
        assert isinstance(p, str) and why in p, p


def test_a_launch_whose_loops_the_emulator_sampled_gets_the_diff_unverified():
    """Checking a rewrite runs every iteration of the traced CTAs: where the emulator sampled
    the launch's long loops (HeCBench's contraction: 14 minutes, then rejected) the diff is
    shown, display-only, and says why it is not verified."""
    from types import SimpleNamespace

    from gpuadvise.rules import reload_variant
    from gpuadvise.source.text import find_kernel_source

    ks = find_kernel_source(SRC, "window_match")
    assert ks is not None
    line = SimpleNamespace(
        line=source_line(SRC, "same += target[t + j]"), buffer="target", lanes=100,
        addresses=10, threads=1, after_store=0, stored_between=0, same_inst=100,
        previous_line=0, store_line=0, store_buffer="", read_only=True, gap=3.0,
    )  # fmt: skip
    for sampled, safety in ((False, "automatic-and-verified"), (True, "display-only")):
        v = reload_variant(ks, [line], str(SRC), sampled)
        assert v.safety == safety and v.diff and "target_r[16]" in v.diff
        assert ("emulator sampled" in v.description) == sampled

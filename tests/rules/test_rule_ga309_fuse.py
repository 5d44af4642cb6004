"""GA309's loop fusion (gpuadvise/source/fixkit_fuse.py) on kernels/fuse/fuse.cu: a thread's
second loop reading back what its first loop stored, iteration by iteration (llm.c's softmax exp
and sum passes through a reassigned row pointer, a template with a macro and one-line loops, C
style with the index declared up front and integers), becomes one loop whose read is the store's
own target; the patched kernel, run whole on the CPU emulator, writes bit-identical outputs and
GA309 reports the buffer no more. Where the trace shows the reads out of step with the stores (a
thread's next element) no fusion is offered; the kit's refusals say why."""

from __future__ import annotations

import numpy as np
import pytest
from rulekit import KERNELS, analyze, patched_folder, run_rule, source_line, whole_run_outputs

from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite
from gpuadvise.source.fixkit_fuse import plan_fuse

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "fuse" / "fuse.cu"
SPECS = {
    "exp_sum": "case.toml",
    "scaled_dot<128>": "scaled_dot.toml",
    "square_sum": "square_sum.toml",
    "exp_sum_next": "exp_sum_next.toml",
    "exp_sum_mirror": "exp_sum_mirror.toml",
    "exp_sum_register": "exp_sum_register.toml",
}
OUTPUTS = {
    "exp_sum": ("out", "sums"),
    "scaled_dot<128>": ("y", "dots"),
    "square_sum": ("buf", "sums"),
}
CTAS = 4


def ga309(src, kernel):
    spec = str(src.parent / SPECS[kernel])
    return run_rule(analyze(src, kernel, CTAS, spec=spec), "GA309", trace_ctas=CTAS)


def outputs(src, kernel):
    """The kernel's outputs over its first 8 CTAs, run whole on the emulator."""
    got = whole_run_outputs(src, kernel, str(src.parent / SPECS[kernel]), "8")
    return [got[b] for b in OUTPUTS[kernel]]


def patched(tmp_path, text):
    return patched_folder(tmp_path, SRC, text)


@pytest.mark.parametrize(
    ("kernel", "marker", "buffer", "has"),
    [
        ("exp_sum", "s += x[i];", "out", "+        s += out[row * n + i];"),
        ("scaled_dot<128>", "acc += y[ROW(r, i)] * w[i];", "y",
         "+        acc += y[ROW(r, i)] * w[i];  // expect: GA309"),
        ("square_sum", "ss = ss + buf[base + i];", "buf",
         "-    }\n-    for (i = threadIdx.x; i < len; i = i + blockDim.x) {"),
    ],
)  # fmt: skip
def test_the_fused_loops_write_the_same_outputs(kernel, marker, buffer, has, tmp_path):
    from gpuadvise.analyze.fix import _not_a_fix
    from gpuadvise.source.patch import apply_unified_diff

    (f,) = ga309(SRC, kernel)
    assert f.line == source_line(SRC, marker)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v
    assert has in v.diff, v.diff
    assert "fused into the loop before it" in v.description and not v.needs_measurement
    assert _not_a_fix(f, v, unsafe=False, measured=False) is None  # --fix checks it itself
    new = patched(tmp_path, apply_unified_diff(SRC.read_text(), v.diff))
    for want, got in zip(outputs(SRC, kernel), outputs(new, kernel), strict=True):
        assert np.count_nonzero(want) and want.tobytes() == got.tobytes()
    left = [x.buffer for f in ga309(new, kernel) for x in f.details.lines]
    assert buffer not in left, left


def test_the_softmax_spelling_moves_the_sum_and_keeps_the_pointer():
    (f,) = ga309(SRC, "exp_sum")
    d = f.variant.diff
    assert "+    float s = 0.0f;\n     for (int i = tid; i < n; i += blockDim.x) {" in d
    assert "     x = out + row * n;\n-    float s = 0.0f;" in d  # the pointer stays after
    assert "`float s = 0.0f;` moved before it" in f.variant.description


def test_reads_out_of_step_with_the_stores_keep_the_advice():
    """The kit alone would fuse exp_sum_next (its headers, names and statements allow it); the
    trace shows each thread reading its next iteration's store, so no fusion is offered."""
    from gpuadvise.rules import forwarded_in_order

    (f,) = ga309(SRC, "exp_sum_next")
    assert f.variant is not None and "fused" not in f.variant.description
    text = SRC.read_text()
    st = T.parse(text)
    line = source_line(SRC, "s += out[row * n + (i + blockDim.x) % n];")
    store = next(
        i for i in range(line, 0, -1) if "out[row * n + i] = expf(inp" in text.splitlines()[i - 1]
    )
    p = plan_fuse(st, _span(st, store), _span(st, line), "out", set())
    assert not isinstance(p, str)
    a = analyze(SRC, "exp_sum_next", CTAS, spec=str(SRC.parent / SPECS["exp_sum_next"]))
    from gpuadvise.trace.view import trace_view

    view = trace_view(a.memory.trace, a.spec)
    assert not forwarded_in_order(view, lambda f: True, "out", store, line)


@pytest.mark.parametrize("kernel", ["exp_sum_mirror", "exp_sum_register"])
def test_another_threads_values_and_the_fixed_kernel_are_silent(kernel):
    assert ga309(SRC, kernel) == []


def _span(st, line):
    return st.line_start(line), st.line_start(line + 1)


KIT = """__global__ void k(float* out, const float* in, const float* __restrict__ w, float* o2, int n) {{
    int t = threadIdx.x;
    float m = 0.0f;
    for (int i = t; i < n; i += blockDim.x) {{
        out[i] = in[i] * 2.0f;  // store
        {first}
    }}
    {between}
    float s = 0.0f;
    for (int i = t; i < n; i {step}= blockDim.x) {{
        s += out[i];  // reload
        {second}
    }}
    o2[t] = s + m;
}}
"""


@pytest.mark.parametrize(
    ("first", "between", "step", "second", "why"),
    [
        ("", "", "+", "", None),
        ("", "", "+", "s += w[i];", None),  # a const __restrict__ parameter
        ("", "", "+", "s += in[i];", "reads or writes memory"),  # may alias `out`
        ("", "", "+", "o2[i] = s;", "reads or writes memory"),
        ("", "__syncthreads();", "+", "", "calls `__syncthreads`"),
        ("", "", "*", "", "headers differ"),
        ("m += out[i];", "", "+", "s += m;", "the second loop reads a name the first changes"),
        ("o2[i] = m;", "", "+", "m = s;", "the first loop reads a name the second changes"),
        ("", "", "+", "if (s > 1.0f) break;", "has a break"),
        ("", "n = n - 1;", "+", "", "of the header changes between the loops"),
        ("o2[i] = m;", "m = 1.0f;", "+", "s += m;", "both loops need `m`"),
        ("", "o2[0] = 1.0f;", "+", "", "between the loops reads or writes memory"),
        ("", "if (t == 0) m = 1.0f;", "+", "", "stands between the loops"),
    ],
)
def test_the_fix_kit_refuses_what_fusing_could_change(first, between, step, second, why):
    text = KIT.format(first=first, between=between, step=step, second=second)
    st = T.parse(text)
    lines = text.splitlines()
    store = next(i for i, s in enumerate(lines, 1) if "// store" in s)
    reload = next(i for i, s in enumerate(lines, 1) if "// reload" in s)
    kernel = T.find_kernel(st, "k")
    p = plan_fuse(st, _span(st, store), _span(st, reload), "out", set(), kernel)
    if why is None:
        assert not isinstance(p, str), p
        rw = Rewrite(text)
        p.apply(rw)
        out = rw.text()
        assert out.count("for (") == 1 and "s += out[i];  // reload" in out
        assert out.index("float s = 0.0f;") < out.index("for (")
    else:
        assert isinstance(p, str) and why in p, p


def test_a_guarded_store_is_refused():
    text = KIT.format(first="", between="", step="+", second="").replace(
        "out[i] = in[i] * 2.0f;  // store", "if (i > 0) out[i] = in[i] * 2.0f;  // store"
    )
    st = T.parse(text)
    lines = text.splitlines()
    store = next(i for i, s in enumerate(lines, 1) if "// store" in s)
    reload = next(i for i, s in enumerate(lines, 1) if "// reload" in s)
    p = plan_fuse(st, _span(st, store), _span(st, reload), "out", set())
    assert isinstance(p, str) and "a guard around it" in p, p


def test_a_read_through_a_pointer_set_from_the_buffer_is_found_among_others():
    """``y = out + 0`` between the loops: the read ``y[i]`` beside ``w[i]`` (a const
    __restrict__ parameter) is the one made the store's target; ``y`` stays after the loop."""
    text = KIT.format(first="", between="const float* y = out + 0;", step="+", second="")
    text = text.replace("s += out[i];  // reload", "s += y[i] * w[i];  // reload")
    st = T.parse(text)
    lines = text.splitlines()
    store = next(i for i, s in enumerate(lines, 1) if "// store" in s)
    reload = next(i for i, s in enumerate(lines, 1) if "// reload" in s)
    p = plan_fuse(st, _span(st, store), _span(st, reload), "out", set(), T.find_kernel(st, "k"))
    assert not isinstance(p, str), p
    rw = Rewrite(text)
    p.apply(rw)
    out = rw.text()
    assert "s += out[i] * w[i];  // reload" in out and out.count("for (") == 1
    assert out.index("for (") < out.index("const float* y = out + 0;")

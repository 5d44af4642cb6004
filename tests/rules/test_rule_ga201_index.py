"""GA201's index padding of 1-D ``__shared__`` arrays (compiled with nvcc, no GPU).

kernels/bank1d/scan.cu: GPU Gems 3's work-efficient scan in three spellings (an index macro, an
index helper function, a template block size). Its tree steps make the lanes of a warp touch
words ``2 * offset`` apart: 2-, 4- ... 16-way conflicts. Every index ``e`` of the array made
``e + (e >> 5)`` (the chapter's ``CONFLICT_FREE_OFFSET``) puts lanes 32 words apart in
neighbouring banks: the diff applies, compiles, computes bit-identical outputs on the CPU
emulator (the exclusive scan of each CTA's 512 elements), and the bank model over the *patched
kernel's own trace* shows the line conflict free. The chapter's own padded scan and a reversal
stay silent; a use that padding could change (a pointer to the array or into it, ``sizeof``, a
macro naming it) refuses the padding with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from patchkit import Patched
from rulekit import KERNELS, analyze, compiled, ev, run_rule, source_line

from gpuadvise.analyze.evaluate import rule_context
from gpuadvise.rules.config import Config
from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

CASE = KERNELS / "bank1d"
SRC = CASE / "scan.cu"
CTAS = 8
SPECS = {
    "scan_macro": "case.toml",
    "scan_helper": "scan_helper.toml",
    "scan_template<256>": "scan_template.toml",
    "scan_offset": "scan_offset.toml",
    "reverse": "reverse.toml",
}


def _analysis(src: Path, kernel: str) -> Any:
    return analyze(src, kernel, CTAS, spec=str(src.parent / SPECS[kernel]))


def ga201(src: Path, kernel: str) -> list[Any]:
    return run_rule(_analysis(src, kernel), "GA201", trace_ctas=CTAS)


def bank_line(src: Path, kernel: str, line: int) -> tuple[int, int]:
    """(wavefronts, ideal) at ``line`` from the bank model over the kernel's own trace."""
    ctx = rule_context(_analysis(src, kernel), Config(trace_ctas=CTAS))
    rows = [ln for ln in ctx.banks.lines if ln.line == line]
    assert rows, f"no shared access traced at line {line}"
    return sum(r.wavefronts for r in rows), sum(r.ideal for r in rows)


def outputs(src: Path, kernel: str, ctas: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """(``in``, ``out``) after the first ``ctas`` CTAs on the emulator."""
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = compiled(src, kernel, spec=str(src.parent / SPECS[kernel]))
    launch = resolve(a.spec, parse_signature(src.read_text(), a.spec.kernel))
    e = emulate(a.module, a.kernel, launch, a.device, sample_ctas=ctas, trace=False)
    return e.inputs["in"], e.outputs["out"]


# the kernels given the padding, by the copy of scan.cu their diffs are applied to together:
# scan_helper's hunks share context lines with the lines its neighbours' diffs rewrite (the
# diffs do not commute), scan_macro's and scan_template's do not
PADDED = (("scan_macro", "scan_template<256>"), ("scan_helper",))


class Fixed:
    """GA201's findings on each kernel of PADDED (8 CTAs traced), and a copy of scan.cu per
    group with its kernels' diffs applied (:class:`patchkit.Patched`, its specs beside it):
    compiled and disassembled twice for the three kernels, not three times. Each kernel's text
    is still checked as its own diff alone makes it."""

    def __init__(self, folder: Path) -> None:
        self.found = {k: ga201(SRC, k) for group in PADDED for k in group}
        self.patched = {}
        for n, group in enumerate(PADDED):
            diffs = {
                k: found[0].variant.diff
                for k in group
                if len(found := self.found[k]) == 1
                and found[0].variant is not None
                and found[0].variant.diff
            }
            patched = Patched(folder / f"copy{n}", SRC, diffs)
            self.patched.update(dict.fromkeys(group, patched))


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> Fixed:
    return Fixed(tmp_path_factory.mktemp("bank1d"))


@pytest.mark.parametrize(
    ("kernel", "array", "marker", "helper_use"),
    [
        ("scan_macro", "temp", "temp[RIGHT(offset, t)] += temp[LEFT(offset, t)];",
         "temp[temp_padded(RIGHT(offset, t))] += temp[temp_padded(LEFT(offset, t))];"),
        ("scan_helper", "buf", "buf[leaf(offset, t, 2)] += buf[leaf(offset, t, 1)];",
         "buf[buf_padded(leaf(offset, t, 2))] += buf[buf_padded(leaf(offset, t, 1))];"),
        ("scan_template<256>", "s", "s[bi] += s[ai];", "s[s_padded(bi)] += s[s_padded(ai)];"),
    ],
)  # fmt: skip
def test_index_padding_applies_compiles_verifies_and_removes_the_conflicts(
    kernel: str, array: str, marker: str, helper_use: str, fixed: Fixed
) -> None:
    line = source_line(SRC, marker)
    (f,) = fixed.found[kernel]
    assert f.line == line and f.severity == "warning"
    e = ev(f)
    # 8 CTAs x 8 warps: the up-sweep's and down-sweep's loads and stores, 2- to 16-way
    assert e["wavefronts"] > 4 * e["ideal_wavefronts"] and e["worst_ways"] == 16
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff
    assert f"pad the index of {array}[512]" in v.description
    assert "e + (e >> 5)" in v.description and "+64 B" in v.description
    assert f"instead of {e['wavefronts']} (" in v.description
    # the text its own diff makes; compiled, traced and run: scan.cu with every kernel's diff
    text = apply_unified_diff(SRC.read_text(), v.diff)
    patched = fixed.patched[kernel].check(kernel, v.diff)
    # every access rewritten, the array grown by a word per 32, one helper before the kernel
    assert helper_use in text
    assert f"{array}_padded(I e) {{ return e + (e >> 5); }}" in text
    assert text.count(f"__device__ __forceinline__ I {array}_padded") == 1
    decl = next(ln.strip() for ln in text.splitlines() if f" {array}[" in ln and "__shared__" in ln)
    assert decl in (
        f"__shared__ int {array}[N + (N >> 5)];",
        f"__shared__ float {array}[N + (N >> 5)];",
        f"__shared__ int {array}[2 * B + (2 * B >> 5)];",
    ), decl
    # the other kernels of the file are untouched
    old_lines, new_lines = SRC.read_text().splitlines(), text.splitlines()
    tail = old_lines.index(
        "// correct: the chapter's own fix, the index padded by hand (a spare word after every 32)"
    )
    assert old_lines[tail:] == new_lines[len(new_lines) - len(old_lines) + tail :]
    # the patched kernel's own trace: the line is conflict free, and GA201 is silent
    wf, ideal = bank_line(patched, kernel, source_line(patched, helper_use))
    assert wf == ideal
    assert bank_line(SRC, kernel, line)[0] > ideal
    assert ga201(patched, kernel) == []
    # bit-identical outputs on the emulator, and both an exclusive scan of each CTA's elements
    data, want = outputs(SRC, kernel)
    _, got = outputs(patched, kernel)
    assert want.tobytes() == got.tobytes()
    blocks = (
        data[: 4 * 512].reshape(4, 512).astype(np.float64 if data.dtype.kind == "f" else np.int64)
    )
    scan = np.cumsum(blocks, axis=1) - blocks
    if data.dtype.kind == "f":
        np.testing.assert_allclose(got[: 4 * 512].reshape(4, 512), scan, rtol=1e-4, atol=1e-3)
    else:
        np.testing.assert_array_equal(
            got[: 4 * 512].reshape(4, 512), (scan + 2**31) % 2**32 - 2**31
        )


@pytest.mark.parametrize("kernel", ["scan_offset", "reverse"])
def test_conflict_free_one_dimensional_arrays_stay_silent(kernel: str) -> None:
    assert ga201(SRC, kernel) == []


# ---------------------------------------------------------------------------------------------
# Uses that the padding could change refuse it: a strided read (lane t reads word 4t: 4-way)

STRIDED = """\
#define N 1024
{top}
__global__ void strided(const float* __restrict__ in, float* __restrict__ out) {{
    __shared__ float s[N];
    const unsigned t = threadIdx.x;
    for (int k = 0; k < 4; ++k) s[t + 256 * k] = in[blockIdx.x * N + t + 256 * k];
    __syncthreads();
{body}
    out[blockIdx.x * 256 + t] = s[4 * t];
}}
"""

STRIDED_CASE = """\
source = "k.cu"
kernel = "strided"
grid = 2112
block = 256
seed = 1

[buffers]
in = "float[2112*1024]"
out = { type = "float", count = "2112*256", fill = "zeros" }
"""


def strided_findings(tmp: Path, top: str = "", body: str = "") -> list[Any]:
    src = tmp / "k.cu"
    src.write_text(STRIDED.format(top=top, body=body))
    (tmp / "case.toml").write_text(STRIDED_CASE)
    a = analyze(src, "strided", CTAS, spec=str(tmp / "case.toml"))
    return run_rule(a, "GA201", trace_ctas=CTAS)


def test_strided_read_gets_the_index_padding(tmp_path: Path) -> None:
    """Lane t reads word 4t: lanes 8 apart share a bank (4-way). With a spare word after every
    32, lanes 8k..8k+7 read words 33k + 4j: banks 4j + k, all 32 different."""
    (f,) = strided_findings(tmp_path)
    assert f.line == 9
    e = ev(f)
    assert e["worst_ways"] == 4
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff
    assert "__shared__ float s[N + (N >> 5)];" in v.diff
    assert "s[s_padded(4 * t)]" in v.diff and "s[s_padded(t + 256 * k)]" in v.diff
    wf, ideal = e["wavefronts"], e["ideal_wavefronts"]
    assert wf == 4 * ideal
    assert f"this line takes {ideal} wavefronts instead of {wf} ({ideal} ideal)" in v.description


@pytest.mark.parametrize(
    ("top", "body", "why"),
    [
        ("", "    const float* p = s;\n    if (t == 0) out[0] = p[1];",
         "line 8 uses s without a subscript"),
        ("", "    const float* q = &s[t];\n    if (t == 0) out[0] = q[1];",
         "line 8 takes the address of an element of s"),
        ("", "    if (t == 0 && sizeof(s) != 4096) return;", "uses s without a subscript"),
        ("#define P (&s[1])", "    if (t == 0) out[1] = *P;",
         "the macro at line 2 uses s otherwise than s[e]"),
        ("#define AT(i) s[i]\n__device__ float at(const float* s) { return s[0]; }",
         "    if (t == 0) out[1] = AT(3);", "s is declared more than once in its scope"),
    ],
    ids=["pointer", "address-of", "sizeof", "macro-pointer", "macro-other-s"],
)  # fmt: skip
def test_unsafe_uses_refuse_the_index_padding(
    tmp_path: Path, top: str, body: str, why: str
) -> None:
    (f,) = strided_findings(tmp_path, top, body)
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    assert "is not provably safe" in v.description and why in v.description, v.description


def test_scan_numbers_by_hand() -> None:
    """The search over (shift, pad) picks a spare word after every 32 (the cheapest of the
    conflict-free ones: 64 B); the whole array's accesses lose every excess wavefront."""
    import sys

    import gpuadvise.rules.registry as rule_registry

    mod = sys.modules[type(rule_registry.load_registry().get("GA201")).__module__]
    a = _analysis(SRC, "scan_macro")
    ctx = rule_context(a, Config(trace_ctas=CTAS))
    line = source_line(SRC, "temp[RIGHT(offset, t)] += temp[LEFT(offset, t)];")
    insts = tuple(i for ln in ctx.banks.lines if ln.line == line for i in ln.insts)
    plan = mod.plan_padding(ctx, insts)
    assert not isinstance(plan, str), plan
    ((decl, p),) = plan.pads
    assert (decl.name, decl.ndim, decl.cols, p.cols, p.pad, p.elem) == ("temp", 1, 512, 32, 1, 4)
    assert plan.extra_bytes == 64 and p.size == 528 * 4
    assert plan.line_after[0] == plan.line_after[1] < plan.line_before[0]
    assert plan.kernel_after[0] == plan.kernel_after[1] < plan.kernel_before[0]


# An accessor macro: its body is rewritten, and every array of the name its expansions reach
# (each kernel's own ``s``) padded alike

TWO_KERNELS = """\
#define N 1024
#define AT(i) s[i]
__global__ void strided(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float s[N];
    const unsigned t = threadIdx.x;
    for (int k = 0; k < 4; ++k) AT(t + 256 * k) = in[blockIdx.x * N + t + 256 * k];
    __syncthreads();
    out[blockIdx.x * 256 + t] = AT(4 * t);
}

__global__ void mirror(float* out) {
    __shared__ float s[64];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = AT(63 - threadIdx.x);
}
"""


def test_accessor_macro_rewritten_and_every_array_of_the_name_padded(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text(TWO_KERNELS)
    (tmp_path / "case.toml").write_text(STRIDED_CASE)
    a = analyze(src, "strided", CTAS, spec=str(tmp_path / "case.toml"))
    (f,) = run_rule(a, "GA201", trace_ctas=CTAS)
    assert f.line == 8
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v
    new = tmp_path / "patched"
    new.mkdir()
    (new / "case.toml").write_text(STRIDED_CASE)
    patched = new / "k.cu"
    patched.write_text(apply_unified_diff(TWO_KERNELS, v.diff))
    text = patched.read_text()
    assert "#define AT(i) s[s_padded(i)]" in text
    assert (
        "__shared__ float s[N + (N >> 5)];" in text
        and "__shared__ float s[64 + (64 >> 5)];" in text
    )
    assert "s[s_padded(threadIdx.x)] = threadIdx.x;" in text
    assert text.index("s_padded(I e)") < text.index("__global__ void strided")
    b = analyze(patched, "strided", CTAS, spec=str(new / "case.toml"))
    assert run_rule(b, "GA201", trace_ctas=CTAS) == []
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    outs = []
    for x, path in ((a, src), (b, patched)):
        launch = resolve(x.spec, parse_signature(path.read_text(), "strided"))
        outs.append(emulate(x.module, x.kernel, launch, x.device, sample_ctas=4, trace=False))
    assert outs[0].outputs["out"].tobytes() == outs[1].outputs["out"].tobytes()


# Dynamic shared memory: the launch sets the array's bytes, so the variant grows them too

DYNAMIC = """\
__global__ void strided(const float* __restrict__ in, float* __restrict__ out) {
    extern __shared__ float s[];
    const unsigned t = threadIdx.x;
    for (int k = 0; k < 4; ++k) s[t + 256 * k] = in[blockIdx.x * 1024 + t + 256 * k];
    __syncthreads();
    out[blockIdx.x * 256 + t] = s[4 * t];
}
"""


def dynamic_case(folder: Path, code: str, smem: int = 4096) -> Path:
    src = folder / "k.cu"
    src.write_text(code)
    spec = STRIDED_CASE.replace("seed = 1\n", f"seed = 1\ndynamic_smem = {smem}\n")
    (folder / "case.toml").write_text(spec)
    return src


def test_dynamic_array_padded_with_the_launch_grown(tmp_path: Path) -> None:
    """1024 floats of dynamic shared memory (4096 B): a spare word after every 32 makes them
    1056 (4224 B), which the variant's launch passes."""
    src = dynamic_case(tmp_path, DYNAMIC)
    a = analyze(src, "strided", CTAS, spec=str(tmp_path / "case.toml"))
    (f,) = run_rule(a, "GA201", trace_ctas=CTAS)
    assert f.line == 6
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v
    assert v.launch == {"dynamic_smem_bytes": 4224}
    assert "grows from 4096 to 4224 B (the host's launch must pass it)" in v.description
    assert "-    extern __shared__ float s[];" not in v.diff  # the declaration stays as it is
    new = tmp_path / "patched"
    new.mkdir()
    patched = dynamic_case(new, apply_unified_diff(DYNAMIC, v.diff), 4224)
    assert "out[blockIdx.x * 256 + t] = s[s_padded(4 * t)];" in patched.read_text()
    b = analyze(patched, "strided", CTAS, spec=str(new / "case.toml"))
    assert run_rule(b, "GA201", trace_ctas=CTAS) == []
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    outs = []
    for x, path in ((a, src), (b, patched)):
        launch = resolve(x.spec, parse_signature(path.read_text(), "strided"))
        outs.append(emulate(x.module, x.kernel, launch, x.device, sample_ctas=4, trace=False))
    assert outs[0].outputs["out"].tobytes() == outs[1].outputs["out"].tobytes()


def test_two_extern_arrays_alias_and_refuse(tmp_path: Path) -> None:
    code = DYNAMIC.replace(
        "    extern __shared__ float s[];\n",
        "    extern __shared__ float s[];\n    extern __shared__ int flags[];\n",
    ).replace("    __syncthreads();\n", "    __syncthreads();\n    if (t == 0) flags[0] = 1;\n")
    src = dynamic_case(tmp_path, code)
    a = analyze(src, "strided", CTAS, spec=str(tmp_path / "case.toml"))
    (f,) = run_rule(a, "GA201", trace_ctas=CTAS)
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    assert "through 2 extern __shared__ arrays" in v.description, v.description


def test_dynamic_padding_is_a_fix_without_a_gpu(tmp_path: Path) -> None:
    """The grown dynamic shared memory keeps the grid and the block: ``--diff`` without a GPU
    verifies it over both whole launches on the emulator and applies it (it was refused as "a
    launch change: its safety needs a GPU measurement"), and the notes name the new launch."""
    import contextlib
    import json

    from clikit import cli_run

    code = DYNAMIC.replace(
        "    out[blockIdx.x * 256 + t] = s[4 * t];\n",
        "    float acc = 0.0f;\n"
        "    for (int r = 0; r < 64; ++r) acc += s[(4 * t + r) & 1023];\n"
        "    out[blockIdx.x * 256 + t] = acc;\n",
    )  # shared-bound: 64 conflicting reads per thread, so the padding's bound is above 1x
    src = dynamic_case(tmp_path, code)
    spec = tmp_path / "case.toml"
    spec.write_text(spec.read_text().replace("2112", "132"))
    with contextlib.chdir(tmp_path):
        p = cli_run("analyze", str(src), "--spec", str(spec), "--select", "GA201",
                    "--no-measure", "--diff", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    fix = json.loads(p.stdout)["fix"]
    (step,) = fix["steps"]
    assert step["rule"] == "GA201" and step["status"] == "applied", step
    assert step["launch"] == {"dynamic_smem_bytes": 4224}
    assert "both whole launches (132 and 132 CTAs)" in step["reason"], step["reason"]
    notes = "\n".join(fix["notes"])
    assert "dynamic shared memory 4224 B" in notes, notes

"""GA303's rewrite of narrow coalesced loads (issue 28 item "vectorize loads/stores"; nvcc, no GPU):
kernels/vectorize/vectorize.cu and kernels/scalar/narrow.cu, one 1- or 2-byte element per thread
or per loop iteration in four spellings (a grid-stride loop over halves in a template, a
block-stride loop along a row at a row offset with ``c = c + blockDim.x``, a thread per byte under
``if (i < n)``, one under an early return). The variant is automatic; the patched kernel, run over
its whole launch on the CPU emulator at sizes with a tail (and, for the rows, with rows whose
chunks are not aligned: the scalar path), writes bit-identical outputs. A column walk, a macro
and a helper that take the pointer stay display-only with the reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from patchkit import Patched
from rulekit import KERNELS, analyze, compiled, run_rule

import gpuadvise.rules as rule_api

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

VEC = KERNELS / "vectorize" / "vectorize.cu"
NARROW = KERNELS / "scalar" / "narrow.cu"


def narrow(src: Path, kernel: str, spec: str) -> list[rule_api.Finding]:
    a = analyze(src, kernel, 8, spec=str(src.parent / spec))
    found = run_rule(a, "GA303", trace_ctas=8)
    return [f for f in found if type(f.details).__name__ == "NarrowRun"]


def _small(src: Path, spec: str, sizes: dict[str, int], grid: int, to: Path) -> Path:
    """``spec`` with ``sizes`` (its [args]) and ``grid``, written to ``to``."""
    text = (src.parent / spec).read_text()
    for name, value in sizes.items():
        text = re.sub(rf"(?m)^{name} = \d+$", f"{name} = {value}", text)
    text = re.sub(r"(?m)^grid = .*$", f"grid = {grid}", text)
    text = text.replace("32768 * w", "6 * w")
    to.write_text(text)
    return to


def _outputs(src: Path, kernel: str, spec: Path) -> dict[str, bytes]:
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = compiled(src, kernel, spec=str(spec))
    launch = resolve(a.spec, parse_signature(src.read_text(), kernel))
    run = emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False)
    return {k: v.tobytes() for k, v in run.outputs.items()}


CASES = [
    # (source, kernel, spec, small sizes, small grid, k, the variant's grid (None: the same),
    # text of the diff)
    (VEC, "pick_max<true>", "pick_max.toml", {"n": 8 * 256 * 3 + 13}, 25, 8, 8192,
     "ga303_v < ga303_nv; ga303_v += blockDim.x * gridDim.x"),
    (VEC, "scale_rows", "scale_rows.toml", {"w": 516}, 6, 8, None,
     "*reinterpret_cast<uint4*>(&x[base + c]) = *reinterpret_cast<const uint4*>(ga303_x);"),
    (VEC, "brighten", "case.toml", {"n": 16 * 256 * 2 + 77}, 33, 16, 2048,
     "const int v = ga303_in[ga303_q] + add;"),
    (NARROW, "threshold_bytes", "case.toml", {"n": 16 * 256 * 2 + 77}, 33, 16, 2048,
     "if (ga303_mask[ga303_q] == 0) {"),
]  # fmt: skip


class Fixed:
    """GA303's narrow-run findings on each kernel of CASES, and one copy of each source with
    every kernel's diff of it applied (:class:`patchkit.Patched`, its specs beside it): compiled
    and disassembled once for vectorize.cu's three kernels, not once per kernel."""

    def __init__(self, folder: Path) -> None:
        self.found = {c[1]: narrow(c[0], c[1], c[2]) for c in CASES}
        self.patched = {}
        for src in {c[0] for c in CASES}:
            diffs = {
                kernel: found[0].variant.diff
                for s, kernel, *_ in CASES
                if s == src
                and len(found := self.found[kernel]) == 1
                and found[0].variant is not None
                and found[0].variant.diff
            }
            self.patched[src] = Patched(folder / src.parent.name, src, diffs)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> Fixed:
    return Fixed(tmp_path_factory.mktemp("vectorize"))


@pytest.mark.parametrize(
    ("src", "kernel", "spec", "sizes", "grid", "k", "shrinks", "has"),
    CASES,
    ids=[c[1] for c in CASES],
)
def test_the_vector_rewrite_writes_the_same_outputs(
    src, kernel, spec, sizes, grid, k, shrinks, has, tmp_path, fixed
):
    (f,) = fixed.found[kernel]
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v
    assert v.label == f"k={k}" and has in v.diff, v.diff
    assert "% 16u == 0" in v.diff  # every chunk 16 bytes, its alignment checked as it runs
    assert (v.launch["grid"][0] if v.launch else None) == shrinks
    new = fixed.patched[src].check(kernel, v.diff)  # the source with every kernel's diff
    want = _outputs(src, kernel, _small(src, spec, sizes, grid, tmp_path / "old.toml"))
    got = _outputs(
        new,
        kernel,
        _small(src, spec, sizes, -(-grid // k) if shrinks else grid, tmp_path / "n.toml"),
    )
    assert want.keys() == got.keys()
    for name in want:
        assert want[name] == got[name], name
    if src == VEC:  # the chunks are taken: the narrow loads are gone (the specs beside it)
        assert narrow(new, kernel, spec) == []


@pytest.mark.parametrize(
    ("src", "kernel", "spec", "why"),
    [
        pytest.param(
            VEC,
            "column_counts",
            "column_counts.toml",
            "`m[...]`'s index changes with `r` too",
            # no finding since s13-memb: a known miss, measured right on the H200
            # (KNOWN_MISSES in test_rules_golden.py)
            marks=pytest.mark.xfail(strict=True, reason="GA303 misses column_counts:52"),
        ),
        (NARROW, "threshold_bytes_macro", "threshold_bytes_macro.toml", "a helper, a macro"),
        (NARROW, "threshold_t<2>", "threshold_t.toml", "a helper, a macro"),
    ],
)
def test_what_the_rewrite_cannot_prove_stays_display_only(src, kernel, spec, why):
    (f,) = narrow(src, kernel, spec)
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    assert "not rewritten" in v.description and why in v.description, v.description


@pytest.mark.parametrize(
    ("body", "why"),
    [
        # a value carried from one element to the next
        (
            "int s = 0;\n    for (int i = threadIdx.x; i < n; i += blockDim.x) { s += a[i]; b[i] = s; }",
            "`s` (declared outside) carries a value",
        ),
        (
            "for (int i = threadIdx.x; i < n; i += blockDim.x) { if (a[i] < 0) break; b[i] = 1; }",
            "leaves the iteration",
        ),
        (
            "for (int i = threadIdx.x; i < n; i += blockDim.x) { b[i] = a[i] + threadIdx.x; }",
            "position other than by the index",
        ),
        (
            "for (int i = threadIdx.x; i < n; i += blockDim.x) { __syncthreads(); b[i] = a[i]; }",
            "synchronize",
        ),
        (
            "for (int i = threadIdx.x; i < n; i += blockDim.x) b[i] = a[i] + a[i + 1];",
            "read at 2 indices",
        ),
        (
            "for (int i = threadIdx.x; i < n; i += blockDim.x) b[i] = a[2 * i];",
            "does not step by one",
        ),
        ("for (int i = 0; i < n; ++i) b[i] = a[i];", "not `for (i = s; i < n; i += S)`"),
    ],
)
def test_the_loop_rewrite_refuses_what_it_cannot_keep(body, why, tmp_path):
    from gpuadvise.source.fixkit_vector import loop_vectors
    from gpuadvise.source.text import find_kernel_source

    cu = tmp_path / "k.cu"
    cu.write_text(
        "__global__ void k(const unsigned char* a, unsigned char* b, int n)\n{\n    "
        + body
        + "\n}\n"
    )
    ks = find_kernel_source(cu, "k")
    assert ks is not None
    at = ks.code.index("a[", ks.body_start)
    fix = loop_vectors(ks, str(cu), {"a": 1, "b": 1}, 16, at, must="a")
    assert fix.diff is None and why in fix.why_not, fix.why_not


def test_a_thread_per_element_carrying_a_value_is_refused(tmp_path):
    from gpuadvise.source.fixkit_vector import per_thread_vectors
    from gpuadvise.source.text import find_kernel_source

    cu = tmp_path / "k.cu"
    cu.write_text(
        "__global__ void k(const unsigned char* a, unsigned char* b, int n)\n{\n"
        "    int seen = 0;\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) { seen += a[i]; b[i] = seen; }\n}\n"
    )
    ks = find_kernel_source(cu, "k")
    assert ks is not None
    fix = per_thread_vectors(ks, str(cu), {"a": 1, "b": 1}, 16, must="a")
    assert fix.diff is None and "`seen`" in fix.why_not, fix.why_not

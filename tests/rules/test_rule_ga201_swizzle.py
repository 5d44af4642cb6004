"""GA201's index swizzle of 1-D ``__shared__`` arrays (compiled with nvcc, no GPU).

kernels/bitonic/sort.cu: a bitonic sort of 512 keys per CTA in three spellings (CUDA samples'
``Comparator`` by reference, a template block size with the pair's index written as
``(t / k) * 2k + t % k``, a macro's compare-exchange). At strides 1 to 16 a warp touches runs of
``k`` words every ``2k``: 2-way conflicts that no index padding removes at every stride (a spare
word per 32 serves stride 1 only; the best padding leaves most of the excess). The swizzle (every
odd group of 32 words read backwards, no spare) puts each odd row's runs in the banks the even row
leaves free at every stride: the diff applies, compiles, sorts bit-identically on the CPU
emulator, the bank model over the patched kernel's own trace shows the line conflict free, and
GA201 is silent on it. The partner-``t ^ k`` formulation stays silent; a padding still wins where
it does as well (the scans of test_rule_ga201_index.py keep theirs).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rulekit import KERNELS, analyze, compiled, ev, run_rule, source_line

from gpuadvise.analyze.evaluate import rule_context
from gpuadvise.rules.config import Config
from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

CASE = KERNELS / "bitonic"
SRC = CASE / "sort.cu"
CTAS = 4
SPECS = {
    "bitonic_samples": "case.toml",
    "bitonic_template<256>": "bitonic_template.toml",
    "bitonic_macro": "bitonic_macro.toml",
    "bitonic_xor": "bitonic_xor.toml",
}


def _analysis(src: Path, kernel: str) -> Any:
    return analyze(src, kernel, CTAS, spec=str(src.parent / SPECS[kernel]))


def ga201(src: Path, kernel: str) -> list[Any]:
    return run_rule(_analysis(src, kernel), "GA201", trace_ctas=CTAS)


def outputs(src: Path, kernel: str) -> tuple[np.ndarray, np.ndarray]:
    """(``in``, ``out``) after the first ``CTAS`` CTAs on the emulator."""
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = compiled(src, kernel, spec=str(src.parent / SPECS[kernel]))
    launch = resolve(a.spec, parse_signature(src.read_text(), a.spec.kernel))
    e = emulate(a.module, a.kernel, launch, a.device, sample_ctas=CTAS, trace=False)
    return e.inputs["in"], e.outputs["out"]


@pytest.mark.parametrize(
    ("kernel", "arrays", "marker", "helper_use"),
    [
        ("bitonic_samples", ("s_key",), "Comparator(s_key[pos + 0], s_key[pos + stride], up);",
         "Comparator(s_key[s_key_swizzled(pos + 0)], s_key[s_key_swizzled(pos + stride)], up);"),
        ("bitonic_template<256>", ("keys",), "unsigned a = keys[lo], b = keys[lo + k];",
         "unsigned a = keys[keys_swizzled(lo)], b = keys[keys_swizzled(lo + k)];"),
        ("bitonic_macro", ("sk",), "CMP_SWAP(sk[p], sk[p + stride], (t & (size / 2)) == 0)",
         "CMP_SWAP(sk[sk_swizzled(p)], sk[sk_swizzled(p + stride)], (t & (size / 2)) == 0)"),
    ],
)  # fmt: skip
def test_swizzle_applies_compiles_sorts_the_same_and_removes_the_conflicts(
    kernel: str, arrays: tuple[str, ...], marker: str, helper_use: str, tmp_path: Path
) -> None:
    (f,) = ga201(SRC, kernel)
    assert f.line == source_line(SRC, marker) and f.severity == "warning"
    e = ev(f)
    assert e["worst_ways"] == 2 and e["wavefronts"] > 1.3 * e["ideal_wavefronts"]
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff
    for a in arrays:
        assert f"swizzle the index of {a}[512]" in v.description
    assert "e ^ (((e >> 5) & 1) * 31)" in v.description and "+0 B" in v.description
    for t in [*CASE.glob("*.toml"), CASE / "comparator.cuh"]:
        shutil.copy(t, tmp_path / t.name)
    patched = tmp_path / SRC.name
    patched.write_text(apply_unified_diff(SRC.read_text(), v.diff))
    text = patched.read_text()
    assert helper_use in text
    for a in arrays:  # the array keeps its length; one helper before the kernel
        assert f"{a}_swizzled(I e) {{ return e ^ (((e >> 5) & 1) * 31); }}" in text
        assert text.count(f"__device__ __forceinline__ I {a}_swizzled") == 1
        decl = next(
            ln for ln in SRC.read_text().splitlines() if f" {a}[" in ln and "__shared__" in ln
        )
        assert decl in text.splitlines()  # the declaration as it was
    # the patched kernel's own trace: the line conflict free in the bank model, GA201 silent
    ctx = rule_context(_analysis(patched, kernel), Config(trace_ctas=CTAS))
    rows = [r for r in ctx.banks.lines if r.line == source_line(patched, helper_use)]
    assert rows and sum(r.wavefronts for r in rows) == sum(r.ideal for r in rows)
    assert ga201(patched, kernel) == []
    # bit-identical outputs on the emulator: each CTA's 512 keys sorted ascending
    data, want = outputs(SRC, kernel)
    _, got = outputs(patched, kernel)
    assert want.tobytes() == got.tobytes()
    np.testing.assert_array_equal(
        got[: CTAS * 512].reshape(CTAS, 512), np.sort(data[: CTAS * 512].reshape(CTAS, 512))
    )


def test_partner_xor_formulation_stays_silent() -> None:
    assert ga201(SRC, "bitonic_xor") == []


def test_remap_swizzles_odd_groups_backwards() -> None:
    """Stride-1 compare-exchange of a warp (lane l reads word 2l, words 0..62): 2-way, 64
    words over 32 banks. Swizzled, row 1's words 32 + k move to 32 + (31 - k): its even words
    land in the odd banks row 0 leaves free: 1 wavefront. Stride 16 (runs of 16 every 32: lanes
    0-15 read 0-15, lanes 16-31 read 32-47): the second run moves to 48-63, banks 16-31."""
    from gpuadvise.rules import bank_layout as BL
    from gpuadvise.trace.access import Kind, Space, empty_records

    layout = BL.Layout((BL.SharedVar("s", 0x400, 4096, 4),), 0x1400, 16)
    recs = empty_records(2)
    recs["mask"] = 0xFFFFFFFF
    recs["width"] = 4
    recs["space"] = int(Space.SHARED)
    recs["kind"] = int(Kind.LOAD)
    lanes = np.arange(32, dtype=np.uint64)
    recs["addr"][0] = 0x400 + 8 * lanes
    recs["addr"][1] = 0x400 + 4 * (lanes + 16 * (lanes // 16))
    assert BL.cost(recs[:1]) == (2, 1) and BL.cost(recs[1:]) == (2, 1)
    swz = BL.Padded(layout.vars[0], 32, 4, 0, swizzle=True)
    assert swz.size == 4096
    out = BL.remap(recs, layout, [swz])
    words = (out["addr"] - np.uint64(0x400)) // np.uint64(4)
    np.testing.assert_array_equal(words[0][:16], 2 * lanes[:16])
    np.testing.assert_array_equal(words[0][16:], 32 + (31 - (2 * lanes[16:] - 32)))
    np.testing.assert_array_equal(words[1][16:], 48 + (15 - lanes[:16]))
    assert BL.cost(out[:1]) == (1, 1) and BL.cost(out[1:]) == (1, 1)

"""GA305's lookup-table path: loads whose addresses come from values the kernel read (static PTX
taint) into a buffer small enough for shared memory are one finding per table, at its first
line, with the fix of staging the whole table; a big data-indexed buffer is a gather, left to
GA301. Three spellings (an S-box chained through a byte, the bytes of a word into four float tables
by pointer arithmetic, __ldg of masked keys). Needs nvcc, no GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import rulekit
from rulekit import ev, needs_toolkit, run_rule

pytestmark = [needs_toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = Path(__file__).parents[1] / "cuda" / "tables" / "tables.cu"
N = 8192
CASES = {
    "sbox_index": ("in=uint8[n]:random(0,255)", "sbox=uint8[256]:random(0,255)", "out=uint8[n]"),
    "byte_tables": ("in=uint32[n]:random(0,4294967295)", "table=float32[128]", "out=float32[n]"),
    "ldg_lookup": ("keys=int32[n]:random(0,65535)", "lut=int32[32]", "out=int32[n]"),
}


def _ga305(kernel: str, buffers: tuple[str, ...]):  # type: ignore[no-untyped-def]
    a = rulekit.analyze(SRC, kernel, 4, (f"n={N}",), grid=str(N // 256), block="256",
                        buffers=buffers)  # fmt: skip
    return run_rule(a, "GA305", 4)


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_a_small_table_indexed_by_data_is_staged_whole(kernel: str) -> None:
    (f,) = _ga305(kernel, CASES[kernel])
    table = {"sbox_index": "sbox", "byte_tables": "table", "ldg_lookup": "lut"}[kernel]
    assert f"`{table}`" in f.message and "lookup table" in f.message
    assert "Copy the whole table to shared memory" in f.message
    e = ev(f)
    assert e["table_bytes"] <= 48 * 1024 and e["threads_per_address"] >= 4.0
    assert f.variant is not None and "__shared__" in f.variant.description
    assert f.recommend_only_if_faster is True


def test_lookups_on_several_lines_are_one_finding_at_the_first() -> None:
    (f,) = _ga305("ldg_lookup", CASES["ldg_lookup"])
    assert f.line == 30  # both lookups are on line 30: one finding, one line
    (g,) = _ga305("byte_tables", CASES["byte_tables"])
    assert g.line == 22


def test_a_big_data_indexed_buffer_is_a_gather_not_a_table() -> None:
    buffers = ("idx=int32[n]:random(0,1000000)", "big=float32[1048576]", "out=float32[n]")
    assert _ga305("big_gather", buffers) == []

"""values.operand_constant: a 0-d operand gives the bits and dtype a numpy scalar gives, and
cannot be changed in place (it is shared by every access of an instruction)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.ptx.memory import GLOBAL_BASE
from gpuadvise.ptx.values import operand_constant

_EDGES = [0, 1, -1, 4, 2**31 - 1, -(2**31), 2**40 + 3, -(2**62), 2**63 - 1, GLOBAL_BASE]


@pytest.mark.parametrize("value", _EDGES)
def test_add_and_subtract_match_the_scalars(value: int) -> None:
    rng = np.random.default_rng(abs(value) % 1000)
    for size in (1, 5, 12, 256):
        a = rng.integers(-(2**62), 2**62, size, dtype=np.int64)
        c = operand_constant(value)
        for got, want in (
            (np.add(a, c), a + np.int64(value)),
            (np.subtract(a, c), a - np.int64(value)),
        ):
            assert got.dtype == want.dtype == np.int64
            np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


@pytest.mark.parametrize("shift", [0, 1, 2, 3, 4])
def test_right_shift_matches_a_python_int(shift: int) -> None:
    offs = np.array([0, 7, 4096, 2**40 + 12, 2**63 - 1], np.int64)
    got = np.right_shift(offs, operand_constant(shift))
    want = offs >> shift
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_a_constant_is_read_only_and_0d() -> None:
    c = operand_constant(16)
    assert c.shape == () and c.dtype == np.int64 and bool(c) and not bool(operand_constant(0))
    with pytest.raises(ValueError):
        c += 1
    with pytest.raises(ValueError):
        np.add(np.ones(3, np.int64), 1, out=np.broadcast_to(c, (3,)))
    assert int(c) == 16

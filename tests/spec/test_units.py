"""Property tests for the size and launch-dimension parsers in gpuadvise.spec.units."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.errors import UsageError
from gpuadvise.spec.units import Dim3, parse_dims, parse_size

extents = st.integers(min_value=1, max_value=2**31 - 1)
dims = (
    st.builds(Dim3, extents, extents, extents)
    | st.builds(Dim3, extents)
    | st.builds(Dim3, extents, extents)
)


@settings(max_examples=examples(300))
@given(d=dims)
def test_dims_round_trip_through_str(d: Dim3) -> None:
    assert parse_dims(str(d)) == d
    assert parse_dims(d.x) == Dim3(d.x)


@settings(max_examples=examples(300))
@given(
    values=st.lists(extents, min_size=1, max_size=3),
    sep=st.sampled_from(["x", "X", ",", "*", " x ", ", ", " * "]),
    wrap=st.sampled_from(["{}", "({})", "[{}]", "  {}  "]),
)
def test_dims_accept_every_separator(values: list[int], sep: str, wrap: str) -> None:
    d = parse_dims(wrap.format(sep.join(map(str, values))))
    assert d.as_tuple() == tuple(values + [1] * (3 - len(values)))
    assert d.count == d.x * d.y * d.z


@settings(max_examples=examples(200))
@given(values=st.lists(st.integers(max_value=0), min_size=1, max_size=3))
def test_dims_refuse_zero_and_negative(values: list[int]) -> None:
    with pytest.raises(UsageError, match="zero or negative"):
        parse_dims("x".join(map(str, values)))


@settings(max_examples=examples(500))
@given(
    text=st.one_of(st.text(max_size=30), st.text(alphabet="0123456789xX,*()[] -+.", max_size=30))
)
@example("")
@example("1x2x3x4")
@example("0")
@example("16x")
def test_dims_garbage_only_raises_usage_error(text: str) -> None:
    try:
        d = parse_dims(text)
    except UsageError as err:
        assert err.hint
    else:
        assert min(d.as_tuple()) >= 1


@settings(max_examples=examples(300))
@given(n=st.integers(min_value=0, max_value=2**40))
def test_size_round_trips(n: int) -> None:
    assert parse_size(n) == n
    assert parse_size(str(n)) == n
    assert parse_size(hex(n)) == n
    assert parse_size(f"{n}b") == n


@settings(max_examples=examples(300))
@given(
    n=st.integers(min_value=0, max_value=2**20),
    unit=st.sampled_from(["k", "K", "kb", "KB", "KiB", "m", "M", "MB", "MiB", "g", "GiB"]),
    space=st.sampled_from(["", " "]),
)
def test_size_units_are_binary(n: int, unit: str, space: str) -> None:
    scale = {"k": 1024, "m": 1024**2, "g": 1024**3}[unit[0].lower()]
    assert parse_size(f"{n}{space}{unit}") == n * scale


def test_size_fractions() -> None:
    assert parse_size("1.5k") == 1536
    assert parse_size("0.5KiB") == 512
    with pytest.raises(UsageError, match="whole number"):
        parse_size("1.1")
    with pytest.raises(UsageError, match="negative"):
        parse_size(-1)
    with pytest.raises(UsageError, match="unit"):
        parse_size("0x10k")


@settings(max_examples=examples(500))
@given(
    text=st.one_of(st.text(max_size=30), st.text(alphabet="0123456789.xXkKmMgGiIbB -", max_size=30))
)
@example("")
@example("1e5")
@example("k")
@example("0x")
@example("1.k")
def test_size_garbage_only_raises_usage_error(text: str) -> None:
    try:
        value = parse_size(text)
    except UsageError as err:
        assert err.hint
    else:
        assert isinstance(value, int) and value >= 0


@pytest.mark.parametrize("text", ["9" * 400, "1" * 5000 + "x2"])
def test_huge_numbers_raise_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        parse_size(text)
    with pytest.raises(UsageError):
        parse_dims(text)

"""Kernel cases under folders (``analyze PATH...``) and CI shards (``--shard K/N``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuadvise.analyze.cases import (
    Case,
    discover_cases,
    parse_shard,
    take_shard,
    time_to_win_ms,
)
from gpuadvise.analyze.options import KernelOptions
from gpuadvise.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


@given(st.lists(st.text(min_size=1, max_size=6), unique=True, max_size=40), st.integers(1, 12))
def test_shards_partition_the_cases(names: list[str], n: int) -> None:
    shards = [take_shard(names, (k, n), key=str) for k in range(1, n + 1)]
    flat = [x for s in shards for x in s]
    assert sorted(flat) == sorted(names)  # nothing lost, nothing repeated
    assert len(flat) == len(set(flat))
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    # the split depends on the ids only, not on the order they were found in
    assert take_shard(list(reversed(names)), (1, n), key=str) == shards[0]


@pytest.mark.parametrize("text", ["0/3", "4/3", "1", "a/b", "1/0", "2/3/4", ""])
def test_bad_shards_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="--shard"):
        parse_shard(text)


def test_good_shard() -> None:
    assert parse_shard(" 2/5 ") == (2, 5)
    assert parse_shard(None) is None


def test_time_to_win() -> None:
    assert time_to_win_ms(10.0, 2.0) == pytest.approx(5.0)
    assert time_to_win_ms(10.0, 4.0) == pytest.approx(7.5)
    assert time_to_win_ms(10.0, 0.9) == 0.0  # slower: nothing to win
    assert time_to_win_ms(None, 2.0) is None


def _write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_discovery_finds_specs_case_files_and_gate_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    two = "__global__ void a(float* x) { x[0] = 1; }\n__global__ void b(float* x) { x[1] = 2; }\n"
    _write(tmp_path / "k/two.cu", two)
    _write(tmp_path / "k/case.toml", 'source = "two.cu"\ngrid = 1\nblock = 32\n')
    _write(tmp_path / "k/b.toml", 'source = "two.cu"\nkernel = "b"\ngrid = 2\nblock = 64\n')
    _write(tmp_path / "k/ruff.toml", "line-length = 100\n")  # not a launch spec
    _write(tmp_path / "k/missing.toml", 'source = "gone.cu"\nkernel = "x"\n')
    _write(tmp_path / ".hidden/x.toml", 'source = "x.cu"\n')  # skipped
    _write(tmp_path / "one/only.cu", "__global__ void only(int* p) { p[0] = 0; }\n")
    _write(tmp_path / "one/only.toml", "grid = 1\nblock = 32\n")
    _write(
        tmp_path / "g/gpuadvise.toml",
        '[gate]\n[[gate.cases]]\nname = "gc"\nsource = "../one/only.cu"\nkernel = "only"\n'
        'grid = "4"\nblock = "128"\n',
    )

    def gate_cases(f: Path) -> list[Case]:
        from gpuadvise.cli.analyze import _gate_cases

        return _gate_cases(f)

    cases = discover_cases([str(tmp_path)], KernelOptions(source=None), gate_cases=gate_cases)
    by_id = {c.id: c for c in cases}
    assert set(by_id) == {
        "g/gate:gc",
        "k/b.toml",
        "k/case.toml::a",
        "k/missing.toml",
        "one/only.toml",
    }
    assert by_id["k/case.toml::a"].options.kernel == "a"  # b has its own spec
    assert by_id["k/b.toml"].options.kernel == "b"
    assert "gone.cu" in (by_id["k/missing.toml"].error or "")
    assert Path(by_id["one/only.toml"].options.source or "").name == "only.cu"
    assert by_id["g/gate:gc"].options.grid == "4"
    assert [c.id for c in cases] == sorted(by_id)  # sorted, whatever the walk found first


def test_discovery_of_the_bundled_kernels_is_stable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    a = discover_cases(["kernels"], KernelOptions(source=None))
    b = discover_cases(["kernels/tail", "kernels"], KernelOptions(source=None))
    assert [c.id for c in a] == [c.id for c in b]  # a folder given twice adds nothing
    assert all(c.error is None for c in a), [c.error for c in a if c.error]
    assert {"kernels/tail/case.toml", "kernels/tail/scale_stride.toml"} <= {c.id for c in a}


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        discover_cases([str(tmp_path / "nope")], KernelOptions(source=None))

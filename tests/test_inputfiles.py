"""Input files a stranger wrote (gpuadvise/inputfiles.py): regular files only, sizes and nesting
checked before parsing. Each hostile file of the gate-inputs review is replayed through the
loader that reads it (spec, gate configuration, baseline, rules configuration), and the lexical
checks are compared with the parsers on generated text."""

from __future__ import annotations

import json
import os
import time
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuadvise.errors import ConfigError
from gpuadvise.gate.baseline import BaselineError, load_baseline
from gpuadvise.gate.config import load_gate_config
from gpuadvise.inputfiles import (
    MAX_KEY_PARTS,
    MAX_NESTING,
    TEXT_LIMIT_BYTES,
    json_shape_problem,
    load_toml_file,
    parse_json,
    parse_toml,
    read_cache_bytes,
    read_input_text,
    toml_shape_problem,
)
from gpuadvise.rules.config import load_config
from gpuadvise.spec.kernel_spec import load_spec

pytestmark = pytest.mark.timeout(60)

LOADERS = {
    "spec": load_spec,
    "gate configuration": lambda p: load_gate_config(p),
    "baseline": load_baseline,
    "rules configuration": load_config,
}


def _one_line(exc: BaseException) -> str:
    assert isinstance(exc, ConfigError)
    line = exc.one_line()
    assert "\n" not in line and "; " in line, line  # what is wrong; how to fix it
    return line


@pytest.mark.parametrize("what", list(LOADERS))
def test_a_fifo_is_refused_not_waited_on(what: str, tmp_path: Path) -> None:
    name = {"rules configuration": "gpuadvise.toml", "baseline": "b.json"}.get(what, "x.toml")
    fifo = tmp_path / name
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(ConfigError) as e:
        LOADERS[what](fifo)
    assert time.monotonic() - start < 5
    line = _one_line(e.value)
    assert "named pipe" in line or "does not exist" in line or "not a" in line, line


@pytest.mark.parametrize("what", ["spec", "gate configuration", "rules configuration"])
def test_a_100000_part_dotted_key_is_refused_before_parsing(what: str, tmp_path: Path) -> None:
    path = tmp_path / ("gpuadvise.toml" if what == "rules configuration" else "x.toml")
    path.write_text("a" + ".a" * 100_000 + " = 1\n")
    start = time.monotonic()
    with pytest.raises(ConfigError) as e:
        LOADERS[what](path)
    assert time.monotonic() - start < 2  # plain tomllib: 20 s and 16 GB
    assert "dotted key" in _one_line(e.value)


@pytest.mark.parametrize("depth", [500, 100_000])
@pytest.mark.parametrize("shape", ["array", "inline table"])
@pytest.mark.parametrize("what", ["spec", "gate configuration", "rules configuration"])
def test_deep_toml_is_a_one_line_error(what: str, shape: str, depth: int, tmp_path: Path) -> None:
    value = "[" * depth + "]" * depth if shape == "array" else "{a=" * depth + "1" + "}" * depth
    path = tmp_path / ("gpuadvise.toml" if what == "rules configuration" else "x.toml")
    key = "gate.grid" if what == "gate configuration" else "grid"
    path.write_text(f"{key} = {value}\n")
    with pytest.raises(ConfigError) as e:  # not RecursionError
        LOADERS[what](path)
    assert "nest more than" in _one_line(e.value)


@pytest.mark.parametrize("depth", [500, 100_000])
def test_deep_baseline_is_a_one_line_error(depth: int, tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text('{"kind": "gpuadvise-gate-baseline", "x": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(BaselineError) as e:
        load_baseline(path)
    assert "nest more than" in _one_line(e.value)


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    with path.open("wb") as f:  # sparse: nothing is written but its size
        f.truncate(5 << 30)
    start = time.monotonic()
    with pytest.raises(ConfigError) as e:
        load_spec(path)
    assert time.monotonic() - start < 2
    assert "5.0 GiB" in _one_line(e.value)
    assert read_cache_bytes(path, TEXT_LIMIT_BYTES) is None


def test_folders_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        read_input_text(tmp_path, "baseline")
    assert "is a folder, not a regular file; give the baseline" in _one_line(e.value)
    with pytest.raises(ConfigError) as e:
        load_toml_file(tmp_path / "nope.toml", "spec file", missing_hint="check the --spec path")
    assert "does not exist; check the --spec path" in _one_line(e.value)
    assert read_cache_bytes(tmp_path, 100) is None
    assert read_cache_bytes(tmp_path / "nope", 100) is None
    assert read_cache_bytes(tmp_path / "a\0b", 100) is None


def test_shape_checks_pass_what_gpuadvise_writes() -> None:
    spec = (
        'source = "reduce.cu"  # a comment with [[[ and "quotes"\n'
        'kernel = "reduce<256, true>"\ngrid = [240, 135]\nrtol = 1.5e-4\n'
        "when = 1979-05-27T07:32:00.999\n"
        'text = """multi [ line\n { with "" quotes """\nlit = \'\'\'[[[\'\'\'\n'
        "[tool.gpuadvise.gate.thresholds]\n"
        'registers = { abs = 4, rel = "10%" }\n"quoted.key".b.c = 1\n'
    )
    assert toml_shape_problem(spec) is None
    assert parse_toml(spec, "spec")["grid"] == [240, 135]
    doc = json.dumps({"a": [[{"b": "[[[[\\"}]], "c": "{{{{"})
    assert json_shape_problem(doc) is None and parse_json(doc)["c"] == "{{{{"
    deep = "[" * 33
    assert json_shape_problem(f'["\\\\", "\\"{deep}", "{deep}"]') is None  # in strings
    assert json_shape_problem(f'["x\\"", {deep}') is not None  # an escaped quote ends none
    assert json_shape_problem(f'"unterminated {deep}') is None
    assert json_shape_problem("]]]]" + "[" * 32) is None  # closers first count for nothing
    assert json_shape_problem("]]]]" + deep) is not None


# --- properties: the lexical checks against the parsers ----------------------------------------

_LEAF = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(alphabet="ab[]{}\"'#.=,\\\n ", max_size=8),
)


def _toml_value(v: object) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"k{i} = {_toml_value(x)}" for i, x in enumerate(v.values())) + "}"
    return json.dumps(v) if isinstance(v, str) else repr(v)


def _depth(v: object) -> int:
    if isinstance(v, list | dict):
        items = v if isinstance(v, list) else list(v.values())
        return 1 + max((_depth(x) for x in items), default=0)
    return 0


def _nested(depth: int) -> st.SearchStrategy[object]:
    return st.recursive(
        _LEAF,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.just("k"), inner, max_size=1)
        ),
        max_leaves=depth,
    )


@settings(max_examples=200, deadline=None, database=None)
@given(_nested(60), st.integers(1, 80))
def test_toml_nesting_is_bounded_exactly(value: object, parts: int) -> None:
    key = ".".join(["k"] * parts)
    text = f"{key} = {_toml_value(value)}\n"
    problem = toml_shape_problem(text)
    if _depth(value) > MAX_NESTING or parts > MAX_KEY_PARTS:
        assert problem is not None
    else:
        assert problem is None, problem
        tomllib.loads(text)  # the text is valid: the check passed something the parser takes


@settings(max_examples=200, deadline=None, database=None)
@given(_nested(60))
def test_json_nesting_is_bounded_exactly(value: object) -> None:
    text = json.dumps(value)
    if _depth(value) > MAX_NESTING:
        with pytest.raises(ValueError):
            parse_json(text)
    else:
        assert parse_json(text) == json.loads(text)


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(alphabet="ab1.[]{}\"'#=,\\\n ", max_size=300))
def test_any_text_is_parsed_or_refused_in_one_line(text: str) -> None:
    try:
        parse_toml(text, "x.toml")
    except ConfigError as exc:
        assert "\n" not in exc.one_line()
    try:
        parse_json(text)
    except ValueError:
        pass


def test_a_nul_byte_in_a_source_name_is_a_one_line_error(tmp_path: Path) -> None:
    spec = tmp_path / "x.toml"
    spec.write_text('source = "reduce.cu\\u0000.cu"\ngrid = 1\nblock = 32\n')
    with pytest.raises(ConfigError) as e:  # was ValueError: embedded null byte
        load_spec(spec)
    assert "NUL byte" in _one_line(e.value)
    gate = tmp_path / "gpuadvise.toml"
    gate.write_text('[[gate.cases]]\nsource = "reduce.cu\\u0000.cu"\n')
    with pytest.raises(ConfigError) as e:
        load_gate_config(gate)
    assert "NUL byte" in _one_line(e.value)
    from gpuadvise.errors import UsageError
    from gpuadvise.spec.kernel_spec import build_kernel_spec

    with pytest.raises(UsageError) as e:
        build_kernel_spec("reduce.cu\0.cu", grid=1, block=32)
    assert "NUL byte" in e.value.one_line()

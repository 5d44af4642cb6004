"""Property: whatever the arguments and spec files, the CLI ends in exit 0, 1 or 2, an exit 2 says
one line ``error: ...`` on stderr, nothing escapes as a traceback, no input file changes, and no
line it prints on stdout or stderr is a GitHub workflow command or holds a control character
(user text in names, paths and values is escaped: issue 21).

Generated: ``analyze`` launches (the source, --grid/--block/--arg/--buffer/--sample-ctas/--output/
--gpu/--fail-on), spec TOML files (valid or not), ``occupancy`` inputs, and gate configurations. No GPU
is needed: ``--no-trace`` keeps the emulator out, and the gate gates compile-time metrics only, so
after the first compile (cached) each example takes milliseconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.cli.main import main

KERNEL = """\
__global__ void scale(float* out, const float* in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
"""

SETTINGS = settings(
    max_examples=examples(25),
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

NAMES = st.sampled_from(["n", "out", "in", "bogus", "N", "", "n n", "x" * 300])
NUMBERS = st.one_of(
    st.integers(min_value=-(2**65), max_value=2**65).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
)
WORDS = st.sampled_from(
    ["", " ", "n", "n/0", "n*n*n*n*n*n", "ceil_div(n,256)", "0x10", "1e3", "true", "x" * 5000]
)
GOOD_DIMS = st.one_of(
    st.integers(min_value=1, max_value=4096).map(str),
    st.sampled_from(["16x16", "4,4", "ceil_div(n, 256)", "8x4x2", " 8 "]),
)
HOSTILE_DIMS = st.one_of(
    st.integers(min_value=-2, max_value=2**31 + 1).map(str),
    st.sampled_from(
        ["0x10", "1x1x65", "2147483647x65535x65535", "ceil_div(n,256)x2", "4x", "x", "1,2,3,4"]
    ),
    st.text(max_size=12),
)
GOOD_BLOCK = st.one_of(
    st.integers(min_value=1, max_value=1024).map(str), st.sampled_from(["16x16", "8x4x2", "32,8"])
)
# Mostly valid, so that most examples run the whole command.
DIMS = st.one_of(GOOD_DIMS, GOOD_DIMS, GOOD_DIMS, HOSTILE_DIMS)
VALUES = st.one_of(NUMBERS, WORDS, st.text(max_size=12))
GOOD_N = st.integers(min_value=1, max_value=10**6).map(lambda v: f"n={v}")
ARGS = st.lists(
    st.one_of(GOOD_N, GOOD_N, GOOD_N, st.builds(lambda n, v: f"{n}={v}", NAMES, VALUES)),
    min_size=1,
    max_size=3,
)
BUFFERS = st.builds(
    lambda name, typ, count, fill: f"{name}={typ}[{count}]{fill}",
    NAMES,
    st.sampled_from(["float", "float32", "int", "uint8", "quux", "double2", ""]),
    st.sampled_from(["n", "0", "-1", "1000", "n*n", "1000000000000", "", "n/0"]),
    st.sampled_from(["", ":zeros", ":random", ":ones", ":iota", ":bogus", ":"]),
)
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# User text for names: line breaks, workflow-command prefixes, ESC sequences, rich markup.
USER_TEXT = st.one_of(
    st.lists(
        st.sampled_from(
            ["::", "##[", "error", "::stop-commands::t", "\n", "\r", "\x1b[2J", "\x07", "[/]",
             "[red]", ":x:", " ", "x", "\u202e", "\x85"]
        ),
        min_size=1,
        max_size=8,
    ).map("".join),
    st.text(max_size=12),
)  # fmt: skip
# Few distinct flag sets: each is one compile (cached after that).
SAFE_FLAGS = st.sampled_from(["-DTILE=16", "-lineinfo"])


def assert_no_commands(text: str, args: list[str]) -> None:
    """No line (split as GitHub's runner splits: LF, CR) starts with ``::`` once stripped, none
    holds ``##[``, and no control character but LF and TAB is printed raw."""
    for line in re.split(r"\r\n|\r|\n", text):
        assert not line.strip().startswith("::") and "##[" not in line, (args, line)
    assert not CONTROL.search(text.replace("\n", "").replace("\t", "")), (args, text[-2000:])


def _digest(paths: list[Path]) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def run_cli(args: list[str], inputs: list[Path]) -> tuple[int, str, str]:
    """``gpuadvise ARGS`` in this process; checks the property and returns (code, out, err)."""
    before = _digest(inputs)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    stderr = err.getvalue()
    assert code in (0, 1, 2), (args, code, stderr[-2000:])
    assert "Traceback" not in stderr, (args, stderr[-2000:])
    if code == 2:
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, stderr[-2000:])
    assert _digest(inputs) == before, f"an input changed: {args}"
    for text in (out.getvalue(), stderr):
        assert_no_commands(text, args)
    event(f"exit {code}" + (f": {stderr[7:400]}" if code == 2 else ""))
    return code, out.getvalue(), stderr


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("props")
    (root / "scale.cu").write_text(KERNEL)
    (root / "out").mkdir()
    return root


HOSTILE_ARGS = st.lists(st.builds(lambda n, v: f"{n}={v}", NAMES, VALUES), min_size=1, max_size=3)
# Each example spoils at most one of these (None: none), so that a good share runs to the end.
SPOILED = st.sampled_from(
    [None, None, None, "grid", "block", "args", "buffers", "sample", "output", "gpu", "source"]
)
# Sources the system cannot look up, or that are not a source file (a traceback before).
HOSTILE_SOURCES = st.sampled_from(
    ["", " ", "k" * 300 + ".cu", "d/" * 2500 + "k.cu", "LOOP", "out", "/dev/null", "missing.cu"]
)


@SETTINGS
@given(data=st.data(), spoiled=SPOILED, fail_on=st.sampled_from([None, "warning", "error"]))
def test_analyze_arguments(work: Path, data: st.DataObject, spoiled, fail_on) -> None:  # type: ignore[no-untyped-def]
    def draw(name: str, good: st.SearchStrategy, bad: st.SearchStrategy):  # type: ignore[no-untyped-def,type-arg]
        return data.draw(bad if spoiled == name else good, label=name)

    source = work / "scale.cu"
    loop = work / "loop.cu"
    if not loop.is_symlink():
        loop.symlink_to(loop.name)
    given_source = draw("source", st.just(str(source)), HOSTILE_SOURCES)
    given_source = {"LOOP": str(loop), "out": str(work / "out")}.get(given_source, given_source)
    gpu = draw("gpu", st.just("H100"), st.sampled_from(["", " ", "nope", "x" * 5000]))
    argv = ["analyze", given_source, "--no-trace", "--gpu", gpu]
    argv += ["--grid", draw("grid", GOOD_DIMS, HOSTILE_DIMS)]
    argv += ["--block", draw("block", GOOD_BLOCK, HOSTILE_DIMS)]
    for a in draw("args", st.lists(GOOD_N, min_size=1, max_size=1), HOSTILE_ARGS):
        argv += ["--arg", a]
    for b in draw("buffers", st.just([]), st.lists(BUFFERS, min_size=1, max_size=2)):
        argv += ["--buffer", b]
    sample = draw(
        "sample",
        st.sampled_from([None, "1", "4"]),
        st.sampled_from(["all", "0", "-1", "5000000000", "x", "", "1e3"]),
    )
    if sample is not None:
        argv += ["--sample-ctas", sample]
    output = draw(
        "output",
        st.sampled_from([None, "report.json", "missing/sub/r.sarif"]),
        st.sampled_from(["SOURCE", "FOLDER", "", "scale.cu/x.json"]),
    )
    if output is not None:
        target = {"SOURCE": str(source), "FOLDER": str(work / "out"), "": ""}.get(output)
        argv += ["--format", "json", "-o", target if target is not None else str(work / output)]
    if fail_on:
        argv += ["--fail-on", fail_on]
    code, _, _ = run_cli(argv, [source])
    if fail_on is None:
        assert code != 1
    if spoiled == "source":
        assert code == 2
    if spoiled in (None, "sample") and sample not in ("0", "-1", "x", "", "1e3"):
        assert code in (0, 1)  # nothing spoiled: the whole command runs
        if output is not None:
            assert (work / output).is_file()


HOSTILE_SPEC = st.sampled_from(["[]", '""', "true", "1.5", '"x"', "-1", str(2**64), '"n/0"'])
SPEC_VALUES = st.one_of(st.integers(min_value=1, max_value=4096).map(str), HOSTILE_SPEC)
GOOD_SPEC_GRID = st.one_of(
    st.integers(min_value=1, max_value=4096).map(str),
    st.sampled_from(['"16x16"', '"ceil_div(n, 256)"', "[4, 4]"]),
)
GOOD_SPEC_BLOCK = st.one_of(
    st.integers(min_value=1, max_value=1024).map(str), st.sampled_from(['"16x16"', "[32, 8]"])
)
SPEC_SPOILED = st.sampled_from(
    [None, None, None, "grid", "block", "n", "extra", "buffers", "garbage"]
)


@SETTINGS
@given(data=st.data(), spoiled=SPEC_SPOILED, flags=st.lists(SAFE_FLAGS, max_size=1))
def test_spec_files(work: Path, data: st.DataObject, spoiled, flags) -> None:  # type: ignore[no-untyped-def]
    def draw(name: str, good: st.SearchStrategy, bad: st.SearchStrategy):  # type: ignore[no-untyped-def,type-arg]
        return data.draw(bad if spoiled == name else good, label=name)

    source = work / "scale.cu"
    spec = work / "spec.toml"
    lines = [
        f"grid = {draw('grid', GOOD_SPEC_GRID, st.one_of(HOSTILE_SPEC, st.none()))}",
        f"block = {draw('block', GOOD_SPEC_BLOCK, st.one_of(HOSTILE_SPEC, st.none()))}",
    ]
    lines = [line for line in lines if not line.endswith("None")]
    extra = draw(
        "extra",
        st.sampled_from([{}, {"seed": "3"}, {"kernel": '"scale"'}, {"dynamic_smem": '"1k"'}]),
        st.dictionaries(
            st.sampled_from(["dynamic_smem", "seed", "repeat", "kernel", "bogus", "rtol"]),
            HOSTILE_SPEC,
            min_size=1,
            max_size=2,
        ),
    )
    lines += [f"{k} = {v}" for k, v in extra.items()]
    if flags:
        lines.append("nvcc_flags = [" + ", ".join(f'"{f}"' for f in flags) + "]")
    lines.append(draw("garbage", st.just(""), st.sampled_from(["[args\n", "grid = = 1\n", "\x00"])))
    n = draw(
        "n", st.integers(min_value=1, max_value=10**6).map(str), st.one_of(HOSTILE_SPEC, st.none())
    )
    if n is not None:
        lines += ["[args]", f"n = {n}"]
    buffers = draw(
        "buffers",
        st.sampled_from([{}, {"in": '"float[n]"'}, {"out": '"float[n]:zeros"'}]),
        st.dictionaries(
            st.sampled_from(["in", "out", "zz"]),
            st.sampled_from(
                ['"int[0]"', '"quux[n]"', '"float[n]:bogus"', "3", '""', '"float[-1]"']
            ),
            min_size=1,
            max_size=2,
        ),
    )
    if buffers:
        lines += ["[buffers]", *(f"{k} = {v}" for k, v in buffers.items())]
    spec.write_text("\n".join(lines) + "\n")
    code, _, _ = run_cli(
        ["analyze", str(source), "--spec", str(spec), "--no-trace", "--gpu", "H100"], [source, spec]
    )
    if spoiled is None:
        assert code == 0


@SETTINGS
@given(
    threads=st.one_of(DIMS, st.integers(min_value=-1, max_value=5000).map(str)),
    regs=st.one_of(st.integers(min_value=-1, max_value=300).map(str), WORDS),
    smem=st.sampled_from(["0", "32k", "48KB", "0x8000", "12q", "-1", "", "1e9", "228k"]),
    gpu=st.sampled_from(["H100", "A100", "", "nope", "x" * 5000]),
    sweep=st.booleans(),
)
def test_occupancy_arguments(threads, regs, smem, gpu, sweep) -> None:  # type: ignore[no-untyped-def]
    argv = ["occupancy", "--threads", threads, "--regs", regs, "--smem", smem, "--gpu", gpu]
    run_cli(argv + (["--sweep"] if sweep else []), [])


@settings(SETTINGS, max_examples=examples(12))
@given(
    grid=DIMS,
    args=st.one_of(
        st.integers(min_value=1, max_value=10**6).map(lambda v: {"n": str(v)}),
        st.integers(min_value=1, max_value=10**6).map(lambda v: {"n": str(v)}),
        st.dictionaries(st.sampled_from(["n", "nn", "in", "rows"]), SPEC_VALUES, max_size=2),
    ),
    buffers=st.dictionaries(st.sampled_from(["in", "inn", "n"]), st.just('"float[n]"'), max_size=1),
    flags=st.lists(
        st.sampled_from(["-O3", "-ccbin=/bin/false", "-DX=$(true)", "-Xptxas=-v"]), max_size=2
    ),
    output=st.sampled_from([None, "gate.sarif", "gpuadvise.toml", "kernels/scale.cu", ""]),
    update=st.booleans(),
    name=st.one_of(st.none(), USER_TEXT),
)
def test_gate_configs(work: Path, grid, args, buffers, flags, output, update, name) -> None:  # type: ignore[no-untyped-def]
    repo = work / "repo"
    repo.mkdir(exist_ok=True)
    kernel = work / "scale.cu"  # the other tests' kernel: its compiles are cached
    config = repo / "gpuadvise.toml"
    case = [
        "[gate]",
        'metrics = ["registers", "spill_bytes", "occupancy"]',
        'gpu = "H100"',
        "[[gate.cases]]",
        *([] if name is None else [f"name = {json.dumps(name)}"]),
        'source = "../scale.cu"',
        f"grid = {grid!r}".replace("'", '"'),
        "block = 256",
    ]
    if args:
        case.append("args = { " + ", ".join(f"{k} = {v}" for k, v in args.items()) + " }")
    if buffers:
        case.append("buffers = { " + ", ".join(f"{k} = {v}" for k, v in buffers.items()) + " }")
    if flags:
        case.append("nvcc_flags = [" + ", ".join(f"'{f}'" for f in flags) + "]")
    config.write_text("\n".join(case) + "\n")
    argv = ["gate", "--config", str(config), "--gates", "static"]
    if update:
        argv.append("--update-baseline")
    elif output is not None:
        argv += ["--format", "sarif", "-o", str(repo / output) if output else ""]
    run_cli(argv, [kernel, config])

"""Property: the parsers of what users type (grid and block, sizes, ``--arg``, ``--buffer``,
fills, ``--sample-ctas``, ``--l2-probe-ctas``, ``--shard``, GPUADVISE_MEMORY_BUDGET) and the
whole launch built from them and bound to a kernel's parameters, on arbitrary input, give a
result or a :class:`~gpuadvise.errors.GpuAdviseError`, never another exception (a traceback).

The inputs are drawn from a small grammar of the forms users write (numbers of every size and
spelling, names the kernel has and has not, expressions, units, fills) as well as from arbitrary
text, so that examples reach the deep paths (the binding to the kernel's parameters, the counts
of buffers, expressions in launch dimensions) and not only the first check.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuadvise.errors import GpuAdviseError

KERNEL = """\
struct Pair { float a; int b; };
__global__ void k(float* out, const float* in, int n, float alpha, long long m,
                  unsigned char* flags, const Pair* pairs, bool on)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && on) out[i] = alpha * in[i] + flags[i] + pairs[i].a;
}
"""

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

NAMES = st.sampled_from(
    ["n", "m", "alpha", "on", "out", "in", "flags", "pairs", "bogus", "N", "", " n", "n n", "1n",
     "x" * 300]
)  # fmt: skip
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.integers(min_value=0, max_value=5000).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        [
            "0x10",
            "0X7fffffff",
            "1e3",
            "1e400",
            "-0",
            "1_000",
            "١٢",
            "0b101",
            "007",
            " 4 ",
            "9" * 400,
            "2**63",
            "4k",
            "1.5k",
            "48KB",
            "0x",
            ".",
        ]
    ),  # fmt: skip
)
WORDS = st.sampled_from(["true", "false", "True", "nan", "inf", "-inf", "n/0", "n%0", ""])


def _expressions() -> st.SearchStrategy[str]:
    leaf = st.one_of(NUMBERS, NAMES, WORDS)
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.builds(
                lambda a, op, b: f"{a}{op}{b}",
                inner,
                st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "<<", ">>", " x ", ","]),
                inner,
            ),
            st.builds(lambda a: f"({a})", inner),
            st.builds(
                lambda f, a, b: f"{f}({a}, {b})",
                st.sampled_from(["ceil_div", "min", "max", "round_up", "abs", "bogus", ""]),
                inner,
                inner,
            ),
            st.builds(lambda a: f"-{a}", inner),
        ),
        max_leaves=6,
    )


EXPRS = _expressions()
TEXT = st.text(max_size=40)
DIMS = st.one_of(
    st.lists(st.one_of(NUMBERS, EXPRS), min_size=1, max_size=4).flatmap(
        lambda parts: st.sampled_from(["x", ",", ", ", "X", " x "]).map(lambda sep: sep.join(parts))
    ),
    TEXT,
)
GOOD_DIMS = st.sampled_from(["4", "16x16", "ceil_div(n, 256)", "2,2,1", "256"])
TYPES = st.sampled_from(
    ["float", "float32", "int", "uint8", "unsigned char", "double2", "half", "float4", "Pair",
     "bogus", "", "float*", "char[4]"]
)  # fmt: skip
FILLS = st.sampled_from(
    ["", ":zeros", ":ones", ":iota", ":random", ":random(0,255)", ":random(5,1)",
     ":random(-1e400,1)", ":random(", ":", ":bogus", ":absent.npy", ":absent.bin", ":/", ":."]
)  # fmt: skip
ARGS = st.builds(lambda n, v: f"{n}={v}", NAMES, st.one_of(NUMBERS, EXPRS, WORDS, TEXT))
BUFFERS = st.one_of(
    st.builds(
        lambda n, t, c, f: f"{n}={t}[{c}]{f}", NAMES, TYPES, st.one_of(NUMBERS, EXPRS), FILLS
    ),
    st.builds(lambda n, f: f"{n}={f}", NAMES, st.sampled_from(["absent.npy", "x", "", "[]"])),
    TEXT,
)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("parsers") / "k.cu"
    path.write_text(KERNEL)
    return path


def _result_or_gpuadvise_error(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    try:
        return fn(*args, **kwargs)
    except GpuAdviseError as err:
        assert err.message, err
        assert "\n" not in err.one_line()
        return None


ENV = {"n": 1000, "m": 7, "w": 0, "big": 2**62}


@SETTINGS
@given(text=st.one_of(DIMS, EXPRS), what=st.sampled_from(["grid", "block"]))
@example(text="ceil_div(n, 0)", what="grid")
@example(text="big*big", what="grid")
@example(text="n" + "*n" * 40, what="block")
def test_launch_dims(text: str, what: str) -> None:
    from gpuadvise.spec.kernel_spec import parse_launch_dims

    got = _result_or_gpuadvise_error(parse_launch_dims, text, ENV, what)
    if got is not None:
        dims, names = got
        assert min(dims.as_tuple()) >= 1 and names <= set(ENV)


@SETTINGS
@given(text=st.one_of(NUMBERS, EXPRS, TEXT))
@example(text="big*big")
def test_dynamic_smem(text: str) -> None:
    from gpuadvise.spec.kernel_spec import parse_smem

    got = _result_or_gpuadvise_error(parse_smem, text, ENV)
    if got is not None:
        assert got[0] >= 0


@SETTINGS
@given(arg=ARGS, buffer=BUFFERS)
def test_arg_and_buffer(arg: str, buffer: str) -> None:
    from gpuadvise.spec.kernel_spec import parse_arg, parse_buffer

    _result_or_gpuadvise_error(parse_arg, arg)
    _result_or_gpuadvise_error(parse_buffer, buffer)


@SETTINGS
@given(text=st.one_of(FILLS.map(lambda f: f[1:]), TEXT))
def test_fill(text: str) -> None:
    from gpuadvise.spec.fills import parse_fill

    _result_or_gpuadvise_error(parse_fill, text)


@SETTINGS
@given(
    text=st.one_of(
        NUMBERS, WORDS, TEXT, st.sampled_from(["all", "ALL", " all ", "1/2", "wave", " Wave "])
    )
)
def test_counts_and_shards(text: str) -> None:
    from gpuadvise.analyze.cases import parse_shard
    from gpuadvise.analyze.options import parse_l2_probe_ctas, parse_sample_ctas

    n = _result_or_gpuadvise_error(parse_sample_ctas, text)
    assert n is None or n in ("all", "wave") or (isinstance(n, int) and n > 0)
    p = _result_or_gpuadvise_error(parse_l2_probe_ctas, text)
    assert p is None or p >= 0
    s = _result_or_gpuadvise_error(parse_shard, text)
    assert s is None or 1 <= s[0] <= s[1]


@SETTINGS
@given(text=st.one_of(NUMBERS, WORDS, TEXT))
def test_memory_budget_variable(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuadvise.spec.environment import memory_budget_cap

    monkeypatch.setenv("GPUADVISE_MEMORY_BUDGET", text.replace("\0", ""))
    cap = _result_or_gpuadvise_error(memory_budget_cap)
    assert cap is None or cap > 0


@SETTINGS
@given(
    grid=st.one_of(GOOD_DIMS, DIMS),
    block=st.one_of(GOOD_DIMS, DIMS),
    smem=st.one_of(st.none(), NUMBERS, EXPRS),
    args=st.lists(st.one_of(st.just("n=1000"), ARGS), max_size=4),
    buffers=st.lists(BUFFERS, max_size=3),
    seed=st.one_of(st.none(), st.integers(min_value=-5, max_value=2**70)),
)
@example(
    grid="ceil_div(n, 256)", block="256", smem=None, args=["n=1000", "on=true"], buffers=[],
    seed=None,
)  # fmt: skip
def test_a_whole_launch_bound_to_the_kernel(
    source: Path,
    grid: str,
    block: str,
    smem: str | None,
    args: list[str],
    buffers: list[str],
    seed: int | None,
) -> None:
    """build_kernel_spec from command-line strings, then bound to the kernel's parameters (as
    ``analyze`` does before it compiles anything)."""
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import build_kernel_spec, resolve

    spec = _result_or_gpuadvise_error(
        build_kernel_spec,
        source,
        "k",
        grid=grid,
        block=block,
        dynamic_smem=smem,
        args=args,
        buffers=buffers,
        seed=seed,
        discover=False,
    )
    if spec is None:
        return
    params = parse_signature(KERNEL, "k")
    launch = _result_or_gpuadvise_error(resolve, spec, params)
    if launch is not None:
        assert launch.total_buffer_bytes >= 0

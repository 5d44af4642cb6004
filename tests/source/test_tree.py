"""The parsed source (gpuadvise.source.tree and KernelSource): kernels in several spellings,
loops, statements, declarations, expressions, on small sources and on every .cu of the repo."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpuadvise.source import tree as T
from gpuadvise.source.signature import list_kernels
from gpuadvise.source.text import KernelSource, find_kernel_source

ROOT = Path(__file__).resolve().parents[2]
CUDA_FILES = sorted(
    [
        *ROOT.glob("kernels/**/*.cu"),
        *ROOT.glob("tests/cuda/**/*.cu"),
        *ROOT.glob("tests/cuda/**/*.cuh"),
    ]
)

SPELLINGS = r"""
#define BLOCK 128
#define RESTRICT __restrict__
#define TILE (BLOCK / 4)  // 32

__device__ __forceinline__ float at(const float* p, int i) { return p[i]; }  // a helper

extern "C" __global__ void plain(float* out) { out[threadIdx.x] = 1.0f; }

extern "C" {
__global__ void in_block(float* out) { for (int i = 0; i < 4; ++i) out[i] = at(out, i); }
}

namespace outer { namespace inner {
__global__ void __launch_bounds__(BLOCK, 2)
bounded(float* out)
{
    while (out[0] > 0) out[0] -= 1;
    do { out[1] += 1; } while (out[1] < 8);
}
} }

template <int B, typename T = float>
__global__ void reduce(const T* RESTRICT in, T* out) {
    __shared__ T s[B];
    __shared__ float tile[TILE][TILE + 1];
    extern __shared__ float dyn[];
    s[threadIdx.x] = in[threadIdx.x];
}
template __global__ void reduce<256>(const float*, float*);

__global__ void __maxnreg__(64) capped(int* x) { x[0] = 0; }

#if 0
__global__ void dead(int* x) {}
#endif
"""


@pytest.fixture()
def spellings(tmp_path: Path) -> Path:
    p = tmp_path / "k.cu"
    p.write_text(SPELLINGS)
    return p


def test_kernels_in_several_spellings(spellings: Path) -> None:
    st = T.parse(spellings.read_text())
    ks = {(k.name, k.specialization_args): k for k in T.kernels(st)}
    assert set(ks) == {
        ("plain", None),
        ("in_block", None),
        ("outer::inner::bounded", None),
        ("reduce", None),
        ("reduce", ("256",)),
        ("capped", None),
    }  # the device helper is no kernel, #if 0 hides `dead`
    assert ks["plain", None].extern_c and ks["in_block", None].extern_c
    assert not ks["outer::inner::bounded", None].extern_c
    lb = ks["outer::inner::bounded", None].launch_bounds
    assert lb is not None and [st.text[a:b].strip() for a, b in lb.args] == ["BLOCK", "2"]
    assert lb.text == "__launch_bounds__(BLOCK, 2)"
    cap = ks["capped", None].maxnreg
    assert cap is not None and cap.text == "__maxnreg__(64)"
    r = ks["reduce", None]
    assert r.template_params == (
        T.TemplateParameter("value", "B", None, "int"),
        T.TemplateParameter("type", "T", "float"),
    )
    assert [p.name for p in r.params][1:] == ["out"] and r.params[1].pointer
    inst = ks["reduce", ("256",)]
    assert inst.instantiation and not inst.is_definition
    assert st.text[r.body[0]] == "{" and st.text[r.body[1]] == "}"


def test_find_kernel_source_binds_the_instantiation(spellings: Path) -> None:
    ks = find_kernel_source(spellings, "reduce<64>")
    assert ks is not None and ks.bindings == {"B": "64", "T": "float"}
    assert ks.constants["B"] == 64 and ks.constants["BLOCK"] == 128 and ks.constants["TILE"] == 32
    assert ks.value("B * 2 + TILE") == 160
    assert ks.value("blockDim.x / 2", **{"blockDim.x": 256}) == 128
    assert ks.value("n + 1") is None
    # the same kernel without template arguments: B is not known, the file's constants are
    plain = find_kernel_source(spellings, "reduce")
    assert plain is not None and "B" not in plain.constants and plain.constants["TILE"] == 32
    ns = find_kernel_source(spellings, "inner::bounded")
    assert ns is not None and ns.kernel is not None and ns.kernel.name == "outer::inner::bounded"
    assert find_kernel_source(spellings, "dead") is None
    assert find_kernel_source(spellings, "nope") is None


def _ks(tmp_path: Path, text: str, kernel: str = "k") -> KernelSource:
    p = tmp_path / "k.cu"
    p.write_text(textwrap.dedent(text))
    ks = find_kernel_source(p, kernel)
    assert ks is not None
    return ks


def test_loops_headers_and_bodies(tmp_path: Path) -> None:
    ks = _ks(
        tmp_path,
        """\
        __global__ void k(int* a, int n) {
            for (unsigned s = 1; s < n; s *= 2) a[s] += 1;
            for (;;) { break; }
            while (n > 0) { n--; }
            do n++; while (n < 4);
            #pragma unroll
            for (int i = 0, j = 1; i < 4; ++i, ++j)
                a[i] = j;
        }
        """,
    )
    lps = ks.loops()
    assert [lp.kind for lp in lps] == ["for", "for", "while", "do", "for"]
    one = lps[0]
    code = ks.code
    assert code[slice(*one.init)] == "unsigned s = 1"  # type: ignore[misc]
    assert code[slice(*one.condition)] == "s < n"  # type: ignore[misc]
    assert code[slice(*one.update)] == "s *= 2"  # type: ignore[misc]
    assert code[slice(*one.body)] == "a[s] += 1;" and not one.braced
    assert code[slice(*one.header)] == "(unsigned s = 1; s < n; s *= 2)"  # type: ignore[misc]
    assert lps[1].init is None and lps[1].condition is None and lps[1].braced
    assert code[slice(*lps[2].condition)] == "n > 0"  # type: ignore[misc]
    assert code[slice(*lps[3].body)] == "n++;" and lps[3].header is None
    assert code[slice(*lps[4].update)] == "++i, ++j"  # type: ignore[misc]
    assert ks.line_at(lps[4].body[0]) == 8


def test_a_pragma_between_a_braceless_header_and_its_body(tmp_path: Path) -> None:
    """``for (...)`` then ``#pragma unroll`` then the inner loop (kernels/regpressure): the
    grammar alone closes the header with an empty body and makes the inner loop its sibling;
    the directive is blanked so the inner loop is the body, at every level, after ``if``,
    ``else`` and ``while`` too, while a pragma before a statement of a block stays one."""
    ks = _ks(
        tmp_path,
        """\
        __global__ void k(float* a, int n) {
            for (int i = 0; i < 8; ++i)
        #pragma unroll
                for (int j = 0; j < 6; ++j)
        #pragma unroll 2
                    for (int l = 0; l < 4; ++l) a[i] += j * l;
            if (n > 1)
        #pragma unroll
                for (int j = 0; j < 6; ++j) a[j] += j;
            else
        #pragma unroll
                for (int j = 0; j < 6; ++j) a[j] -= j;
            while (n--)
        #pragma unroll
                for (int j = 0; j < 6; ++j) a[j] *= 2;
            #pragma unroll
            for (int j = 0; j < 6; ++j) a[j] += 1;
        }
        """,
    )
    t = ks.text
    lps = ks.loops()
    assert len(lps) == 8
    outer, mid, inner = lps[:3]
    assert not outer.braced and outer.body[0] == mid.span[0] and outer.body[1] == mid.span[1]
    assert mid.body[0] == inner.span[0] and t[slice(*inner.body)] == "a[i] += j * l;"
    assert [s.kind for s in ks.top_level()] == [
        "for_statement",
        "if_statement",
        "while_statement",
        "preproc_call",
        "for_statement",
    ]
    for s in ks.statements():  # no made-up empty statement; each found where it is
        assert s.start <= s.end and t[s.end] == ";"
        got = ks.statement_at(s.start)
        assert got is not None and (got.start, got.end) == (s.start, s.end)
    body = ks.statement_at(t.index("a[j] -= j"))
    assert body is not None and body.header_end is not None
    assert t[body.header_end - 1] == ")"  # the inner for's header, not the else's


def test_statements_and_control_headers(tmp_path: Path) -> None:
    ks = _ks(
        tmp_path,
        """\
        __global__ void k(float* a, int n) {
            int i = threadIdx.x;
            if (a[i] > 0) a[i] = 0;
            else a[i] = 1;
            switch (n) { case 1: a[0] = 2; break; }
        }
        """,
    )
    t = ks.text
    assert ks.statement_at(t.index("a[i] > 0")) is None  # in the header
    st = ks.statement_at(t.index("a[i] = 0"))
    assert st is not None and t[st.start : st.end + 1] == "a[i] = 0;"
    assert st.header_end == t.index(") a[i] = 0") + 1
    els = ks.statement_at(t.index("a[i] = 1"))
    assert els is not None and t[els.header_end - 4 : els.header_end] == "else"  # type: ignore[operator]
    case = ks.statement_at(t.index("a[0] = 2"))
    assert case is not None and case.labelled and not st.labelled
    first = ks.statement_at(t.index("threadIdx"))
    assert first is not None and first.kind == "declaration" and first.header_end is None
    assert [s.kind for s in ks.top_level()] == [
        "declaration",
        "if_statement",
        "switch_statement",
    ]
    (i,) = [x for x in ks.ifs() if ks.code[slice(*x.condition)] == "a[i] > 0"]
    assert t[i.head[0] : i.head[1]] == "if (a[i] > 0)" and not i.braced


def test_declarations_shared_arrays_and_uses(tmp_path: Path) -> None:
    ks = _ks(
        tmp_path,
        """\
        #define N 8
        #define AT(r, c) tile[r][c]
        __shared__ float g[N][N + 1];
        __global__ void k(float* o, int i) {
            __shared__ float tile[N][ 2 * N ], row[N];
            extern __shared__ float dyn[];
            volatile int* v = (volatile int*)o;
            const unsigned a = 1, b = a + 1;
            o[0] = tile[i][i] + row[i] + AT(1, 2) + g[0][0] + dyn[i];
            float* p = &tile[0][0];
            p[0] = sizeof(row);
        }
        """,
    )
    decls = ks.declarations()
    shared = [d for d in decls if d.has("__shared__")]
    assert [[dd.name for dd in d.declarators] for d in shared] == [["tile", "row"], ["dyn"]]
    tile, row = shared[0].declarators
    assert [ks.text[a:b] for a, b in tile.dims] == ["N", " 2 * N "]  # spaces kept: edits keep them
    assert (
        len(row.dims) == 1
        and shared[1].has("extern")
        and ks.text[slice(*shared[1].declarators[0].dims[0])] == ""
    )
    v = next(d for d in decls if d.declarators[0].name == "v")
    assert v.has("volatile") and v.declarators[0].pointer and v.type == "int"
    ab = next(d for d in decls if d.declarators[0].name == "a")
    assert [dd.name for dd in ab.declarators] == ["a", "b"] and ab.prefix == "const unsigned"
    (g,) = [d for d in ks.declarations(file=True) if d.file_scope and d.has("__shared__")]
    assert [ks.text[a:b] for a, b in g.declarators[0].dims] == ["N", "N + 1"]
    uses = ks.uses("tile")
    assert [u.subscripts for u in uses] == [2, 2, 2]  # its declaration, o[0] = ..., &tile[0][0]
    assert [u.declared for u in uses] == [True, False, False]
    assert [u.address_taken for u in uses] == [False, False, True]
    (m,) = ks.macro_uses("tile")
    assert m.subscripts == 2 and ks.text[m.span[0] : m.span[1]] == "tile"
    assert [u.subscripts for u in ks.uses("row")][2] == 0  # sizeof(row)
    assert [
        s.name for s in ks.subscripts(within=(ks.text.index("o[0] ="), ks.text.index("float* p")))
    ] == [
        "o",
        "tile",
        "row",
        "g",
        "dyn",
    ]


def test_calls_assignments_and_expressions(tmp_path: Path) -> None:
    ks = _ks(
        tmp_path,
        """\
        __global__ void k(float* o, int n) {
            int i = 4 * (n << 2);
            i += 1;
            o[i] = __hadd(o[0], o[1]) + fminf(1.0f, o[2]);
            o[1] = c ? o[2] : o[3];
        }
        """,
    )
    calls = ks.calls()
    assert [c.name for c in calls] == ["__hadd", "fminf"]
    assert [ks.code[a:b] for a, b in calls[0].args] == ["o[0]", "o[1]"]
    assert [c.name for c in ks.calls(["fminf"])] == ["fminf"]
    assert [(a.kind, a.operator) for a in ks.assignments("i")] == [
        ("init", "="),
        ("compound", "+="),
    ]
    init = ks.assignments("i")[0]
    e = ks.expr(init.value)  # type: ignore[arg-type]
    assert e is not None and e.kind == "binary" and e.op == "*"
    assert [(op, x.text) for op, x in e.chain("*")] == [("", "4"), ("*", "(n << 2)")]
    assert e.args[1].stripped().op == "<<"
    call_span = calls[0].span
    assert ks.call_of(call_span) is not None and ks.called_with(calls[0].args[0]) == "__hadd"
    assert [op for _, op in ks.arithmetic_operators(call_span)] == ["+"]
    parent = ks.expr_parent(ks.subscripts("o")[0].span)
    assert parent is not None and parent.kind == "assignment" and parent.op == "="
    cond = T.parse_expression("(unsigned)(a + b) ? x : y")
    assert cond is not None and cond.kind == "conditional"
    assert cond.args[0].stripped(["unsigned"]).op == "+"
    assert T.parse_expression("a +") is None
    assert "tid" in ks.substitute(init.value, {"n": "tid"})  # type: ignore[arg-type]


@pytest.mark.parametrize("path", CUDA_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cuda_file_of_the_repository(path: Path) -> None:
    """Every kernel the signature reader lists is found in the tree, with its body balanced
    and its loops, declarations and statements inside it."""
    text = path.read_text()
    st = T.parse(text)
    names = {k.name for k in T.kernels(st)}
    for kernel in list_kernels(text):
        base = kernel.split("<", 1)[0]
        assert base in names, (kernel, names)
        ks = find_kernel_source(path, kernel)
        if ks is None:  # declared only, or only as an explicit specialization
            continue
        assert ks.text[ks.body_start] == "{" and ks.text[ks.body_end] == "}"
        body = ks.code[ks.body_start : ks.body_end + 1]
        assert body.count("{") == body.count("}")
        for lp in ks.loops():
            assert ks.body_start < lp.span[0] and lp.span[1] <= ks.body_end + 1
            assert lp.body[0] >= (lp.header[1] if lp.header else lp.span[0])
        for d in ks.declarations():
            assert ks.text[d.span[1] - 1] == ";"
            for dd in d.declarators:
                assert ks.text[dd.name_span[0] : dd.name_span[1]] == dd.name
        for s in ks.statements():
            got = ks.statement_at(s.start)
            assert got is not None and (got.start, got.end) == (s.start, s.end)


def test_a_set_of_types_is_found_in_one_traversal_and_each_span_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Walks of the whole tree for one set of types (an analysis makes hundreds) traverse it
    once; within a span they yield what the pruned traversal of the tree's nodes yields."""
    text = "__global__ void k(float *a, int n) {\n  for (int i = 0; i < n; ++i) { a[i] = 1.f; }\n}"
    text += "\n// é: two bytes, offsets are not the bytes'\nint g(int x) { return x; }\n"
    st = T.SourceTree(text)
    traversals = []
    real = T.SourceTree._walk_all
    monkeypatch.setattr(
        T.SourceTree, "_walk_all", staticmethod(lambda n, w: traversals.append(w) or real(n, w))
    )
    names = ("identifier", "number_literal")
    every = [st.text_of(n) for n in st.walk(types=names)]
    assert every[:4] == ["k", "a", "n", "i"] and every[-2:] == ["x", "x"]
    for lo, hi in [(0, len(text)), (40, 60), (len(text) - 10, len(text)), (5, 5)]:
        kept = [st.span(n) for n in st.walk(types=names, within=(lo, hi))]
        assert kept == [st.span(n) for n in st.walk(st.root.children[0], names, (lo, hi))] + [
            st.span(n) for c in st.root.children[1:] for n in st.walk(c, names, (lo, hi))
        ]
    assert traversals == [frozenset(names)]

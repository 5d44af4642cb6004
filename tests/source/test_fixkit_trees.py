"""The fix kit's reduction-tree operations (gpuadvise.source.fixkit_trees): the readers on several
spellings of one pattern, and the edits leaving everything outside their node as written."""

from __future__ import annotations

import pytest

from gpuadvise.source import fixkit_trees as K
from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite

TIDS = {"threadIdx.x", "tid"}


def _e(text: str) -> T.Expr:
    e = T.parse_expression(text)
    assert e is not None
    return e


@pytest.mark.parametrize(
    "text", ["tid % (2 * s) == 0", "0 == (tid % (s * 2))", "(threadIdx.x & (2*s - 1)) == 0u",
             "tid % (s << 1) == 0", "tid % (s + s) == 0"],
)  # fmt: skip
def test_interleaved_guard(text: str) -> None:
    assert K.interleaved_guard(_e(text), "s", TIDS) in TIDS


@pytest.mark.parametrize("text", ["tid % 2 * s == 0", "tid % (2 * s) == 1", "k % (2 * s) == 0"])
def test_not_an_interleaved_guard(text: str) -> None:
    assert K.interleaved_guard(_e(text), "s", TIDS) is None


@pytest.mark.parametrize("text", ["2 * s * tid", "tid * (2 * s)", "s * 2u * threadIdx.x"])
def test_strided_product(text: str) -> None:
    assert K.strided_product(_e(text), "s", TIDS) in TIDS


@pytest.mark.parametrize("text", ["s *= 2", "s <<= 1", "s += s", "s = 2 * s", "s = s << 1"])
def test_doubles(text: str) -> None:
    assert K.doubles(_e(text), "s")


@pytest.mark.parametrize(
    "stmt, arr, chain",
    [("a[t] += a[t + s];", "a", None), ("a[t] = a[t] + a[t + s];", "a", None),
     ("a[t] = v = v + a[t + s];", "a", "v"), ("a[t] = (a[t] + a[t ^ s]);", "a", None)],
)  # fmt: skip
def test_sum_step(stmt: str, arr: str, chain: str | None) -> None:
    st = T.parse("__global__ void k(int* a) { int v = 0; unsigned t = 0, s = 1; " + stmt + " }")
    (x,) = [s for s in T.statements(st) if s.kind == "expression_statement"]
    got = K.sum_step(st, x)
    assert got is not None and (got.array, got.chain) == (arr, chain)


def test_a_max_is_no_sum_step() -> None:
    st = T.parse("__global__ void k(int* a) { a[0] = max(a[0], a[0 + 1]); }")
    (x,) = T.statements(st)
    assert K.sum_step(st, x) is None


LOOP = """\
#define B 256
__global__ void k(int* a) {
    for (unsigned s = 1 /* first */; s < B; s *= 2) {  // doubling
        unsigned i = 2 * s * threadIdx.x, j = i + s;  // both
        if (i < B) a[i] += a[j];
    }
}
"""


def test_halve_loop_and_remove_declarator_keep_the_rest() -> None:
    st = T.parse(LOOP)
    (lp,) = T.loops(st)
    sl = K.stride_loop(st, lp)
    assert sl is not None and sl.s == "s" and sl.decl == "unsigned "
    bound = K.doubling_bound(st, sl)
    assert bound is not None and bound.text == "B"
    rw = Rewrite(LOOP)
    K.halve_loop(st, rw, sl, bound)
    (d,) = T.declarations(st, lp.body)
    K.remove_declarator(rw, d, d.declarators[0])
    (check,) = K.bounds_checks(st, "i", lp.body)
    rw.replace(*check, "threadIdx.x < s")
    K.rename_uses(st, rw, "i", "threadIdx.x", lp.body, skip=[d.declarators[0].span, check])
    assert rw.text().splitlines()[2:5] == [
        "    for (unsigned s = B / 2 /* first */; s > 0; s >>= 1) {  // doubling",
        "        unsigned j = threadIdx.x + s;  // both",
        "        if (threadIdx.x < s) a[threadIdx.x] += a[j];",
    ]


def test_remove_and_replace_statements_by_whole_lines() -> None:
    text = "void f() {\n    int a = 1;\n    a += 2; a += 3;\n    a += 4;\n}\n"
    st = T.parse(text)
    ss = T.statements(st)
    rw = Rewrite(text)
    K.remove_statement(rw, (ss[0].start, ss[0].end + 1))
    K.replace_statements(rw, (ss[1].start, ss[2].end + 1), ["a += 5;", "a += 6;"])
    K.replace_statements(rw, (ss[3].start, ss[3].end + 1), ["a += 7;"])
    assert rw.text() == "void f() {\n    a += 5;\n    a += 6;\n    a += 7;\n}\n"


# the trees GA205 rewrites beyond a top-level loop (kernels/tree_tails): a step run by a
# block-stride loop, a barrier first or last in the step, the root read as a[tid] under tid == 0

NESTED = """__global__ void k(float* out, int vecs) {
    __shared__ float acc[512];
    unsigned tid = threadIdx.x;
    for (int v = blockIdx.x; v < vecs; v += gridDim.x) {
        for (int j = tid; j < 512; j += blockDim.x) acc[j] = 1.0f;
        for (int s = 256; s > 0; s >>= 1) {
            __syncthreads();
            for (int j = threadIdx.x; j < s; j += blockDim.x)
                acc[j] += acc[s + j];
        }
        __syncthreads();
        if (tid == 0) out[v] = acc[tid];
        if (tid != 0) out[v] = acc[tid];
    }
}
"""


def _nested() -> tuple[T.SourceTree, list[T.Loop], int]:
    st = T.parse(NESTED)
    at = NESTED.index("acc[j] += acc[s + j];")
    around = [lp for lp in T.loops(st) if lp.kind == "for" and lp.body[0] <= at < lp.body[1]]
    return st, around, at


def test_the_tree_loop_and_the_thread_index_behind_a_block_stride_step() -> None:
    st, around, at = _nested()
    loop = K.tree_loop(st, around)
    assert loop is not None and st.code[loop.span[0] :].startswith("for (int s = 256")
    assert K.nested_tree_why(st, loop, "acc") is None  # the loop around it only stores
    inner = [lp for lp in around if lp.span[0] > loop.span[0]]
    assert K.block_stride_step(st, loop, inner, at, "j", TIDS) == ("threadIdx.x", "")
    assert not K.ends_with_barrier(loop, st)  # its barrier comes first


@pytest.mark.parametrize(
    "loop, tid",
    [("for (int j = threadIdx.x; j < s; j += blockDim.x)", "threadIdx.x"),
     ("for (unsigned j = tid; j < s; j += blockDim.x)", "tid"),
     ("for (j = tid; j < s; j += blockDim.x)", "tid"),
     ("for (int j = threadIdx.x; j < s; j++)", None),  # each thread many steps: another loop
     ("for (int j = threadIdx.x; j <= s; j += blockDim.x)", None),
     ("for (int j = blockIdx.x; j < s; j += blockDim.x)", None)],
)  # fmt: skip
def test_block_stride_start(loop: str, tid: str | None) -> None:
    st = T.parse(
        f"__global__ void k(int* a) {{ int j, s = 4; unsigned tid = 0; {loop} a[j] = 0; }}"
    )
    (lp,) = [x for x in T.loops(st)]
    assert K.block_stride_start(st, lp, "s", TIDS) == tid


@pytest.mark.parametrize(
    "body, ends",
    [("{ if (t < s) a[t] += a[t + s]; __syncthreads(); }", True),
     ("{ if (t < s) a[t] += a[t + s]; __syncthreads();  // done\n }", True),
     ("__syncthreads();", True),
     ("{ __syncthreads(); if (t < s) a[t] += a[t + s]; }", False),
     ("{ if (t < s) a[t] += a[t + s]; cg::sync(cta); }", False),  # a group's: maybe a warp's
     ("{ if (t < s) a[t] += a[t + s]; __syncwarp(); }", False)],
)  # fmt: skip
def test_ends_with_barrier(body: str, ends: bool) -> None:
    st = T.parse(
        f"__global__ void k(int* a) {{ unsigned t = 0; for (int s = 4; s > 0; s >>= 1) {body} }}"
    )
    (lp,) = T.loops(st)
    assert K.ends_with_barrier(lp, st) is ends


def test_zero_thread_read() -> None:
    st = T.parse(NESTED)
    reads = T.subscripts(st, "acc", (NESTED.index("if (tid == 0)"), len(NESTED)))
    assert [K.zero_thread_read(st, r, TIDS) for r in reads] == [True, False]
    for guard in ("!tid", "0 == tid", "(tid) == 0u"):
        text = NESTED.replace("tid == 0", guard)
        st = T.parse(text)
        (r, _) = T.subscripts(st, "acc", (text.index(f"if ({guard})"), len(text)))
        assert K.zero_thread_read(st, r, TIDS), guard


def test_a_read_in_the_loop_around_the_tree_refuses_the_rewrite() -> None:
    text = NESTED.replace("acc[j] = 1.0f;", "acc[j] = acc[j] * 2.0f;")
    st = T.parse(text)
    at = text.index("acc[j] += acc[s + j];")
    around = [lp for lp in T.loops(st) if lp.kind == "for" and lp.body[0] <= at < lp.body[1]]
    loop = K.tree_loop(st, around)
    assert loop is not None
    assert K.nested_tree_why(st, loop, "acc") == "`acc[j]` is read in the loop around the tree"


@pytest.mark.parametrize(
    "text, ok",
    [("s >>= 1", True), ("s /= 2", True), ("s = s >> 1", True), ("s = s / 2u", True),
     ("s >>= 1u", True), ("(s) /= 2", True), ("s >>= 2", False), ("s = 2 / s", False),
     ("t >>= 1", False), ("s -= 1", False), ("s = s - s / 2", False)],
)  # fmt: skip
def test_halves(text: str, ok: bool) -> None:
    assert K.halves(_e(text), "s") is ok


@pytest.mark.parametrize(
    "text, ok",
    [("a[tid] += a[tid + s]", True), ("a[tid] = a[tid] + a[tid + s]", True),
     ("a[ tid ] += a[(tid + s)]", True), ("a[threadIdx.x] += a[threadIdx.x + s]", False),
     ("a[tid] += a[s + tid]", False), ("a[tid] = a[tid + s] + a[tid]", False),
     ("b[tid] += a[tid + s]", False), ("a[tid] -= a[tid + s]", False),
     ("a[tid] += a[tid + 2 * s]", False)],
)  # fmt: skip
def test_add_step(text: str, ok: bool) -> None:
    assert K.add_step(_e(text), "a", "tid", "s") is ok


@pytest.mark.parametrize(
    "text, bound",
    [("tid < s", "s"), ("(tid < 128)", "128"), ("tid < s && i < n", "s"),
     ("tid < blockDim.x", "blockDim.x"), ("tid <= s", None), ("s > tid", None),
     ("lane < s", None), ("tid < s / 2", None)],
)  # fmt: skip
def test_thread_bound(text: str, bound: str | None) -> None:
    assert K.thread_bound(_e(text), "tid") == bound

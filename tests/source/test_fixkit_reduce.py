"""The fix kit's order-free reductions (gpuadvise.source.fixkit_reduce), on parsed loops: what a
loop's body carries only as a count, a sum, a bitwise or, a minimum or a maximum (three spellings
of each kind where the language has them), and what it carries otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuadvise.source import tree as T
from gpuadvise.source.fixkit_reduce import reductions
from gpuadvise.source.text import find_kernel_source


def _found(tmp_path: Path, decl: str, body: str):  # type: ignore[no-untyped-def]
    cu = tmp_path / "k.cu"
    cu.write_text(
        "#define ADD(a, b) ((a) + (b))\n"
        "__global__ void k(const float* a, int* c, int n)\n{\n"
        f"    {decl}\n    for (int i = threadIdx.x; i < n; i += blockDim.x) {{ {body} }}\n"
        "    c[0] = (int)r;\n}\n"
    )
    ks = find_kernel_source(cu, "k")
    assert ks is not None
    (lp,) = T.loops(ks.tree, (ks.body_start, ks.body_end))
    return reductions(ks, lp.body, {"i"}, lp.span[0])


@pytest.mark.parametrize(
    ("decl", "body", "op", "exact"),
    [
        ("int r = 0;", "if (a[i] > 0) r++;", "add", True),
        ("unsigned r = 0;", "--r; r += a[i] > 1;", "add", True),
        ("long long r = 0;", "r = (long long)(a[i] * 8) + r;", "add", True),
        ("int r = 0;", "r ^= (int)a[i];", "xor", True),
        ("int r = 0;", "r &= (int)a[i];", "and", True),
        ("float r = 1e30f;", "r = fminf(r, a[i]);", "min", True),
        ("float r = 0;", "r = max(a[i] * a[i], r);", "max", True),
        ("double r = 0;", "r -= a[i];", "add", False),
    ],
)
def test_order_free_reductions(decl, body, op, exact, tmp_path):
    found, why = _found(tmp_path, decl, body)
    assert why is None, why
    assert [(r.name, r.op, r.exact) for r in found.values()] == [("r", op, exact)]


@pytest.mark.parametrize(
    ("decl", "body", "why"),
    [
        ("int r = 0;", "c[i] = r; r++;", "the loop reads it"),
        ("int r = 0;", "r = ADD(r, 1);", "carries a value"),  # a macro hides the operation
        ("int r = 0;", "r += r > 3;", "its update reads it"),
        ("int r = 0;", "r++; r |= 2;", "2 kinds of operation"),
        ("int r = 0;", "c[i] = ++r;", "inside a larger expression"),
        ("float r = 0;", "r = r * a[i];", "carries a value"),
        ("static int r = 0;", "r++;", "not a local integer or floating scalar"),
        ("float2 q; float r = 0;", "r += q.x; q.x = a[i];", None),
    ],
)
def test_what_is_not_an_order_free_reduction(decl, body, why, tmp_path):
    found, got = _found(tmp_path, decl, body)
    if why is None:  # q's member is not a variable of its own: fixkit_vector refuses it
        assert got is None and list(found) == ["r"]
        return
    assert found == {} and got is not None and why in got, got

"""GA301 names the pattern the addresses show (issue 27): a gather or scatter by data (an index
array, a graph's edges, a hash: three spellings) is neither "a transposed index" nor given a
tile or a remap, and gets no speedup it cannot deliver; a thread-per-row store walk (an
epilogue writing its row) is told to give the row a warp without a shuffle reduction."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from bundlekit import write_bundle
from rulekit import analyze, run_rule, source_line

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

GATHERS = {
    # CSR-style: x[col[i]]
    "csr_gather": (
        """
        __global__ void csr_gather(const int* __restrict__ col, const float* __restrict__ x,
                                   float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) y[i] = x[col[i]] * 2.0f;  // x[col[i]]
        }
        """,
        'col = { type = "int", count = "n", fill = "random(0,1048575)" }\n'
        'x = "float[1048576]"\ny = "float[n]"',
        ("x", "load", "x[col[i]]"),
    ),
    # a graph traversal: visited[id] and cost[id] with id from the edge list
    "visit": (
        """
        __global__ void visit(const int2* nodes, const int* edges, const char* visited,
                              int* cost, int n) {
            int tid = blockIdx.x * blockDim.x + threadIdx.x;
            if (tid < n) {
                int2 nd = nodes[tid];
                for (int e = nd.x; e < nd.x + nd.y; e++) {
                    int id = edges[e];
                    if (!visited[id]) cost[id] = cost[tid] + 1;  // by data
                }
            }
        }
        """,
        'nodes = { type = "int2", count = "n", fill = "random(0,7)" }\n'
        'edges = { type = "int", count = "n+8", fill = "random(0,65535)" }\n'
        'visited = { type = "char", count = "n", fill = "zeros" }\n'
        'cost = { type = "int", count = "n", fill = "zeros" }',
        ("visited", "load", "// by data"),
    ),
    # a hash table probe: the index is computed from a loaded key
    "hashprobe": (
        """
        #define MASK 1048575u
        __global__ void hashprobe(const unsigned* keys, const unsigned* table, unsigned* out,
                                  int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i >= n) return;
            unsigned h = (keys[i] * 2654435761u) & MASK;
            out[i] = table[h];  // probe
        }
        """,
        'keys = "unsigned[n]"\ntable = "unsigned[1048576]"\nout = "unsigned[n]"',
        ("table", "load", "// probe"),
    ),
}

EPILOGUE = """
__global__ void rows_out(const float* __restrict__ bias, float* C, int n) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n) return;
    for (int col = 0; col < 256; col++)
        C[row * 256 + col] = bias[col] * (float)row;  // epilogue
}
"""


# rows of 64 of the epilogue's 256 columns: a lane still walks a row of two warps' width (the
# pattern and its message), for a quarter of the emulator's work (6.7 -> 2.7 CPU-s)
ROWS_OUT = (EPILOGUE.replace("256", "64"), 'bias = "float[64]"\nC = "float[n*64]"')


def _launch(buffers: str, grid: int = 256) -> str:
    return f"grid = {grid}\nblock = 256\n\n[args]\nn = 65536\n\n[buffers]\n{buffers}\n"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GATHERS' kernels and rows_out in one file (bundlekit: one compile and one disassembly for
    the four), each with its own buffers."""
    cases = {name: (code, buffers) for name, (code, buffers, _) in GATHERS.items()}
    cases["rows_out"] = ROWS_OUT
    return write_bundle(
        tmp_path_factory.mktemp("ga301-patterns"),
        {name: code for name, (code, _) in cases.items()},
        {name: _launch(buffers) for name, (_, buffers) in cases.items()},
    )


@cache
def _ga301(name: str, src: Path) -> list:
    return run_rule(analyze(src, name, trace=False), "GA301")


@pytest.mark.parametrize("name", sorted(GATHERS))
def test_a_gather_by_data_is_named_as_such_with_no_remap_and_no_speedup(name, bundle):
    src, found = bundle, _ga301(name, bundle)
    buffer, kind, marker = GATHERS[name][2]
    f = next(f for f in found if f.details.buffer == buffer)
    assert f.line == source_line(src, marker)
    assert f.details.pattern == "gather" and f.details.kind == kind
    assert "by data" in f.message
    assert "transposed" not in f.message and "tile" not in f.message
    assert "__shfl" not in f.message
    assert f.estimated_speedup.kind == "none" and f.estimated_speedup.speedup is None
    assert f.variant is None


def test_a_scatter_by_data_is_a_scatter(bundle):
    found = _ga301("visit", bundle)
    stores = [f for f in found if f.details.kind == "store"]
    assert stores and all(f.details.pattern == "gather" for f in stores)
    assert all("scatter by data" in f.message for f in stores)


def test_a_thread_per_row_store_walk_gets_a_warp_per_row_without_shuffles(bundle):
    src = bundle
    (f,) = [f for f in run_rule(analyze(src, "rows_out", trace=False), "GA301")]
    assert f.line == source_line(src, "// epilogue")
    assert f.details.pattern == "thread-per-row" and f.details.kind == "store"
    assert "lane l writes elements l, l + 32" in f.message
    assert "__shfl" not in f.message and "__shfl" not in f.variant.description

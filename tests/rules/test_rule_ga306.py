"""GA306 transpose-through-shared: the transposition is found from the trace's per-thread element
streams (the kernels of kernels/transpose/ and look-alikes in other spellings in
tests/cuda/transpose/, the cuda-samples transposeNaive when its mirror is here), not on the tiled
kernel nor on strided copies that are no transposes; the variant's diff applies, compiles and
computes the same matrix on the CPU emulator (sizes that are not multiples of the tile, each
tile and launch the variant offers), and the rule is silent on the patched kernel."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rulekit import KERNELS, analyze, compiled, ev, run_rule

from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

HERE = Path(__file__).resolve().parents[1] / "cuda" / "transpose"
SAMPLES = Path("/work/.mirror/NVIDIA+cuda-samples/repo")
SAMPLES_PATH = "Samples/6_Performance/transpose/transpose.cu"
TRANSPOSE = KERNELS / "transpose" / "transpose.cu"


def write_spec(
    folder: Path,
    source: str,
    kernel: str,
    grid: tuple[int, int] | str,
    block: tuple[int, int],
    args: dict[str, int],
    buffers: dict[str, str],
    name: str | None = None,
) -> Path:
    """A launch spec in ``folder`` for ``source`` (a file beside it, or a path; buffers: name ->
    count expression; the first is the input, random, the others zeros)."""
    g = json.dumps(grid) if isinstance(grid, str) else json.dumps(list(grid))
    lines = [
        f'source = "{source}"',
        f'kernel = "{kernel}"',
        f"grid = {g}",
        f'block = "{block[0]}x{block[1]}"',
        "seed = 5",
        "",
        "[args]",
        *(f"{k} = {v}" for k, v in args.items()),
        "",
        "[buffers]",
    ]
    for i, (b, count) in enumerate(buffers.items()):
        fill = "" if i == 0 else ', fill = "zeros"'
        lines.append(f'{b} = {{ type = "float", count = "{count}"{fill} }}')
    path = folder / f"{name or kernel}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def emulate_all(source: Path, kernel: str, spec: Path) -> dict[str, np.ndarray]:
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = compiled(source, kernel, spec=str(spec))
    launch = resolve(a.spec, parse_signature(source.read_text(), kernel))
    e = emulate(a.module, a.kernel, launch, a.device, sample_ctas="all")
    return {**e.outputs, **{f"in:{k}": v for k, v in e.inputs.items()}}


def ga306(source: Path, kernel: str, spec: Path) -> list[Any]:
    return run_rule(analyze(source, kernel, 8, spec=str(spec)), "GA306", 8)


def transposed(tmp: Path) -> tuple[Path, Path]:
    """kernels/transpose/transpose.cu, read where it is (compiled once in the run's cache), with
    a 72 x 100 spec in ``tmp`` for transpose_naive (32x8 threads per 32x32 tile; neither size a
    multiple of 32)."""
    src = TRANSPOSE
    spec = write_spec(tmp, str(src), "transpose_naive", ("ceil_div(cols, 32)", "ceil_div(rows, 32)"),
                      (32, 8), {"rows": 72, "cols": 100},
                      {"in": "rows*cols", "out": "rows*cols"})  # fmt: skip
    return src, spec


def check_variants(tmp: Path, src: Path, kernel: str, spec: Path, f: Any, out: str) -> int:
    """Every candidate of ``f``'s variant: the patched kernel, launched as the candidate says,
    writes the same ``out`` as the original; GA306 is silent on it. Returns the count."""
    want = emulate_all(src, kernel, spec)
    n = 0
    for i, c in enumerate(f.variant.candidates()):
        assert c.safety == "automatic-and-verified" and c.diff, c.description
        folder = tmp / f"patched{i}"
        folder.mkdir()
        patched = folder / src.name
        patched.write_text(apply_unified_diff(src.read_text(), c.diff))
        # the spec names the patched copy beside it (the original's may name a path elsewhere)
        text = re.sub(r"(?m)^source = .*$", f'source = "{patched.name}"', spec.read_text())
        if c.launch:
            gx, gy, _ = c.launch["grid"]
            bx, by, _ = c.launch["block"]
            text = re.sub(r"(?m)^grid = .*$", f"grid = [{gx}, {gy}]", text)
            text = re.sub(r"(?m)^block = .*$", f'block = "{bx}x{by}"', text)
        pspec = folder / spec.name
        pspec.write_text(text)
        got = emulate_all(patched, kernel, pspec)
        np.testing.assert_array_equal(got[out], want[out])
        assert ga306(patched, kernel, pspec) == []
        n += 1
    return n


# ---------------------------------------------------------------------------------------------
# kernels/transpose


def test_naive_transpose_is_found_and_the_tile_computes_the_same(tmp_path):
    src, spec = transposed(tmp_path)
    (f,) = ga306(src, "transpose_naive", spec)
    assert f.line == 19 and "transpose" in f.message
    e = ev(f)
    assert (e["matrix_rows"], e["matrix_cols"]) == (72, 100)
    assert e["transposed_pairs_share"] == 1.0 and e["stride_bytes"] == 72 * 4
    assert e["sector_ratio"] >= 2.0
    v = f.variant
    assert v.launch is None  # 32x8 threads per 32x32 tile already: the user's launch
    assert "ga_tile[32][32 + 1]" in v.diff and "(size_t)ga_c * rows + ga_r" in v.diff
    assert f.estimated_speedup is not None and f.estimated_speedup.kind == "upper-bound"
    # the input's values land transposed (the emulator's random fill)
    want = emulate_all(src, "transpose_naive", spec)
    np.testing.assert_array_equal(want["out"].reshape(100, 72), want["in:in"].reshape(72, 100).T)
    assert check_variants(tmp_path, src, "transpose_naive", spec, f, "out") == 1


def test_naive_2d_offers_the_32x8_tile_and_its_own_block(tmp_path):
    src = TRANSPOSE
    spec = write_spec(tmp_path, str(src), "transpose_naive2d",
                      ("ceil_div(cols, 16)", "ceil_div(rows, 16)"), (16, 16),
                      {"rows": 40, "cols": 50}, {"in": "rows*cols", "out": "rows*cols"})  # fmt: skip
    (f,) = ga306(src, "transpose_naive2d", spec)
    assert f.line == 29
    labels = [c.label for c in f.variant.candidates()]
    assert labels == ["32x32 tile, 32x8 threads", "16x16 tile, 16x16 threads"]
    assert f.variant.launch == {"grid": [2, 2, 1], "block": [32, 8, 1]}
    assert f.variant.alternatives[0].launch is None
    assert check_variants(tmp_path, src, "transpose_naive2d", spec, f, "out") == 2


def test_tiled_transpose_is_silent(tmp_path):
    src, spec = transposed(tmp_path)
    tiled = write_spec(tmp_path, str(src), "transpose_tiled", ("ceil_div(cols, 32)",
                       "ceil_div(rows, 32)"), (32, 8), {"rows": 72, "cols": 100},
                       {"in": "rows*cols", "out": "rows*cols"})  # fmt: skip
    assert ga306(src, "transpose_tiled", tiled) == []
    # and it computes what the naive one does
    a = emulate_all(src, "transpose_naive", spec)["out"]
    np.testing.assert_array_equal(emulate_all(src, "transpose_tiled", tiled)["out"], a)


# ---------------------------------------------------------------------------------------------
# Other spellings and look-alikes


LOOKALIKES = HERE / "lookalikes.cu"


def test_cuda_samples_spelling(tmp_path):
    src = LOOKALIKES
    spec = write_spec(tmp_path, str(src), "samples_naive", (4, 3), (32, 8),
                      {"width": 128, "height": 96}, {"idata": "width*height",
                      "odata": "width*height"})  # fmt: skip
    (f,) = ga306(src, "samples_naive", spec)
    assert f.line == 15
    assert (ev(f)["matrix_rows"], ev(f)["matrix_cols"]) == (96, 128)
    # the sizes are named as the kernel names them: `width` for the rows read, `height` written
    assert "(size_t)ga_r * width + ga_c" in f.variant.diff
    assert "(size_t)ga_c * height + ga_r" in f.variant.diff


def test_siboehm_spelling_with_a_1d_block(tmp_path):
    src = LOOKALIKES
    spec = write_spec(tmp_path, str(src), "sib_transpose", (3, 2), (1024, 1),
                      {"M": 64, "N": 96}, {"A": "M*N", "B": "M*N"})  # fmt: skip
    (f,) = ga306(src, "sib_transpose", spec)
    assert f.line == 24 and (ev(f)["matrix_rows"], ev(f)["matrix_cols"]) == (64, 96)
    assert f.variant.launch == {"grid": [3, 2, 1], "block": [32, 8, 1]}
    assert check_variants(tmp_path, src, "sib_transpose", spec, f, "B") == 1


def test_strided_load_coalesced_store(tmp_path):
    src = LOOKALIKES
    spec = write_spec(tmp_path, str(src), "gather_columns", ("ceil_div(n_cols, 32)",
                      "ceil_div(n_rows, 8)"), (32, 8), {"n_rows": 48, "n_cols": 80},
                      {"src": "n_rows*n_cols", "dst": "n_rows*n_cols"})  # fmt: skip
    (f,) = ga306(src, "gather_columns", spec)
    assert f.line == 33 and "`src` read along its columns" in f.message
    assert check_variants(tmp_path, src, "gather_columns", spec, f, "dst") == 1


def test_lookalikes_that_are_no_transposes_are_silent(tmp_path):
    src = LOOKALIKES
    scatter = write_spec(tmp_path, str(src), "scatter_row", (8, 1), (256, 1), {"n": 4096},
                         {"src": "n", "dst": "33*n"})  # fmt: skip
    assert ga306(src, "scatter_row", scatter) == []
    copy = write_spec(tmp_path, str(src), "copy2d", (3, 6), (32, 8), {"n_rows": 48, "n_cols": 80},
                      {"src": "n_rows*n_cols", "dst": "n_rows*n_cols"})  # fmt: skip
    assert ga306(src, "copy2d", copy) == []


def test_a_transpose_that_is_not_a_copy_gets_no_automatic_variant(tmp_path):
    src = LOOKALIKES
    spec = write_spec(tmp_path, str(src), "scaled_transpose", (3, 6), (32, 8),
                      {"n_rows": 48, "n_cols": 80},
                      {"src": "n_rows*n_cols", "dst": "n_rows*n_cols"})  # fmt: skip
    (f,) = ga306(src, "scaled_transpose", spec)
    assert f.variant.safety == "display-only"
    assert "not an element of `src` as it is" in f.variant.description


def test_cuda_samples_transpose_naive_from_the_mirror(tmp_path):
    """The kernel as NVIDIA wrote it (cuda-samples, BSD-3-Clause), copied at run time from the
    mirror (never committed): its text from ``__global__ void transposeNaive`` to its closing
    brace, with the sample's TILE_DIM and BLOCK_ROWS."""
    if not (SAMPLES / "HEAD").exists() and not (SAMPLES / ".git").exists():
        pytest.skip("the cuda-samples mirror is not on this machine")
    r = subprocess.run(["git", "-C", str(SAMPLES), "show", f"HEAD:{SAMPLES_PATH}"],
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode != 0:
        pytest.skip("the cuda-samples mirror has no transpose sample")
    text = r.stdout
    defines = re.findall(r"(?m)^#define (?:TILE_DIM|BLOCK_ROWS)\s+\d+$", text)
    start = text.index("__global__ void transposeNaive")
    end = text.index("\n}\n", start) + 3
    src = tmp_path / "transpose_naive_samples.cu"
    src.write_text("\n".join(defines) + "\n\n" + text[start:end])
    tile = int(re.search(r"TILE_DIM\s+(\d+)", "\n".join(defines)).group(1))  # type: ignore[union-attr]
    rows = int(re.search(r"BLOCK_ROWS\s+(\d+)", "\n".join(defines)).group(1))  # type: ignore[union-attr]
    spec = write_spec(tmp_path, src.name, "transposeNaive", (4, 4), (tile, rows),
                      {"width": 4 * tile, "height": 4 * tile},
                      {"idata": "width*height", "odata": "width*height"})  # fmt: skip
    (f,) = ga306(src, "transposeNaive", spec)
    assert "odata[index_out + i]" in src.read_text().splitlines()[f.line - 1]
    assert check_variants(tmp_path, src, "transposeNaive", spec, f, "odata") >= 1

"""The reference kernels ported from seeds 000, 001, 002 and 004 (``kernels/luminance``,
``kernels/fp16_neighbourhood``, ``kernels/tile_gather``, ``kernels/cells``), compiled with nvcc and
run on the CPU emulator (no GPU):

- every kernel analyzes through the CLI (in this process, ``main(argv)``) with its bundled
  launch spec (``case.toml`` or ``<kernel>.toml``, on a smaller frame where the spec's would take
  long to fill): exit 0, the emulator ran, the memory models produced lines;
- the variants of one case compute the same output on a small launch (every CTA emulated), and
  that output is the one a numpy reference computes from the same input;
- the ``// expect:`` annotations name rule ids of the issue's list, and each case keeps kernels
  with and without findings (a rule's golden test needs both).

The golden findings of the rules that exist are checked by ``tests/test_rules_golden.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import rulekit
from clikit import cli_run

import gpuadvise.rules.registry as rule_registry
import gpuadvise.source.text as srctext
from gpuadvise.source.signature import list_kernels
from gpuadvise.toolchain import find_toolchain

try:
    find_toolchain()
    HAVE_NVCC = True
except Exception:
    HAVE_NVCC = False

pytestmark = pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit (pip install .[toolkit])")

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"
CASES = {
    "luminance": "luminance.cu",
    "tile_gather": "gather.cu",
    "fp16_neighbourhood": "moments.cu",
    "cells": "cells.cu",
}
# the bundled rules' ids (GA1xx launch, GA2xx shared memory, GA3xx global, GA4xx math)
KNOWN_IDS = {r.id for r in rule_registry.load_registry()}
SAMPLE_CTAS = 8
# Smaller frames than the bundled launches where those fill hundreds of MB of buffers (8K floats,
# a 1024x1024 grid of 44-byte cells); test_rules_golden.py runs the bundled launches themselves.
CLI_ARGS = {
    "luminance": (),
    "tile_gather": ("w=2048", "h=1024"),
    "fp16_neighbourhood": ("w=640", "h=360"),
    "cells": ("w=256", "h=256"),  # the seed's own data set
}


def _source(folder: str) -> Path:
    return KERNELS / folder / CASES[folder]


def _all_kernels() -> list[tuple[str, str]]:
    return [(f, k) for f in CASES for k in list_kernels(_source(f).read_text())]


ALL = _all_kernels()


@pytest.fixture(scope="module")
def cache_dir(compile_cache: Path) -> Path:
    """The run's compile cache (conftest.py), for the CLI runs and the in-process analyses."""
    return compile_cache


# ---------------------------------------------------------------------------------------------
# The folders and their annotations


@pytest.mark.parametrize("folder", list(CASES))
def test_case_folder(folder: str) -> None:
    from gpuadvise.spec.kernel_spec import find_spec_for, load_spec

    source = _source(folder)
    kernels = list_kernels(source.read_text())
    assert len(kernels) >= 3, kernels
    case = load_spec(source.parent / "case.toml")
    assert Path(case["source"]).resolve() == source.resolve()
    assert case["kernel"] in kernels
    for toml in source.parent.glob("*.toml"):
        if toml.name != "case.toml":
            # a kernel's own spec; it may name another source of the folder (the fp32 build
            # moments_f32.cu beside moments.cu, whose kernels all compute the same bits): then
            # the kernel is that file's, and its own spec is the one found for it there
            spec = load_spec(toml)
            own_source = Path(spec["source"]).resolve()
            assert own_source.parent == source.parent.resolve(), toml.name
            own_kernels = kernels
            if own_source != source.resolve():
                own_kernels = list_kernels(own_source.read_text())
                assert toml.stem not in kernels, f"{toml.name} names {source.name}'s kernel"
                assert find_spec_for(own_source, toml.stem) == toml
            assert toml.stem in own_kernels, f"{toml.name} names no kernel of {own_source.name}"
            assert spec["kernel"] == toml.stem
    for k in kernels:  # each kernel finds its own spec, else case.toml
        own = source.parent / f"{k}.toml"
        assert find_spec_for(source, k) == (own if own.is_file() else source.parent / "case.toml")


@pytest.mark.parametrize("folder", list(CASES))
def test_annotations(folder: str) -> None:
    source = _source(folder)
    marks = rule_registry.expectations(source)
    ids = {rid for rids in marks.values() for rid in rids}
    assert ids and ids <= KNOWN_IDS, ids - KNOWN_IDS
    flagged = set()
    for k in list_kernels(source.read_text()):
        ks = srctext.find_kernel_source(source, k)
        assert ks is not None
        if any(ks.decl_line <= line <= ks.body_lines[1] for line in marks):
            flagged.add(k)
    assert flagged
    # the kernels that must stay silent: a case's own good variants, or (cells: every layout now
    # has something to improve, GA307 on the tiled one) kernels/styles' silent kernels, which the
    # golden test holds to no finding at all
    clean = set(list_kernels(source.read_text())) - flagged
    silent_styles = [
        k for cu in (KERNELS / "styles").rglob("*.cu") for k in list_kernels(cu.read_text())
        if not any(
            (ks := srctext.find_kernel_source(cu, k)) is not None
            and ks.decl_line <= line <= ks.body_lines[1]
            for line in rule_registry.expectations(cu)
        )
    ]  # fmt: skip
    assert clean or silent_styles, (flagged, clean)


# ---------------------------------------------------------------------------------------------
# Every kernel through the CLI, with its bundled launch


@pytest.mark.parametrize("case", ALL, ids=[f"{f}:{k}" for f, k in ALL])
def test_analyze_cli(
    case: tuple[str, str], cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, kernel = case
    source = _source(folder)
    monkeypatch.chdir(ROOT)
    r = cli_run(
        "analyze", str(source), "-k", kernel, "--json", "--sample-ctas", str(SAMPLE_CTAS),
        *(f"--arg={a}" for a in CLI_ARGS[folder]),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kernel"]["name"] == kernel
    spec = source.parent / f"{kernel}.toml"
    if not spec.is_file():
        spec = source.parent / "case.toml"
    assert f"launch spec read from {spec}" in doc["notes"], doc["notes"]
    emu = doc["emulation"]
    assert emu["error"] is None, emu["error"]
    assert emu["ctas_traced"] == SAMPLE_CTAS and emu["lane_instructions"] > 0
    gmem = doc["global_memory"]["lines"]
    assert {ln["kind"] for ln in gmem} >= {"load", "store"}, gmem
    assert all(ln["line"] is not None and ln["requests"] > 0 for ln in gmem)
    if doc["resources"]["static_smem_bytes"] > 0:
        smem = doc["shared_memory"]["lines"]
        assert {ln["kind"] for ln in smem} >= {"load", "store"}, smem
    assert not [f for f in doc["findings"] if f.get("error")], doc["findings"]


# ---------------------------------------------------------------------------------------------
# Variants of one case compute the same output


def outputs(folder: str, kernel: str, args: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The kernel's outputs for its bundled launch with ``args``, every CTA run on the emulator
    for its outputs alone (``rulekit.untraced_run``: the spec, compile and kernel an analysis
    has; no trace, SASS or memory models, which nothing here reads)."""
    run = rulekit.untraced_run(_source(folder), kernel, args)
    assert run.complete  # every CTA ran
    assert not run.sampled_loops, run.sampled_loops  # every iteration: the kernel's outputs
    return dict(run.outputs)


def inputs(folder: str, kernel: str, args: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The input buffers the emulator made for this launch (same bytes, same seed)."""
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.runner.data import make_host_buffer
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import buffer_dtype

    source = _source(folder)
    spec, _, _ = build(KernelOptions(source=str(source), kernel=kernel, gpu="H100", args=args))
    launch = resolve(spec, parse_signature(source.read_text(), kernel))
    out = {}
    for buf in launch.buffers:
        if not buf.is_output:
            dt, kind = buffer_dtype(buf)
            out[buf.name] = make_host_buffer(dt, buf.count, buf.fill, launch.seed, buf.name, kind)
    return out


def assert_same_bits(a: np.ndarray, b: np.ndarray, what: str) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype, what
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), what


def test_luminance_variants_agree(cache_dir: Path) -> None:
    # 64x40: 4x3 tiles, the last tile row half below the frame
    w, h = 64, 40
    args = (f"w={w}", f"h={h}")
    kernels = list_kernels(_source("luminance").read_text())
    results = {k: outputs("luminance", k, args)["out"] for k in kernels}
    pixels = inputs("luminance", kernels[0], args)["in"]  # uchar4: records of 4 bytes
    rgba = pixels.view(np.uint8).reshape(h, w, 4).astype(np.int64)
    luma = 54 * rgba[..., 0] + 183 * rgba[..., 1] + 19 * rgba[..., 2]
    padded = np.zeros((48, 64), np.int64)
    padded[:h] = luma
    sums = padded.reshape(3, 16, 4, 16).sum(axis=(1, 3))
    want = (sums / 65536.0).astype(np.float32).ravel()
    for k, got in results.items():
        np.testing.assert_array_equal(got, want, err_msg=k)


def test_tile_gather_variants_agree(cache_dir: Path) -> None:
    # 100x70 in 16x16 blocks: a 7x5 grid; strips of n = 2 and 3 leave a narrower last strip
    w, h, r, step = 100, 70, 8, 4
    args = (f"w={w}", f"h={h}", f"r={r}", f"step={step}")
    runs = {
        "gather_rowmajor": outputs("tile_gather", "gather_rowmajor", args)["out"],
        "gather_1440p": outputs("tile_gather", "gather_1440p", args)["out"],
    }
    for n in (2, 3, 7, 32):
        tiled = outputs("tile_gather", "gather_tiled", (*args, f"n={n}"))
        runs[f"gather_tiled n={n}"] = tiled["out"]
    img = inputs("tile_gather", "gather_rowmajor", args)["in"].reshape(h, w)
    acc = np.zeros((h, w), np.float32)
    ys, xs = np.arange(h)[:, None], np.arange(w)[None, :]
    for dy in range(-r, r + 1, step):
        for dx in range(-r, r + 1, step):
            acc += img[np.clip(ys + dy, 0, h - 1), np.clip(xs + dx, 0, w - 1)]
    taps = 2 * r // step + 1
    want = (acc / np.float32(taps * taps)).ravel()
    base = runs["gather_rowmajor"]
    for name, got in runs.items():
        assert_same_bits(got, base, name)
    np.testing.assert_allclose(base, want, rtol=1e-6, atol=1e-7)


def test_fp16_neighbourhood_variants_agree(cache_dir: Path) -> None:
    # 40x28 in 8x8 blocks: a 5x4 grid, the last block row half outside
    w, h = 40, 28
    args = (f"w={w}", f"h={h}")
    kernels = list_kernels(_source("fp16_neighbourhood").read_text())
    runs = {k: outputs("fp16_neighbourhood", k, args) for k in kernels}
    base = runs[kernels[0]]
    for k, got in runs.items():
        for name in ("mean", "variance"):
            assert_same_bits(got[name], base[name], f"{k} {name}")
    # against fp64 arithmetic on the same fp16 input: fp16 accumulation over 81 taps
    rgba = inputs("fp16_neighbourhood", kernels[0], args)["rgba"].astype(np.float64)
    rgb = rgba.reshape(h, w, 4)[..., :3]
    k1 = np.exp(-3.0 * np.arange(5) ** 2 / 25.0)
    mean = np.zeros((h, w, 3))
    second = np.zeros((h, w, 3))
    wsum = 0.0
    ys, xs = np.arange(h)[:, None], np.arange(w)[None, :]
    for j in range(-4, 5):
        for i in range(-4, 5):
            wt = k1[abs(i)] * k1[abs(j)]
            v = rgb[np.clip(ys + j, 0, h - 1), np.clip(xs + i, 0, w - 1)]
            mean += wt * v
            second += wt * v * v
            wsum += wt
    mean /= wsum
    variance = np.abs(second / wsum - mean**2)
    got_mean = base["mean"].view(np.float32).reshape(h, w, 4)
    got_var = base["variance"].view(np.float32).reshape(h, w, 4)
    assert np.all(got_mean[..., 3] == 0) and np.all(got_var[..., 3] == 0)
    np.testing.assert_allclose(got_mean[..., :3], mean, atol=1e-2)
    np.testing.assert_allclose(got_var[..., :3], variance, atol=1e-2)


# Cells: the layouts hold the same cells only after conversion, so the kernels run on the emulator
# with inputs built here from one random set of cells.

CELL = np.dtype([("type", "<i4"), ("gender", "<i4"), ("moved", "<i4"), ("age", "<i4"),
                 ("energy", "<f4"), ("food", "<f4"), ("lsa", "<i4"), ("target_x", "<i4"),
                 ("target_y", "<i4"), ("trait0", "<f4"), ("trait1", "<f4")])  # fmt: skip
PACKED = np.dtype([("info", "<u4"), ("energy", "<f4"), ("food", "<f4"), ("lsa", "<i4"),
                   ("target_x", "<i4"), ("target_y", "<i4"), ("trait0", "<f4"),
                   ("trait1", "<f4")])  # fmt: skip


def cells_reference(t: np.ndarray, g: np.ndarray, m: np.ndarray, a: np.ndarray) -> np.ndarray:
    h, w = t.shape
    same = np.zeros((h, w), np.int64)
    mates = np.zeros((h, w), np.int64)
    for dy in range(-2, 3):
        for dx in range(-2, 3):
            if dx == 0 and dy == 0:
                continue
            nt, ng, na = (np.full((h + 4, w + 4), -1, np.int64) for _ in range(3))
            nt[2 : h + 2, 2 : w + 2], ng[2 : h + 2, 2 : w + 2] = t, g
            na[2 : h + 2, 2 : w + 2] = a
            sl = (slice(2 + dy, 2 + dy + h), slice(2 + dx, 2 + dx + w))
            kin = nt[sl] == t
            same += kin
            mates += kin & (ng[sl] != g) & (na[sl] >= 16)
    alive = (t != 0) & (same >= 2) & (same <= 12)
    age = np.where(alive, np.where(m == 1, a, np.minimum(a + 1, 255)), 0)
    out = np.where(alive, t, 0) | g << 8 | (mates > 0).astype(np.int64) << 16 | age << 24
    return out.astype(np.uint32).ravel()


def test_cells_variants_agree(cache_dir: Path) -> None:
    from gpuadvise.trace.emulate import emulate_ptx

    w, h = 40, 36  # 3x3 blocks of 16x16, the last ones partly outside
    rng = np.random.default_rng(4)
    t, g, m = rng.integers(0, 4, (h, w)), rng.integers(0, 2, (h, w)), rng.integers(0, 2, (h, w))
    a = rng.integers(0, 256, (h, w))
    info = (t | g << 8 | m << 16 | a << 24).astype(np.uint32).ravel()
    aos = np.zeros(w * h, CELL)
    junk = rng.integers(0, 2**20, (4, w * h))  # bits above each field: the kernel masks them off
    aos["type"], aos["gender"] = t.ravel() + (junk[0] << 2), g.ravel() + (junk[1] << 1)
    aos["moved"], aos["age"] = m.ravel() + (junk[2] << 1), a.ravel() + (junk[3] << 8)
    for f in ("energy", "food", "trait0", "trait1"):
        aos[f] = rng.uniform(0, 1, w * h)
    for f in ("lsa", "target_x", "target_y"):
        aos[f] = rng.integers(0, 1 << 30, w * h)
    packed = np.zeros(w * h, PACKED)
    packed["info"] = info
    for f in ("energy", "food", "lsa", "target_x", "target_y", "trait0", "trait1"):
        packed[f] = aos[f]
    data = {"cells_fields": aos, "cells_packed": packed, "cells_soa": info, "cells_soa_tiled": info}
    want = cells_reference(t, g, m, a)
    kernels = list_kernels(_source("cells").read_text())
    assert set(kernels) == set(data)
    for k in kernels:
        an = rulekit.compiled(_source("cells"), k, (f"w={w}", f"h={h}"))
        e = emulate_ptx(
            an.module.ptx, an.kernel.mangled, an.spec.launch.grid.as_tuple(),
            an.spec.launch.block.as_tuple(),
            [data[k], np.zeros(w * h, np.uint32), np.int32(w), np.int32(h)],
            arch=an.module.arch, trace=False,
        )  # fmt: skip
        np.testing.assert_array_equal(e.outputs["arg1"], want, err_msg=k)
    # the structs' layouts in the source are the ones built above
    from gpuadvise.toolchain import struct_layouts

    layouts = struct_layouts(_source("cells"), ["Cell", "PackedCell"])
    assert layouts["Cell"][0] == CELL.itemsize and layouts["PackedCell"][0] == PACKED.itemsize


def test_cells_soa_pair_agrees_on_the_bundled_fill(cache_dir: Path) -> None:
    # the two SoA kernels take the same buffers: the launch spec's own data
    args = ("w=40", "h=36")
    got = [outputs("cells", k, args)["next"] for k in ("cells_soa", "cells_soa_tiled")]
    assert_same_bits(got[0], got[1], "cells_soa vs cells_soa_tiled")
    survivors, mates = (got[0] & 3) != 0, (got[0] >> 16) & 1 == 1  # the fill exercises both
    assert survivors.any() and (~survivors).any() and mates.any() and (~mates).any()


def test_annotations_are_well_formed() -> None:
    """Every ``expect:`` on a line of code is a plain, complete list of rule ids that the parser
    reads whole (a typo would silently drop an expectation)."""
    for folder in CASES:
        source = _source(folder)
        marks = rule_registry.expectations(source)
        for n, line in enumerate(source.read_text().splitlines(), 1):
            if "expect:" not in line or line.lstrip().startswith("//"):
                continue
            assert re.search(r"//\s*expect:\s*GA\d{3}(?:,\s*GA\d{3})*\s*$", line), line
            assert marks[n] == tuple(re.findall(r"GA\d{3}", line.split("expect:")[1])), line

"""GPU validation of gpuadvise's L2 model (gpuadvise/model/l2.py) on seed 002's wide gather.

For frame sizes 1440p, 4K and 8K, several neighbourhoods (radius R, stride S: 9 x 9 samples per
pixel, footprints of 128 to 2048 pixels), 16x16 and 8x8 blocks, and the launch orders row-major and
thread-group tiling along X with N = 4, 8, 16, 32 (gpuadvise's own CUDA remap), this script:

(a) measures each kernel once under Nsight Compute through ``ncu-counters`` (L2 sector hit rate,
    DRAM bytes read, duration; Nsight flushes the caches before each replay pass), and times it
    with CUDA events after flushing the L2 (median of 5);
(b) predicts the same numbers with ``l2_model`` from a trace of the row-major kernel synthesized in
    pure Python (trace_synth.py: the kernel's exact address arithmetic, 4 CTA rows traced; the
    untraced CTAs are synthesized by the model), for the default parameters and a sweep of the L2
    efficiency and the fill granule (32 or 64 bytes), and for the previous model (one cache, no
    partition lookups, 32-byte fills) as a reference, in worker processes while the GPU works;
(c) prints predicted vs measured hit rate, DRAM bytes and sectors crossing between the two L2
    partitions per kernel, the predicted best order vs the two fastest measured per configuration,
    and the parameters that fit best, and writes everything to ``l2_gather.json`` (in $OUT when
    set, else --out).

Targets: hit rate within 5 points and DRAM bytes within 25% on every kernel.

Run on the GPU machine (H100 kind: Nsight Compute reads counters there), from the repository root:
    PYTHONUNBUFFERED=1 python3 benchmarks/l2_gather/run.py
Options: --quick (1440p and 4K, 16x16 only), --predict-only (no GPU: the model's table only),
--measured FILE (no GPU: the model against the measurements of an earlier run's l2_gather.json),
--no-ncu, --jobs N. The whole run takes about 1.5-2 minutes on the H100 machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

FRAMES = {"1440p": (2560, 1440), "4K": (3840, 2160), "8K": (7680, 4320)}
TILES = (4, 8, 16, 32)
EFFICIENCIES = (0.25, 0.35, 0.5, 0.65, 0.8, 1.0)
FETCHES = (32, 64)
DEFAULT = (64, 0.5)  # (fetch_bytes, efficiency): the model's defaults on an H100
PREVIOUS = "one-cache/32/0.5"  # the model before the partition lookups: a reference
EXTRA_METRICS = (
    "lts__t_sector_op_read_hit_rate.pct",
    "lts__t_sectors_op_read.sum",
    "lts__t_sectors_op_write.sum",
    "lts__t_sectors_srcunit_ltcfabric.sum",
)
CHIPS = {"9.0": "gh100", "8.0": "ga100", "10.0": "gb100", "8.9": "ad102", "8.6": "ga102"}


@dataclass(frozen=True)
class Config:
    """One kernel configuration: a frame, a block shape, a neighbourhood (all orders of it)."""

    frame: str
    W: int
    H: int
    block: int
    R: int
    S: int

    @property
    def label(self) -> str:
        return f"{self.frame} {self.block}x{self.block} R={self.R} S={self.S}"

    @property
    def grid(self) -> tuple[int, int]:
        return -(-self.W // self.block), -(-self.H // self.block)


@dataclass(frozen=True)
class Case:
    """One kernel launch: a configuration and a launch order (n = 0: row-major)."""

    cfg: Config
    n: int

    @property
    def kernel(self) -> str:
        return "gather_rm" if self.n == 0 else f"gather_x{self.n}"

    @property
    def order(self) -> str:
        return "row-major" if self.n == 0 else f"tile-x:{self.n}"


def configs(quick: bool) -> list[Config]:
    out = []
    for frame, (W, H) in FRAMES.items():
        if quick and frame == "8K":
            continue
        # 9 x 9 samples each; the widest footprint that leaves interior CTAs in the frame
        rs = [(64, 16), (256, 64), (512, 128) if frame == "1440p" else (1024, 256)]
        for R, S in rs:
            out.append(Config(frame, W, H, 16, R, S))
        if not quick:
            wide = [(256, 64)] + ([] if frame == "8K" else [rs[-1]])
            for R, S in wide:
                out.append(Config(frame, W, H, 8, R, S))
    return out


def cases_of(cfgs: list[Config]) -> list[Case]:
    return [Case(c, n) for c in cfgs for n in (0, *TILES)]


# --------------------------------------------------------------------------------------------
# Prediction (CPU, worker processes)


def predict(cfg: Config, l2_bytes: int, sm_count: int, cc: str, blocks_per_sm: int) -> dict:
    """The model's predictions for every order, per (fetch, efficiency)."""
    from trace_synth import gather_trace

    from gpuadvise.devices import arch_spec
    from gpuadvise.model import l2 as L

    t0 = time.perf_counter()
    trace = gather_trace(cfg.W, cfg.H, cfg.block, cfg.block, cfg.R, cfg.S)
    t_trace = time.perf_counter() - t0
    dev = replace(arch_spec(cc), l2_bytes=l2_bytes, sm_count=sm_count)
    orders: list[L.OrderSpec] = ["row-major", *(("tile-x", n) for n in TILES)]
    out: dict[str, Any] = {"blocks_per_sm": blocks_per_sm, "by_param": {}}
    t1 = time.perf_counter()
    for fetch in FETCHES:
        results = L.l2_models(trace, dev, blocks_per_sm, orders, EFFICIENCIES, fetch, "auto", None)
        for eff, res in zip(EFFICIENCIES, results, strict=True):
            out["by_param"][f"{fetch}/{eff}"] = res.to_json()
    prev = L.l2_models(trace, dev, blocks_per_sm, orders, 0.5, 32, "auto", None, partitions=1)
    out["by_param"][PREVIOUS] = prev[0].to_json()
    out["seconds_trace"] = t_trace
    out["seconds_model"] = time.perf_counter() - t1
    out["traced_ctas"] = len(trace.ctas)
    return out


# --------------------------------------------------------------------------------------------
# GPU side


def kernel_source() -> str:
    from gpuadvise.source.patch import tiled_block_index_cuda

    src = (HERE / "gather.cu").read_text()
    for n in TILES:
        src += "\n" + tiled_block_index_cuda(n, "x", name=f"bid_x{n}")
        src += f"GATHER_KERNEL(gather_x{n}, bid_x{n}())\n"
    return src


def build(workdir: Path, cc: str) -> Path | None:
    """gather.cubin compiled by nvcc, or None (then NVRTC through CuPy)."""
    src = workdir / "gather_all.cu"
    src.write_text(kernel_source())
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    arch = "sm_" + cc.replace(".", "")
    cubin = workdir / "gather.cubin"
    r = subprocess.run(
        [nvcc, "-cubin", "-O3", f"-arch={arch}", "-o", str(cubin), str(src)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        print("nvcc failed, falling back to NVRTC:\n" + r.stderr[-2000:])
        return None
    return cubin


def load_module(workdir: Path) -> Any:
    import cupy as cp

    cubin = workdir / "gather.cubin"
    if cubin.exists():
        return cp.RawModule(path=str(cubin))
    return cp.RawModule(code=(workdir / "gather_all.cu").read_text(), options=("-O3",))


def launch(mod: Any, case: Case, inp: Any, out: Any) -> None:
    import numpy as np

    cfg = case.cfg
    k = mod.get_function(case.kernel)
    gx, gy = cfg.grid
    args = (inp, out, np.int32(cfg.W), np.int32(cfg.H), np.int32(cfg.R), np.int32(cfg.S))
    k((gx, gy, 1), (cfg.block, cfg.block, 1), args)


def buffers(cfg: Config, cache: dict) -> tuple[Any, Any]:
    import cupy as cp

    key = (cfg.W, cfg.H)
    if key not in cache:
        cache.clear()
        inp = cp.arange(cfg.W * cfg.H, dtype=cp.float32) % 251
        cache[key] = (inp, cp.zeros(cfg.W * cfg.H, dtype=cp.float32))
    return cache[key]


def worker(spec: Path) -> None:
    """Under Nsight Compute: each case's kernel launched once, in the spec's order."""
    import cupy as cp

    data = json.loads(spec.read_text())
    mod = load_module(Path(data["workdir"]))
    cache: dict = {}
    for c in data["cases"]:
        case = Case(Config(**c["cfg"]), c["n"])
        inp, out = buffers(case.cfg, cache)
        launch(mod, case, inp, out)
        cp.cuda.Device().synchronize()


def blocks_per_sm(mod: Any, block: int, cc: str) -> int:
    import cupy as cp

    k = mod.get_function("gather_rm")
    try:
        return int(cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(k.kernel.ptr, block, 0))
    except Exception:
        from gpuadvise.devices import for_arch
        from gpuadvise.model.occupancy import KernelResources, max_active_blocks

        res = max_active_blocks(for_arch(cc), KernelResources(block, int(k.num_regs)))
        return res.active_blocks_per_sm


def time_cases(mod: Any, cases: list[Case], l2_bytes: int, reps: int = 5) -> dict[int, dict]:
    """CUDA-event times with the L2 flushed before each launch (median of ``reps``), and a check
    that every tiled kernel writes exactly the row-major kernel's output."""
    import cupy as cp

    flush = cp.empty(max(4 * l2_bytes, 256 << 20) // 4, dtype=cp.float32)
    cache: dict = {}
    ref: dict[Config, Any] = {}
    out_t: dict[int, dict] = {}
    for i, case in enumerate(cases):
        inp, out = buffers(case.cfg, cache)
        out.fill(0)
        launch(mod, case, inp, out)  # warm-up (and the output to check)
        cp.cuda.Device().synchronize()
        if case.n == 0:
            ref[case.cfg] = out.copy()
        ok = bool(cp.array_equal(out, ref[case.cfg])) if case.cfg in ref else None
        times = []
        for _ in range(reps):
            flush.fill(1.0)
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            launch(mod, case, inp, out)
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop))
        out_t[i] = {"event_ms": statistics.median(times), "output_matches_row_major": ok}
    del flush
    return out_t


def available_metrics(cc: str) -> list[str]:
    chip = CHIPS.get(cc)
    ncu = shutil.which("ncu")
    if chip is None or ncu is None:
        return []
    r = subprocess.run(
        [ncu, "--query-metrics", "--chip", chip], capture_output=True, text=True, timeout=120
    )
    names = {ln.split()[0] for ln in r.stdout.splitlines() if ln.strip()}
    return [m for m in EXTRA_METRICS if m.rsplit(".", 1)[0] in names]


def run_ncu(workdir: Path, cases: list[Case], extra: list[str]) -> dict[int, dict[str, float]]:
    spec = workdir / "cases.json"
    spec.write_text(
        json.dumps(
            {"workdir": str(workdir), "cases": [{"cfg": asdict(c.cfg), "n": c.n} for c in cases]}
        )
    )
    cmd = [str(HERE / "ncu-counters"), "-k", "^gather", "-c", str(len(cases))]
    if extra:
        cmd += ["-m", ",".join(extra)]
    cmd += ["--", sys.executable, str(Path(__file__).resolve()), "--worker", str(spec)]
    t0 = time.perf_counter()
    r = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    print(f"ncu: {len(cases)} kernels profiled in {time.perf_counter() - t0:.0f} s")
    if r.returncode != 0 or not r.stdout.strip():
        print("ncu-counters failed:\n" + r.stdout[-2000:] + r.stderr[-2000:])
    launches: dict[int, dict[str, float]] = {}
    ids: list[int] = []
    for ln in r.stdout.splitlines():
        parts = ln.split()
        if len(parts) != 4:
            continue
        lid, _kernel, metric, value = parts
        try:
            v = float(value)
        except ValueError:
            continue
        i = int(lid)
        if i not in launches:
            launches[i] = {}
            ids.append(i)
        launches[i][metric] = v
    # the i-th profiled launch is the i-th case
    return {k: launches[lid] for k, lid in enumerate(sorted(ids))}


# --------------------------------------------------------------------------------------------
# Report


def pct(x: float) -> str:
    return f"{x:6.1f}"


def describe(param: str) -> str:
    if param == PREVIOUS:
        return "the previous model: one cache, no partition lookups, fetch 32 B, efficiency 0.5"
    fetch, eff = param.split("/")
    return f"fetch {fetch} B, efficiency {eff}"


def report(
    cases: list[Case],
    pred: dict[Config, dict],
    meas: dict[int, dict],
    param: str,
    table: bool = True,
) -> dict:
    """Print the table for one parameter set (``table=False``: its summary line only); return
    its statistics. Columns: L2 sector hit rate (ncu, predicted, difference), read hit rate,
    DRAM MB read and the ratio predicted / measured, millions of sectors that crossed between
    the two L2 partitions (lts__t_sectors_srcunit_ltcfabric), times (ncu, CUDA events)."""
    print(f"\n== predicted ({describe(param)}) vs measured")
    if table:
        print(
            f"{'configuration':28s} {'order':10s} {'hit% ncu':>8s} {'pred':>6s} {'d':>6s} "
            f"{'rd% ncu':>7s} {'pred':>6s} {'DRAM MB':>8s} {'pred':>8s} {'ratio':>6s} "
            f"{'fab M':>7s} {'pred':>7s} {'ncu ms':>7s} {'ev ms':>7s}"
        )
    worst_hit = worst_ratio = 0.0
    errs: list[float] = []
    ok = n = 0
    for i, case in enumerate(cases):
        p = pred.get(case.cfg)
        m = meas.get(i, {})
        if p is None or param not in p["by_param"]:
            continue
        res = p["by_param"][param]
        o = next(x for x in res["orders"] if (x["n"] or 0) == case.n)
        ph, pr, pd = 100 * o["hit_rate"], 100 * o["read_hit_rate"], o["dram_bytes"] / 1e6
        pf = o.get("fabric_sectors", 0.0) / 1e6
        mh = m.get("lts__t_sector_hit_rate.pct", math.nan)
        mr = m.get("lts__t_sector_op_read_hit_rate.pct", math.nan)
        md = m.get("dram__bytes_read.sum", math.nan) / 1e6
        mf = m.get("lts__t_sectors_srcunit_ltcfabric.sum", math.nan) / 1e6
        mt = m.get("gpu__time_duration.sum", math.nan) / 1e6
        et = m.get("event_ms", math.nan)
        ratio = pd / md if md and not math.isnan(md) else math.nan
        if table:
            print(
                f"{case.cfg.label:28s} {case.order:10s} {pct(mh):>8s} {pct(ph)} {ph - mh:+6.1f} "
                f"{pct(mr):>7s} {pct(pr)} {md:8.1f} {pd:8.1f} {ratio:6.2f} {mf:7.2f} {pf:7.2f} "
                f"{mt:7.3f} {et:7.3f}"
            )
        if not math.isnan(mh):
            n += 1
            errs.append(abs(ph - mh))
            worst_hit = max(worst_hit, abs(ph - mh))
            worst_ratio = max(worst_ratio, abs(ratio - 1))
            ok += abs(ph - mh) <= 5 and abs(ratio - 1) <= 0.25
    mean = statistics.fmean(errs) if errs else math.nan
    print(
        f"-- {ok}/{n} kernels within targets (hit rate +-5 points, DRAM +-25%); worst hit-rate "
        f"error {worst_hit:.1f} points (mean {mean:.2f}), worst DRAM error "
        f"{100 * worst_ratio:.0f}%"
    )
    return {
        "param": param,
        "within": ok,
        "n": n,
        "worst_hit": worst_hit,
        "mean_hit": mean,
        "worst_dram": worst_ratio,
    }


def best_orders(cases: list[Case], pred: dict[Config, dict], meas: dict[int, dict], param: str):
    print(f"\n== predicted best order (fetch/eff {param}) vs the two fastest measured")
    by_cfg: dict[Config, list[tuple[float, str]]] = {}
    for i, case in enumerate(cases):
        m = meas.get(i, {})
        t = m.get("gpu__time_duration.sum", m.get("event_ms", math.nan) * 1e6)
        by_cfg.setdefault(case.cfg, []).append((t, case.order))
    hits = 0
    total = 0
    for cfg, times in by_cfg.items():
        if cfg not in pred:
            continue
        b = pred[cfg]["by_param"][param]["best"]
        best = "row-major" if b["order"] == "row-major" else f"{b['order']}:{b['n']}"
        times = [x for x in times if not math.isnan(x[0])]
        if not times:
            print(f"{cfg.label:28s} predicted {best:10s} (not measured)")
            continue
        fast = sorted(times)[:2]
        t_best = next((t for t, o in times if o == best), math.inf)
        # among the two fastest, or within 2% of the fastest (a tie within timing noise)
        good = best in [o for _, o in fast] or t_best <= 1.02 * fast[0][0]
        total += 1
        hits += good
        fast_s = ", ".join(f"{o} {t / 1e6:.3f} ms" for t, o in fast)
        rm = next((t for t, o in times if o == "row-major"), math.nan)
        print(
            f"{cfg.label:28s} predicted {best:10s} fastest: {fast_s}  (row-major {rm / 1e6:.3f} ms)"
            f"  {'ok' if good else 'MISS'}"
        )
    print(f"-- predicted best among the two fastest in {hits}/{total} configurations")


def calibrate(cases: list[Case], pred: dict[Config, dict], meas: dict[int, dict]) -> str:
    """Kernels within targets per (fetch, efficiency); returns the best-fitting one."""
    print("\n== calibration: kernels within targets per parameter set")
    table = []
    for fetch in FETCHES:
        for eff in EFFICIENCIES:
            param = f"{fetch}/{eff}"
            hits, drams = [], []
            for i, case in enumerate(cases):
                m = meas.get(i, {})
                if case.cfg not in pred or "lts__t_sector_hit_rate.pct" not in m:
                    continue
                res = pred[case.cfg]["by_param"][param]
                o = next(x for x in res["orders"] if (x["n"] or 0) == case.n)
                hits.append(abs(100 * o["hit_rate"] - m["lts__t_sector_hit_rate.pct"]))
                md = m.get("dram__bytes_read.sum", 0.0)
                drams.append(abs(o["dram_bytes"] / md - 1) if md else math.inf)
            if not hits:
                continue
            within = sum(h <= 5 and d <= 0.25 for h, d in zip(hits, drams, strict=True))
            table.append((within, -statistics.fmean(hits), param))
            print(
                f"fetch {fetch:3d} B, efficiency {eff:4.2f}: {within:3d}/{len(hits)} within; "
                f"mean |d hit| {statistics.fmean(hits):5.1f} points, mean |d DRAM| "
                f"{100 * statistics.fmean(drams):5.1f}%"
            )
    best = max(table)[2] if table else f"{DEFAULT[0]}/{DEFAULT[1]}"
    print(f"best-fitting parameters: fetch/efficiency {best}")
    return best


def load_measured(
    path: Path, cases: list[Case], meas: dict[int, dict]
) -> tuple[str, int, int, dict[int, int]]:
    """Fill ``meas`` from an earlier run's l2_gather.json (cases matched by configuration and
    order); returns its (cc, L2 bytes, SMs, blocks per SM by block size)."""
    blob = json.loads(path.read_text())
    index = {case_key(Config(**c["cfg"]), c["order"]): i for i, c in enumerate(blob["cases"])}
    for i, case in enumerate(cases):
        j = index.get(case_key(case.cfg, case.order))
        if j is not None:
            meas[i].update(blob["measured"][j])
    occ = {int(k): int(v) for k, v in blob["blocks_per_sm"].items()}
    return str(blob["cc"]), int(blob["l2_bytes"]), int(blob["sms"]), occ


def case_key(cfg: Config, order: str) -> tuple:
    return (cfg.frame, cfg.W, cfg.H, cfg.block, cfg.R, cfg.S, order)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--predict-only", action="store_true", help="no GPU: model predictions only")
    ap.add_argument(
        "--measured",
        type=Path,
        default=None,
        help="no GPU: compare with the measurements of an earlier run's l2_gather.json",
    )
    ap.add_argument("--no-ncu", action="store_true")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--l2-bytes", type=int, default=52428800, help="with --predict-only")
    ap.add_argument("--sms", type=int, default=132, help="with --predict-only")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    cfgs = configs(args.quick)
    cases = cases_of(cfgs)
    t_start = time.perf_counter()
    meas: dict[int, dict] = {i: {} for i in range(len(cases))}
    workdir = Path(tempfile.mkdtemp(prefix="l2_gather_"))
    pool = ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn"))
    futures: dict[Config, Future] = {}
    if args.measured is not None:
        cc, l2_bytes, sms, occ = load_measured(args.measured, cases, meas)
        print(
            f"measurements of {args.measured}: cc {cc}, L2 {l2_bytes} B, {sms} SMs, blocks/SM {occ}"
        )
        mod = None
    elif args.predict_only:
        cc, l2_bytes, sms = "9.0", args.l2_bytes, args.sms
        occ = {16: 8, 8: 32}
        print(f"model only: cc {cc}, L2 {l2_bytes} B, {sms} SMs, blocks/SM {occ}")
        mod = None
    else:
        import cupy as cp

        dev = cp.cuda.Device()
        props = cp.cuda.runtime.getDeviceProperties(dev.id)
        cc = f"{props['major']}.{props['minor']}"
        l2_bytes, sms = int(props["l2CacheSize"]), int(props["multiProcessorCount"])
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        build(workdir, cc)
        mod = load_module(workdir)
        occ = {b: blocks_per_sm(mod, b * b, cc) for b in (16, 8)}
        print(f"{name}: cc {cc}, L2 {l2_bytes} B, {sms} SMs, blocks/SM {occ}")
    for cfg in cfgs:
        futures[cfg] = pool.submit(predict, cfg, l2_bytes, sms, cc, occ[cfg.block])
    if mod is not None:
        t0 = time.perf_counter()
        for i, v in time_cases(mod, cases, l2_bytes).items():
            meas[i].update(v)
        bad = [cases[i] for i, v in meas.items() if v.get("output_matches_row_major") is False]
        print(
            f"timed {len(cases)} kernels in {time.perf_counter() - t0:.0f} s; outputs of tiled "
            f"kernels equal row-major's: {'yes' if not bad else 'NO: ' + str(bad)}"
        )
        if not args.no_ncu:
            extra = available_metrics(cc)
            for i, v in run_ncu(workdir, cases, extra).items():
                meas[i].update(v)
    pred: dict[Config, dict] = {}
    for cfg, fut in futures.items():
        try:
            pred[cfg] = fut.result()
        except Exception as exc:  # report and go on with the others
            print(f"prediction failed for {cfg.label}: {exc!r}")
    pool.shutdown()
    for cfg, p in pred.items():
        res = p["by_param"][f"{DEFAULT[0]}/{DEFAULT[1]}"]
        print(
            f"model {cfg.label:28s}: mode {res['mode']}, {p['traced_ctas']} CTAs traced, "
            f"trace {p['seconds_trace']:.1f} s, model {p['seconds_model']:.1f} s "
            f"({len(FETCHES) * len(EFFICIENCIES) + 1} parameter sets); notes: {res['notes']}"
        )
    default = f"{DEFAULT[0]}/{DEFAULT[1]}"
    stats = [report(cases, pred, meas, default)]
    has_meas = any("lts__t_sector_hit_rate.pct" in m for m in meas.values())
    best_orders(cases, pred, meas, default)
    if has_meas:
        stats.append(report(cases, pred, meas, PREVIOUS, table=False))
        best = calibrate(cases, pred, meas)
        if best != default:
            stats.append(report(cases, pred, meas, best))
            best_orders(cases, pred, meas, best)
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else (args.out or HERE / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    blob = {
        "cases": [{"cfg": asdict(c.cfg), "order": c.order, "kernel": c.kernel} for c in cases],
        "measured": [meas.get(i, {}) for i in range(len(cases))],
        "predicted": {c.label: pred[c] for c in cfgs if c in pred},
        "stats": stats,
        "l2_bytes": l2_bytes,
        "sms": sms,
        "cc": cc,
        "blocks_per_sm": occ,
    }
    (out_dir / "l2_gather.json").write_text(json.dumps(blob, indent=1))
    print(f"\nwrote {out_dir / 'l2_gather.json'}; total {time.perf_counter() - t_start:.0f} s")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

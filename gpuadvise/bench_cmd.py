"""``gpuadvise bench``: time a kernel on the GPU (or compare two), with verified outputs.

Exit codes: 0 measured; 1 the kernel failed on the GPU (a CUDA error, a timeout) or two compared
kernels disagree in their outputs; 2 a usage or tool error (no GPU, no PyCUDA, bad input).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from gpuadvise.analyze_cmd import KernelOptions, build
from gpuadvise.devices import DeviceSpec
from gpuadvise.errors import UsageError
from gpuadvise.runner import job as J
from gpuadvise.spec import KernelSpec, ResolvedArg, ResolvedBuffer, ResolvedLaunch

_STRUCT_CODES = {
    "f4": "f", "f8": "d", "i4": "i", "u4": "I", "i8": "q", "u8": "Q", "i2": "h", "u2": "H",
    "i1": "b", "u1": "B", "b1": "?",
}  # fmt: skip


@dataclass(frozen=True)
class Prepared:
    """One kernel ready to run: its spec, compiled module, resolved launch and worker launch."""

    spec: KernelSpec
    device: DeviceSpec
    kernel_name: str
    resolved: ResolvedLaunch
    launch: J.KernelLaunch
    buffers: tuple[J.BufferInit, ...]
    rtol: float
    atol: float
    notes: tuple[str, ...] = field(default=())


def split_source(text: str) -> tuple[str, str | None]:
    """``a.cu`` or ``a.cu:kernel`` (the kernel may be ``ns::k`` or ``k<256>``)."""
    m = re.match(r"^(.*?\.(?:cu|cuh|cpp|cxx|cc))(?::(.+))?$", text)
    if not m:
        return text, None
    return m.group(1), m.group(2)


def _scalar_param(a: ResolvedArg) -> J.Param:
    ct = a.ctype
    if ct.kind == "bfloat16":
        from gpuadvise.ctypes_cuda import encode_bfloat16

        return J.Param("scalar", "H", int(encode_bfloat16(np.array([a.value]))[0]))
    fmt = ct.numpy_format.lstrip("<>=|")
    if fmt == "f2":
        return J.Param("scalar", "H", int(np.array([a.value], np.float16).view(np.uint16)[0]))
    code = _STRUCT_CODES.get(fmt)
    if code is None or ct.lanes > 1:
        raise UsageError(
            f"parameter {a.name} of type {ct.name} cannot be passed by value yet",
            "pass it through a pointer",
        )
    value: int | float = float(a.value) if code in "fd" else int(a.value)
    return J.Param("scalar", code, value)


def _buffer_init(b: ResolvedBuffer) -> J.BufferInit:
    from gpuadvise.ctypes_cuda import CudaType

    if isinstance(b.elem, CudaType):
        dtype = b.elem.dtype
        kind = b.elem.kind if b.elem.kind in ("bfloat16", "fp8_e4m3", "fp8_e5m2") else None
    else:  # a user struct: raw bytes of the compiler's size
        dtype = np.dtype((np.void, b.elem_size_bytes))
        kind = None
        if b.fill in ("ones", "iota"):
            raise UsageError(
                f"buffer {b.name}: fill {b.fill!r} needs a type with fields, and {b.elem.name} is a "
                "struct gpuadvise only knows the size of",
                "use zeros or random for struct buffers",
            )
    # Outputs start poisoned (NaN / 0xFF) unless the user gave their start value (zeros, ones,
    # iota): then they are in/out buffers and start with that value.
    poison = b.is_output and b.fill == "random"
    return J.BufferInit(b.name, dtype, b.count, b.fill, b.is_output, poison, kind)


def prepare(opts: KernelOptions, label: str) -> Prepared:
    from gpuadvise.pipeline import resolve_launch
    from gpuadvise.runner.checks import check_launch
    from gpuadvise.toolchain import compile_source, find_toolchain, select_kernel

    spec, choice, options = build(opts)
    tc = find_toolchain(opts.nvcc)
    module = compile_source(Path(spec.source), options, tc, kernels=[spec.kernel])
    kernel = select_kernel(module, spec.kernel)
    res = kernel.resources
    notes = list(
        check_launch(
            choice.device,
            spec.launch.grid,
            spec.launch.block,
            res.registers,
            res.static_smem_bytes,
            spec.launch.dynamic_smem_bytes,
        )
    )
    resolved = resolve_launch(spec, kernel, options, tc)
    notes += list(resolved.notes)
    fmt_params = tuple(
        _scalar_param(p) if isinstance(p, ResolvedArg) else J.Param("buffer", "P", 0, p.name)
        for p in resolved.params
    )
    launch = J.KernelLaunch(
        label=label,
        cubin_path=str(module.cubin_path),
        symbol=kernel.mangled,
        grid=spec.launch.grid.as_tuple(),
        block=spec.launch.block.as_tuple(),
        dynamic_smem_bytes=spec.launch.dynamic_smem_bytes,
        params=fmt_params,
        repeat=spec.repeat,
    )
    buffers = tuple(_buffer_init(b) for b in resolved.buffers)
    return Prepared(
        spec,
        choice.device,
        kernel.name,
        resolved,
        launch,
        buffers,
        spec.rtol,
        spec.atol,
        tuple(notes),
    )


# ---------------------------------------------------------------------------------------------
# The bandwidth ceiling of the device: a copy kernel, measured once and cached.


def bandwidth_ceiling(device_info: dict[str, Any], timeout_s: float) -> tuple[float | None, str]:
    """(GB/s counting bytes read and written, where it came from)."""
    from gpuadvise.runner.client import run_in_worker
    from gpuadvise.toolchain import CompileOptions, cache_root, compile_source

    key = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{device_info.get('name')}-{device_info.get('driver')}")
    path = cache_root() / f"ceiling-{key}.json"
    try:
        doc = json.loads(path.read_text())
        return float(doc["gbps"]), f"copy kernel, measured {doc['date']} (cached)"
    except (OSError, ValueError, KeyError):
        pass
    cc = str(device_info.get("cc", "9.0")).replace(".", "")
    src = Path(__file__).parent / "data" / "copy.cu"
    module = compile_source(src, CompileOptions(arch=f"sm_{cc}"))
    l2 = int(device_info.get("l2_bytes") or 50 * 2**20)
    nbytes = max(16 * l2, 1 << 30)
    n4 = nbytes // 16
    sms = int(device_info.get("sm_count") or 132)
    launch = J.KernelLaunch(
        "copy",
        str(module.cubin_path),
        "gpuadvise_copy",
        (sms * 32, 1, 1),
        (256, 1, 1),
        0,
        (
            J.Param("buffer", "P", 0, "in"),
            J.Param("buffer", "P", 0, "out"),
            J.Param("scalar", "Q", n4),
        ),
    )
    bufs = (
        J.BufferInit("in", np.dtype(np.uint8), nbytes, "zeros"),
        J.BufferInit("out", np.dtype(np.uint8), nbytes, "zeros", is_output=False),
    )
    run = run_in_worker(
        J.Job((launch,), bufs, verify=False, timing=J.TimingConfig(cold=False, min_time_s=0.3)),
        timeout_s,
    )
    if not run.result.ok or not run.result.outcomes:
        return None, f"copy kernel failed: {run.result.error}"
    med = float(np.median(run.result.outcomes[0].samples_ms))
    gbps = 2 * nbytes / (med * 1e-3) / 1e9
    import datetime

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "gbps": gbps,
                    "date": str(datetime.date.today()),
                    "bytes": 2 * nbytes,
                    "median_ms": med,
                }
            )
        )
        tmp.replace(path)
    except OSError:
        pass
    return gbps, "copy kernel, measured now"


def time_prepared(
    prepared: list[Prepared], timing: J.TimingConfig, hot: bool, timeout_s: float
) -> Any:
    """Verify and time prepared launches (A B interleaved) in the isolated worker."""
    from gpuadvise.runner.client import run_in_worker
    from gpuadvise.toolchain import CompileOptions, compile_source

    data = Path(__file__).parent / "data"
    arch = CompileOptions(arch=prepared[0].device.arch)
    spin = compile_source(data / "spin.cu", arch)
    flush = compile_source(data / "flush.cu", arch)
    timing = replace(
        timing,
        cold=not hot,
        spin_cubin=str(spin.cubin_path),
        flush_cubin=str(flush.cubin_path),
    )
    job = J.Job(
        launches=tuple(p.launch for p in prepared),
        buffers=prepared[0].buffers,
        seed=prepared[0].spec.seed,
        verify=True,
        timing=timing,
    )
    return run_in_worker(job, timeout_s + timing.max_time_s + 60)


def live_options(opts: KernelOptions) -> KernelOptions:
    """Options to compile for the live GPU (bench and timed gates run there)."""
    from gpuadvise.devices import live_device, resolve_device

    live = live_device()
    if live is not None and (opts.gpu or opts.arch):
        asked = resolve_device(opts.gpu, opts.arch).device
        if asked.cc != live.cc:
            raise UsageError(
                f"timing runs on the live {live.full_name} ({live.arch}), not on {asked.name}",
                "drop --gpu/--arch: kernels are compiled for the GPU they run on",
            )
    if live is not None:
        opts = replace(opts, gpu=None, arch=None)
    return opts


# ---------------------------------------------------------------------------------------------


@dataclass
class BenchReport:
    """What ``bench`` found; rendered by the report package."""

    prepared: list[Prepared]
    device_info: dict[str, Any]
    stats: list[Any]  # TimingStats per kernel
    bytes_moved: int
    ceiling_gbps: float | None
    ceiling_source: str
    flops: int | None
    hot: bool
    clocks: dict[str, Any]
    comparisons: list[Any] = field(default_factory=list)  # verify.Comparison (B vs A outputs)
    speedup: Any = None  # stats.SpeedupCI (A / B)
    unwritten: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    cuda_error: str | None = None
    worker_log: str = ""


def run_bench(
    sources: tuple[str, ...],
    opts: KernelOptions,
    hot: bool,
    timeout_s: float,
    flops_expr: str | None,
    timing: J.TimingConfig,
    as_json: bool,
) -> int:
    from gpuadvise.runner.client import require_gpu
    from gpuadvise.runner.stats import speedup_ci, summarize
    from gpuadvise.runner.verify import compare, unwritten

    if not sources:
        raise UsageError("no CUDA source given", "gpuadvise bench kernel.cu --grid ... --block ...")
    if len(sources) > 2:
        raise UsageError("bench compares at most two kernels", "give one or two sources")
    opts = live_options(opts)
    prepared = []
    for label, text in zip("AB", sources, strict=False):
        src, kname = split_source(text)
        prepared.append(prepare(replace(opts, source=src, kernel=kname or opts.kernel), label))
    require_gpu()
    if len(prepared) == 2:
        a, b = prepared
        if [x.name for x in a.buffers] != [x.name for x in b.buffers] or [
            x.nbytes for x in a.buffers
        ] != [x.nbytes for x in b.buffers]:
            raise UsageError(
                "the two kernels do not take the same buffers",
                "compare kernels with the same parameters (same names, types and sizes)",
            )
    run = time_prepared(prepared, timing, hot, timeout_s)
    res = run.result
    env = dict(prepared[0].resolved.env)
    flops = None
    if flops_expr:
        from gpuadvise.expr import evaluate

        flops = evaluate(flops_expr, env)
    report = BenchReport(
        prepared=prepared,
        device_info=res.device,
        stats=[],
        bytes_moved=prepared[0].resolved.total_buffer_bytes,
        ceiling_gbps=None,
        ceiling_source="",
        flops=flops,
        hot=hot,
        clocks=res.clocks,
        notes=[n for p in prepared for n in p.notes],
        worker_log=run.log,
    )
    if not res.ok:
        report.error = res.error
        report.cuda_error = res.cuda_error
        if res.failed_label and len(prepared) > 1:
            report.error = f"kernel {res.failed_label}: {res.error}"
        _render(report, as_json)
        return 1
    for p, o in zip(prepared, res.outcomes, strict=True):
        report.stats.append(summarize(o.samples_ms, o.throttled))
        for buf in p.buffers:
            if buf.poison and buf.name in o.outputs:
                n = unwritten(o.outputs[buf.name])
                if n:
                    report.unwritten[f"{p.launch.label}:{buf.name}"] = n
    if len(prepared) == 2:
        oa, ob = res.outcomes
        for buf in prepared[0].buffers:
            if buf.is_output:
                report.comparisons.append(
                    compare(
                        buf.name,
                        oa.outputs[buf.name],
                        ob.outputs[buf.name],
                        rtol=prepared[0].rtol,
                        atol=prepared[0].atol,
                    )
                )
        report.speedup = speedup_ci(oa.samples_ms, ob.samples_ms)
    report.ceiling_gbps, report.ceiling_source = bandwidth_ceiling(res.device, timeout_s)
    _render(report, as_json)
    if any(not c.ok for c in report.comparisons):
        return 1
    return 0


def _render(report: BenchReport, as_json: bool) -> None:
    if as_json:
        from gpuadvise.report.json_report import bench_json, emit

        emit(bench_json(report))
    else:
        from gpuadvise.report import console

        console.bench(report)

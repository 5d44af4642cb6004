"""``gpuadvise bench``: time a kernel on the GPU (or compare two), with verified outputs.

Exit codes: 0 measured; 1 the kernel failed on the GPU (a CUDA error, a timeout) or two compared
kernels disagree in their outputs; 2 a usage or tool error (no GPU, no PyCUDA, bad input).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from gpuadvise.analyze.options import KernelOptions, build
from gpuadvise.devices import DeviceSpec
from gpuadvise.errors import UsageError
from gpuadvise.inputfiles import parse_json, read_cache_bytes
from gpuadvise.runner.job import BufferInit, Job, KernelLaunch, Param, TimingConfig
from gpuadvise.runner.params import buffer_init, constant_inits, scalar_param
from gpuadvise.spec.kernel_spec import KernelSpec, ResolvedArg, ResolvedLaunch


@dataclass(frozen=True)
class Prepared:
    """One kernel ready to run: its spec, compiled module, resolved launch and worker launch."""

    spec: KernelSpec
    device: DeviceSpec
    kernel_name: str
    resolved: ResolvedLaunch
    launch: KernelLaunch
    buffers: tuple[BufferInit, ...]
    rtol: float
    atol: float
    notes: tuple[str, ...] = field(default=())


def split_source(text: str) -> tuple[str, str | None]:
    """``a.cu`` or ``a.cu:kernel`` (the kernel may be ``ns::k`` or ``k<256>``)."""
    m = re.match(r"^(.*?\.(?:cu|cuh|cpp|cxx|cc))(?::(.+))?$", text)
    if not m:
        return text, None
    return m.group(1), m.group(2)


def prepare(opts: KernelOptions, label: str) -> Prepared:
    from gpuadvise.analyze.pipeline import resolve_launch
    from gpuadvise.runner.checks import check_launch
    from gpuadvise.toolchain import (
        as_written,
        compile_source,
        find_toolchain,
        select_compiled_kernel,
    )

    spec, choice, options = build(opts)
    tc = find_toolchain(opts.nvcc)
    module = compile_source(Path(spec.source), options, tc, kernels=[spec.kernel])
    kernel = as_written(module, spec.kernel, select_compiled_kernel(module, spec.kernel))
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
        scalar_param(p) if isinstance(p, ResolvedArg) else Param("buffer", "P", 0, p.name)
        for p in resolved.params
    )
    launch = KernelLaunch(
        label=label,
        cubin_path=str(module.cubin_path),
        symbol=kernel.mangled,
        grid=spec.launch.grid.as_tuple(),
        block=spec.launch.block.as_tuple(),
        dynamic_smem_bytes=spec.launch.dynamic_smem_bytes,
        params=fmt_params,
        repeat=spec.repeat,
        constants=constant_inits(module.ptx, resolved.constants),
    )
    buffers = tuple(buffer_init(b) for b in resolved.buffers)
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
        doc = parse_json(read_cache_bytes(path, 1 << 20) or b"")
        return float(doc["gbps"]), f"copy kernel, measured {doc['date']} (cached)"
    except (ValueError, KeyError, TypeError):
        pass
    cc = str(device_info.get("cc", "9.0")).replace(".", "")
    src = Path(__file__).parents[1] / "data" / "copy.cu"
    module = compile_source(src, CompileOptions(arch=f"sm_{cc}"))
    l2 = int(device_info.get("l2_bytes") or 50 * 2**20)
    nbytes = max(16 * l2, 1 << 30)
    n4 = nbytes // 16
    sms = int(device_info.get("sm_count") or 132)
    launch = KernelLaunch(
        "copy",
        str(module.cubin_path),
        "gpuadvise_copy",
        (sms * 32, 1, 1),
        (256, 1, 1),
        0,
        (
            Param("buffer", "P", 0, "in"),
            Param("buffer", "P", 0, "out"),
            Param("scalar", "Q", n4),
        ),
    )
    bufs = (
        BufferInit("in", np.dtype(np.uint8), nbytes, "zeros"),
        BufferInit("out", np.dtype(np.uint8), nbytes, "zeros", is_output=False),
    )
    run = run_in_worker(
        Job((launch,), bufs, verify=False, timing=TimingConfig(cold=False, min_time_s=0.3)),
        timeout_s,
    )
    if not run.result.ok or not run.result.outcomes:
        return None, f"copy kernel failed: {run.result.error}"
    med = float(np.median(run.result.outcomes[0].samples_ms))
    gbps = 2 * nbytes / (med * 1e-3) / 1e9
    import datetime

    try:
        from gpuadvise.fileio import write_atomic

        write_atomic(
            path,
            json.dumps(
                {
                    "gbps": gbps,
                    "date": str(datetime.date.today()),
                    "bytes": 2 * nbytes,
                    "median_ms": med,
                }
            ),
        )
    except OSError:
        pass
    return gbps, "copy kernel, measured now"


_TIMING_KERNELS: dict[str, tuple[Any, Any]] = {}
_TIMING_LOCK = threading.Lock()  # one build of them at a time: a second caller waits for it


def timing_kernels(arch: str) -> tuple[Any, Any]:
    """The timing's own kernels (``data/spin.cu``: the launch queue's spin; ``data/flush.cu``:
    the L2 flush) compiled for ``arch``, once per process (the measurement stage builds them
    beside the variants, before its first race: two nvcc runs on a cold cache)."""
    from gpuadvise.toolchain import CompileOptions, compile_source

    with _TIMING_LOCK:
        got = _TIMING_KERNELS.get(arch)
        if got is None or not all(Path(m.cubin_path).is_file() for m in got):  # gone: again
            data = Path(__file__).parents[1] / "data"
            opts = CompileOptions(arch=arch)
            got = (compile_source(data / "spin.cu", opts), compile_source(data / "flush.cu", opts))
            _TIMING_KERNELS[arch] = got
        return got


def time_prepared(
    prepared: list[Prepared],
    timing: TimingConfig,
    hot: bool,
    timeout_s: float,
    matching: tuple[float, float] | None = None,
    outputs: bool = True,
) -> Any:
    """Verify and time prepared launches (A B interleaved) in the isolated worker.

    ``matching`` (rtol, atol): in a race (``timing.race``), variants whose outputs differ from
    the first launch's are not timed (``Job.time_matching``). ``outputs`` False: the worker
    compares the outputs under ``matching`` and sends back the comparisons, not the outputs
    (``Job.return_outputs``)."""
    from gpuadvise.runner.client import run_in_worker

    spin, flush = timing_kernels(prepared[0].device.arch)
    timing = replace(
        timing,
        cold=not hot,
        spin_cubin=str(spin.cubin_path),
        flush_cubin=str(flush.cubin_path),
    )
    job = Job(
        launches=tuple(p.launch for p in prepared),
        buffers=prepared[0].buffers,
        seed=prepared[0].spec.seed,
        verify=True,
        timing=timing,
        time_matching=matching,
        return_inputs=False,
        return_outputs=outputs,
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

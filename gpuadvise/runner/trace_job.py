"""The GPU tracer's worker: ``python -m gpuadvise.runner.trace_job JOB.pkl RESULT.pkl``.

A job kind of its own beside :mod:`gpuadvise.runner.worker` (same isolation: the parent never
creates a CUDA context; a kernel that crashes or hangs takes only this process down, and the parent,
:func:`run_trace_in_worker`, reports it). It:

1. builds the buffers as the runner does (:func:`gpuadvise.runner.data.make_host_buffer`, outputs
   poisoned when the job says so) and allocates them once;
2. runs the original kernel on fresh data and keeps its outputs (the reference);
3. runs the instrumented kernel (one more parameter: the trace buffer) on fresh data; when the
   records overflowed the buffer and a buffer of the size the counter reports fits (device memory,
   ``max_trace_bytes``), it runs once more with that buffer;
4. writes the records into ``records_path`` (raw :data:`~gpuadvise.ptx.instrument.DEVICE_RECORD`
   rows) and the instrumented run's outputs, the header, the allocations' device addresses into
   the result;
5. times both kernels, alternating, ``timing_samples`` times each on fresh data (CUDA events).

A failure at any step is written into the result with its stage (``reference``, ``instrumented``,
``timing``, ``load``) and the CUDA error's name.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuadvise.runner.backend import cuda_error_name
from gpuadvise.runner.job import BufferInit, ConstantInit, Param

_CHUNK_BYTES = 256 << 20
_SAFETY_BYTES = 512 << 20  # device memory left free when sizing the trace buffer


@dataclass(frozen=True)
class TraceJob:
    """One kernel, traced. ``original``/``instrumented``: cubin paths (a ``.ptx`` path is
    JIT-compiled by the driver). ``params``: the user's parameters (the trace buffer is added)."""

    symbol: str
    original: str
    instrumented: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int
    params: tuple[Param, ...]
    buffers: tuple[BufferInit, ...]
    records_path: str
    seed: int = 0
    cta_lo: int = 0
    cta_hi: int = 0
    capacity: int = 1 << 16  # records of the first attempt
    max_trace_bytes: int = 16 << 30
    timing_samples: int = 5
    header_bytes: int = 1024
    record_bytes: int = 272
    constants: tuple[ConstantInit, ...] = ()  # filled in both modules after they are loaded


@dataclass
class TraceResult:
    ok: bool
    stage: str = ""
    error: str | None = None
    cuda_error: str | None = None
    device: dict[str, Any] = field(default_factory=dict)
    reference: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    header: list[int] = field(default_factory=list)
    counter: int = 0
    capacity: int = 0
    records_written: int = 0
    attempts: int = 0
    allocations: dict[str, tuple[int, int]] = field(default_factory=dict)
    times_ms: list[float] = field(default_factory=list)
    instrumented_times_ms: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class TraceRun:
    result: TraceResult
    log: str
    timed_out: bool = False


def _load(backend: Any, path: str, symbol: str, fmt: str, smem: int) -> Any:
    data = Path(path).read_bytes()
    if path.endswith(".ptx") and not data.endswith(b"\0"):
        data += b"\0"
    return backend.load(data, symbol, fmt, smem)


def _args(job: TraceJob, dev: dict[str, Any]) -> list[Any]:
    return [dev[p.buffer] if p.kind == "buffer" else p.value for p in job.params]


def run_trace(job: TraceJob, backend: Any) -> TraceResult:
    from gpuadvise.runner.data import make_host_buffer
    from gpuadvise.runner.verify import poison

    drv = backend.drv
    res = TraceResult(ok=True, device=backend.device_info())
    stage = "setup"
    try:
        inputs = {}
        for b in job.buffers:
            arr = make_host_buffer(
                np.dtype(b.dtype), b.count, b.fill, job.seed, b.name, b.float_kind
            )
            if b.poison:
                arr = arr.copy()
                poison(arr)
            inputs[b.name] = arr
        dev = {b.name: backend.alloc(b.nbytes) for b in job.buffers}
        res.allocations = {b.name: (int(dev[b.name]), b.nbytes) for b in job.buffers}

        def fresh() -> None:
            for b in job.buffers:
                backend.upload(dev[b.name], inputs[b.name])

        def outputs() -> dict[str, np.ndarray]:
            out = {}
            for b in job.buffers:
                if b.is_output:
                    host = np.empty_like(inputs[b.name])
                    backend.download(dev[b.name], host)
                    out[b.name] = host
            return out

        stage = "load"
        from gpuadvise.runner.job import param_format

        fmt = param_format(list(job.params))
        k_orig = _load(backend, job.original, job.symbol, fmt, job.dynamic_smem_bytes)
        k_inst = _load(backend, job.instrumented, job.symbol, fmt + "P", job.dynamic_smem_bytes)
        for c in job.constants:
            host = c.host(job.seed)
            backend.set_constant(k_orig, c.symbol, host)
            backend.set_constant(k_inst, c.symbol, host)
        args = _args(job, dev)
        run_orig = backend.bind(k_orig, job.grid, job.block, job.dynamic_smem_bytes, args)

        stage = "reference"
        fresh()
        run_orig()
        backend.synchronize()
        res.reference = outputs()

        stage = "instrumented"
        free, _total = drv.mem_get_info()
        limit = max(0, min(job.max_trace_bytes, free - _SAFETY_BYTES) - job.header_bytes)
        max_records = limit // job.record_bytes
        capacity = max(1, min(job.capacity, max_records))
        trace_buf = None
        run_inst = None
        header = np.zeros(job.header_bytes // 8, np.uint64)
        while True:
            res.attempts += 1
            if trace_buf is not None:
                trace_buf.free()
            trace_buf = backend.alloc(job.header_bytes + capacity * job.record_bytes)
            run_inst = backend.bind(
                k_inst, job.grid, job.block, job.dynamic_smem_bytes, [*args, trace_buf]
            )
            head = np.zeros(job.header_bytes // 8, np.uint64)
            head[1:4] = (capacity, job.cta_lo, job.cta_hi)
            fresh()
            backend.upload(trace_buf, head)
            run_inst()
            backend.synchronize()
            backend.download(trace_buf, header)
            counter = int(header[0])
            if counter <= capacity or res.attempts >= 2:
                break
            if counter > max_records:
                res.notes.append(
                    f"the trace needs {counter} records ({counter * job.record_bytes / 2**30:.1f} "
                    f"GiB) but at most {max_records} fit in the device memory allowed"
                )
                break
            capacity = counter + 1024
        res.outputs = outputs()
        res.header = [int(x) for x in header]
        res.counter = counter
        res.capacity = capacity
        n = min(counter, capacity)
        res.records_written = n
        with open(job.records_path, "wb") as f:
            done = 0
            base = int(trace_buf) + job.header_bytes
            per = max(1, _CHUNK_BYTES // job.record_bytes)
            while done < n:
                k = min(per, n - done)
                chunk = np.empty(k * job.record_bytes, np.uint8)
                drv.memcpy_dtoh(chunk, base + done * job.record_bytes)
                chunk.tofile(f)
                done += k

        stage = "timing"
        head = np.zeros(4, np.uint64)
        head[1:4] = (capacity, job.cta_lo, job.cta_hi)
        assert run_inst is not None
        for _ in range(max(job.timing_samples, 0)):
            fresh()
            res.times_ms.append(backend.timed(run_orig))
            fresh()
            backend.upload(trace_buf, head)
            res.instrumented_times_ms.append(backend.timed(run_inst))
    except Exception as exc:  # a CUDA error from the kernel or the driver
        msg = f"{type(exc).__name__}: {exc}"
        if stage == "timing":  # the trace is complete; only the timing is missing
            res.notes.append(f"timing failed: {msg}")
            res.times_ms.clear()
            res.instrumented_times_ms.clear()
            return res
        res.ok = False
        res.stage = stage
        res.error = msg
        res.cuda_error = cuda_error_name(msg)
    return res


def main(argv: list[str]) -> int:
    from gpuadvise.runner.client import serve_job

    return serve_job(
        argv, run_trace, lambda stage, error: TraceResult(ok=False, stage=stage, error=error)
    )


class _Alloc:
    def __init__(self, address: int, nbytes: int) -> None:
        self.address = address
        self.array = np.zeros(max(nbytes, 1), np.uint8)

    def __int__(self) -> int:
        return self.address

    def free(self) -> None:
        self.array = np.zeros(1, np.uint8)


class _EmulatedDriver:
    def __init__(self, owner: EmulatedBackend) -> None:
        self.owner = owner

    def mem_get_info(self) -> tuple[int, int]:
        return 8 << 30, 8 << 30

    def memcpy_dtoh(self, host: np.ndarray, src: Any) -> None:
        address = int(src)
        for a in self.owner.allocs:
            if a.address <= address < a.address + len(a.array):
                off = address - a.address
                flat = host.reshape(-1).view(np.uint8)
                flat[...] = a.array[off : off + flat.size]
                return
        raise RuntimeError(f"no allocation at {address:#x}")


_SCALARS = {
    "i": np.int32, "I": np.uint32, "q": np.int64, "Q": np.uint64, "f": np.float32,
    "d": np.float64, "h": np.int16, "H": np.uint16, "b": np.int8, "B": np.uint8, "?": np.bool_,
}  # fmt: skip


class EmulatedBackend:
    """A stand-in for the PyCUDA backend that runs PTX (``load`` gets PTX text) in the CPU
    emulator, every CTA: the tracer's whole path (rewrite, data, runs, records, conversion) can
    run without a GPU, to test it. Buffer ``k`` (in allocation order) gets the address the
    emulator gives the ``k``-th pointer argument, so the addresses the kernel sees are the
    allocations'."""

    name = "emulator"

    def __init__(self) -> None:
        self.allocs: list[_Alloc] = []
        self.drv = _EmulatedDriver(self)

    def device_info(self) -> dict[str, Any]:
        return {"name": "CPU emulator", "backend": "emulator"}

    def load(self, image: bytes, symbol: str, param_formats: str, dynamic_smem: int) -> Any:
        import re

        text = image.rstrip(b"\0").decode()
        target = re.search(r"^\s*\.target\s+(sm_\w+)", text, re.M)
        return [text, symbol, param_formats, target.group(1) if target else "sm_90", {}]

    def set_constant(self, kernel: Any, symbol: str, host: np.ndarray) -> None:
        kernel[4][symbol] = np.ascontiguousarray(host).tobytes()

    def alloc(self, nbytes: int) -> _Alloc:
        from gpuadvise.ptx.memory import GLOBAL_BASE, GLOBAL_STRIDE_BITS

        a = _Alloc(GLOBAL_BASE + (len(self.allocs) << GLOBAL_STRIDE_BITS), nbytes)
        self.allocs.append(a)
        return a

    def upload(self, dev: _Alloc, host: np.ndarray) -> None:
        raw = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        dev.array[: raw.size] = raw

    def download(self, dev: _Alloc, host: np.ndarray) -> None:
        self.drv.memcpy_dtoh(host, dev)

    def bind(
        self,
        kernel: Any,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem: int,
        args: list[Any],
    ) -> Any:
        from gpuadvise.trace.emulate import emulate_ptx

        text, symbol, fmt, arch, constants = kernel

        def go() -> None:
            values: list[Any] = []
            for code, a in zip(fmt, args, strict=True):
                values.append(a.array if isinstance(a, _Alloc) else _SCALARS[code](a))
            e = emulate_ptx(
                text,
                symbol,
                grid,
                block,
                values,
                smem,
                arch,
                sample_ctas="all",
                trace=False,
                constants=tuple(constants.items()),
            )
            for i, a in enumerate(args):
                if isinstance(a, _Alloc):
                    a.array[...] = e.outputs[f"arg{i}"]

        return go

    def synchronize(self) -> None:
        pass

    def timed(self, fn: Any) -> float:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    def close(self) -> None:
        pass


def run_trace_in_worker(job: TraceJob, timeout_s: float = 120.0) -> TraceRun:
    """Run ``job`` in a fresh worker process; kill its process group after ``timeout_s``."""
    from gpuadvise.runner.client import run_worker_module

    run = run_worker_module("gpuadvise.runner.trace_job", job, timeout_s)
    if run.timed_out:
        return TraceRun(
            TraceResult(
                ok=False,
                stage="timeout",
                error=f"the traced kernel did not finish within {timeout_s:g} s "
                f"(ran {run.elapsed_s:.0f} s) and was killed",
            ),
            run.log,
            timed_out=True,
        )
    if run.result is None:
        return TraceRun(TraceResult(ok=False, stage="worker", error=run.death()), run.log)
    return TraceRun(run.result, run.log)


if __name__ == "__main__":
    # run the module's own copy (not __main__'s), so the result pickles as
    # gpuadvise.runner.trace_job.TraceResult for the parent
    from gpuadvise.runner.trace_job import main as _main

    sys.exit(_main(sys.argv))

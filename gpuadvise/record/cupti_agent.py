"""The recorder's link to the real CUPTI and driver, inside the recorded program: a
:class:`~gpuadvise.record.agent.Cuda` made of ctypes memory reads and ``cuda.bindings`` driver
calls, a CUPTI subscriber (the ``cupti-python`` bindings) on the launch callbacks of the driver
and runtime domains and the module-loaded callback, and the kernel activity records for GPU
time. Everything it learns goes through :class:`~gpuadvise.record.agent.Recorder`.

Only this module imports ``cupti`` and ``cuda.bindings`` (``pip install 'gpuadvise[record]'``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from pathlib import Path
from typing import Any

from gpuadvise.record import layout
from gpuadvise.record.agent import DOMAIN_DRIVER, DOMAIN_RESOURCE, DOMAIN_RUNTIME, Recorder
from gpuadvise.record.raw import KernelTiming, RawWriter
from gpuadvise.record.sampling import SnapshotPolicy

__all__ = ["DriverCuda", "start"]

_ACTIVITY_BUFFER_BYTES = 8 << 20


class DriverCuda:
    """:class:`~gpuadvise.record.agent.Cuda` on the CUDA driver (``cuda.bindings.driver``)."""

    def __init__(self) -> None:
        from cuda.bindings import driver

        self.d = driver
        self.ok = driver.CUresult.CUDA_SUCCESS

    def read(self, address: int, size: int) -> bytes:
        return ctypes.string_at(address, size) if size else b""

    def param_slots(self, function: int) -> list[tuple[int, int]] | None:
        d = self.d
        f = d.CUfunction(function)
        slots: list[tuple[int, int]] = []
        for i in range(4096):
            err, offset, size = d.cuFuncGetParamInfo(f, i)
            if err != self.ok:
                if i == 0 and err != d.CUresult.CUDA_ERROR_INVALID_VALUE:
                    return None
                break
            slots.append((int(offset), int(size)))
        return slots

    def kernel_function(self, kernel: int) -> int | None:
        err, f = self.d.cuKernelGetFunction(self.d.CUkernel(kernel))
        return int(f) if err == self.ok and int(f) else None

    def function_name(self, function: int) -> str | None:
        err, name = self.d.cuFuncGetName(self.d.CUfunction(function))
        if err != self.ok or not name:
            return None
        return name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)

    def address_range(self, address: int) -> tuple[int, int] | None:
        err, base, size = self.d.cuMemGetAddressRange(self.d.CUdeviceptr(address))
        return (int(base), int(size)) if err == self.ok and int(size) > 0 else None

    def stream_capturing(self, stream: int) -> bool:
        d = self.d
        err, status = d.cuStreamIsCapturing(d.CUstream(stream))
        if err != self.ok:
            return True  # CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and the like: never synchronise
        return bool(status != d.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)

    def copy_to_host(self, base: int, size: int, stream: int) -> bytes:
        d = self.d
        host = (ctypes.c_char * size)()
        (err,) = d.cuMemcpyDtoHAsync(ctypes.addressof(host), d.CUdeviceptr(base), size,
                                     d.CUstream(stream))  # fmt: skip
        if err == self.ok:
            (err,) = d.cuStreamSynchronize(d.CUstream(stream))
        if err != self.ok:
            raise RuntimeError(f"copying {size} bytes at {base:#x} failed: {err}")
        return bytes(host)


@functools.lru_cache(maxsize=4096)
def _cxa_demangle(name: str) -> str:
    """``name`` demangled by the C++ runtime's ``__cxa_demangle`` (the name itself when there is
    no C++ runtime or the name is not mangled)."""
    try:
        lib = ctypes.CDLL("libstdc++.so.6")
        fn = lib.__cxa_demangle
    except (OSError, AttributeError):
        return name
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    status = ctypes.c_int(-1)
    out = fn(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not out:
        return name
    text = ctypes.string_at(out).decode("utf-8", "replace")
    ctypes.CDLL(None).free(ctypes.c_void_p(out))
    return text


class _Dump:
    """``GPUADVISE_RECORD_DUMP=1``: the raw bytes of the first callbacks (the callback data and
    the structure it points to), to check the layouts of :mod:`gpuadvise.record.layout` and the
    tests' fixtures against a real driver."""

    def __init__(self, path: Path, limit: int = 64) -> None:
        self.path, self.left = path, limit

    def write(self, domain: int, cbid: int, cbdata: Any) -> None:
        if self.left <= 0:
            return
        self.left -= 1
        import json

        try:
            ptr = int(cbdata.ptr)
            head = ctypes.string_at(ptr, 72 if domain != 3 else 24)
            inner = int.from_bytes(head[16:24], "little")
            doc = {
                "domain": domain,
                "cbid": cbid,
                "type": type(cbdata).__name__,
                "cbdata": head.hex(),
                "inner": ctypes.string_at(inner, 64).hex() if inner else None,
            }
        except Exception as exc:
            doc = {"domain": domain, "cbid": cbid, "error": repr(exc)}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(doc) + "\n")


def start(out: Path, kernel_filter: str | None, max_per_kernel: int, max_bytes: int) -> Any:
    """Subscribe to CUPTI in this process and record into ``out/raw/<pid>``; returns a function
    that flushes the activity records and finishes the recording (call it once, at exit)."""
    from cupti import cupti

    writer = RawWriter(out / "raw" / str(os.getpid()), list(sys.argv))
    rec = Recorder(
        DriverCuda(),
        writer,
        SnapshotPolicy(max_per_kernel, max_bytes),
        kernel_filter,
        demangle=_cxa_demangle,
    )

    dump = (
        _Dump(writer.folder / "callbacks.jsonl")
        if os.environ.get("GPUADVISE_RECORD_DUMP")
        else None
    )

    def callback(userdata: Any, domain: Any, cbid: Any, cbdata: Any) -> None:
        if dump is not None:
            dump.write(int(domain), int(cbid), cbdata)
        rec.on_callback(int(domain), int(cbid), int(cbdata.ptr))

    sub = cupti.subscribe(callback, [])
    skipped = []
    for cbid in layout.DRIVER_LAUNCHES:
        cupti.enable_callback(1, sub, DOMAIN_DRIVER, cbid)
    for cbid, (api, _) in layout.RUNTIME_LAUNCHES.items():
        try:
            cupti.enable_callback(1, sub, DOMAIN_RUNTIME, cbid)
        except Exception:  # a CUPTI older than the callback: those launches come as driver ones
            skipped.append(api)
    cupti.enable_callback(1, sub, DOMAIN_RESOURCE, 6)  # CUPTI_CBID_RESOURCE_MODULE_LOADED

    def requested() -> tuple[int, int]:
        return _ACTIVITY_BUFFER_BYTES, 0

    def completed(activities: list[Any]) -> None:
        kernels = [
            KernelTiming(
                str(a.name),
                int(a.correlation_id),
                int(a.start),
                int(a.end),
                int(a.stream_id),
                (int(a.grid_x), int(a.grid_y), int(a.grid_z)),
                (int(a.block_x), int(a.block_y), int(a.block_z)),
                int(a.dynamic_shared_memory),
            )
            for a in activities
            if int(a.kind) == int(cupti.ActivityKind.CONCURRENT_KERNEL)
        ]
        rec.on_activity(kernels)

    activity = True
    try:
        cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
        cupti.activity_register_callbacks(requested, completed)
    except Exception as exc:  # timing is a bonus: record launches without it
        activity = False
        rec.errors.append(f"kernel activity records unavailable: {exc}")

    done: list[bool] = []

    def finish() -> None:
        if done:
            return
        done.append(True)
        if activity:
            try:
                cupti.activity_flush_all(1)
                # no buffer request may reach this Python after it: a program whose own
                # teardown (CuPy's memory pool at interpreter exit) still runs CUDA would
                # call into callbacks of a finalised interpreter (the CuPy script recorded
                # on the H200 ended with SIGSEGV after its output, 2026-11-28)
                cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
                cupti.activity_flush_all(1)
            except Exception as exc:
                rec.errors.append(f"flushing the activity records: {exc}")
        try:
            cupti.unsubscribe(sub)
        except Exception:
            pass
        try:
            cupti.finalize()  # CUPTI detaches from the process: no callback after this
        except Exception:
            pass
        rec.finish({"runtime_callbacks_unavailable": skipped, "activity": activity})

    return finish

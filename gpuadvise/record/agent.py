"""The recorder inside the program: what it does with each CUPTI callback, written against a
small :class:`Cuda` interface (memory reads and the few driver calls it makes), so that tests
drive it with a fake and :mod:`gpuadvise.record.cupti_agent` with the real driver.

For each launch callback (at API entry, before the kernel is queued):

1. the launch is decoded from the callback's parameter structure (:mod:`.layout`): API, grid,
   block, dynamic shared memory, stream, and the kernel's handle;
2. it is counted under its kernel and shape; :class:`~.sampling.SnapshotPolicy` says whether
   this one is snapshotted (and ``kernel_filter`` whether its kernel is wanted at all);
3. a snapshotted launch gets its parameter layout from ``cuFuncGetParamInfo`` (a CUfunction, or
   the CUfunction of a CUDA 13 ``cudaKernel_t``), else from the module's cubin (a runtime launch
   of a host stub), its parameter bytes, every 8-byte parameter that lies in a device allocation
   resolved with ``cuMemGetAddressRange``, and each such allocation copied to the host on the
   launch's stream, which is then synchronised: the copy holds what the kernel is about to see,
   and the program's own results do not change. A stream being captured into a graph is never
   synchronised (that would break the capture): such a launch is recorded without data.

A runtime launch (``cudaLaunchKernel``, ``__cudaLaunchKernel``) may call the driver's launch
underneath, which CUPTI reports too: a driver launch inside a runtime launch on the same thread
is the same launch and is not recorded twice.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Protocol

from gpuadvise.record import layout
from gpuadvise.record.cubin import elf_images, read_cubin
from gpuadvise.record.raw import KernelTiming, LaunchRecord, PointerArg, RawWriter, shape_key
from gpuadvise.record.sampling import SnapshotPolicy

__all__ = ["Cuda", "Recorder"]

DOMAIN_DRIVER, DOMAIN_RUNTIME, DOMAIN_RESOURCE = 1, 2, 3
RESOURCE_MODULE_LOADED = 6
_SHAPES_EVERY = 256  # launches between rewrites of shapes.json


class Cuda(Protocol):
    """What the recorder asks of the process and the driver."""

    def read(self, address: int, size: int) -> bytes: ...

    def param_slots(self, function: int) -> list[tuple[int, int]] | None:
        """(offset, size) of each parameter (``cuFuncGetParamInfo`` until it says no more);
        None when the driver cannot say."""
        ...

    def kernel_function(self, kernel: int) -> int | None:
        """The CUfunction of a CUkernel in the current context (``cuKernelGetFunction``)."""
        ...

    def function_name(self, function: int) -> str | None: ...

    def address_range(self, address: int) -> tuple[int, int] | None:
        """(base, size) of the device allocation holding ``address``, or None."""
        ...

    def stream_capturing(self, stream: int) -> bool: ...

    def copy_to_host(self, base: int, size: int, stream: int) -> bytes:
        """The allocation's bytes, copied on ``stream``, after which ``stream`` is synchronised."""
        ...


class Recorder:
    """Turns CUPTI callbacks into a raw recording (:class:`~.raw.RawWriter`)."""

    def __init__(
        self,
        cuda: Cuda,
        writer: RawWriter,
        policy: SnapshotPolicy,
        kernel_filter: str | None = None,
        demangle: Callable[[str], str] = lambda s: s,
    ) -> None:
        self.cuda = cuda
        self.writer = writer
        self.policy = policy
        self.filter = re.compile(kernel_filter) if kernel_filter else None
        self.demangle = demangle
        self.seq = 0
        self.launches = 0
        self.snapshots = 0
        self.callback_ns = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self._wanted: dict[str, bool] = {}
        self._cubin_slots: dict[str, tuple[tuple[int, int], ...]] = {}

    # -- the callbacks ------------------------------------------------------------------------

    def on_callback(self, domain: int, cbid: int, cbdata_ptr: int) -> None:
        """A CUPTI callback of the driver, runtime or resource domain (those enabled)."""
        t0 = time.perf_counter_ns()
        try:
            if domain == DOMAIN_RESOURCE:
                if cbid == RESOURCE_MODULE_LOADED:
                    self._module(cbdata_ptr)
                return
            table = layout.DRIVER_LAUNCHES if domain == DOMAIN_DRIVER else layout.RUNTIME_LAUNCHES
            entry = table.get(cbid)
            if entry is None:
                return
            fields = layout.decode_callback(self.cuda.read, cbdata_ptr)
            stack = self._runtime_stack()
            if domain == DOMAIN_RUNTIME and fields.site != layout.API_ENTER:
                if stack:
                    stack.pop()
                return
            if fields.site != layout.API_ENTER:
                return
            if domain == DOMAIN_DRIVER and any(stack):
                return  # the driver launch under a runtime launch already recorded
            api, kind = entry
            if domain == DOMAIN_RUNTIME:
                stack.append(False)  # until it is recorded: the driver launch under it counts
            call = layout.decode_launch(self.cuda.read, kind, api, fields.params_ptr)
            problem = layout.implausible(call)
            if problem is not None:
                raise ValueError(f"{api}: {problem}; the launch is left to the driver's callback")
            self._launch(fields, call)
            if domain == DOMAIN_RUNTIME:
                stack[-1] = True
        except Exception as exc:  # never let a recorder fault reach the program
            with self._lock:
                if len(self.errors) < 20:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self.callback_ns += time.perf_counter_ns() - t0

    def on_activity(self, timings: list[KernelTiming]) -> None:
        if timings:
            with self._lock:
                self.writer.activity(timings)

    def finish(self, extra: dict[str, object] | None = None) -> None:
        with self._lock:
            self.writer.shapes(self._shape_counts())
            self.writer.finish(
                {
                    "callback_ns": self.callback_ns,
                    "launches": self.launches,
                    "snapshots": self.snapshots,
                    "snapshot_bytes": self.policy.used_bytes,
                    "errors": list(self.errors),
                    **(extra or {}),
                }
            )

    def _runtime_stack(self) -> list[bool]:
        """This thread's runtime launch calls under way: whether each was recorded."""
        stack = getattr(self._local, "runtime", None)
        if stack is None:
            stack = self._local.runtime = []
        return stack

    # -- modules -------------------------------------------------------------------------------

    def _module(self, ptr: int) -> None:
        module_id, image = layout.decode_module(self.cuda.read, ptr)
        if not image:
            return
        with self._lock:
            self.seq += 1
            self.writer.module(self.seq, module_id, image)
            for elf in elf_images(image):
                try:
                    info = read_cubin(elf)
                except ValueError:
                    continue
                for name, slots in info.kernels.items():
                    self._cubin_slots[name] = tuple((s.offset, s.size_bytes) for s in slots)

    # -- launches ------------------------------------------------------------------------------

    def _wants_kernel(self, symbol: str) -> bool:
        if self.filter is None:
            return True
        hit = self._wanted.get(symbol)
        if hit is None:
            hit = bool(self.filter.search(symbol) or self.filter.search(self.demangle(symbol)))
            self._wanted[symbol] = hit
        return hit

    def _shape_counts(self) -> dict[str, int]:
        return {str(k): v for k, v in self.policy.counts.items()}

    def _launch(self, fields: layout.CallbackFields, call: layout.LaunchCall) -> None:
        function = call.handle if call.handle_kind == "function" else None
        if call.handle_kind == "kernel":
            function = self.cuda.kernel_function(call.handle)
        symbol = fields.symbol_name or (function and self.cuda.function_name(function)) or "?"
        key = shape_key(symbol, call.grid, call.block, call.dynamic_smem_bytes)
        with self._lock:
            self.launches += 1
            number = self.policy.count(key)
            if self.launches % _SHAPES_EVERY == 0:
                self.writer.shapes(self._shape_counts())
            if not (self._wants_kernel(symbol) and self.policy.wants(number)):
                return
            self.seq += 1
            seq = self.seq
        notes: list[str] = []
        slots, source = None, "cuFuncGetParamInfo"
        if function:
            slots = self.cuda.param_slots(function)
        if slots is None:
            known = self._cubin_slots.get(symbol)
            slots, source = (list(known), "cubin") if known is not None else ([], "none")
            if known is None:
                notes.append("parameter layout unknown: no CUfunction and no cubin names it")
        params = layout.param_buffer(self.cuda.read, call, slots)
        pointers = self._pointers(seq, call, slots, params, notes)
        record = LaunchRecord(
            seq=seq,
            launch_number=number,
            correlation_id=fields.correlation_id,
            api=call.api,
            symbol=symbol,
            grid=call.grid,
            block=call.block,
            dynamic_smem_bytes=call.dynamic_smem_bytes,
            stream=call.stream,
            slots=tuple((int(o), int(s)) for o, s in slots),
            slot_source=source,
            params_hex=params.hex(),
            pointers=pointers,
            notes=tuple(notes),
        )
        with self._lock:
            self.writer.launch(record)

    def _pointers(
        self,
        seq: int,
        call: layout.LaunchCall,
        slots: list[tuple[int, int]],
        params: bytes,
        notes: list[str],
    ) -> tuple[PointerArg, ...]:
        """Every 8-byte parameter that lies in a device allocation, with that allocation copied
        (once per allocation) when the stream allows it and the budget has room."""
        found: list[tuple[int, int, int, int]] = []
        for ordinal, (off, size) in enumerate(slots):
            if size != 8 or off % 8:
                continue
            value = int.from_bytes(params[off : off + 8], "little")
            rng = self.cuda.address_range(value) if value else None
            if rng is not None:
                found.append((ordinal, value, rng[0], rng[1]))
        if not found:
            return ()
        capturing = self.cuda.stream_capturing(call.stream)
        if capturing:
            notes.append("the stream was being captured into a graph: no data was copied")
        files: dict[int, str | None] = {}
        for k, (_, _, base, size) in enumerate(found):
            if base in files or capturing:
                continue
            with self._lock:
                admitted = self.policy.admit(size)
            if not admitted:
                files[base] = None
                notes.append(f"allocation of {size} bytes over --max-snapshot-bytes: not copied")
                continue
            name = f"{seq:06d}-{k}.bin"
            self.writer.snapshot(name, self.cuda.copy_to_host(base, size, call.stream))
            files[base] = name
            with self._lock:
                self.snapshots += 1
        return tuple(
            PointerArg(ordinal, value, base, size, files.get(base))
            for ordinal, value, base, size in found
        )

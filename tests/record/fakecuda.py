"""A fake process for the recorder's CPU tests: host memory holding the structures CUPTI and the
driver hand over, laid out as the CUDA 13 headers declare them (cupti_callbacks.h,
generated_cuda_meta.h, generated_cuda_runtime_api_meta.h, cuda.h, driver_types.h), device
allocations, and the driver calls of :class:`gpuadvise.record.agent.Cuda`."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field


@dataclass
class FakeCuda:
    host: dict[int, bytes] = field(default_factory=dict)
    device: dict[int, bytearray] = field(default_factory=dict)
    functions: dict[int, list[tuple[int, int]] | None] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    kernels: dict[int, int] = field(default_factory=dict)  # CUkernel -> CUfunction
    capturing: set[int] = field(default_factory=set)
    copies: list[tuple[int, int, int]] = field(default_factory=list)  # (base, size, stream)
    _next_host: int = 0x1000_0000
    _next_dev: int = 0x7F00_0000_0000

    # -- memory ------------------------------------------------------------------------------
    def put(self, data: bytes) -> int:
        addr = self._next_host
        self.host[addr] = bytes(data)
        self._next_host += (len(data) + 0x100) & ~0xFF
        return addr

    def cstr(self, text: str) -> int:
        return self.put(text.encode() + b"\0")

    def alloc(self, data: bytes) -> int:
        addr = self._next_dev
        self.device[addr] = bytearray(data)
        self._next_dev += (len(data) + 0x10000) & ~0xFFFF
        return addr

    def read(self, address: int, size: int) -> bytes:
        for base, blob in self.host.items():
            if base <= address and address + size <= base + len(blob):
                return blob[address - base : address - base + size]
            if base <= address < base + len(blob):  # a string read past its end: pad as memory
                return blob[address - base :].ljust(size, b"\0")
        raise AssertionError(f"read of {size} bytes at {address:#x}: not mapped")

    # -- the driver ----------------------------------------------------------------------------
    def param_slots(self, function: int) -> list[tuple[int, int]] | None:
        return self.functions.get(function)

    def kernel_function(self, kernel: int) -> int | None:
        return self.kernels.get(kernel)

    def function_name(self, function: int) -> str | None:
        return self.names.get(function)

    def address_range(self, address: int) -> tuple[int, int] | None:
        for base, blob in self.device.items():
            if base <= address < base + len(blob):
                return base, len(blob)
        return None

    def stream_capturing(self, stream: int) -> bool:
        return stream in self.capturing

    def copy_to_host(self, base: int, size: int, stream: int) -> bytes:
        self.copies.append((base, size, stream))
        return bytes(self.device[base][:size])

    # -- what CUPTI hands over -----------------------------------------------------------------
    def callback(self, site: int, params: int, symbol: str, correlation: int) -> int:
        """A CUpti_CallbackData: site @0, functionName @8, functionParams @16, return @24,
        symbolName @32, context @40, contextUid @48, correlationData @56, correlationId @64."""
        data = struct.pack(
            "<IIQQQQQIIQI4x",
            site,
            0,
            self.cstr("launch"),
            params,
            0,
            self.cstr(symbol) if symbol else 0,
            0xC0,
            1,
            0,
            0,
            correlation,
        )
        return self.put(data)

    def args(self, values: list[bytes]) -> int:
        """A kernelParams/args array: one pointer per parameter, each to its value."""
        return self.put(b"".join(struct.pack("<Q", self.put(v)) for v in values))

    def cu_launch_kernel(self, func: int, grid, block, smem: int, stream: int, values) -> int:
        """cuLaunchKernel_params: f, gridDim{X,Y,Z}, blockDim{X,Y,Z}, sharedMemBytes, hStream,
        kernelParams, extra."""
        return self.put(
            struct.pack("<Q3I3II4xQQQ", func, *grid, *block, smem, stream, self.args(values), 0)
        )

    def cu_launch_kernel_extra(self, func: int, grid, block, smem, stream, buffer: bytes) -> int:
        """cuLaunchKernel with kernelParams NULL and `extra` = {BUFFER_POINTER, p, BUFFER_SIZE,
        &size, END}."""
        size_ptr = self.put(struct.pack("<Q", len(buffer)))
        extra = self.put(struct.pack("<5Q", 1, self.put(buffer), 2, size_ptr, 0))
        return self.put(struct.pack("<Q3I3II4xQQQ", func, *grid, *block, smem, stream, 0, extra))

    def cu_launch_kernel_ex(self, func: int, grid, block, smem, stream, values) -> int:
        """cuLaunchKernelEx_params: config*, f, kernelParams, extra; CUlaunchConfig: grid, block,
        sharedMemBytes, hStream, attrs, numAttrs."""
        cfg = self.put(struct.pack("<3I3II4xQQI4x", *grid, *block, smem, stream, 0, 0))
        return self.put(struct.pack("<QQQQ", cfg, func, self.args(values), 0))

    def cuda_launch_kernel(self, handle: int, grid, block, smem, stream, values) -> int:
        """cudaLaunchKernel_v7000_params (and __cudaLaunchKernel's): func, dim3 gridDim, dim3
        blockDim, args, size_t sharedMem, stream."""
        return self.put(
            struct.pack("<Q3I3IQQQ", handle, *grid, *block, self.args(values), smem, stream)
        )

    def cuda_launch_kernel_exc(self, func: int, grid, block, smem, stream, values) -> int:
        """cudaLaunchKernelExC_v11060_params: config*, func, args; cudaLaunchConfig_t: dim3 grid,
        dim3 block, size_t dynamicSmemBytes, stream, attrs, numAttrs."""
        cfg = self.put(struct.pack("<3I3IQQQI4x", *grid, *block, smem, stream, 0, 0))
        return self.put(struct.pack("<QQQ", cfg, func, self.args(values)))

    def module_loaded(self, module_id: int, image: bytes) -> int:
        """CUpti_ResourceData {context, resourceHandle, resourceDescriptor} whose descriptor is a
        CUpti_ModuleResourceData {moduleId, cubinSize, pCubin}."""
        desc = self.put(struct.pack("<I4xQQ", module_id, len(image), self.put(image)))
        return self.put(struct.pack("<QQQ", 0xC0, 0, desc))


def f32(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def i32(v: int) -> bytes:
    return struct.pack("<i", v)


def ptr(v: int) -> bytes:
    return struct.pack("<Q", v)

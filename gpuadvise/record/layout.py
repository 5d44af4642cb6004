"""The C structures a CUPTI callback hands over, decoded from memory (pure: every read goes
through a ``read(address, size) -> bytes`` function, so tests replay recorded bytes).

Layouts are those of the x86-64 ABI for the CUDA 13 headers that the ``nvidia-cuda-cupti``
wheel ships: ``CUpti_CallbackData`` (cupti_callbacks.h), the driver's ``cuLaunchKernel_params``,
``cuLaunchKernelEx_params`` with its ``CUlaunchConfig`` (generated_cuda_meta.h, cuda.h), the
runtime's ``cudaLaunchKernel_v7000_params``, ``cudaLaunchKernelExC_v11060_params`` with its
``cudaLaunchConfig_t`` (generated_cuda_runtime_api_meta.h, driver_types.h), and
``__cudaLaunchKernel`` (CUDA 13's ``<<<...>>>``, crt/device_functions.h: the cudaLaunchKernel
layout with a ``cudaKernel_t`` where the host stub was). Callback ids are the headers' numbers.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "DRIVER_LAUNCHES",
    "RUNTIME_LAUNCHES",
    "CallbackFields",
    "LaunchCall",
    "Read",
    "decode_callback",
    "decode_launch",
    "decode_module",
    "implausible",
    "param_buffer",
]

Read = Callable[[int, int], bytes]
"""``read(address, size)``: ``size`` bytes of this process's memory at ``address``."""

# cbid -> (name, layout). Layouts: "driver" cuLaunchKernel, "driver_coop" (no `extra`),
# "driver_ex" cuLaunchKernelEx, "runtime" cudaLaunchKernel (host stub), "runtime_kernel"
# __cudaLaunchKernel (a cudaKernel_t), "runtime_ex" cudaLaunchKernelExC.
DRIVER_LAUNCHES: dict[int, tuple[str, str]] = {
    307: ("cuLaunchKernel", "driver"),
    442: ("cuLaunchKernel_ptsz", "driver"),
    477: ("cuLaunchCooperativeKernel", "driver_coop"),
    478: ("cuLaunchCooperativeKernel_ptsz", "driver_coop"),
    652: ("cuLaunchKernelEx", "driver_ex"),
    653: ("cuLaunchKernelEx_ptsz", "driver_ex"),
}
RUNTIME_LAUNCHES: dict[int, tuple[str, str]] = {
    211: ("cudaLaunchKernel", "runtime"),
    214: ("cudaLaunchKernel_ptsz", "runtime"),
    269: ("cudaLaunchCooperativeKernel", "runtime"),
    270: ("cudaLaunchCooperativeKernel_ptsz", "runtime"),
    430: ("cudaLaunchKernelExC", "runtime_ex"),
    431: ("cudaLaunchKernelExC_ptsz", "runtime_ex"),
    505: ("__cudaLaunchKernel", "runtime_kernel"),
    506: ("__cudaLaunchKernel_ptsz", "runtime_kernel"),
}
API_ENTER, API_EXIT = 0, 1

# CU_LAUNCH_PARAM_* markers of a launch's `extra` array (cuda.h)
_PARAM_END, _PARAM_BUFFER_POINTER, _PARAM_BUFFER_SIZE = 0, 1, 2
_MAX_EXTRA = 64  # entries of an `extra` array read before giving up on its end marker


@dataclass(frozen=True)
class CallbackFields:
    """The fields of a ``CUpti_CallbackData`` that the recorder reads."""

    site: int  # API_ENTER or API_EXIT
    function_name: str
    params_ptr: int
    symbol_name: str
    context: int
    correlation_id: int


@dataclass(frozen=True)
class LaunchCall:
    """One launch as its API call describes it. ``handle_kind`` says what ``handle`` is:
    ``function`` (a CUfunction), ``kernel`` (a CUkernel/cudaKernel_t) or ``host`` (a runtime
    host stub, which only the runtime itself can turn into a function). ``kernel_params``:
    the ``void**`` array, one pointer per parameter (0: none); ``extra``: the driver's
    ``extra`` array (0: none)."""

    api: str
    handle_kind: str
    handle: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int
    stream: int
    kernel_params: int
    extra: int = 0


def _u32(read: Read, addr: int) -> int:
    return int(struct.unpack("<I", read(addr, 4))[0])


def _u64(read: Read, addr: int) -> int:
    return int(struct.unpack("<Q", read(addr, 8))[0])


def _cstr(read: Read, addr: int, limit: int = 4096) -> str:
    """The NUL-terminated string at ``addr`` (empty for a null pointer), read in small steps."""
    if not addr:
        return ""
    out = bytearray()
    while len(out) < limit:
        chunk = read(addr + len(out), 64)
        end = chunk.find(b"\0")
        if end >= 0:
            out += chunk[:end]
            break
        out += chunk
    return out.decode("utf-8", "replace")


def decode_callback(read: Read, ptr: int) -> CallbackFields:
    """``CUpti_CallbackData`` at ``ptr``: callbackSite @0, functionName @8, functionParams @16,
    functionReturnValue @24, symbolName @32, context @40, contextUid @48, correlationData @56,
    correlationId @64."""
    return CallbackFields(
        site=_u32(read, ptr),
        function_name=_cstr(read, _u64(read, ptr + 8)),
        params_ptr=_u64(read, ptr + 16),
        symbol_name=_cstr(read, _u64(read, ptr + 32)),
        context=_u64(read, ptr + 40),
        correlation_id=_u32(read, ptr + 64),
    )


def _dims(read: Read, addr: int) -> tuple[int, int, int]:
    x, y, z = struct.unpack("<III", read(addr, 12))
    return (int(x), int(y), int(z))


def decode_launch(read: Read, layout: str, api: str, p: int) -> LaunchCall:
    """The launch whose parameter structure (``functionParams``) is at ``p``."""
    if layout in ("driver", "driver_coop"):
        # f @0, gridDim{X,Y,Z} @8, blockDim{X,Y,Z} @20, sharedMemBytes @32, hStream @40,
        # kernelParams @48, extra @56 (cuLaunchKernel only)
        return LaunchCall(
            api,
            "function",
            _u64(read, p),
            _dims(read, p + 8),
            _dims(read, p + 20),
            _u32(read, p + 32),
            _u64(read, p + 40),
            _u64(read, p + 48),
            _u64(read, p + 56) if layout == "driver" else 0,
        )
    if layout == "driver_ex":
        # config* @0, f @8, kernelParams @16, extra @24; CUlaunchConfig: gridDim{X,Y,Z} @0,
        # blockDim{X,Y,Z} @12, sharedMemBytes @24, hStream @32, attrs @40, numAttrs @48
        cfg = _u64(read, p)
        return LaunchCall(
            api,
            "function",
            _u64(read, p + 8),
            _dims(read, cfg),
            _dims(read, cfg + 12),
            _u32(read, cfg + 24),
            _u64(read, cfg + 32),
            _u64(read, p + 16),
            _u64(read, p + 24),
        )
    if layout in ("runtime", "runtime_kernel"):
        # func (or cudaKernel_t) @0, dim3 gridDim @8, dim3 blockDim @20, args @32,
        # size_t sharedMem @40, stream @48
        return LaunchCall(
            api,
            "kernel" if layout == "runtime_kernel" else "host",
            _u64(read, p),
            _dims(read, p + 8),
            _dims(read, p + 20),
            _u64(read, p + 40),
            _u64(read, p + 48),
            _u64(read, p + 32),
        )
    if layout == "runtime_ex":
        # config* @0, func @8, args @16; cudaLaunchConfig_t: dim3 gridDim @0, dim3 blockDim
        # @12, size_t dynamicSmemBytes @24, stream @32
        cfg = _u64(read, p)
        return LaunchCall(
            api,
            "host",
            _u64(read, p + 8),
            _dims(read, cfg),
            _dims(read, cfg + 12),
            _u64(read, cfg + 24),
            _u64(read, cfg + 32),
            _u64(read, p + 16),
        )
    raise ValueError(f"unknown launch layout {layout!r}")


def implausible(call: LaunchCall) -> str | None:
    """Why ``call`` cannot be a launch CUDA accepted (a layout that does not match this CUDA:
    then nothing it points to is read), or None."""
    gx, gy, gz = call.grid
    bx, by, bz = call.block
    if not (0 < gx < 2**31 and 0 < gy <= 65535 and 0 < gz <= 65535):
        return f"grid {call.grid} is not a CUDA grid"
    if not (0 < bx <= 1024 and 0 < by <= 1024 and 0 < bz <= 64 and bx * by * bz <= 1024):
        return f"block {call.block} is not a CUDA block"
    if not 0 <= call.dynamic_smem_bytes < 1 << 24:
        return f"dynamic shared memory {call.dynamic_smem_bytes} is not a size CUDA takes"
    return None


def param_buffer(read: Read, call: LaunchCall, slots: list[tuple[int, int]]) -> bytes:
    """The launch's parameter buffer as the device sees it: each parameter's bytes at its
    offset (``slots``: (offset, size) in ordinal order, from ``cuFuncGetParamInfo`` or the
    cubin). From ``kernelParams`` (one pointer per parameter) or, for a driver launch that
    packed them itself, from ``extra``'s CU_LAUNCH_PARAM_BUFFER_POINTER."""
    total = max((off + size for off, size in slots), default=0)
    if call.kernel_params:
        buf = bytearray(total)
        for i, (off, size) in enumerate(slots):
            arg = _u64(read, call.kernel_params + 8 * i)
            buf[off : off + size] = read(arg, size) if arg else bytes(size)
        return bytes(buf)
    if call.extra:
        pointer, given = 0, None
        for i in range(0, 2 * _MAX_EXTRA, 2):
            key = _u64(read, call.extra + 8 * i)
            if key == _PARAM_END:
                break
            value = _u64(read, call.extra + 8 * (i + 1))
            if key == _PARAM_BUFFER_POINTER:
                pointer = value
            elif key == _PARAM_BUFFER_SIZE and value:
                given = _u64(read, value)
        if pointer:
            n = min(total, given) if given is not None else total
            return bytes(read(pointer, n)).ljust(total, b"\0")
    return bytes(total)


def decode_module(read: Read, ptr: int) -> tuple[int, bytes]:
    """The module of a resource callback whose ``CUpti_ResourceData`` is at ``ptr`` (context @0,
    resourceHandle @8, resourceDescriptor @16), the descriptor being a
    ``CUpti_ModuleResourceData``: moduleId @0 (u32), cubinSize @8, pCubin @16. Returns the module
    id and the module's image."""
    ptr = _u64(read, ptr + 16)
    if not ptr:
        return 0, b""
    module_id = _u32(read, ptr)
    size = _u64(read, ptr + 8)
    image = _u64(read, ptr + 16)
    return module_id, bytes(read(image, size)) if image and size else b""

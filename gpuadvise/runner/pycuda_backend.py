"""The PyCUDA backend. Imported only inside the worker process."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class PyCudaBackend:
    name = "pycuda"

    def __init__(self, device_index: int = 0) -> None:
        import pycuda.driver as drv

        self.drv = drv
        drv.init()
        self.device = drv.Device(device_index)
        self.ctx = self.device.make_context()
        a = drv.device_attribute
        self.l2_bytes = int(self.device.get_attribute(a.L2_CACHE_SIZE))
        self._scratch = None
        self._start = drv.Event()
        self._end = drv.Event()

    def device_info(self) -> dict[str, Any]:
        drv = self.drv
        a = drv.device_attribute
        cc = self.device.compute_capability()
        return {
            "name": self.device.name(),
            "cc": f"{cc[0]}.{cc[1]}",
            "sm_count": int(self.device.get_attribute(a.MULTIPROCESSOR_COUNT)),
            "l2_bytes": self.l2_bytes,
            "driver": f"{drv.get_driver_version() // 1000}.{drv.get_driver_version() % 1000 // 10}",
            "cuda": ".".join(map(str, drv.get_version())),
            "backend": "pycuda",
        }

    def load(self, cubin: bytes, symbol: str, param_formats: str, dynamic_smem: int) -> Any:
        drv = self.drv
        module = drv.module_from_buffer(cubin)
        fn = module.get_function(symbol)
        fn._gpuadvise_module = module  # keep the module alive with the function
        if dynamic_smem > 48 * 1024:
            fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_smem)
        fn.prepare(param_formats)
        return fn

    def alloc(self, nbytes: int) -> Any:
        return self.drv.mem_alloc(max(nbytes, 1))

    def upload(self, dev: Any, host: np.ndarray) -> None:
        self.drv.memcpy_htod(dev, np.ascontiguousarray(host))

    def download(self, dev: Any, host: np.ndarray) -> None:
        self.drv.memcpy_dtoh(host, dev)

    def launch(
        self,
        kernel: Any,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem: int,
        args: Sequence[Any],
    ) -> None:
        kernel.prepared_call(grid, block, *args, shared_size=smem)

    def bind(
        self,
        kernel: Any,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem: int,
        args: Sequence[Any],
    ) -> Any:
        """A launch with its arguments packed once: the fewest host instructions per launch."""
        from pycuda._pvt_struct import pack

        arg_buf = pack(kernel.arg_format, *args)
        launch = kernel._launch_kernel

        def go() -> None:
            launch(grid, block, arg_buf, smem, None)

        return go

    def synchronize(self) -> None:
        self.ctx.synchronize()

    def timed(self, fn: Any) -> float:
        self._start.record()
        fn()
        self._end.record()
        self._end.synchronize()
        return float(self._start.time_till(self._end))

    def flush_l2(self) -> None:
        """Write a buffer twice the L2's size, so the next sample starts with a cold L2."""
        nbytes = max(2 * self.l2_bytes, 1 << 20)
        if self._scratch is None:
            self._scratch = self.drv.mem_alloc(nbytes)
        self.drv.memset_d32(self._scratch, 0, nbytes // 4)

    def close(self) -> None:
        try:
            self.ctx.pop()
            self.ctx.detach()
        except Exception:
            pass

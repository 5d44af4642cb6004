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

    def bind_graph(
        self,
        launches: Sequence[
            tuple[Any, tuple[int, int, int], tuple[int, int, int], int, Sequence[Any]]
        ],
    ) -> Any:
        """``launches`` captured, in order, from a stream into one CUDA graph and instantiated
        once; the callable replays it with one ``cuGraphLaunch`` on the default stream (like the
        stream launches, so the timing events on that stream bracket it the same way).

        Capture records the launches without running them (PyCUDA's ``Stream.begin_capture`` /
        ``end_capture``, ``Graph.instantiate``, ``GraphExec.launch``); a blocking stream is used
        (the legacy default stream cannot capture), and nothing else may touch the GPU until the
        capture ends. The graph keeps a copy of each launch's packed arguments.
        """
        from pycuda._pvt_struct import pack

        drv = self.drv
        if not hasattr(drv.Stream, "begin_capture"):
            raise RuntimeError(
                "this PyCUDA has no CUDA graph support (pycuda.driver.Stream.begin_capture): "
                "pip install -U pycuda"
            )
        packed = [
            (kernel._launch_kernel, grid, block, pack(kernel.arg_format, *args), smem)
            for kernel, grid, block, smem, args in launches
        ]
        stream = drv.Stream()
        stream.begin_capture()
        try:
            for launch, grid, block, arg_buf, smem in packed:
                launch(grid, block, arg_buf, smem, stream)
        except BaseException:
            try:  # end the broken capture so that the stream and the context stay usable
                stream.end_capture()
            except Exception:
                pass
            raise
        graph = stream.end_capture()
        return _GraphReplay(graph.instantiate(), (stream, graph, packed))

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


class _GraphReplay:
    """One launch of an instantiated graph per call; keeps what the graph was built from."""

    def __init__(self, exe: Any, keep: Any) -> None:
        self.exe = exe
        self.keep = keep

    def __call__(self) -> None:
        self.exe.launch()

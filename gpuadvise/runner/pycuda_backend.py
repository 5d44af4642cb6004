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

    def set_constant(self, kernel: Any, symbol: str, host: np.ndarray) -> None:
        """``cudaMemcpyToSymbol``: the module's global ``symbol`` (cuModuleGetGlobal) gets
        ``host``'s bytes."""
        ptr, size = kernel._gpuadvise_module.get_global(symbol)
        data = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        if data.nbytes > size:
            raise RuntimeError(
                f"__constant__ {symbol} holds {size} bytes, not the {data.nbytes} given"
            )
        self.drv.memcpy_htod(ptr, data)

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

        Capture records the launches without running them. PyCUDA 2026.1 wraps no graph API,
        so the four driver calls it lacks (``cuStreamBeginCapture``, ``cuStreamEndCapture``,
        ``cuGraphInstantiateWithFlags``, ``cuGraphLaunch``) go through ctypes on the same
        libcuda and context; the launches themselves are PyCUDA's, on a PyCUDA stream (the
        legacy default stream cannot capture). The graph keeps a copy of each launch's packed
        arguments.
        """
        from pycuda._pvt_struct import pack

        drv = self.drv
        cu = _GraphDriver()
        packed = [
            (kernel._launch_kernel, grid, block, pack(kernel.arg_format, *args), smem)
            for kernel, grid, block, smem, args in launches
        ]
        stream = drv.Stream()
        cu.begin_capture(stream.handle)
        try:
            for launch, grid, block, arg_buf, smem in packed:
                launch(grid, block, arg_buf, smem, stream)
        except BaseException:
            try:  # end the broken capture so that the stream and the context stay usable
                cu.end_capture(stream.handle)
            except Exception:
                pass
            raise
        graph = cu.end_capture(stream.handle)
        return _GraphReplay(cu, cu.instantiate(graph), graph, (stream, packed))

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


class _GraphDriver:
    """The CUDA driver's graph calls, through ctypes (PyCUDA does not wrap them)."""

    CAPTURE_MODE_THREAD_LOCAL = 1

    def __init__(self) -> None:
        import ctypes

        lib = None
        for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if lib is None:
            raise RuntimeError("CUDA graphs: cannot load the CUDA driver library (libcuda)")
        self.ct = ctypes
        self.lib = lib
        vp, pvp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
        sigs = {
            "cuStreamBeginCapture_v2": [vp, ctypes.c_int],
            "cuStreamEndCapture": [vp, pvp],
            "cuGraphInstantiateWithFlags": [pvp, vp, ctypes.c_ulonglong],
            "cuGraphLaunch": [vp, vp],
            "cuGraphExecDestroy": [vp],
            "cuGraphDestroy": [vp],
            "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
        }
        for fname, args in sigs.items():
            fn = getattr(lib, fname)
            fn.argtypes = args
            fn.restype = ctypes.c_int

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            name = self.ct.c_char_p()
            self.lib.cuGetErrorName(rc, self.ct.byref(name))
            text = name.value.decode() if name.value else f"error {rc}"
            raise RuntimeError(f"{what} failed: {text}")

    def begin_capture(self, stream: int) -> None:
        rc = self.lib.cuStreamBeginCapture_v2(stream, self.CAPTURE_MODE_THREAD_LOCAL)
        self._check(rc, "cuStreamBeginCapture")

    def end_capture(self, stream: int) -> Any:
        graph = self.ct.c_void_p()
        self._check(self.lib.cuStreamEndCapture(stream, self.ct.byref(graph)), "cuStreamEndCapture")
        return graph

    def instantiate(self, graph: Any) -> Any:
        exe = self.ct.c_void_p()
        rc = self.lib.cuGraphInstantiateWithFlags(self.ct.byref(exe), graph, 0)
        self._check(rc, "cuGraphInstantiate")
        return exe

    def launch(self, exe: Any) -> None:
        self._check(self.lib.cuGraphLaunch(exe, None), "cuGraphLaunch")

    def destroy(self, exe: Any, graph: Any) -> None:
        self.lib.cuGraphExecDestroy(exe)
        self.lib.cuGraphDestroy(graph)


class _GraphReplay:
    """One launch of an instantiated graph per call, on the legacy default stream; keeps what
    the graph was built from."""

    def __init__(self, cu: _GraphDriver, exe: Any, graph: Any, keep: Any) -> None:
        self.cu = cu
        self.exe = exe
        self.graph = graph
        self.keep = keep

    def __call__(self) -> None:
        self.cu.launch(self.exe)

    def __del__(self) -> None:
        try:
            self.cu.destroy(self.exe, self.graph)
        except Exception:
            pass

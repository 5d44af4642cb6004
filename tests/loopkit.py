"""tests/cuda/loops/loops.cu's kernels compiled for the emulator (the long-loop and SASS-arrival
tests): the module, the kernel, its resolved launch and the device, as the pipeline builds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

LOOPS = Path(__file__).resolve().parent / "cuda" / "loops" / "loops.cu"


def compiled(kernel: str, grid: str, block: str, *args: str, buffers: tuple[str, ...] = ()) -> Any:
    """(module, kernel, resolved launch, device) of ``kernel`` at ``grid`` x ``block`` with
    ``args`` and ``buffers``; the spec of the last call is kept as ``compiled.spec``."""
    from gpuadvise.analyze.models import resolve_launch
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.toolchain import compile_source, find_toolchain, select_compiled_kernel

    opts = KernelOptions(source=str(LOOPS), kernel=kernel, grid=grid, block=block, args=args,
                         buffers=buffers, gpu="H100")  # fmt: skip
    spec, choice, options = build(opts)
    tc = find_toolchain()
    module = compile_source(LOOPS, options, tc, kernels=[spec.kernel])
    k = select_compiled_kernel(module, spec.kernel)
    compiled.spec = spec  # type: ignore[attr-defined]
    return module, k, resolve_launch(spec, k, options, tc), choice.device

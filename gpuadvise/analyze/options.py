"""``gpuadvise analyze`` and the launch/compile options it shares with ``bench``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuadvise.devices import DeviceChoice, resolve_device
from gpuadvise.spec.kernel_spec import KernelSpec, build_kernel_spec


@dataclass(frozen=True)
class KernelOptions:
    """What the user said on the command line about the kernel, its launch and its compile."""

    source: str | None
    kernel: str | None = None
    grid: str | None = None
    block: str | None = None
    dynamic_smem: str | None = None
    spec: str | None = None
    args: tuple[str, ...] = ()
    buffers: tuple[str, ...] = ()
    seed: int | None = None
    gpu: str | None = None
    arch: str | None = None
    include: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    std: str | None = None
    use_fast_math: bool = False
    xptxas: tuple[str, ...] = ()
    nvcc_flags: tuple[str, ...] = ()
    maxrregcount: int | None = None
    nvcc: str | None = None
    no_cache: bool = False


def build(opts: KernelOptions) -> tuple[KernelSpec, DeviceChoice, Any]:
    """The kernel spec, the device and the compile options the command line asks for."""
    from gpuadvise.analyze.pipeline import compile_options_for

    spec = build_kernel_spec(
        opts.source,
        opts.kernel,
        spec=opts.spec,
        grid=opts.grid,
        block=opts.block,
        dynamic_smem=opts.dynamic_smem,
        args=opts.args,
        buffers=opts.buffers,
        seed=opts.seed,
    )
    choice = resolve_device(opts.gpu, opts.arch)
    options = compile_options_for(
        choice.device,
        spec_flags=tuple(spec.nvcc_flags),
        include_dirs=opts.include,
        defines=opts.defines,
        std=opts.std,
        use_fast_math=opts.use_fast_math,
        xptxas=opts.xptxas,
        extra_flags=opts.nvcc_flags,
        maxrregcount=opts.maxrregcount,
        use_cache=not opts.no_cache,
    )
    return spec, choice, options


def parse_l2_probe_ctas(text: str | None) -> int | None:
    """``--l2-probe-ctas``: how many CTAs in the middle of a 2D grid the L2 model traces besides
    the sampled ones (0: none), or None (the default: up to 64, at most ``--sample-ctas``)."""
    from gpuadvise.errors import UsageError

    if text is None:
        return None
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise UsageError(f"--l2-probe-ctas {text!r} is not a count", "give 0 or a positive number")
    return n


def parse_sample_ctas(text: str | None) -> int | str | None:
    """``--sample-ctas``: a positive count, ``all``, or None (the first wave)."""
    from gpuadvise.errors import UsageError

    if text is None:
        return None
    if text.strip().lower() == "all":
        return "all"
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise UsageError(f"--sample-ctas {text!r} is not a count", "give a positive number or all")
    return n

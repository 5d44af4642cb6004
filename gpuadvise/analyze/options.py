"""``gpuadvise analyze`` and the launch/compile options it shares with ``bench``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuadvise.devices import DeviceChoice, DeviceSpec, resolve_device
from gpuadvise.spec.kernel_spec import KernelSpec, build_kernel_spec

if TYPE_CHECKING:
    from gpuadvise.toolchain.options import CompileOptions


@dataclass(frozen=True)
class AnalyzeSettings:
    """How a kernel is analyzed (the command line's analysis options), the same for one kernel
    (``gpuadvise analyze kernel.cu``) and for every case of a batch (``analyze FOLDER...``):
    :func:`gpuadvise.analyze.run.run_analysis` takes it. ``time_budget_s`` is per case;
    ``write_variants``: the folder the findings' variants are written to (one kernel only)."""

    trace: bool = True
    sample_ctas: str | None = None
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    rules_dirs: tuple[str, ...] = ()
    measure: bool | None = None
    tracer: str = "auto"
    time_budget_s: float | None = None
    l2_probe_ctas: str | None = None
    write_variants: str | None = None


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
    confine_to: tuple[str, ...] = ()  # the gate's repository: see CompileOptions.confine_to
    includes_trusted: bool = False  # gate --trust-config: see CompileOptions
    constants: tuple[str, ...] = ()  # --constant NAME=TYPE[COUNT]:FILL
    max_instructions: int | None = None  # --max-instructions N: the emulator's budget per warp
    with_source: str | None = None  # analyze --source FILE: the .cu of a .ptx/.cubin given


def build(opts: KernelOptions) -> tuple[KernelSpec, DeviceChoice, Any]:
    """The kernel spec, the device and the compile options the command line asks for (a
    ``.ptx``/``.cubin`` given: :func:`gpuadvise.analyze.binary_input.build_binary`)."""
    from gpuadvise.toolchain.binary import is_binary

    if opts.source and not is_binary(opts.source):
        # a source file (binary_input imports the rules' API: not for a cache hit)
        return _build(opts)
    from gpuadvise.analyze.binary_input import binary_source, build_binary

    if binary_source(opts) is not None:
        return build_binary(opts, _build)
    return _build(opts)


def _build(opts: KernelOptions) -> tuple[KernelSpec, DeviceChoice, Any]:
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
        constants=opts.constants,
        max_instructions=opts.max_instructions,
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
        confine_to=opts.confine_to,
        includes_trusted=opts.includes_trusted,
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
    """``--sample-ctas``: a positive count, ``all``, ``wave`` (the whole first wave), or None (the
    default sample: the first wave bounded by its cost, :mod:`gpuadvise.trace.emulate`)."""
    from gpuadvise.errors import UsageError

    if text is None:
        return None
    if text.strip().lower() in ("all", "wave"):
        return text.strip().lower()
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise UsageError(
            f"--sample-ctas {text!r} is not a count", "give a positive number, all or wave"
        )
    return n


def compile_options_for(
    device: DeviceSpec,
    spec_flags: tuple[str, ...] = (),
    include_dirs: tuple[str, ...] = (),
    defines: tuple[str, ...] = (),
    std: str | None = None,
    use_fast_math: bool = False,
    xptxas: tuple[str, ...] = (),
    extra_flags: tuple[str, ...] = (),
    maxrregcount: int | None = None,
    use_cache: bool = True,
    confine_to: tuple[str, ...] = (),
    includes_trusted: bool = False,
) -> CompileOptions:
    """The compile options for ``device``: ``spec_flags`` (from a spec file) come before the
    command line's. ``-I``/``-D``/``-std=`` among raw flags are split out into their fields."""
    from gpuadvise.toolchain.options import CompileOptions

    inc, defs, extra = list(include_dirs), list(defines), []
    for flag in (*spec_flags, *extra_flags):
        if flag.startswith("-I") and len(flag) > 2:
            inc.append(flag[2:])
        elif flag.startswith("-D") and len(flag) > 2:
            defs.append(flag[2:])
        elif flag.startswith(("-std=", "--std=")):
            std = flag.split("=", 1)[1]
        else:
            extra.append(flag)
    return CompileOptions(
        arch=device.arch,
        include_dirs=tuple(inc),
        defines=tuple(defs),
        std=std,
        use_fast_math=use_fast_math,
        xptxas=xptxas,
        extra_flags=tuple(extra),
        maxrregcount=maxrregcount,
        use_cache=use_cache,
        confine_to=confine_to,
        includes_trusted=includes_trusted,
    )

"""What the parent sends the isolated worker, and what comes back. Plain picklable dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpuadvise.runner.stats import RacePolicy


@dataclass(frozen=True)
class BufferInit:
    """A device buffer: ``count`` elements of ``dtype`` filled by ``fill`` (runner/data.py).

    ``poison``: fill with NaN / 0xFF bytes before each verification run instead (outputs whose start
    value the user did not give), so an element the kernel never writes is caught.
    """

    name: str
    dtype: Any  # np.dtype
    count: int
    fill: str = "random"
    is_output: bool = False
    poison: bool = False
    float_kind: str | None = None  # bfloat16 / fp8: dtype holds raw bits (runner/data.py)

    @property
    def nbytes(self) -> int:
        return int(np.dtype(self.dtype).itemsize) * self.count


@dataclass(frozen=True)
class ConstantInit:
    """A ``__constant__`` variable of the kernel's module filled before its runs, as the host
    code's ``cudaMemcpyToSymbol`` would: ``symbol`` in the module, the bytes made as a buffer's
    (``name`` seeds them, with the job's seed; runner/data.py)."""

    symbol: str
    name: str
    dtype: Any  # np.dtype
    count: int
    fill: str = "random"
    float_kind: str | None = None

    def host(self, seed: int) -> np.ndarray:
        from gpuadvise.runner.data import make_host_buffer

        return make_host_buffer(
            np.dtype(self.dtype), self.count, self.fill, seed, self.name, self.float_kind
        )


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a scalar (``fmt`` a struct code: i I q Q f d h H b B, or ``Ns`` for
    N bytes given as they are) or a buffer."""

    kind: str  # "scalar" | "buffer"
    fmt: str = "P"
    value: int | float | bytes = 0  # bytes: a struct or vector by value (fmt "Ns")
    buffer: str = ""
    align: int = 0  # a by-value struct's alignment (padding goes before it); 0: fmt's own


def param_format(params: list[Param]) -> str:
    """The struct-module format of a launch's parameters (as PyCUDA packs them, native
    alignment): a value given by its bytes (``Ns``, aligned to 1 by the struct module) gets the
    padding its own alignment needs before it, as the compiler lays it out."""
    from struct import calcsize

    fmt = ""
    for p in params:
        if p.align > 1:
            pad = -calcsize(fmt) % p.align
            fmt += f"{pad}x" if pad else ""
        fmt += p.fmt
    return fmt


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel launched ``repeat`` times per verification run and per timing sample.

    ``graph``: instead of ``repeat`` launches on the stream, one replay of a CUDA graph holding
    the same ``repeat`` launches, captured once from a stream (the backend's ``bind_graph``):
    timing a launch against its ``as_graph`` copy measures what launch overhead costs (GA501).
    """

    label: str  # "A", "B", or the variant's name
    cubin_path: str
    symbol: str  # mangled entry name
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int
    params: tuple[Param, ...]
    repeat: int = 1
    graph: bool = False
    # (output, combine op) pairs: outputs holding one partial result per CTA (a per-block
    # reduction) whose count follows grid[0], compared with the first launch's as totals
    # (verify.compare_totals) when a race chooses its entrants
    totals: tuple[tuple[str, str], ...] = ()
    # __constant__ variables of this launch's module filled after it is loaded
    constants: tuple[ConstantInit, ...] = ()


def as_graph(launch: KernelLaunch, label: str | None = None) -> KernelLaunch:
    """``launch``'s sequence of ``repeat`` launches, replayed as one CUDA graph (captured once).

    A job with ``(launch, as_graph(launch, "B"))`` times the stream launches against the graph
    replay of the same sequence, verified against each other like any A/B pair.
    """
    return replace(launch, label=label or f"{launch.label}-graph", graph=True)


@dataclass(frozen=True)
class TimingConfig:
    cold: bool = True  # flush L2 before every sample
    warmup: int = 3
    min_samples: int = 10
    min_time_s: float = 0.5
    max_time_s: float = 15.0
    target_rel_noise: float = 0.005
    # A cubin with gpuadvise_spin(long long cycles) (data/spin.cu): run before each sample so no
    # host launch overhead lands between the timing events; spin_cycles of GPU clock.
    spin_cubin: str | None = None
    spin_cycles: int = 40_000
    order_seed: int = 0  # each round times the launches in a random order (no order bias)
    # A cubin with gpuadvise_flush (data/flush.cu): reads 2x the L2 to empty it of the kernel's
    # data without leaving dirty lines; without it the backend's memset flush is used.
    flush_cubin: str | None = None
    # Adaptive A/B (stats.Race): the first launch is the baseline, the others its variants, each
    # timed until its speedup interval decides the question or the race's caps are hit; None:
    # every launch timed until the median is known to target_rel_noise (AdaptivePolicy).
    race: RacePolicy | None = None


@dataclass(frozen=True)
class Job:
    launches: tuple[KernelLaunch, ...]
    buffers: tuple[BufferInit, ...]
    seed: int = 0
    verify: bool = True  # run each launch once on fresh data and return its outputs
    timing: TimingConfig | None = None  # None: no timing
    # (rtol, atol): in a race, a variant whose verified outputs differ from the first launch's
    # is not timed (its outcome's stop_reason is "unverified"); None: every launch is timed
    time_matching: tuple[float, float] | None = None
    # whether the result carries the input buffers' data (Result.inputs): timing jobs do not
    # need it back (an 8192^2 transpose's 256 MB input was pickled, written and read for nothing)
    return_inputs: bool = True
    # whether the result carries the launches' outputs; False: the worker compares each later
    # launch's with the first's under time_matching (LaunchOutcome.comparisons) and sends back
    # their names only (an 8K gather's 133 MB output was pickled, written, read and compared
    # again in the parent for each race)
    return_outputs: bool = True


@dataclass
class LaunchOutcome:
    label: str
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    samples_ms: list[float] = field(default_factory=list)
    throttled: list[bool] = field(default_factory=list)
    stop_reason: str | None = None  # why a raced variant's timing stopped (stats.STOP_REASONS)
    # Job.return_outputs False: the outputs' names, and (launches after the first) their
    # comparisons with the first launch's (runner.verify.Comparison; None: not compared)
    output_names: tuple[str, ...] | None = None
    comparisons: list[Any] | None = None


@dataclass
class Result:
    ok: bool
    device: dict[str, Any] = field(default_factory=dict)
    outcomes: list[LaunchOutcome] = field(default_factory=list)
    error: str | None = None  # what failed, with the CUDA error name when there is one
    cuda_error: str | None = None
    failed_label: str | None = None
    clocks: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    # where the worker's time went (seconds): inputs_s (the buffers' start data made, or kept
    # from the worker's last job: kept_inputs), alloc_s, load_s, verify_s, timing_s, compare_s
    timings_s: dict[str, float] = field(default_factory=dict)

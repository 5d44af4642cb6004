"""Device models: the limits of each compute capability plus the numbers of real GPUs.

A :class:`DeviceSpec` is everything gpuadvise's models need to know about a GPU. Presets for real
products live in ``data/devices.toml`` (with their sources), so that everything but measurement works
with no GPU (``--gpu H100``). ``--arch sm_90`` gives the architecture's limits; product numbers (SM
count, L2, bandwidth) then come from the reference product of that architecture when there is one.
With neither option the live GPU is read through NVML when present.
"""

from __future__ import annotations

import difflib
import logging
import re
import tomllib
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from gpuadvise.errors import UnknownDeviceError, UsageError

log = logging.getLogger(__name__)

WARP_SIZE = 32
MAX_THREADS_PER_BLOCK = 1024
MAX_REGS_PER_THREAD = 255
DEFAULT_SMEM_PER_BLOCK = 48 * 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)


def check_block_shape(
    dims: tuple[int, int, int], max_threads: int = MAX_THREADS_PER_BLOCK, what: str = "block"
) -> None:
    """Raise UsageError unless ``dims`` is a block CUDA can launch: x and y at most 1024, z at
    most 64, and at most ``max_threads`` threads in all (1024 on every GPU since Fermi)."""
    shown = dims if dims[2] != 1 else dims[:2] if dims[1] != 1 else dims[:1]
    shape = "x".join(str(d) for d in shown)
    for axis, extent, top in zip("xyz", dims, MAX_BLOCK, strict=True):
        if extent < 1:
            raise UsageError(f"{what} {shape} has {axis} = {extent}", "every extent must be >= 1")
        if extent > top:
            raise UsageError(
                f"{what} {shape} has {axis} = {extent}, above the maximum of {top} "
                f"(CUDA's blocks are at most {MAX_BLOCK[0]}x{MAX_BLOCK[1]}x{MAX_BLOCK[2]})",
                "reshape the block, e.g. 16x16 or 256",
            )
    count = dims[0] * dims[1] * dims[2]
    if count > max_threads:
        raise UsageError(
            f"{what} {shape} has {count} threads, above the maximum of {max_threads} per block",
            "use at most 1024 threads per block, e.g. 256 or 16x16",
        )


# The product whose SM count, L2 and bandwidth stand in for an architecture given as --arch alone.
_REFERENCE_PRODUCT = {
    "6.0": "P100",
    "6.1": "GTX1080",
    "5.2": "GTX980",
    "7.0": "V100",
    "7.5": "T4",
    "8.0": "A100-80GB",
    "8.6": "RTX3090",
    "8.7": "Jetson-Orin",
    "8.9": "L40S",
    "9.0": "H100",
    "10.0": "B200",
    "12.0": "RTX5090",
}


@dataclass(frozen=True)
class DeviceSpec:
    """One GPU as the models see it. Sizes in bytes, bandwidth in GB/s, clocks in MHz.

    Product fields (``sm_count`` ...) are ``None`` for a bare architecture with no reference product.
    """

    name: str
    full_name: str
    cc_major: int
    cc_minor: int
    threads_per_sm: int
    blocks_per_sm: int
    regs_per_sm: int
    regs_per_block: int
    smem_per_sm: int
    smem_per_block_optin: int
    reserved_smem_per_block: int
    smem_per_block: int = DEFAULT_SMEM_PER_BLOCK
    max_threads_per_block: int = MAX_THREADS_PER_BLOCK
    warp_size: int = WARP_SIZE
    sm_count: int | None = None
    l2_bytes: int | None = None
    mem_bandwidth_gbps: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    source: str = "preset"  # preset | arch | live

    @property
    def cc(self) -> str:
        return f"{self.cc_major}.{self.cc_minor}"

    @property
    def arch(self) -> str:
        return f"sm_{self.cc_major}{self.cc_minor}"

    @property
    def max_warps_per_sm(self) -> int:
        return self.threads_per_sm // self.warp_size

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "full_name": self.full_name,
            "arch": self.arch,
            "cc": self.cc,
            "source": self.source,
            "sm_count": self.sm_count,
            "l2_bytes": self.l2_bytes,
            "mem_bandwidth_gbps": self.mem_bandwidth_gbps,
        }


def _data_file(name: str) -> dict[str, Any]:
    """The package's ``data/<name>`` TOML file, read beside this module (as the HTML report's
    templates are): ``importlib.resources`` imported its zip reader first, 5 ms of every
    analysis before the key's nvcc started (issue 31)."""
    return tomllib.loads((Path(__file__).parent / "data" / name).read_text(encoding="utf-8"))


@cache
def _data() -> dict[str, Any]:
    return _data_file("devices.toml")


def known_ccs() -> list[str]:
    """Compute capabilities with limits, in ascending order."""
    return sorted(_data()["arch"], key=lambda s: tuple(int(p) for p in s.split(".")))


def preset_names() -> list[str]:
    return list(_data()["gpu"])


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.lower()).removeprefix("nvidia").removeprefix("geforce")


def arch_spec(cc: str) -> DeviceSpec:
    """The bare limits of compute capability ``cc`` ("9.0"), no product numbers."""
    limits = _data()["arch"].get(cc)
    if limits is None:
        raise UnknownDeviceError(
            f"compute capability {cc} is not known to the occupancy model",
            "use one of " + ", ".join("sm_" + c.replace(".", "") for c in known_ccs()),
        )
    major, minor = (int(p) for p in cc.split("."))
    return DeviceSpec(
        name=f"sm_{major}{minor}",
        full_name=f"compute capability {cc}",
        cc_major=major,
        cc_minor=minor,
        source="arch",
        **limits,
    )


def preset(name: str) -> DeviceSpec:
    """A product preset by name or alias, case-insensitively; a close-match hint when unknown."""
    gpus = _data()["gpu"]
    wanted = _norm(name)
    for key, entry in gpus.items():
        if wanted in {_norm(key), *(_norm(a) for a in entry.get("aliases", []))}:
            return _product(key, entry)
    choices = {_norm(k): k for k in gpus}
    for key, entry in gpus.items():
        for alias in entry.get("aliases", []):
            choices.setdefault(_norm(alias), key)
    close = difflib.get_close_matches(wanted, list(choices), n=3, cutoff=0.5)
    hint = (
        "did you mean " + " or ".join(dict.fromkeys(choices[c] for c in close)) + "?"
        if close
        else "run `gpuadvise devices` for the list, or give --arch sm_XY"
    )
    raise UnknownDeviceError(f"unknown GPU {name!r}", hint)


def _product(key: str, entry: dict[str, Any]) -> DeviceSpec:
    base = arch_spec(entry["cc"])
    return replace(
        base,
        name=key,
        full_name=entry["full_name"],
        sm_count=entry["sms"],
        l2_bytes=entry["l2_bytes"],
        mem_bandwidth_gbps=entry["mem_bandwidth_gbps"],
        sm_clock_mhz=entry["sm_clock_mhz"],
        mem_clock_mhz=entry["mem_clock_mhz"],
        source="preset",
    )


def parse_arch(arch: str) -> str:
    """``sm_90``, ``sm_90a``, ``compute_90``, ``90``, ``9.0`` -> ``"9.0"``."""
    s = arch.strip().lower()
    m = re.fullmatch(r"(?:sm_|compute_|cc)?(\d{1,2})\.(\d)", s) or re.fullmatch(
        r"(?:sm_|compute_)?(\d{1,2}?)(\d)[af]?", s
    )
    if not m:
        raise UnknownDeviceError(
            f"{arch!r} is not an architecture", "write it as sm_90, sm_86 or 9.0"
        )
    return f"{int(m.group(1))}.{int(m.group(2))}"


def for_arch(arch: str) -> DeviceSpec:
    """Limits of ``arch`` with the product numbers of its reference GPU, when it has one."""
    cc = parse_arch(arch)
    base = arch_spec(cc)
    ref = _REFERENCE_PRODUCT.get(cc)
    if ref is None:
        return base
    product = preset(ref)
    return replace(
        product,
        name=base.name,
        full_name=f"{base.full_name} (SM count, L2 and bandwidth of the {ref})",
        source="arch",
    )


def from_live(name: str, cc: str) -> DeviceSpec:
    """A model of a live GPU from the name and compute capability NVML reports."""
    gpus = _data()["gpu"]
    lname = name.lower()
    best: tuple[int, str] | None = None
    for key, entry in gpus.items():
        if entry["cc"] != cc:
            continue
        for pat in entry.get("nvml", []):
            if pat.lower() in lname and (best is None or len(pat) > best[0]):
                best = (len(pat), key)
    if best is not None:
        spec = _product(best[1], gpus[best[1]])
        return replace(spec, full_name=name, source="live")
    return replace(arch_spec(cc), name=name, full_name=name, source="live")


def live_device() -> DeviceSpec | None:
    """The first GPU NVML sees, or None when there is no driver or no GPU. Asked of NVML once a
    process (an ``analyze --measure`` asked it for every build of every candidate: each an
    ``nvmlInit`` and ``nvmlShutdown``, in the compile threads and before the kernel's compile)."""
    return _live_device()


@cache
def _live_device() -> DeviceSpec | None:
    try:
        import pynvml
    except ImportError:  # pragma: no cover - nvidia-ml-py is a dependency
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        log.debug("NVML unavailable: %s", exc)
        return None
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            return None
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        if isinstance(name, bytes):
            name = name.decode()
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        cc = f"{major}.{minor}"
        if cc not in _data()["arch"]:
            log.debug("live GPU %s has unknown cc %s", name, cc)
            return None
        return from_live(name, cc)
    except Exception as exc:
        log.debug("NVML query failed: %s", exc)
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


DEFAULT_GPU = "H100"


@dataclass(frozen=True)
class DeviceChoice:
    device: DeviceSpec
    note: str | None  # said to the user when the device was assumed


def resolve_device(gpu: str | None = None, arch: str | None = None) -> DeviceChoice:
    """``--gpu`` wins, then ``--arch``, then the live GPU, then the default (said in ``note``)."""
    if gpu and arch:
        dev = preset(gpu)
        if parse_arch(arch) != dev.cc:
            raise UnknownDeviceError(
                f"--gpu {gpu} is compute capability {dev.cc}, but --arch says {arch}",
                "give one of the two",
            )
        return DeviceChoice(dev, None)
    if gpu:
        return DeviceChoice(preset(gpu), None)
    if arch:
        return DeviceChoice(for_arch(arch), None)
    live = live_device()
    if live is not None:
        return DeviceChoice(live, None)
    return DeviceChoice(
        preset(DEFAULT_GPU),
        f"no GPU found and no --gpu given: assumed the {DEFAULT_GPU} model",
    )


# ---------------------------------------------------------------------------------------------
# Memory-system rates of the roofline (gpuadvise.model.roofline)


@dataclass(frozen=True)
class MemoryRates:
    """The sustained rates the roofline's terms divide by, per GPU (whole device).

    ``dram_sustained_gbps``: a device-to-device copy (read + write); ``l2_load_gsectors`` and
    ``l2_store_gsectors``: 32-byte sectors per second the L2 serves to loads and full-sector
    stores; ``l2_partial_store_gsectors``: stores that fill part of a sector (the L2 merges
    them with byte masks); ``l2_scattered_store_gsectors``: partial stores whose lanes each
    reach another 128-byte line (a column of a row-major matrix); ``latency_ns``: the memory
    latency Little's law sees (bytes in flight / bandwidth at few warps); ``source``: where the
    numbers come from."""

    dram_sustained_gbps: float
    l2_load_gsectors: float
    l2_store_gsectors: float
    l2_partial_store_gsectors: float
    l2_scattered_store_gsectors: float
    latency_ns: float
    source: str


# Measured on an H200 (132 SMs at 1980 MHz, 4.8 TB/s peak) on 2026-11-25 with
# benchmarks/roofline_probe (CUDA events, median of 20; docs/data/roofline_probe_h200_2026-11-25.txt):
# copy 3913 GB/s; L2-resident (8 MiB) loads 7494 GB/s = 234 G sectors/s, the same for one word per
# sector (233 G sectors/s: the L2 counts sectors); full-sector stores 4154 GB/s = 130 G sectors/s;
# one word per sector, four sectors per line 98.8 G sectors/s; reads of 16 bytes per lane with
# 1..16 warps per SM scale linearly, 171 GB/s with one warp per SM: 132 x 512 B in flight /
# 171 GB/s = 395 ns. The scattered-store rate (one sector per line per lane, 32 KB apart) is the
# naive transpose of 8192^2 floats on that H200: 67.1 M sectors in 1.048 ms = 64 G sectors/s; it is
# the calibration of that term, so the transpose's estimate is not an independent check of it.
_H200_RATES = MemoryRates(3913.0, 234.0, 130.0, 98.8, 64.0, 395.0, "measured on an H200")


def memory_rates(device: DeviceSpec) -> MemoryRates | None:
    """The roofline's rates for ``device``: the H200's measured ones; for another GPU the H200's
    scaled, L2 rates by SMs x clock and DRAM by peak bandwidth (the H100's copy rate is the
    measured 2.99 TB/s of ../shared/HARDWARE.md section 3). None without SM count, clock or
    bandwidth."""
    if not (device.sm_count and device.sm_clock_mhz and device.mem_bandwidth_gbps):
        return None
    ref = _H200_RATES
    if device.name == "H200":
        return ref
    l2 = device.sm_count * device.sm_clock_mhz / (132 * 1980)
    dram = device.mem_bandwidth_gbps / 4800
    copy = 2990.0 if device.name == "H100" else ref.dram_sustained_gbps * dram
    return MemoryRates(
        copy,
        ref.l2_load_gsectors * l2,
        ref.l2_store_gsectors * l2,
        ref.l2_partial_store_gsectors * l2,
        ref.l2_scattered_store_gsectors * l2,
        ref.latency_ns,
        f"the H200's measured rates scaled to the {device.name} (L2 by SMs x clock, DRAM by "
        "bandwidth)",
    )


# ---------------------------------------------------------------------------------------------
# Pipe throughputs and latencies of the execution model (gpuadvise.model.execution)

PIPE_KEYS = ("fp32", "fp16", "fp64", "int", "imad", "mufu", "xu", "shuffle", "tensor")
"""The pipes with a throughput of their own (lsu, branch and barrier issue at the issue rate;
their other costs are the roofline's L1/shared term and the barrier latency)."""
LATENCY_KEYS = ("fp32", "fp16", "fp64", "int", "mufu", "xu", "shuffle", "shared", "l1", "l2",
                "dram", "tensor", "barrier", "store")  # fmt: skip
_SCALAR_KEYS = ("shared_wavefront_cycles", "cta_launch_ns", "launch_floor_us", "cta_turnaround_ns")
_OPTIONAL_SCALAR_KEYS = ("barrier_warp_cycles", "barrier_arrive_cycles")  # 0 where not known


@dataclass(frozen=True)
class PipeRates:
    """What the execution model divides by, per SM of one GPU.

    ``lanes_per_clock``: results (thread instructions) per clock per SM of each pipe
    (:data:`PIPE_KEYS`); ``latency_cycles``: the cycles a dependent instruction waits for each
    class of result (:data:`LATENCY_KEYS`: ``l1``, ``l2``, ``dram`` for a global load served
    there); ``shared_wavefront_cycles``: what each wavefront past the first adds to a shared
    access's latency (bank conflicts); ``cta_launch_ns``: the block scheduler's time per CTA on
    an SM; ``launch_floor_s``: an empty kernel's launch to completion; ``measured``: the keys
    measured on this GPU or one of its compute capability (``pipe.fp32``, ``latency.dram``,
    ``launch_floor_us`` ...), the others are the defaults of ``data/pipes.toml``;
    ``source``: where the numbers come from, in words; ``cta_turnaround_ns``: what each round
    of resident CTAs adds to the dependency term (the round's CTAs retiring, the next ones
    launched and reaching their first load; 0: none); ``barrier_warp_cycles``: the SM's cycles
    each warp's pass through a CTA barrier takes of a resource all its resident CTAs share (the
    execution model's barrier throughput; 0: none); ``barrier_arrive_cycles``: what each warp
    of a CTA adds to the latency of the CTA's barrier on its critical path (the barrier releases
    once every warp has passed it, one after another; 0: none, the latency alone)."""

    lanes_per_clock: dict[str, float]
    latency_cycles: dict[str, float]
    shared_wavefront_cycles: float
    cta_launch_ns: float
    launch_floor_s: float
    measured: frozenset[str]
    source: str
    cta_turnaround_ns: float = 0.0
    barrier_warp_cycles: float = 0.0
    barrier_arrive_cycles: float = 0.0

    def describe(self) -> str:
        got = ", ".join(sorted(self.measured)) or "none"
        return f"{self.source} (measured: {got})"


@cache
def _pipe_data() -> dict[str, Any]:
    return _data_file("pipes.toml")


def _cc_key(cc: str, known: list[str]) -> str:
    """``cc`` when the table has it, else the nearest lower one (the first when none is)."""
    want = tuple(int(p) for p in cc.split("."))
    ranked = sorted(known, key=lambda s: tuple(int(p) for p in s.split(".")))
    lower = [k for k in ranked if tuple(int(p) for p in k.split(".")) <= want]
    return lower[-1] if lower else ranked[0]


def pipe_rates(device: DeviceSpec) -> PipeRates:
    """The execution model's rates for ``device``: its compute capability's defaults
    (``data/pipes.toml``: the CUDA guide's throughputs, published latencies), with what was
    measured on this GPU, or else on another GPU of the same compute capability (the same SM:
    per-clock figures carry over), in their place."""
    data = _pipe_data()
    key = _cc_key(device.cc, list(data["cc"]))
    base = data["cc"][key]
    lanes = {k: float(base["lanes_per_clock"][k]) for k in PIPE_KEYS}
    lat = {k: float(base["latency_cycles"][k]) for k in LATENCY_KEYS}
    scalars = {k: float(base[k]) for k in _SCALAR_KEYS}
    scalars |= {k: float(base.get(k, 0.0)) for k in _OPTIONAL_SCALAR_KEYS}
    what = f"compute capability {key}'s defaults (CUDA guide throughputs, published latencies)"
    if key != device.cc:
        what = f"compute capability {key}'s defaults for {device.cc} (the nearest known)"
    measured: set[str] = set()
    gpus = data.get("gpu", {})
    own = gpus.get(device.name)
    same_cc = [n for n in gpus if n != device.name and _product_cc(n) == device.cc]
    source_gpu = device.name if own is not None else (same_cc[0] if same_cc else None)
    if source_gpu is not None:
        m = gpus[source_gpu]
        for k, v in m.get("lanes_per_clock", {}).items():
            lanes[k] = float(v)
            measured.add(f"pipe.{k}")
        for k, v in m.get("latency_cycles", {}).items():
            lat[k] = float(v)
            measured.add(f"latency.{k}")
        for k in _SCALAR_KEYS + _OPTIONAL_SCALAR_KEYS:
            if k in m:
                scalars[k] = float(m[k])
                measured.add(k)
        if measured:
            what += (
                f"; measured on an {source_gpu}"
                if source_gpu == device.name
                else f"; measured on an {source_gpu} (same SM, per-clock figures carried over)"
            )
    return PipeRates(
        lanes,
        lat,
        scalars["shared_wavefront_cycles"],
        scalars["cta_launch_ns"],
        scalars["launch_floor_us"] * 1e-6,
        frozenset(measured),
        what,
        cta_turnaround_ns=scalars["cta_turnaround_ns"],
        barrier_warp_cycles=scalars["barrier_warp_cycles"],
        barrier_arrive_cycles=scalars["barrier_arrive_cycles"],
    )


def _product_cc(name: str) -> str | None:
    entry = _data()["gpu"].get(name)
    return None if entry is None else str(entry["cc"])

"""How much host memory gpuadvise may use, and checks of sizes against it *before* allocating.

A buffer of ``float[1000000000000]``, the one-element-per-thread default buffer of a
``--grid 2147483647`` launch or the CTA ids of ``--sample-ctas all`` on a 65535x65535 grid ask
numpy for terabytes; numpy then fails with a traceback (or the kernel's OOM killer ends the
process). Every allocation whose size comes from user input is checked here first, and a size over
the budget is a :class:`TooLargeError`: one line naming what is too large and what to lower.

The budget (:func:`memory_budget`) is the smallest of:

- the physical memory (``SC_PHYS_PAGES``), or ``MemAvailable`` of ``/proc/meminfo`` when that is
  known (memory the system can give without swapping);
- the cgroup's limit less its current use (``/sys/fs/cgroup/memory.max`` and ``memory.current``
  on cgroup v2, ``memory.limit_in_bytes`` and ``memory.usage_in_bytes`` on v1): a container's
  limit, which the physical memory does not show;
- ``RLIMIT_AS`` (``ulimit -v``) less the process's current address space, and ``RLIMIT_DATA``
  less its current data segment.

``GPUADVISE_MEMORY_BUDGET`` (bytes, or a size such as ``2G``) caps it further, for shared
machines and for tests; a value that is not a positive size is an error naming it
(:mod:`gpuadvise.spec.environment`).

The time budget (``analyze --time-budget SECONDS``): :func:`time_budget` sets a deadline for the
code run inside; long steps ask :func:`out_of_time` between units of work and, when it is past,
stop early or skip, and say what with :func:`skip`. The trace is cut first: the emulator and the
L2 model stop while a share of the budget is left (``out_of_time(KEEP_FOR_RULES)``), so that the
rules still run. The caller reads :attr:`TimeBudget.skipped` for the partial result's report.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from gpuadvise.errors import UsageError

__all__ = [
    "KEEP_FOR_RULES",
    "MemoryBudget",
    "TimeBudget",
    "TooLargeError",
    "check_fits",
    "format_bytes",
    "memory_budget",
    "out_of_time",
    "JSON_READ_CAP_BYTES",
    "read_limit_bytes",
    "skip",
    "time_budget",
    "time_left_s",
]

_ENV = "GPUADVISE_MEMORY_BUDGET"
_FALLBACK_BYTES = 8 << 30
_UNLIMITED = 1 << 62  # cgroup "max" and RLIM_INFINITY read as this
_CGROUP_ROOT = Path("/sys/fs/cgroup")


class TooLargeError(UsageError):
    """A size from the user's input (a buffer, a launch, a CTA sample) that does not fit in memory.

    It is a mistake in the input, like any :class:`UsageError`: the analysis stops with exit 2
    rather than reporting the trace as merely unavailable."""


@dataclass(frozen=True)
class MemoryBudget:
    """``bytes`` gpuadvise may allocate now; ``source`` names the limit that set it."""

    bytes: int
    source: str

    def describe(self) -> str:
        """``the 1.8 GiB gpuadvise may use here (set by ...)``, naming GPUADVISE_MEMORY_BUDGET,
        which lowers it, when something else set it."""
        cap = "" if self.source.startswith(_ENV) else f"; {_ENV} lowers it"
        return f"the {format_bytes(self.bytes)} gpuadvise may use here (set by {self.source}{cap})"


def format_bytes(n: int | float) -> str:
    """``1.5 GiB``, ``4.0 TiB``, ``512 B`` (binary units)."""
    if n >= 1 << 63:
        return "over 8 EiB"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if abs(value) < 1024 or unit == "EiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} EiB"  # pragma: no cover


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except (OSError, ValueError):
        return None
    if text == "max":
        return _UNLIMITED
    try:
        return int(text)
    except ValueError:
        return None


def _meminfo(key: str) -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _physical() -> tuple[int, str]:
    available = _meminfo("MemAvailable")
    if available is not None:
        return available, "the memory available (MemAvailable)"
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE")), "physical memory"
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_BYTES, "an assumed 8 GiB of memory"


def _cgroup() -> tuple[int, str] | None:
    root = _CGROUP_ROOT
    v2 = _read_int(root / "memory.max")
    if v2 is not None and v2 < _UNLIMITED:
        used = _read_int(root / "memory.current") or 0
        return max(0, v2 - used), "the cgroup's memory limit (memory.max)"
    v1 = _read_int(root / "memory" / "memory.limit_in_bytes")
    if v1 is not None and v1 < _UNLIMITED:
        used = _read_int(root / "memory" / "memory.usage_in_bytes") or 0
        return max(0, v1 - used), "the cgroup's memory limit (memory.limit_in_bytes)"
    return None


def _proc_status(key: str) -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def _rlimits() -> list[tuple[int, str]]:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Linux
        return []
    out: list[tuple[int, str]] = []
    for name, status_key, label in (
        ("RLIMIT_AS", "VmSize", "the address-space limit (ulimit -v, RLIMIT_AS)"),
        ("RLIMIT_DATA", "VmData", "the data-segment limit (ulimit -d, RLIMIT_DATA)"),
    ):
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            soft, _hard = resource.getrlimit(which)
        except (OSError, ValueError):
            continue
        if soft == resource.RLIM_INFINITY or soft < 0:
            continue
        out.append((max(0, soft - _proc_status(status_key)), label))
    return out


def _env_cap() -> tuple[int, str] | None:
    """``GPUADVISE_MEMORY_BUDGET`` and how it was written; malformed: a UsageError."""
    from gpuadvise.spec.environment import memory_budget_cap

    cap = memory_budget_cap()
    if cap is None:
        return None
    return cap, f"{_ENV}={os.environ.get(_ENV, '').strip()}"


def memory_budget() -> MemoryBudget:
    """The memory gpuadvise may allocate now: see the module docstring."""
    candidates = [_physical(), *_rlimits()]
    for extra in (_cgroup(), _env_cap()):
        if extra is not None:
            candidates.append(extra)
    size, source = min(candidates, key=lambda c: c[0])
    return MemoryBudget(int(size), source)


JSON_READ_CAP_BYTES = 256 << 20
"""The largest JSON document gpuadvise parses from a cache (its own entries take kilobytes to a few
megabytes; a parsed document takes several times its size in memory)."""


def read_limit_bytes(share: float = 0.25, *, as_json: bool = False) -> int:
    """The largest file (a cache entry, a data file) gpuadvise reads whole now: ``share`` of the
    memory budget, and for a JSON document (``as_json``) a sixteenth of it, at most
    :data:`JSON_READ_CAP_BYTES`. Checked against the file's size before any of it is read (a 5 GB
    cache entry was read whole first)."""
    budget = memory_budget().bytes
    if as_json:
        return min(budget // 16, JSON_READ_CAP_BYTES)
    return int(budget * share)


def check_fits(need_bytes: int, what: str, hint: str, share: float = 1.0, use: str = "") -> None:
    """Raise :class:`TooLargeError` when ``need_bytes`` exceeds ``share`` of the budget.

    ``what`` names the allocation ("the buffers x: float[1000000000000]"); ``hint`` says what to
    lower; ``use`` names what the share is for ("buffers": "a third of it for buffers").
    """
    budget = memory_budget()
    allowed = int(budget.bytes * share)
    if need_bytes <= allowed:
        return
    limit = budget.describe()
    if share != 1.0:
        limit = f"{format_bytes(allowed)}, the part for {use or 'this'} of " + limit
    raise TooLargeError(
        f"{what} needs {format_bytes(need_bytes)} of memory, more than {limit}", hint
    )


@dataclass
class TimeBudget:
    """``seconds`` from ``started`` (``time.monotonic``); ``skipped``: what was left out or cut
    short because the time ran out, one phrase each."""

    seconds: float
    started: float = field(default_factory=time.monotonic)
    skipped: list[str] = field(default_factory=list)

    def left_s(self) -> float:
        return self.seconds - (time.monotonic() - self.started)


_TIME: ContextVar[TimeBudget | None] = ContextVar("gpuadvise_time_budget", default=None)


@contextmanager
def time_budget(seconds: float | None) -> Iterator[TimeBudget | None]:
    """Run the code inside under a budget of ``seconds`` (None: no budget)."""
    if seconds is None:
        yield None
        return
    if not seconds > 0:
        raise UsageError(f"--time-budget {seconds} is not a positive number of seconds", "e.g. 30")
    budget = TimeBudget(float(seconds))
    token = _TIME.set(budget)
    try:
        yield budget
    finally:
        _TIME.reset(token)


def time_left_s() -> float | None:
    """Seconds left of the time budget (negative: past it), or None when there is none."""
    budget = _TIME.get()
    return None if budget is None else budget.left_s()


KEEP_FOR_RULES = 0.5
"""The share of a time budget kept for the rules. The trace is what is cut first: the emulator
stops, and the L2 model (about a second on a grid of 250,000 CTAs, whatever the trace) is
skipped, once no more than this share is left, so that a partial result still has its
findings. The rules themselves are skipped only when the whole budget is spent before them."""


def out_of_time(keep_share: float = 0.0) -> bool:
    """Whether a time budget is set and spent, or, with ``keep_share``, no more than that share
    of it is left (:data:`KEEP_FOR_RULES`)."""
    budget = _TIME.get()
    return budget is not None and budget.left_s() <= keep_share * budget.seconds


def skip(what: str) -> None:
    """Record that ``what`` was skipped or cut short by the time budget (nothing without one)."""
    budget = _TIME.get()
    if budget is not None and what not in budget.skipped:
        budget.skipped.append(what)

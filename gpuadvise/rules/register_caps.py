"""GA401's family: local-memory facts from the SASS and the source, what caps a kernel's
registers, and the relaxations of that cap, each built and checked.

- :func:`sass_line_bytes`, :func:`local_lines`, :func:`global_bytes`: bytes per thread the
  SASS moves (each instruction counted once);
- :func:`local_arrays`: arrays of the kernel's body outside shared memory
  (:class:`LocalArray`);
- :func:`find_register_cap`: the ``__maxnreg__``, ``__launch_bounds__`` or ``-maxrregcount``
  that caps the registers (:class:`RegisterCap`);
- :func:`candidate_caps`: one relaxation per occupancy step; :func:`compile_candidate`: a
  :class:`Candidate` built as the analysis built the kernel (:class:`Compiled`).

Kept beside the rule (issue 28: no rule file over 400 lines).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.errors import GpuAdviseError
from gpuadvise.model.occupancy import max_active_blocks
from gpuadvise.rules.context import RuleContext
from gpuadvise.rules.details import FindingDetails
from gpuadvise.source.text import KernelSource

__all__ = [
    "Candidate",
    "Compiled",
    "LocalArray",
    "RegisterCap",
    "candidate_caps",
    "compile_candidate",
    "find_register_cap",
    "global_bytes",
    "local_arrays",
    "local_lines",
    "sass_line_bytes",
]

log = logging.getLogger(__name__)

_MAXRREG = re.compile(r"^--?maxrregcount(?:=(\d+))?$")
_TYPE_BYTES = {
    "char": 1, "bool": 1, "int8_t": 1, "uint8_t": 1, "short": 2, "half": 2, "__half": 2,
    "int16_t": 2, "uint16_t": 2, "__nv_bfloat16": 2, "int": 4, "unsigned": 4, "float": 4,
    "int32_t": 4, "uint32_t": 4, "half2": 4, "__half2": 4, "long": 8, "double": 8,
    "int64_t": 8, "uint64_t": 8, "size_t": 8, "float2": 8, "int2": 8, "uint2": 8,
    "float4": 16, "int4": 16, "uint4": 16, "double2": 16,
}  # fmt: skip


def sass_line_bytes(line: Any) -> int:
    """Bytes per thread that the instructions of one SASS line move, each executed once."""
    return int(line.width_bits) // 8 * int(line.count)


def local_lines(sass_lines: Sequence[Any]) -> list[Any]:
    return [ln for ln in sass_lines if ln.space == "local"]


def global_bytes(sass_lines: Sequence[Any]) -> int:
    """Static global bytes per thread: LDG/STG/ATOM/RED (and generic LD/ST, which address global
    memory in practice) of the kernel's SASS, each instruction counted once."""
    return sum(sass_line_bytes(ln) for ln in sass_lines if ln.space in ("global", "generic"))


@dataclass(frozen=True)
class LocalArray:
    name: str
    line: int
    elem_type: str
    elements: int | None  # None: a dimension is not an integer the rule can read
    size_bytes: int | None


def _elem_bytes(quals: list[str], type_name: str) -> int | None:
    """The size of a builtin element type written as ``quals type`` (None: not a builtin)."""
    words = [q for q in quals if q not in ("const", "volatile", "register")] + [type_name]
    if "long" in words:
        return 8  # long, long long, (unsigned) long int: 8 bytes on the 64-bit ABIs CUDA has
    if "short" in words:
        return 2
    if type_name in ("unsigned", "signed", "int"):
        return 4
    if type_name == "char":
        return 1
    return _TYPE_BYTES.get(type_name)


def local_arrays(ks: KernelSource) -> list[LocalArray]:
    """Arrays declared in the kernel's body, outside shared memory."""
    out: list[LocalArray] = []
    for d in ks.declarations():
        if d.has("__shared__") or d.has("extern") or d.has("static"):
            continue
        words = d.type.split()
        if not words:
            continue
        quals = [q for q in d.specifiers] + words[:-1]
        elem = _elem_bytes(quals, words[-1])
        for dd in d.declarators:
            if not dd.dims or dd.pointer:
                continue
            sizes = [ks.value(ks.code[a:b]) for a, b in dd.dims]
            count: int | None = None
            if all(s is not None for s in sizes):
                count = 1
                for s in sizes:
                    count *= int(s or 0)
            size = None if (count is None or elem is None) else count * elem
            out.append(LocalArray(dd.name, ks.line_at(dd.name_span[0]), words[-1], count, size))
    return out


@dataclass(frozen=True)
class RegisterCap(FindingDetails):
    """What caps the kernel's registers: ``__launch_bounds__``, ``__maxnreg__`` or
    ``-maxrregcount`` (in that order of precedence, as ptxas applies them)."""

    kind: str  # launch_bounds | maxnreg | maxrregcount
    text: str  # as written
    line: int | None = None
    args: tuple[str, ...] = ()
    arg_spans: tuple[tuple[int, int], ...] = ()  # file offsets of each argument
    max_threads: int | None = None
    min_blocks: int | None = None
    registers: int | None = None  # the cap it sets, when known

    def describe(self) -> str:
        if self.kind == "maxrregcount":
            return f"-maxrregcount={self.registers}"
        return self.text


def _regs_cap(regs_per_sm: int, threads: int, blocks: int) -> int:
    """The per-thread register cap that lets ``blocks`` blocks of ``threads`` threads share an
    SM: ``regs_per_sm / (blocks x threads rounded up to a warp)``, rounded down to the
    allocation unit of 8 registers per thread, at most 255."""
    warps_threads = -(-threads // 32) * 32
    per_thread = regs_per_sm // max(blocks * warps_threads, 1)
    return max(min(per_thread // 8 * 8, 255), 0)


def find_register_cap(ks: KernelSource | None, flags: Sequence[str], regs_per_sm: int) -> Any:
    """The attribute or flag that caps the kernel's registers (None: no cap but ptxas's 255)."""
    k = ks.kernel if ks is not None else None
    if ks is not None and k is not None:
        for attr in (k.maxnreg, k.launch_bounds):  # __maxnreg__ wins, as ptxas applies them
            if attr is None:
                continue
            args = [ks.text[a:b] for a, b in attr.args]
            values = [ks.value(ks.code[a:b]) for a, b in attr.args]
            line = ks.line_at(attr.open_paren)
            common = (attr.text, line, tuple(a.strip() for a in args), attr.args)
            if attr.name == "__maxnreg__":
                return RegisterCap("maxnreg", *common, registers=values[0] if values else None)
            t = values[0] if values else None
            b = values[1] if len(values) > 1 else None
            regs = None
            if t is not None:
                regs = _regs_cap(regs_per_sm, t, b if b is not None else 1)
            return RegisterCap(
                "launch_bounds", *common, max_threads=t, min_blocks=b, registers=regs
            )
    n = None
    for i, flag in enumerate(flags):  # nvcc keeps the last -maxrregcount
        mm = _MAXRREG.match(flag)
        if not mm:
            continue
        value = mm.group(1)
        if value is None and i + 1 < len(flags):
            value = flags[i + 1]
        if value is not None and value.isdigit():
            n = int(value)
    if n is not None:
        return RegisterCap("maxrregcount", f"-maxrregcount={n}", registers=n)
    return None


@dataclass(frozen=True)
class Candidate:
    label: str
    cap: int  # the register cap it sets (predicted)
    diff: str | None = None
    patched: str | None = None  # the whole patched source (diff candidates)
    nvcc_flags: tuple[str, ...] = ()
    description: str = ""


@dataclass(frozen=True)
class Compiled:
    candidate: Candidate
    registers: int
    spill_bytes: int
    local_bytes: int
    occupancy: float | None


def candidate_caps(
    cap: RegisterCap, launch_threads: int, regs_per_sm: int, current: int
) -> list[tuple[str, int, Any]]:
    """(label, register cap, new value) of each relaxation of ``cap``, least first: one per
    occupancy step (each distinct cap a lower number of blocks per SM allows)."""
    out: list[tuple[str, int, Any]] = []
    if cap.kind == "launch_bounds":
        t, b = cap.max_threads, cap.min_blocks
        if t is None:
            return out
        if b is not None and len(cap.args) > 1:
            last = current
            for nb in range(b - 1, 0, -1):
                c = _regs_cap(regs_per_sm, t, nb)
                if c > last:
                    out.append((f"minBlocks={nb}", c, nb))
                    last = c
        elif len(cap.args) > 1:  # a minBlocks the rule cannot evaluate: drop it
            out.append(("no minBlocks", _regs_cap(regs_per_sm, t, 1), None))
        elif launch_threads < t:  # only maxThreads caps: shrink it to the real block
            out.append(
                (f"maxThreads={launch_threads}", _regs_cap(regs_per_sm, launch_threads, 1), None)
            )
        return out
    last = current
    for nb in range(64, 0, -1):
        c = _regs_cap(regs_per_sm, launch_threads, nb)
        if c > last:
            label = "maxnreg" if cap.kind == "maxnreg" else "maxrregcount"
            out.append((f"{label}={c}", c, c))
            last = c
    return out


def compile_candidate(ctx: RuleContext, cand: Candidate) -> Compiled | None:
    """Build one candidate as the analysis built the kernel (the rules' compile service); None
    when it does not compile."""
    try:
        kernel = ctx.services.compile_candidate(cand.patched, cand.nvcc_flags)
    except GpuAdviseError as exc:
        log.debug("GA401: candidate %s failed to build: %s", cand.label, exc.one_line())
        return None
    res = kernel.resources
    occupancy = None
    try:
        k = replace(ctx.occupancy_input, regs_per_thread=res.registers)
        occupancy = max_active_blocks(ctx.device, k).occupancy
    except Exception:  # the occupancy of a candidate is context for the user only
        occupancy = None
    return Compiled(
        cand,
        res.registers,
        res.spill_store_bytes + res.spill_load_bytes,
        res.local_bytes,
        occupancy,
    )

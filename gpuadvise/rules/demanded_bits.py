"""Demanded bits of the loads of a kernel's PTX: which bits of each loaded value the kernel can use
at all (``x & 3`` uses 2, ``(x & 255) >= 16`` uses 8), by a backward data-flow analysis: how GA302
knows a field is narrow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuadvise.trace.access import AccessTrace

__all__ = ["demanded_bits", "load_widths"]


def _mask(bits: int) -> int:
    return (1 << bits) - 1 if bits > 0 else 0


def _low(mask: int) -> int:
    """All bits up to the highest set bit of ``mask``."""
    return _mask(mask.bit_length())


def _type_bits(t: str) -> int:
    from gpuadvise.ptx.parser import TYPE_SIZES

    return 1 if t == "pred" else 8 * TYPE_SIZES.get(t, 8)


_NO_DEST = {"st", "red", "bra", "ret", "exit", "bar", "barrier", "call", "prefetch", "membar",
            "fence", "trap", "brkpt", "nanosleep", "cp", "mbarrier", "ldmatrix", "stmatrix"}  # fmt: skip


def demanded_bits(instrs: Sequence[Any], regs: Mapping[str, str]) -> dict[str, int]:
    """For every register, the bits of its value the kernel can use (0: none), by a backward
    analysis to a fixed point over ``instrs`` (a flattened PTX program: stores, addresses,
    branches and calls use everything they read; ``and`` with a constant, shifts, truncating
    ``cvt``, ``bfe``/``bfi``/``prmt`` narrow it; ``add``/``mul.lo``/``mad.lo`` pass only the bits
    up to the highest used one; anything else uses all its operands' bits)."""
    from gpuadvise.ptx.parser import Addr, Imm, Neg, PredOut, Reg, Vec

    dem: dict[str, int] = {}

    def full(name: str) -> int:
        return _mask(_type_bits(regs.get(name, "b64")))

    def regs_in(op: Any) -> list[str]:
        if isinstance(op, Reg):
            return [op.name]
        if isinstance(op, Addr):
            return [op.base.name] if isinstance(op.base, Reg) else []
        if isinstance(op, Vec):
            return [x.name for x in op.items if isinstance(x, Reg)]
        if isinstance(op, Neg):
            return regs_in(op.inner)
        if isinstance(op, PredOut):
            return [op.value.name, op.pred.name]
        return []

    def use(name: str, bits: int) -> bool:
        if not name.startswith("%") or name.startswith(("%tid", "%ctaid", "%ntid", "%nctaid")):
            return False
        new = (dem.get(name, 0) | bits) & full(name)
        if new != dem.get(name, 0):
            dem[name] = new
            return True
        return False

    def use_all(ops: Iterable[Any]) -> bool:
        ch = False
        for op in ops:
            for r in regs_in(op):
                ch |= use(r, full(r))
        return ch

    def imm(op: Any) -> int | None:
        return int(op.value) if isinstance(op, Imm) and isinstance(op.value, int) else None

    changed = True
    rounds = 0
    while changed and rounds < 64:
        changed = False
        rounds += 1
        for ins in reversed(instrs):
            base = ins.base
            ops = ins.operands
            if ins.guard:
                changed |= use(ins.guard, 1)
            if base in _NO_DEST or not ops:
                changed |= use_all(ops)
                continue
            dst = ops[0]
            srcs = ops[1:]
            if base in ("ld", "ldu", "atom"):
                changed |= use_all(srcs)
                continue
            if isinstance(dst, PredOut):
                d = dem.get(dst.value.name, 0) | dem.get(dst.pred.name, 0)
            elif isinstance(dst, Reg):
                d = dem.get(dst.name, 0)
            else:
                changed |= use_all(ops)
                continue
            if not d:
                continue
            mods = ins.mods
            if base == "setp" or (base in ("and", "or", "xor", "not") and "pred" in mods):
                changed |= use_all(srcs)
                continue
            if base in ("mov", "or", "xor", "not", "selp") and not any(
                isinstance(s, Vec) for s in srcs
            ):
                vals = srcs[:2] if base == "selp" else srcs
                for s in vals:
                    for r in regs_in(s):
                        changed |= use(r, d)
                if base == "selp":
                    changed |= use_all(srcs[2:])
                continue
            if base == "and" and len(srcs) == 2:
                for a, b in ((srcs[0], srcs[1]), (srcs[1], srcs[0])):
                    k = imm(b)
                    for r in regs_in(a):
                        changed |= use(r, d & k if k is not None else d)
                continue
            if base in ("shl", "shr") and len(srcs) == 2 and imm(srcs[1]) is not None:
                k = int(imm(srcs[1]) or 0)
                for r in regs_in(srcs[0]):
                    width = _type_bits(regs.get(r, "b32"))
                    if base == "shl":
                        bits = d >> k
                    else:
                        bits = (d << k) & _mask(width)
                        if "s32" in mods or "s64" in mods or "s16" in mods:
                            if d >> max(width - k, 0):
                                bits |= 1 << (width - 1)
                    changed |= use(r, bits)
                continue
            if base == "cvt" and len(mods) >= 2 and len(srcs) == 1:
                dt, st = mods[-2], mods[-1]
                if dt[0] in "usb" and st[0] in "usb" and dt[1:].isdigit() and st[1:].isdigit():
                    n = min(int(dt[1:]), int(st[1:]))
                    bits = d & _mask(n)
                    if st[0] == "s" and int(dt[1:]) > n and d >> n:
                        bits |= 1 << (n - 1)
                    for r in regs_in(srcs[0]):
                        changed |= use(r, bits)
                    continue
            if base == "bfe" and len(srcs) == 3 and imm(srcs[1]) is not None and imm(srcs[2]):
                pos, ln = int(imm(srcs[1]) or 0), int(imm(srcs[2]) or 0)
                bits = (d & _mask(ln)) << pos
                if mods and mods[0].startswith("s") and d >> ln:
                    bits |= 1 << (pos + ln - 1)
                for r in regs_in(srcs[0]):
                    changed |= use(r, bits)
                continue
            if base == "bfi" and len(srcs) == 4 and imm(srcs[2]) is not None and imm(srcs[3]):
                pos, ln = int(imm(srcs[2]) or 0), int(imm(srcs[3]) or 0)
                for r in regs_in(srcs[0]):
                    changed |= use(r, (d >> pos) & _mask(ln))
                for r in regs_in(srcs[1]):
                    changed |= use(r, d & ~(_mask(ln) << pos))
                continue
            if base == "prmt" and len(mods) == 1 and len(srcs) == 3 and imm(srcs[2]) is not None:
                sel = int(imm(srcs[2]) or 0)
                need = [0] * 8
                for i in range(4):
                    byte = (d >> (8 * i)) & 0xFF
                    if byte:
                        nib = (sel >> (4 * i)) & 0xF
                        need[nib & 7] |= 0x80 if nib & 8 else byte
                for j, src in enumerate(srcs[:2]):
                    bits = sum(need[4 * j + i] << (8 * i) for i in range(4))
                    for r in regs_in(src):
                        changed |= use(r, bits)
                continue
            if base in ("add", "sub", "neg") or (base in ("mul", "mad") and "lo" in mods):
                for s in srcs:
                    for r in regs_in(s):
                        changed |= use(r, _low(d))
                continue
            changed |= use_all(srcs)
    return dem


def load_widths(ptx: str, entry: str, trace: AccessTrace) -> dict[int, int] | None:
    """For each scalar global load of the trace (its instruction index): how many low bits of
    the loaded value the kernel uses (``msb(demanded) + 1``). None when the trace's instructions
    cannot be matched with the PTX program's (then nothing is known)."""
    from gpuadvise.ptx.cfg import build_program
    from gpuadvise.ptx.emulator import static_accesses
    from gpuadvise.ptx.parser import Reg, parse_ptx_cached

    try:
        program = build_program(parse_ptx_cached(ptx), entry)  # the emulator's parse
    except Exception:
        return None
    static = sorted((i, int(sp)) for i, sp, _k, _w in static_accesses(program))
    out: dict[int, int] = {}
    k = 0
    pairs: list[tuple[int, int]] = []
    for t, info in enumerate(trace.instructions):
        parts = {m.split("::")[0] for m in info.opcode.split(".")}
        if not parts & {"global", "shared", "local", "const"}:
            continue  # a generic access: not among the declared ones
        if k >= len(static):
            return None
        idx, sp = static[k]
        k += 1
        if program.instrs[idx].opcode != info.opcode or sp != int(info.space):
            return None
        pairs.append((t, idx))
    if k != len(static):
        return None
    dem = demanded_bits(program.instrs, program.regs)
    for t, idx in pairs:
        ins = program.instrs[idx]
        if (
            ins.base not in ("ld", "ldu")
            or not ins.operands
            or not isinstance(ins.operands[0], Reg)
        ):
            continue
        out[t] = dem.get(ins.operands[0].name, 0).bit_length()
    return out

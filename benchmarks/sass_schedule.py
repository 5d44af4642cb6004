"""One warp's issue schedule of SASS code from ptxas's control bits (sm_70 to sm_90), on the CPU.

ptxas writes, with every instruction, how many cycles the warp waits before it issues the next
one (the stall count: fixed-latency results such as an ISETP's predicate are waited for this
way, whether or not the instruction that reads them is predicated off) and which scoreboards of
variable-latency results (a load) it waits on first. A warp issues in order, so for a warp that
no other warp slows down, the sum of the stall counts along the path it takes, plus the waits for
its loads, is its time: the dependent chain *as ptxas scheduled it*, where the execution model's
chains (gpuadvise/ptx/chains.py) are the PTX's dataflow.

The control bits are the top 23 bits of the second 64-bit word of each 128-bit instruction
(``cuobjdump -sass`` prints both words): from bit 41 of that word, the stall count (4 bits), the
yield bit, the write scoreboard (3 bits, 7 = none), the read scoreboard (3 bits), the wait mask
(6 bits), the operand reuse flags (4 bits) (Jia et al., "Dissecting the NVIDIA Volta GPU
Architecture via Microbenchmarking", 2018; unchanged on sm_80 and sm_90).

    python benchmarks/sass_schedule.py CUBIN FUNCTION START:END[:TIMES] ... [--load-cycles 33]

prints each address range's cycles a pass (one warp, the range run straight through, a load's
result ready ``--load-cycles`` after it issues: an L1 hit on an H100/H200) and their sum over
``TIMES`` passes each. HeCBench ga's GA309 hoist (docs/data/s12_fuse_ga309.md): the kernel's
outer iteration 427 cycles, the variant's 700, measured 490 and 684 on the H200 (0.61 for
0.716 measured), where the PTX chains gave 0.95 (main) and 1.27 (s10-memb).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Control:
    """One instruction's control bits: ``stall`` cycles before the next issues, the scoreboard
    its result releases (``write``; 7 none) and its operands' (``read``), the scoreboards it
    waits for first (``wait``, a 6-bit mask)."""

    stall: int
    yield_: int
    write: int
    read: int
    wait: int


def control(hi: int) -> Control:
    """The control bits of an instruction whose second 64-bit word is ``hi``."""
    c = hi >> 41
    return Control(c & 0xF, (c >> 4) & 1, (c >> 5) & 7, (c >> 8) & 7, (c >> 11) & 0x3F)


@dataclass(frozen=True)
class Instruction:
    offset: int
    text: str
    ctl: Control


_LINE = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s+/\* 0x([0-9a-f]{16}) \*/")
_HI = re.compile(r"^\s+/\* 0x([0-9a-f]{16}) \*/\s*$")


def parse(text: str) -> list[Instruction]:
    """``cuobjdump -sass`` text of one function -> its instructions with their control bits."""
    out: list[Instruction] = []
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        m = _LINE.match(line)
        if m and (h := _HI.match(lines[i + 1])):
            out.append(Instruction(int(m.group(1), 16), m.group(2), control(int(h.group(1), 16))))
    return out


_VARIABLE = ("LDG", "LDS", "LDL", "LD.", "LDC", "ATOM", "RED", "SHFL", "MUFU", "S2R", "I2F", "F2I")


def result_cycles(text: str, load_cycles: float) -> float:
    """When a variable-latency result is ready after issue: a global load's ``load_cycles``,
    others at Hopper-like latencies (shared load 30, shuffle 24, constant 14, MUFU 8...)."""
    op = text.split()[1] if text.startswith("@") else text.split()[0]
    for name, cyc in (("LDG", load_cycles), ("LD.", load_cycles), ("ATOM", load_cycles),
                      ("LDS", 30.0), ("SHFL", 24.0), ("LDC", 14.0), ("S2R", 20.0)):  # fmt: skip
        if op.startswith(name):
            return cyc
    return 8.0


def schedule(instrs: list[Instruction], load_cycles: float = 33.0, passes: int = 2) -> float:
    """Cycles one warp takes a pass through ``instrs`` in order (the last of ``passes``
    passes, so that a wait on the previous pass's loads is counted as in a loop)."""
    t = 0.0
    ready = [0.0] * 6
    per = 0.0
    for _ in range(max(passes, 1)):
        start = t
        for ins in instrs:
            for b in range(6):
                if ins.ctl.wait >> b & 1:
                    t = max(t, ready[b])
            if ins.ctl.write != 7:
                ready[ins.ctl.write] = t + result_cycles(ins.text, load_cycles)
            if ins.ctl.read != 7:
                ready[ins.ctl.read] = t + 4.0
            t += max(ins.ctl.stall, 1)
        per = t - start
    return per


def _cuobjdump() -> str:
    found = shutil.which("cuobjdump")
    if found:
        return found
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from gpuadvise.toolchain.find import find_toolchain

    tc = find_toolchain()
    if tc.cuobjdump is None:
        raise SystemExit("no cuobjdump")
    return str(tc.cuobjdump)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cubin")
    ap.add_argument("function", help="the mangled name")
    ap.add_argument("ranges", nargs="+", help="START:END[:TIMES], hex offsets, END excluded")
    ap.add_argument("--load-cycles", type=float, default=33.0)
    a = ap.parse_args(argv)
    text = subprocess.run(
        [_cuobjdump(), "-sass", "-fun", a.function, a.cubin],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    instrs = parse(text)
    total = 0.0
    for r in a.ranges:
        parts = r.split(":")
        lo, hi = int(parts[0], 16), int(parts[1], 16)
        times = float(parts[2]) if len(parts) > 2 else 1.0
        body = [x for x in instrs if lo <= x.offset < hi]
        cyc = schedule(body, a.load_cycles)
        total += cyc * times
        print(f"{lo:#x}-{hi:#x}: {len(body)} instructions, {cyc:.0f} cycles a pass x {times:g}")
    print(f"total {total:.0f} cycles")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

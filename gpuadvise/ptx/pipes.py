"""Which SM pipe a PTX instruction runs on, and with which latency its result comes back.

The execution model (:mod:`gpuadvise.model.execution`) divides a launch's dynamic instruction
counts by the throughput of the pipe each instruction issues to, and its dependent chains by the
latency of each link. The emulator executes PTX, the GPU runs SASS: :func:`pipe_work` maps one PTX
instruction to the SASS instructions ptxas makes of it, by pipe (``fma.rn.f32`` -> one FFMA on
the FP32 pipe; ``div.rn.f32`` -> MUFU.RCP and about eight FFMAs; ``div.rn.f64`` -> MUFU.RCP64H,
eight DFMA/DMUL and the check around its slow path (:mod:`gpuadvise.ptx.slow_paths`, counted
where the traced values take it); ``add.s64`` -> two IADD3 on the
integer pipe; ``mov``, ``ld.param``, ``cvta`` and predicate moves -> nothing: register renames and
constant-bank operands), and :func:`latency_work` the dependent latency of its result.

The pipes (:data:`PIPES`), with the sm_90 throughput of the CUDA C++ Programming Guide's
"Arithmetic Instructions" table that :mod:`gpuadvise.devices` starts from:

- ``fp32``: FADD, FMUL, FFMA (128 results per clock per SM);
- ``fp16``: HADD2, HMUL2, HFMA2 on ``.f16``/``.f16x2``/``.bf16`` (256 results, 128 instructions);
- ``fp64``: DADD, DMUL, DFMA, DSETP, DMNMX (64);
- ``int``: the ALU: IADD3, LOP3, SHF, ISETP, FSETP, FMNMX, SEL, PRMT, BFE/BFI, S2R (64);
- ``imad``: integer multiplies and multiply-adds, IMAD and IMAD.WIDE (64; the FMA-heavy pipe,
  not the ALU: the two do not share their rate);
- ``mufu``: MUFU.SIN/COS/EX2/LG2/RCP/RSQ/SQRT/TANH (16);
- ``xu``: conversions to, from and between floats (F2I, I2F, F2F) and POPC, FLO, BREV (16);
- ``lsu``: loads, stores, atomics of any state space but param (their data-path cost is the
  roofline's L1/shared term; here they take an issue slot);
- ``shuffle``: SHFL (32), ``redux`` (16: counted twice);
- ``branch``: BRA, BRX, CALL, RET, EXIT (the issue rate);
- ``tensor``: HMMA/DMMA/IMMA, counted in m16n8k16 FP16 equivalents (2,048 FMAs each);
- ``barrier``: BAR.SYNC and friends (their cost is the execution model's barrier term);
- ``uniform``: the uniform datapath's instructions (ULDC, UIADD3, S2UR, ...): an issue slot each,
  no vector pipe. The PTX has none (its ``mov`` and ``ld.param`` are free); the SASS counts
  (:mod:`gpuadvise.trace.sass_counts`) have them.

Latency classes (:data:`LATENCY_CLASSES`) are the pipes' (``fp32``, ``int``, ...), except memory:
``shared`` (a shared-memory load), ``global`` (global, local, generic and texture loads and
atomics that return a value: L1, L2 or DRAM, as the model weighs them), ``store`` (stores and
reductions: no result, one issue cycle) and ``barrier``.

Pure: it reads PTX instructions only.
"""

from __future__ import annotations

from gpuadvise.ptx.parser import Instr, Reg

__all__ = [
    "LATENCY_CLASSES",
    "PIPES",
    "latency_work",
    "pipe_work",
]

PIPES = ("fp32", "fp16", "fp64", "int", "imad", "mufu", "xu", "lsu", "shuffle", "branch",
         "tensor", "barrier", "uniform")  # fmt: skip
LATENCY_CLASSES = ("fp32", "fp16", "fp64", "int", "mufu", "xu", "shuffle", "shared", "global",
                   "store", "tensor", "barrier")  # fmt: skip

_FLOAT_ARITH = frozenset({"add", "sub", "mul", "fma", "mad"})
_FREE = frozenset({"mov", "cvta", "prefetch", "prefetchu", "pmevent", "griddepcontrol",
                   "applypriority", "discard", "createpolicy"})  # fmt: skip
_FREE_MODS = frozenset({"param"})
_MEMORY = frozenset({"ld", "ldu", "st", "atom", "red", "cp", "tex", "tld4", "suld", "sust",
                     "ldmatrix", "stmatrix", "cp.async"})  # fmt: skip
_MUFU = frozenset({"sin", "cos", "ex2", "lg2", "tanh"})
_XU = frozenset({"popc", "clz", "brev", "bfind"})
_BRANCH = frozenset({"bra", "brx", "call", "ret", "exit"})
_BARRIER = frozenset({"bar", "barrier"})
_TENSOR = frozenset({"mma", "wmma", "wgmma"})
# special registers read with S2R (the launch's sizes, %ntid and %nctaid, are constant-bank
# operands in SASS: free)
_S2R = ("%tid", "%ctaid", "%laneid", "%warpid", "%smid", "%nsmid", "%clock", "%globaltimer",
        "%lanemask", "%dynamic_smem_size", "%gridid")  # fmt: skip
_FLOATS = ("f32", "f64", "f16", "f16x2", "bf16", "bf16x2", "tf32", "e4m3", "e5m2")


def _ftype(ins: Instr) -> str | None:
    """The instruction's float type (its last float modifier), or None for integer ones."""
    for m in reversed(ins.mods):
        if m in _FLOATS:
            return m
    return None


def _wide(ins: Instr) -> bool:
    """A 64-bit integer operation (two 32-bit SASS operations)."""
    return any(m in ("s64", "u64", "b64") for m in ins.mods) and "wide" not in ins.mods


def _float_pipe(t: str) -> str:
    return "fp64" if t == "f64" else "fp16" if t in ("f16", "f16x2", "bf16", "bf16x2") else "fp32"


def _space(ins: Instr) -> str | None:
    for m in ins.mods:
        if m in ("global", "shared", "local", "const", "param", "tex", "surf"):
            return m
    return None


def _mma_units(ins: Instr) -> float:
    """An mma's FMAs over an m16n8k16 FP16 mma's 2,048, times the type's cost (tf32 2x, f64 16x,
    8-bit integers 0.5x), as the tensor pipe's share of the instruction."""
    m = n = k = 0
    for mod in ins.mods:
        if mod.startswith("m") and "n" in mod and "k" in mod:
            try:
                a, rest = mod[1:].split("n", 1)
                b, c = rest.split("k", 1)
                m, n, k = int(a), int(b), int(c)
            except ValueError:
                continue
    fmas = (m * n * k) or 2048
    mods = set(ins.mods)
    factor = 16.0 if "f64" in mods else 2.0 if "tf32" in mods else 0.5 if mods & {"s8", "u8"} else 1
    return fmas / 2048 * factor


def pipe_work(ins: Instr) -> tuple[tuple[str, float], ...]:
    """The SASS work of one PTX instruction: (pipe, warp instructions) pairs; () for what
    ptxas folds away (moves, parameter loads, address-space conversions)."""
    base = ins.base
    mods = ins.mods
    if base in _FREE:
        if base == "mov" and any(
            isinstance(op, Reg) and op.name.startswith(_S2R) for op in ins.operands[1:]
        ):
            return (("int", 1.0),)  # S2R / CS2R of %tid, %ctaid, %clock
        return ()
    if base in _MEMORY or base.startswith("cp"):
        if _space(ins) in _FREE_MODS:
            return ()
        return (("lsu", 1.0),)
    if base in _BARRIER:
        return (("barrier", 1.0),)
    if base in _BRANCH:
        return (("branch", 1.0),)
    if base in _TENSOR:
        return (("tensor", _mma_units(ins)),)
    if base == "shfl":
        return (("shuffle", 1.0),)
    if base == "redux":
        return (("shuffle", 2.0),)
    if base in ("membar", "fence"):
        return (("lsu", 1.0),)
    if base in _MUFU:
        return (("mufu", 1.0),)
    if base in _XU:
        return (("xu", 2.0 if _wide(ins) else 1.0),)
    t = _ftype(ins)
    if base == "cvt":
        types = [m for m in mods if m[:1] in ("s", "u", "f", "b") and m[1:].isdigit()]
        if any(x.startswith("f") for x in types):
            if "f32" in types and types.count("f32") == 2:
                return (("fp32", 1.0),)  # cvt.rzi.f32.f32 (FRND) / cvt.sat.f32.f32
            return (("xu", 1.0),)
        if all(x.endswith(("32", "64")) for x in types):
            return (("int", 1.0),)  # sign/zero extension, truncation (IADD/SHF/MOV)
        return (("int", 1.0),)  # 8/16-bit integer widening (I2I at the integer rate)
    if base == "rcp":
        if "approx" in mods:
            return (("mufu", 1.0),) if t != "f64" else (("mufu", 1.0), ("fp64", 1.0))
        return (("mufu", 1.0), ("fp64", 6.0)) if t == "f64" else (("mufu", 1.0), ("fp32", 4.0))
    if base == "rsqrt":
        return (("mufu", 1.0),) if t != "f64" else (("mufu", 1.0), ("fp64", 4.0))
    if base == "sqrt":
        if "approx" in mods:
            return (("mufu", 1.0),)
        return (("mufu", 1.0), ("fp64", 8.0)) if t == "f64" else (("mufu", 1.0), ("fp32", 5.0))
    if base == "div":
        if t is None:  # integer division: MUFU.RCP of the divisor, IMADs and the correction
            n = 2.0 if _wide(ins) else 1.0
            return (("xu", 2.0 * n), ("mufu", 1.0 * n), ("imad", 8.0 * n), ("int", 6.0 * n))
        if "approx" in mods or "full" in mods:
            return (("mufu", 1.0), ("fp32", 1.0))
        if t == "f64":
            # ptxas (sm_70-sm_90): IMAD.MOV of the seed, MUFU.RCP64H, seven DFMA and a DMUL of
            # the Newton sequence, the range check (FFMA, two FSETP) and its branch around the
            # slow path's call (BRA, BSSY, BSYNC); the slow path itself where the operands take
            # it: gpuadvise.ptx.slow_paths, counted by the emulator on the traced values
            return (("mufu", 1.0), ("fp64", 8.0), ("fp32", 1.0), ("int", 2.0), ("imad", 1.0),
                    ("branch", 3.0))  # fmt: skip
        return (("mufu", 1.0), ("fp32", 8.0))
    if base == "rem":
        n = 2.0 if _wide(ins) else 1.0
        return (("xu", 2.0 * n), ("mufu", 1.0 * n), ("imad", 9.0 * n), ("int", 7.0 * n))
    if t is not None:
        if base in ("neg", "abs") and t != "f64":
            return ()  # an operand modifier of the instruction that reads it
        if base in _FLOAT_ARITH:
            return ((_float_pipe(t), 1.0),)
        if t == "f64":  # DSETP, DMNMX, DADD for neg/abs: the FP64 pipe
            return (("fp64", 1.0),)
        if t in ("f16", "f16x2", "bf16", "bf16x2"):
            return (("fp16", 1.0),)
        return (("int", 1.0),)  # FSETP, FMNMX, FSEL, testp, copysign: the ALU
    if base in ("mul", "mad", "mul24", "mad24", "sad"):
        if ("lo" in mods or "hi" in mods) and _wide(ins):
            return (("imad", 3.0),)  # a 64-bit multiply: three IMADs
        return (("imad", 1.0),)  # IMAD, IMAD.HI, IMAD.WIDE
    if base == "vote" or base == "activemask" or base == "match":
        return (("int", 1.0),)
    return (("int", 2.0 if _wide(ins) else 1.0),)


def latency_work(ins: Instr) -> tuple[tuple[str, float], ...]:
    """The dependent latency of an instruction's result: (latency class, links) along its SASS
    sequence (:data:`LATENCY_CLASSES`); () when it costs nothing (what :func:`pipe_work` folds
    away). A SASS sequence's links are its dependent steps: ``div.rn.f32`` is MUFU.RCP then
    four dependent FFMAs of its Newton step, ``add.s64`` two IADD3 through the carry."""
    base = ins.base
    if base in _MEMORY or base.startswith("cp"):
        space = _space(ins)
        if space in _FREE_MODS:
            return ()
        if base in ("st", "red", "sust", "stmatrix") or base.startswith("cp"):
            return (("store", 1.0),)
        if space == "shared" or base == "ldmatrix":
            return (("shared", 1.0),)
        return (("global", 1.0),)
    if base in _BARRIER:
        return (("barrier", 1.0),)
    if base in ("membar", "fence"):
        return (("global", 1.0),)
    work = pipe_work(ins)
    if not work:
        return ()
    if len(work) == 1:
        pipe, n = work[0]
        if pipe in ("branch", "lsu", "imad"):
            return (("int", n if pipe == "imad" else 1.0),)
        if pipe == "tensor":
            return (("tensor", 1.0),)
        # a 64-bit integer operation: its halves through the carry; a sequence of one pipe
        # (redux's two steps) the same
        return ((pipe, n),)
    # a sequence: its slow unit once, then about half of its other steps in a row (the
    # Newton iteration of div/rcp/sqrt, the correction of an integer division)
    return tuple(
        ("int" if pipe == "imad" else pipe, 1.0 if pipe in ("mufu", "xu") else max(1.0, n / 2))
        for pipe, n in work
        if pipe not in ("branch", "lsu")  # a branch around a slow path: no result to wait for
    )

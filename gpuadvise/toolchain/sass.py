"""SASS of a compiled kernel, with source lines, and a summary of its memory instructions.

:func:`disassemble` runs ``nvdisasm -c -gi -ndf`` on the cubin (``-g`` where ``-gi`` is not
known; without ``-ndf``, whose skipped dataflow pass only annotates indirect branches, when
the code has one) and parses its text output: the JSON output of nvdisasm 13 carries no line
info. Under ``-gi`` each instruction block is preceded by its inlining chain, innermost first::

    //## File "k.cuh", line 2 inlined at "k.cu", line 5
    //## File "k.cu", line 5 inlined at "k.cu", line 8
    //## File "k.cu", line 8
            /*0050*/                   LDG.E R0, desc[UR4][R2.64] ;

:class:`SassInstruction` keeps the innermost location in ``file``/``line`` (what ``-g`` and the
PTX ``.loc`` give) and the call sites, innermost first, in ``inlined_at``; ``call_site`` is the
outermost one, the line of the kernel's own body. Without nvdisasm, ``cuobjdump -sass`` is used
and the instructions have no source lines.

:func:`memory_summary` counts the memory instructions per source line and per kind, with the
width of each access, which is what the models need to reconcile PTX-level accesses with what
the hardware executes (ptxas merges scalar loads into ``LDS.128`` and the like; HARDWARE.md §2).
Instructions predicated ``@!PT`` never execute (ptxas pads with them) and are not counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import re
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gpuadvise.errors import KernelNotFoundError, ToolchainError
from gpuadvise.fileio import decode_tool_path
from gpuadvise.inputfiles import read_cache_bytes
from gpuadvise.spec.budget import read_limit_bytes
from gpuadvise.toolchain import cache_lock
from gpuadvise.toolchain.find import Toolchain, find_toolchain
from gpuadvise.toolchain.scratch import keep_until_exit, release

if TYPE_CHECKING:
    from gpuadvise.toolchain.module import CompiledModule

__all__ = [
    "MemoryOp",
    "NON_MEMORY_OPCODES",
    "SassInstruction",
    "SassMemLine",
    "classify",
    "disassemble",
    "disassemble_all",
    "function_index",
    "memory_summary",
    "parse_cuobjdump",
    "parse_nvdisasm",
    "source_text",
    "warp_aggregated_atomics",
]

MemSpace = Literal["global", "shared", "local", "constant", "generic"]
MemKind = Literal["load", "store", "atomic", "reduction"]


@dataclass(frozen=True)
class SassInstruction:
    """One SASS instruction.

    ``opcode`` has its modifiers (``LDG.E.128``); ``base_opcode`` has not (``LDG``).
    ``predicate``: the guard such as ``@!P0`` or ``@UP1``, None if unpredicated. ``operands``
    as nvdisasm prints them. ``file``/``line``: innermost source location (None without line
    info); ``inlined_at``: the call sites it was inlined into, innermost first. ``target``: the
    offset a branch's label names (nvdisasm's ``.L_x_4:``; None for other instructions or
    without the label).
    """

    offset: int
    opcode: str
    base_opcode: str
    predicate: str | None
    operands: str
    file: str | None
    line: int | None
    inlined_at: tuple[tuple[str, int], ...] = ()
    target: int | None = None

    @property
    def call_site(self) -> tuple[str | None, int | None]:
        """The outermost location: the line of the kernel body this instruction comes from."""
        if self.inlined_at:
            return self.inlined_at[-1]
        return (self.file, self.line)

    @property
    def never_executes(self) -> bool:
        return self.predicate == "@!PT"

    def to_dict(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "opcode": self.opcode,
            "base_opcode": self.base_opcode,
            "predicate": self.predicate,
            "operands": self.operands,
            "file": self.file,
            "line": self.line,
            "inlined_at": [list(x) for x in self.inlined_at],
        } | ({} if self.target is None else {"target": self.target})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SassInstruction:
        return cls(
            offset=int(data["offset"]),
            opcode=data["opcode"],
            base_opcode=data["base_opcode"],
            predicate=data.get("predicate"),
            operands=data.get("operands", ""),
            file=data.get("file"),
            line=data.get("line"),
            inlined_at=tuple((str(f), int(n)) for f, n in data.get("inlined_at", ())),
            target=None if data.get("target") is None else int(data["target"]),
        )


@dataclass(frozen=True)
class MemoryOp:
    """What a memory instruction does: one access of ``width_bits`` per thread."""

    space: MemSpace
    kind: MemKind
    width_bits: int


@dataclass(frozen=True)
class SassMemLine:
    """Memory instructions of one kind and width at one source line.

    ``count`` is the number of static SASS instructions (not executions); ``opcodes`` the
    distinct full opcodes among them, as evidence (``("LDS.128",)``); ``sequence``: the opcode
    of each of the ``count`` instructions, in address order.
    """

    file: str | None
    line: int | None
    space: MemSpace
    kind: MemKind
    width_bits: int
    count: int
    opcodes: tuple[str, ...]
    sequence: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "space": self.space,
            "kind": self.kind,
            "width_bits": self.width_bits,
            "count": self.count,
            "opcodes": list(self.opcodes),
            "sequence": list(self.sequence),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SassMemLine:
        sequence = tuple(str(op) for op in data.get("sequence", ()))
        return cls(**{**data, "opcodes": tuple(data["opcodes"]), "sequence": sequence})


# --------------------------------------------------------------------------------------------
# Opcodes (Volta to Hopper)

# base opcode -> (space, kind) of every access it makes.
_MEMORY_OPCODES: dict[str, tuple[tuple[MemSpace, MemKind], ...]] = {
    "LDG": (("global", "load"),),
    "STG": (("global", "store"),),
    "LD": (("generic", "load"),),
    "ST": (("generic", "store"),),
    "LDS": (("shared", "load"),),
    "STS": (("shared", "store"),),
    "LDSM": (("shared", "load"),),  # ldmatrix: .1/.2/.4 matrices, 32 bits each per thread
    "STSM": (("shared", "store"),),  # stmatrix (sm_90)
    "STAS": (("shared", "store"),),  # st.async to distributed shared memory (sm_90)
    "LDL": (("local", "load"),),
    "STL": (("local", "store"),),
    "LDC": (("constant", "load"),),
    "ULDC": (("constant", "load"),),
    "ATOM": (("generic", "atomic"),),
    "ATOMG": (("global", "atomic"),),
    "ATOMS": (("shared", "atomic"),),
    "RED": (("generic", "reduction"),),
    "REDG": (("global", "reduction"),),
    "REDAS": (("shared", "reduction"),),  # red.async to distributed shared memory (sm_90)
    "LDGSTS": (("global", "load"), ("shared", "store")),  # cp.async: global -> shared
}

NON_MEMORY_OPCODES = frozenset(
    {
        "BAR",  # barriers
        "BSSY",
        "BSYNC",
        "WARPSYNC",
        "SHFL",  # warp-level data movement, register to register
        "VOTE",
        "VOTEU",
        "MATCH",
        "REDUX",  # warp-wide reduction of registers (__reduce_*_sync), not a memory access
        "CREDUX",
        "MEMBAR",  # ordering, no data
        "FENCE",
        "ERRBAR",
        "CCTL",
        "CCTLL",
        "DEPBAR",
        "LDGDEPBAR",
        "ARRIVES",
        "SYNCS",
    }
)
"""Synchronization and warp-level opcodes recognized as touching no memory themselves.

Bulk/tensor copies (``UBLKCP``, ``UTMALDG``, ``UTMASTG``: TMA on sm_90) move memory but have
no per-thread width; :func:`classify` does not count them either."""

_WIDTH_TOKENS = {
    "U8": 8,
    "S8": 8,
    "U16": 16,
    "S16": 16,
    "F16": 16,
    "BF16": 16,
    "32": 32,
    "U32": 32,
    "S32": 32,
    "F32": 32,
    "F16x2": 32,
    "BF16x2": 32,
    "64": 64,
    "U64": 64,
    "S64": 64,
    "F64": 64,
    "128": 128,
    "U128": 128,
    "B128": 128,
}


def _width_bits(opcode: str) -> int:
    parts = opcode.split(".")
    if parts[0] in ("LDSM", "STSM"):
        counts = [int(p) for p in parts[1:] if p in ("1", "2", "4")]
        return 32 * (counts[-1] if counts else 1)
    for token in parts[1:]:
        if token in _WIDTH_TOKENS:
            return _WIDTH_TOKENS[token]
    return 32


def classify(opcode: str) -> tuple[MemoryOp, ...]:
    """The memory accesses a SASS opcode (with modifiers) makes; () for any other instruction.

    ``LDGSTS`` (``cp.async``) gives a global load and a shared store of the same width.
    Width comes from the modifiers: ``.U8``/``.S8`` 8, ``.U16``/``.S16`` 16, ``.64`` 64,
    ``.128`` 128, otherwise 32; ``LDSM``/``STSM`` ``.x``: 32 bits per matrix.
    """
    base = opcode.split(".", 1)[0]
    kinds = _MEMORY_OPCODES.get(base)
    if not kinds:
        return ()
    width = _width_bits(opcode)
    return tuple(MemoryOp(space, kind, width) for space, kind in kinds)


# --------------------------------------------------------------------------------------------
# Parsing


_FUNC_NVDISASM_RE = re.compile(r"^//-+\s+\.text\.(\S+)\s+-+\s*$")
_FUNC_CUOBJDUMP_RE = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
_LOC_RE = re.compile(
    r'^\s*//##\s*File\s+"(?P<file>[^"]*)",\s*line\s+(?P<line>\d+)'
    r'(?:\s+inlined at\s+"(?P<ifile>[^"]*)",\s*line\s+(?P<iline>\d+))?'
)
_INSTR_RE = re.compile(r"^\s*/\*(?P<off>[0-9a-fA-F]+)\*/\s*(?P<body>[^;]*);")
_BODY_RE = re.compile(
    r"^\{?\s*(?P<pred>@!?U?P(?:T|\d+)\s+)?(?P<op>[A-Z][A-Z0-9_.]*)\s*(?P<ops>.*)$"
)


def _parse_instruction(
    line: str, loc: tuple[str | None, int | None], chain: tuple[tuple[str, int], ...]
) -> SassInstruction | None:
    m = _INSTR_RE.match(line)
    if not m:
        return None
    body = _BODY_RE.match(m.group("body").strip())
    if not body:
        return None
    opcode = body.group("op")
    pred = body.group("pred")
    return SassInstruction(
        offset=int(m.group("off"), 16),
        opcode=opcode,
        base_opcode=opcode.split(".", 1)[0],
        predicate=pred.strip() if pred else None,
        operands=body.group("ops").strip().rstrip("}").strip(),
        file=loc[0],
        line=loc[1],
        inlined_at=chain,
    )


# a branch's label (.L_x_4) or a called function's inside the kernel's code
# ($_Z4normPKfPfi$__internal_accurate_pow)
_LABEL_RE = re.compile(r"^\s*(?P<name>(?:\.L|\$)[\w.$]*):")
_LABEL_USE_RE = re.compile(r"`\((?P<name>(?:\.L|\$)[\w.$]*)\)")


def _with_targets(
    instrs: list[SassInstruction], labels: Mapping[str, int]
) -> tuple[SassInstruction, ...]:
    """``instrs`` with each branch's and call's ``target``: the offset of the label it names."""
    out = []
    for ins in instrs:
        m = (
            _LABEL_USE_RE.search(ins.operands)
            if ins.base_opcode in ("BRA", "BRX", "CALL")
            else None
        )
        if m is not None and m.group("name") in labels:
            ins = dataclasses.replace(ins, target=labels[m.group("name")])
        out.append(ins)
    return tuple(out)


def parse_nvdisasm(text: str) -> dict[str, tuple[SassInstruction, ...]]:
    """nvdisasm ``-c -g``/``-gi`` text -> {mangled function name: its instructions}."""
    functions: dict[str, list[SassInstruction]] = {}
    labels: dict[str, dict[str, int]] = {}  # per function: label -> the next instruction's offset
    pending: list[str] = []
    here: dict[str, int] = {}
    current: list[SassInstruction] | None = None
    block: list[tuple[str, int]] = []  # the //## lines read since the last instruction
    in_block = False
    fresh = False  # block has lines that loc and chain do not hold yet
    loc: tuple[str | None, int | None] = (None, None)
    chain: tuple[tuple[str, int], ...] = ()
    paths: dict[str, str] = {}  # a file as printed -> its normalized path
    for line in text.splitlines():
        if line.startswith("//-") and (m := _FUNC_NVDISASM_RE.match(line)):
            current = functions.setdefault(m.group(1), [])
            here = labels.setdefault(m.group(1), {})
            loc, chain, block, in_block, fresh, pending = (None, None), (), [], False, False, []
            continue
        if (
            current is not None
            and line[:3].lstrip()[:1] in (".", "$")
            and (m := _LABEL_RE.match(line))
        ):
            pending.append(m.group("name"))
            continue
        if "//##" in line and (m := _LOC_RE.match(line)):
            if not in_block:
                block, in_block = [], True
            file = m.group("file")
            path = paths.get(file)
            if path is None:
                path = paths[file] = os.path.normpath(decode_tool_path(file)) if file else ""
            block.append((path, int(m.group("line"))))
            fresh = True
            continue
        if current is None:
            continue
        if fresh:  # the innermost location, and the call sites inlined into
            first_file, first_line = block[0]
            loc = (first_file or None, first_line if first_file else None)
            chain = tuple((f, n) for f, n in block[1:] if f)
            fresh = False
        instr = _parse_instruction(line, loc, chain)
        if instr is not None:
            in_block = False
            current.append(instr)
            for name in pending:
                here[name] = instr.offset
            pending = []
    return {name: _with_targets(instrs, labels.get(name, {})) for name, instrs in functions.items()}


def parse_cuobjdump(text: str) -> dict[str, tuple[SassInstruction, ...]]:
    """``cuobjdump -sass`` text -> {mangled function name: instructions}, without lines."""
    functions: dict[str, list[SassInstruction]] = {}
    current: list[SassInstruction] | None = None
    for line in text.splitlines():
        if m := _FUNC_CUOBJDUMP_RE.match(line):
            current = functions.setdefault(m.group(1), [])
            continue
        if current is not None:
            instr = _parse_instruction(line, (None, None), ())
            if instr is not None:
                current.append(instr)
    return {name: tuple(instrs) for name, instrs in functions.items()}


# --------------------------------------------------------------------------------------------
# Running the disassembler


def cubin_stat(path: Path) -> os.stat_result:
    """The cubin's stat (its size and time key the disassemblers' caches); ToolchainError when
    it is gone."""
    try:
        return path.stat()
    except OSError:
        raise ToolchainError(
            f"cubin {path} not found", "compile the source again (the cache may have been cleared)"
        ) from None


def disassemble_all(
    cubin: str | os.PathLike[str], toolchain: Toolchain | None = None, function: int | None = None
) -> dict[str, tuple[SassInstruction, ...]]:
    """Every function of ``cubin``: {mangled name: instructions}; with ``function`` (a symbol
    index, nvdisasm's ``-fun``) only that one. Cached per cubin file (and function)."""
    path = Path(cubin)
    stat = cubin_stat(path)
    tc = toolchain or find_toolchain()
    tool = tc.nvdisasm or tc.cuobjdump
    if tool is None:
        raise ToolchainError(
            "neither nvdisasm nor cuobjdump was found, so SASS cannot be read",
            'pip install "gpuadvise[toolkit]" (nvidia-cuda-nvdisasm) or use a full CUDA toolkit',
        )
    if tc.nvdisasm is None:
        function = None  # cuobjdump cannot restrict its output to one function
    return _disassemble_cached(
        str(path.resolve()),
        stat.st_mtime_ns,
        stat.st_size,
        str(tool),
        tc.nvdisasm is not None,
        function,
    )


NARROW_ABOVE = 16
"""Functions in a cubin above which one kernel's SASS and life ranges are read alone (nvdisasm
``-fun``): a library's module (CuPy's CUB kernels: hundreds of functions, megabytes of SASS)
recorded by ``gpuadvise record`` took minutes to disassemble and parse whole for each case."""


def function_index(cubin: str | os.PathLike[str], kernel: str) -> int | None:
    """The symbol index of ``kernel`` when ``cubin`` holds more than :data:`NARROW_ABOVE`
    functions (then it is disassembled alone), else None (the whole cubin: its callees too)."""
    path = Path(cubin)
    try:
        stat = path.stat()
    except OSError:
        return None
    symbols = _function_symbols(str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if len(symbols) <= NARROW_ABOVE:
        return None
    return symbols.get(kernel)


@functools.lru_cache(maxsize=32)
def _function_symbols(cubin: str, _mtime_ns: int, _size: int) -> dict[str, int]:
    """The cubin's function symbols, read once per file version (every disassembly and life-range
    lookup of a kernel asks)."""
    from gpuadvise.toolchain.cubin import function_symbols

    try:
        return function_symbols(Path(cubin).read_bytes())
    except OSError:
        return {}


_SIDECAR_HEADER = "// gpuadvise disassembly sha256="

SIDECAR_WAIT_S = 330.0
"""The longest a disassembly waits for another process's run of the same command on the same
cubin (its nvdisasm runs at most 300 s: :func:`_run`); then it runs its own."""


def read_sidecar(path: Path) -> str | None:
    """The disassembly kept in ``path``, or None if it is missing or damaged.

    A sidecar is the disassembler's output after a first line holding its SHA-256; a file that
    is not valid UTF-8, lacks that line or does not match it is damaged (and rewritten).
    """
    data = read_cache_bytes(path, read_limit_bytes())
    try:
        text = "" if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    header, sep, body = text.partition("\n")
    if not sep or not header.startswith(_SIDECAR_HEADER):
        return None
    if header[len(_SIDECAR_HEADER) :] != hashlib.sha256(body.encode("utf-8")).hexdigest():
        return None
    return body


def write_sidecar(path: Path, text: str) -> None:
    """Keep the disassembly ``text`` in ``path`` (see :func:`read_sidecar`); best effort."""
    from gpuadvise.fileio import write_atomic

    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    try:
        write_atomic(path, f"{_SIDECAR_HEADER}{digest}\n{text}")
    except OSError:
        pass  # a read-only cache: disassemble again next time


_INDIRECT_RE = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/[^;]*?\b(?:BRX|JMX)", re.M)
"""An indirect branch in nvdisasm's output (``BRX R10 -0xe10``)."""


@functools.lru_cache(maxsize=32)
def _disassemble_cached(
    cubin: str, _mtime_ns: int, _size: int, tool: str, is_nvdisasm: bool, function: int | None
) -> dict[str, tuple[SassInstruction, ...]]:
    parse = parse_nvdisasm if is_nvdisasm else parse_cuobjdump
    # nvdisasm spends about 0.5 s starting up, whatever the cubin: keep its output beside the
    # cubin (which the compile cache never rewrites), so a cached re-run does not pay it again.
    only = "" if function is None else f".fun{function}"
    sidecar = Path(f"{cubin}.{Path(tool).name}{only}.{_size}.{_mtime_ns}.txt")
    kept = read_sidecar(sidecar)
    if kept is not None:
        return parse(kept)
    # one process at a time disassembles it: another's output is read once it is kept
    with cache_lock.held(_lock_path(sidecar), SIDECAR_WAIT_S) as locked:
        kept = read_sidecar(sidecar) if locked else None
        if kept is not None:
            return parse(kept)
        proc = _disassembled(cubin, _mtime_ns, _size, tool, is_nvdisasm, function)
        if isinstance(proc, dict):
            return proc
        if proc.returncode != 0:
            raise _disassembler_error(Path(cubin), Path(tool).name, proc.stderr)
        write_sidecar(sidecar, proc.stdout)
    return parse(proc.stdout)


def _disassembled(
    cubin: str, _mtime_ns: int, _size: int, tool: str, is_nvdisasm: bool, function: int | None
) -> dict[str, tuple[SassInstruction, ...]] | subprocess.CompletedProcess[str]:
    """:func:`_disassemble_cached`'s SASS where the life ranges give it, else the
    disassembler's run."""
    if is_nvdisasm:
        derived = _from_life_ranges(cubin, _mtime_ns, _size, tool, function)
        if derived is not None:
            return derived
        fun = [] if function is None else ["-fun", str(function)]
        # the same command may have been started as nvcc returned (disassembly_early)
        early = None if function is not None else _early_disassembly(cubin, _mtime_ns, _size, tool)
        proc = early if early is not None else _run([tool, "-c", "-gi", "-ndf", *fun, cubin])
        if proc.returncode != 0 and "-gi" in proc.stderr:  # an nvdisasm without -gi
            proc = _run([tool, "-c", "-g", "-ndf", *fun, cubin])
        if proc.returncode == 0 and _INDIRECT_RE.search(proc.stdout):
            # the dataflow analysis nvdisasm skips under -ndf (a quarter of its time) only
            # annotates indirect branches (their inferred targets): run it for those
            proc = _run([tool, "-c", "-gi", *fun, cubin])
            if proc.returncode != 0 and "-gi" in proc.stderr:
                proc = _run([tool, "-c", "-g", *fun, cubin])
    else:
        proc = _run([tool, "-sass", cubin])
    return proc


_TextKey = tuple[str, int, int, str, int | None]
_texts: dict[_TextKey, str] = {}
"""The last few ``-plr`` outputs read in this process (a read-only cache keeps no sidecar)."""
_KEEP_TEXTS = 2
_texts_lock = threading.Lock()  # a batch analyses kernels in threads
_pending: dict[_TextKey, threading.Event] = {}
"""The ``-plr`` runs started ahead (:func:`life_range_text_early`) and not ended yet."""


def _sidecar(key: _TextKey) -> Path:
    cubin, mtime_ns, size, tool, function = key
    only = "" if function is None else f".fun{function}"
    return Path(f"{cubin}.{Path(tool).name}-plr{only}.{size}.{mtime_ns}.txt")


def has_life_range_text(
    cubin: str, mtime_ns: int, size: int, tool: str, function: int | None
) -> bool:
    """Whether :func:`life_range_text` can answer without running nvdisasm (it ran in this
    process, or its output is kept beside the cubin)."""
    key = (cubin, mtime_ns, size, tool, function)
    return key in _texts or key in _pending or _sidecar(key).is_file()


def life_range_text(cubin: str, mtime_ns: int, size: int, tool: str, function: int | None) -> str:
    """``nvdisasm --print-life-ranges -c [-fun N] cubin``'s output, kept beside the cubin like the
    SASS (nvdisasm starts in about 0.3 s whatever the cubin). It holds every instruction too:
    :func:`disassemble_all` reads the SASS from it (lines from the
    cubin's line table) instead of a second nvdisasm run."""
    key = (cubin, mtime_ns, size, tool, function)
    text = _texts.get(key)
    if text is not None:
        return text
    started = _pending.get(key)
    if started is not None:  # the run started ahead: waited for, not run twice
        started.wait()
        text = _texts.get(key)
        if text is not None:
            return text
    return _read_life_range_text(key)


def _read_life_range_text(key: _TextKey) -> str:
    """:func:`life_range_text` of ``key``: the sidecar or an nvdisasm run, kept in ``_texts``."""
    cubin, _, _, tool, function = key
    sidecar = _sidecar(key)
    text = read_sidecar(sidecar)
    if text is None:
        # one process at a time runs it: another's output is read once it is kept
        with cache_lock.held(_lock_path(sidecar), SIDECAR_WAIT_S) as locked:
            text = read_sidecar(sidecar) if locked else None
            if text is None:
                fun = [] if function is None else ["-fun", str(function)]
                proc = _run([tool, "--print-life-ranges", "-c", *fun, cubin])
                if proc.returncode != 0:
                    raise _disassembler_error(Path(cubin), Path(tool).name, proc.stderr)
                write_sidecar(sidecar, proc.stdout)
                text = proc.stdout
    _keep_text(key, text)
    return text


def _lock_path(sidecar: Path) -> Path:
    """The lock file of ``sidecar``'s making (:mod:`~gpuadvise.toolchain.cache_lock`)."""
    return sidecar.with_name(sidecar.name + ".lock")


def _keep_text(key: _TextKey, text: str) -> None:
    """``text`` kept as ``key``'s ``-plr`` output (the last :data:`_KEEP_TEXTS` are)."""
    with _texts_lock:
        while len(_texts) >= _KEEP_TEXTS:
            _texts.pop(next(iter(_texts)), None)
        _texts[key] = text


class _EarlyRun:
    """One nvdisasm run on a cubin nvcc has just written, started before the compile cache has
    read it back, hashed the compile's inputs and stored it (about 0.05 s of this process on
    the 2-core machine, with the demangler's run and the PTX's resources), on a link to it (or a
    copy) in a folder of its own: the compile's build folder is removed once the cubin is
    stored. nvdisasm's output does not name its input, so it is the stored copy's (the same
    bytes). :meth:`result` waits for it (None: it could not be run)."""

    def __init__(self, cubin: Path, cmd: Sequence[str]) -> None:
        self._folder = keep_until_exit("gpuadvise-sass-")
        try:
            target = self._folder / "module.cubin"
            try:
                os.link(cubin, target)
            except OSError:  # another file system: a copy (a cubin is small)
                import shutil

                shutil.copyfile(cubin, target)
        except BaseException:
            release(self._folder)
            raise
        self._cmd = [*cmd, str(target)]
        self._out: subprocess.CompletedProcess[str] | None = None
        self._done = threading.Event()
        # a daemon: an interrupted analysis does not wait for nvdisasm
        threading.Thread(target=self._go, daemon=True, name="gpuadvise-sass").start()

    def _go(self) -> None:
        try:
            self._out = _run(self._cmd)
        except BaseException:  # noqa: BLE001, S110 - the reader runs nvdisasm itself
            pass
        finally:
            release(self._folder)
            self._done.set()

    def result(self) -> subprocess.CompletedProcess[str] | None:
        self._done.wait()
        return self._out


def _whole_cubin(cubin: Path) -> bool:
    """Whether ``cubin``'s SASS and life ranges are read whole (at most :data:`NARROW_ABOVE`
    functions: :func:`function_index` is None whatever the kernel)."""
    try:
        symbols = _function_symbols(*_stat_key(cubin))
    except OSError:
        return False
    return len(symbols) <= NARROW_ABOVE


def _stat_key(cubin: Path) -> tuple[str, int, int]:
    """(resolved path, mtime, size) of ``cubin``: what its disassemblies are kept under."""
    stat = cubin.stat()
    return str(cubin.resolve()), stat.st_mtime_ns, stat.st_size


def life_range_text_early(cubin: Path, tool: str) -> Callable[[Path], bool] | None:
    """:func:`life_range_text` of the whole of ``cubin``, a cubin nvcc has just written in the
    compile's build folder, started now (:class:`_EarlyRun`, ``analyze``'s key compile: the
    kernel's SASS and live registers are read from it), before the compile cache stores it.
    Returns ``adopt(stored)``, to call with the stored copy's path: its :func:`life_range_text`
    then waits for this run instead of starting its own (a failed run is left to that read,
    which runs nvdisasm again and reports it); whether it was adopted. None (nothing started)
    where the cubin is read a kernel at a time (more than :data:`NARROW_ABOVE` functions) or
    cannot be read."""
    if not _whole_cubin(cubin):
        return None
    run = _EarlyRun(cubin, [tool, "--print-life-ranges", "-c"])

    def adopt(stored: Path) -> bool:
        try:
            path, mtime_ns, size = _stat_key(stored)
        except OSError:
            return False
        key: _TextKey = (path, mtime_ns, size, tool, None)
        with _texts_lock:
            if key in _texts or key in _pending:
                return False
            started = _pending[key] = threading.Event()
        # held until the sidecar is written: another process that has just read the stored
        # cubin from the compile cache waits for this run instead of starting its own (the
        # compile holds its own lock until this is taken: compile._compile)
        lock = cache_lock.acquire(_lock_path(_sidecar(key)), 0)

        def finish() -> None:
            try:
                proc = run.result()
                if proc is not None and proc.returncode == 0:
                    write_sidecar(_sidecar(key), proc.stdout)
                    _keep_text(key, proc.stdout)
            finally:
                cache_lock.release(lock)
                with _texts_lock:
                    _pending.pop(key, None)
                started.set()

        try:
            threading.Thread(target=finish, daemon=True, name="gpuadvise-plr").start()
        except BaseException:
            cache_lock.release(lock)  # no thread to give it back
            with _texts_lock:
                _pending.pop(key, None)
            started.set()
            raise
        return True

    return adopt


_early_sass: dict[tuple[str, int, int, str], _EarlyRun] = {}
"""The ``-c -gi -ndf`` runs started on fresh cubins (:func:`disassembly_early`), by the stored
copy's (path, mtime, size, tool): :func:`_disassemble_cached` takes its output from there."""


def disassembly_early(cubin: Path, tool: str) -> Callable[[Path], bool] | None:
    """:func:`disassemble_all`'s nvdisasm run (``-c -gi -ndf``) of the whole of ``cubin``, a
    cubin nvcc has just written in the compile's build folder, started now
    (:class:`_EarlyRun`: a variant compiled ahead of its trace, whose SASS is read next:
    :class:`gpuadvise.analyze.ahead.Ahead`). Returns ``adopt(stored)``, to call with the stored
    copy's path: :func:`disassemble_all` of it then takes this run's output instead of running
    the same command again (and goes on from it as from its own: ``-g`` where ``-gi`` is not
    known, no ``-ndf`` where the code has an indirect branch); whether it was adopted. None
    (nothing started) where the cubin is read a kernel at a time or cannot be read."""
    if not _whole_cubin(cubin):
        return None
    run = _EarlyRun(cubin, [tool, "-c", "-gi", "-ndf"])

    def adopt(stored: Path) -> bool:
        try:
            key = (*_stat_key(stored), tool)
        except OSError:
            return False
        with _texts_lock:
            if key in _early_sass:
                return False
            _early_sass[key] = run
        return True

    return adopt


def life_ranges_made(cubin: Path, tc: Toolchain) -> Callable[[CompiledModule], None] | None:
    """The kernel's life ranges and SASS (one ``nvdisasm -plr`` run of the whole cubin) started
    as soon as nvcc has made ``cubin``: ``analyze``'s plain run compiles the kernel first for
    the result cache's key, and this is that compile's ``made``
    (:func:`gpuadvise.toolchain.compile.while_nvcc_runs`; :func:`life_range_text_early`). The
    analysis' :class:`~gpuadvise.analyze.ahead.SassAhead` then finds that run under way, or
    finished, instead of starting its own after the compile cache's store, the key, the result
    cache's lookup and the analysis' set-up (the emulator's trace of a small kernel waits for
    the SASS at its end: 0.3-0.7 s on the 2-core machine). The same command on the same bytes,
    the same output: only when it starts moves. Imports nothing (it runs while the analysis'
    imports may still be running beside nvcc) and never raises (the analysis reads the SASS
    again and reports what failed)."""
    return _made(cubin, tc, life_range_text_early)


def disassembly_made(cubin: Path, tc: Toolchain) -> Callable[[CompiledModule], None] | None:
    """A variant's SASS (nvdisasm ``-c -gi -ndf``, the emulator's block costs: a variant's live
    registers are not read) started as soon as nvcc has made its ``cubin``
    (:func:`disassembly_early`): the ``made`` of the compiles of
    :class:`gpuadvise.analyze.ahead.Ahead`, whose thread reads the variant's SASS once it is
    compiled (the compile cache's store, the resources and the occupancy first) and handed
    over; that read takes this run's output. As :func:`life_ranges_made`."""
    return _made(cubin, tc, disassembly_early)


def _made(
    cubin: Path, tc: Toolchain, early: Callable[[Path, str], Callable[[Path], bool] | None]
) -> Callable[[CompiledModule], None] | None:
    if tc.nvdisasm is None:
        return None
    try:
        adopt = early(cubin, str(tc.nvdisasm))
    except Exception:  # noqa: BLE001 - the analysis reads it itself
        return None
    if adopt is None:
        return None

    def stored(module: CompiledModule) -> None:
        with contextlib.suppress(Exception):
            adopt(module.cubin_path)

    return stored


def _early_disassembly(
    cubin: str, mtime_ns: int, size: int, tool: str
) -> subprocess.CompletedProcess[str] | None:
    """The ``-c -gi -ndf`` run :func:`disassembly_early` started on this cubin, waited for, where
    it succeeded (None: none was started, or it failed); taken once."""
    with _texts_lock:
        run = _early_sass.pop((cubin, mtime_ns, size, tool), None)
    proc = None if run is None else run.result()
    # a failure is left to the run on the stored cubin (its error then names that cubin)
    return proc if proc is not None and proc.returncode == 0 else None


def _from_life_ranges(
    cubin: str, mtime_ns: int, size: int, tool: str, function: int | None
) -> dict[str, tuple[SassInstruction, ...]] | None:
    """The SASS of ``nvdisasm -c -gi`` without running it, when the life ranges were read
    (``nvdisasm -plr`` prints every instruction but, ignoring ``-g``, no line): the instructions
    from that output, their lines and call sites from the cubin's line table (:mod:`lines`:
    what ``-gi`` prints). None when there is no such output or the line table is one
    :func:`~gpuadvise.toolchain.lines.line_table` does not read (then nvdisasm runs)."""
    from gpuadvise.toolchain.lines import (
        LineTableError,
        code_sections,
        line_table,
        locate,
        trailing_nops,
    )

    if not has_life_range_text(cubin, mtime_ns, size, tool, function):
        return None
    try:
        text = life_range_text(cubin, mtime_ns, size, tool, function)
        data = Path(cubin).read_bytes()
        table, code = line_table(data), code_sections(data)
    except (OSError, ToolchainError, LineTableError):
        return None
    functions = parse_nvdisasm(text)
    if not functions:
        return None
    out = {}
    for name, instrs in functions.items():
        offsets = [i.offset for i in instrs]
        # sm_70 on (16-byte instructions, none left out): the padding -plr does not print
        if name not in code or offsets != list(range(0, 16 * len(offsets), 16)):
            return None
        pad = trailing_nops(code[name], offsets[-1]) if offsets else None
        if pad is None:
            return None
        offsets += [offsets[-1] + 16 * (k + 1) for k in range(pad)]
        nop = SassInstruction(0, "NOP", "NOP", None, "", None, None)
        full = [*instrs, *(dataclasses.replace(nop, offset=o) for o in offsets[len(instrs) :])]
        where = locate(table.get(name, ()), offsets)
        out[name] = tuple(
            dataclasses.replace(i, file=f, line=n, inlined_at=chain)
            for i, (f, n, chain) in zip(full, where, strict=True)
        )
    return out


def _disassembler_error(cubin: Path, tool: str, stderr: str) -> ToolchainError:
    """Why the disassembler failed: a damaged cubin (the usual cause), else its own words."""
    from gpuadvise.toolchain.resources import elf_section_sizes

    lines = stderr.strip().splitlines()
    detail = lines[-1].strip() if lines else "no output"
    try:
        elf_section_sizes(cubin.read_bytes())
        valid_elf = True
    except (OSError, ToolchainError):
        valid_elf = False
    if not valid_elf or re.search(r"(?i)elf|corrupt|truncat|invalid|malformed", detail):
        return ToolchainError(
            f"the cubin {cubin} is corrupt: {tool} cannot read it ({detail})",
            "re-run with --no-cache (or delete that cache entry) to compile it again",
        )
    return ToolchainError(
        f"{tool} failed on {cubin}: {detail}",
        "re-run with --no-cache; if it fails again, check that the disassembler comes from "
        "the same CUDA version as nvcc",
    )


def _run(cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(cmd), capture_output=True, text=True, errors="replace", timeout=300
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(
            f"cannot run {Path(cmd[0]).name}: {exc}", 'pip install "gpuadvise[toolkit]"'
        ) from None


def disassemble(
    cubin: str | os.PathLike[str], kernel: str, toolchain: Toolchain | None = None
) -> tuple[SassInstruction, ...]:
    """The SASS of one function of ``cubin``, by mangled name (``KernelInfo.mangled``); of that
    function alone when the cubin holds many (:func:`function_index`)."""
    functions = disassemble_all(cubin, toolchain, function_index(cubin, kernel))
    if kernel in functions:
        return functions[kernel]
    raise KernelNotFoundError(
        f"no function {kernel!r} in {Path(cubin).name}",
        f"pass a mangled name; the cubin has: {', '.join(functions) or 'no functions'}",
    )


# --------------------------------------------------------------------------------------------
# Operands

_REG = re.compile(r"^[-|!~]*(?P<r>U?R\d+|U?RZ)\b(?P<mods>\S*)")
_NUM = re.compile(r"^-?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+|0x[0-9a-fA-F]+|INF|NAN|\+INF|-INF)$")
_PRMT_SELECTOR = re.compile(r"0x[0-9a-fA-F]{1,4}")


def operand_list(operands: str) -> list[str]:
    """The operands of an instruction as nvdisasm prints them, split at commas."""
    return [p.strip() for p in operands.split(",")]


def one_lane_fp16(operands: str) -> bool:
    """Whether a packed fp16 ``H*2`` instruction computes one value twice: every register source
    is a broadcast half (``.H0_H0``/``.H1_H1``) or RZ, and its immediates are one value
    repeated."""
    parts = operand_list(operands)[1:]  # sources (the first is the destination)
    nums = []
    for p in parts:
        m = _REG.match(p)
        if m:
            if m.group("r").endswith("RZ"):
                continue
            if ".H0_H0" not in m.group("mods") and ".H1_H1" not in m.group("mods"):
                return False
        elif p.startswith(("c[", "-c[", "|c[")):
            if ".H0_H0" not in p and ".H1_H1" not in p:
                return False
        elif _NUM.match(p):
            nums.append(p)
        else:
            return False
    return len(set(nums)) <= 1


def halfword_prmt(operands: str) -> bool:
    """Whether a ``PRMT``'s selector moves whole 16-bit halves (packing or unpacking pairs)."""
    for p in operand_list(operands):
        if _PRMT_SELECTOR.fullmatch(p):
            d = [int(c, 16) for c in p[2:].rjust(4, "0")][::-1]  # d[0]: source of byte 0
            return d[0] % 2 == 0 and d[1] == d[0] + 1 and d[2] % 2 == 0 and d[3] == d[2] + 1
    return False


def same_source_file(a: str | None, b: str | None) -> bool:
    """Whether two source paths of line info name one file (same path, else same base name:
    nvdisasm may print a path relative to where nvcc ran)."""
    if not a or not b:
        return False
    na, nb = os.path.normpath(a), os.path.normpath(b)
    return na == nb or os.path.basename(na) == os.path.basename(nb)


# --------------------------------------------------------------------------------------------
# Summaries


def memory_summary(
    instructions: Iterable[SassInstruction], *, call_site: bool = False
) -> tuple[SassMemLine, ...]:
    """Memory instructions grouped by (file, line, space, kind, width_bits), in source order.

    Locations are the innermost ones (the line of the access itself, possibly in a header);
    with ``call_site=True``, the outermost ones (the line of the kernel body). Instructions
    that never execute (``@!PT``) are skipped.
    """
    groups: dict[tuple[str | None, int | None, str, str, int], list[SassInstruction]] = {}
    for instr in instructions:
        if instr.never_executes:
            continue
        ops = classify(instr.opcode)
        if not ops:
            continue
        file, line = instr.call_site if call_site else (instr.file, instr.line)
        for op in ops:
            groups.setdefault((file, line, op.space, op.kind, op.width_bits), []).append(instr)

    def order(key: tuple[str | None, int | None, str, str, int]) -> tuple[Any, ...]:
        file, line, space, kind, width = key
        return (file or "", line or 0, space, kind, width)

    return tuple(
        SassMemLine(
            file=key[0],
            line=key[1],
            space=key[2],  # type: ignore[arg-type]
            kind=key[3],  # type: ignore[arg-type]
            width_bits=key[4],
            count=len(instrs),
            opcodes=tuple(dict.fromkeys(i.opcode for i in instrs)),
            sequence=tuple(i.opcode for i in instrs),
        )
        for key, instrs in sorted(groups.items(), key=lambda kv: order(kv[0]))
    )


_UNIFORM_ADDRESS = re.compile(r"^\[UR\d+(?:\s*\+\s*(?:0x[0-9a-fA-F]+|\d+))?\]$")


def warp_aggregated_atomics(
    instructions: Iterable[SassInstruction],
) -> frozenset[tuple[str | None, int | None]]:
    """The source lines (innermost, as :func:`memory_summary` gives them) whose shared-memory
    atomics ptxas aggregated per warp: every ``ATOMS`` of the line updates a warp-uniform address
    (``[URn]``, ``[URn+imm]``: one word for all the lanes), under a predicate (the one elected
    lane), and a ``REDUX`` at the same line combines the lanes' values into a uniform register
    first. What ptxas makes of ``atomicMax(&m, v)`` on a ``__shared__ int m`` (sm_80 on:
    ``VOTEU.ANY``, ``REDUX.MAX.S32 UR7, R2``, ``@P1 ATOMS.MAX.S32 RZ, [UR4], R0``): one update
    per warp, not one per lane."""
    atoms: dict[tuple[str | None, int | None], list[bool]] = {}
    redux: set[tuple[str | None, int | None]] = set()
    for i in instructions:
        if i.never_executes:
            continue
        key = (i.file, i.line)
        if i.base_opcode == "REDUX":
            redux.add(key)
        elif i.base_opcode == "ATOMS" and not i.opcode.startswith(("ATOMS.CAS", "ATOMS.POPC")):
            ops = operand_list(i.operands)
            uniform = len(ops) > 1 and bool(_UNIFORM_ADDRESS.match(ops[1]))
            atoms.setdefault(key, []).append(uniform and i.predicate is not None)
    return frozenset(k for k, flags in atoms.items() if k in redux and all(flags))


def source_text(file: str | os.PathLike[str] | None, line: int | None) -> str | None:
    """The text of ``line`` (1-based) of ``file``, without its newline; None if unavailable.

    Files are read once and cached (re-read when they change on disk).
    """
    if not file or not line or line < 1:
        return None
    try:
        stat = os.stat(file)
    except OSError:
        return None
    lines = _read_lines(os.fspath(file), stat.st_mtime_ns, stat.st_size)
    if lines is None or line > len(lines):
        return None
    return lines[line - 1]


@functools.lru_cache(maxsize=64)
def _read_lines(path: str, _mtime_ns: int, _size: int) -> tuple[str, ...] | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return tuple(fh.read().splitlines())
    except OSError:
        return None

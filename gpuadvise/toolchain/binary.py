"""Kernels without source: a ``.ptx``, ``.cubin`` or ``.fatbin`` given to ``analyze`` as the
module to read (:func:`load_binary`, called by ``compile_source`` for those suffixes).

- PTX: ptxas compiles it for the device (``-v`` for the resources, ``--generate-line-info``):
  the CPU emulator traces the PTX, nvdisasm reads the SASS. PTX without line info (no
  ``.loc``) is given line info of its own first (:func:`with_ptx_lines`): every instruction is
  located at its line of the ``.ptx``, so findings name PTX lines.
- A cubin: the SASS only. Resources come from ``cuobjdump -res-usage`` (spill bytes are not in a
  cubin: 0), the architecture from the ELF header (it must be the device's), the parameters'
  slots from ``.nv.info`` (:mod:`gpuadvise.toolchain.cubin`). There is no PTX, so nothing is
  traced (``module.ptx`` is empty).
- A fat binary: its cubin for the device's architecture (``cuobjdump -xelf``) and its PTX
  (``cuobjdump -xptx``), which the emulator traces; PTX alone is compiled as a ``.ptx`` is.

Bad input (not PTX text, not an ELF cubin, the kernel's architecture not the device's) is a
one-line :class:`UsageError` naming the problem and the fix. Modules are kept per process, by
content and architecture, in a temporary folder removed at exit.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from gpuadvise.errors import CompileError, ToolchainError, UsageError
from gpuadvise.toolchain.cubin import FATBIN_MAGIC, is_elf, read_cubin
from gpuadvise.toolchain.find import Toolchain, run_tool
from gpuadvise.toolchain.module import CompiledModule
from gpuadvise.toolchain.names import demangle, display_name
from gpuadvise.toolchain.options import CompileOptions
from gpuadvise.toolchain.resources import KernelInfo, KernelResources, kernel_infos
from gpuadvise.toolchain.sass import NARROW_ABOVE
from gpuadvise.toolchain.scratch import keep_until_exit

__all__ = [
    "BINARY_SUFFIXES",
    "BinaryParam",
    "binary_arch",
    "binary_params",
    "has_line_info",
    "is_binary",
    "load_binary",
    "with_ptx_lines",
]

log = logging.getLogger(__name__)

BINARY_SUFFIXES = frozenset({".ptx", ".cubin", ".fatbin"})

_TARGET_RE = re.compile(r"^\s*\.target\s+sm_(\d+)", re.M)
_LOC_RE = re.compile(r"^\s*\.loc\s", re.M)
_FILE_RE = re.compile(r"^\s*\.file\s+(\d+)\s", re.M)
_RES_FUNC_RE = re.compile(r"^\s*Function\s+(\S+?):?\s*$")
_RES_VALUE_RE = re.compile(r"([A-Z]+(?:\[\d+\])?):(\d+)")
_ENTRY_RE = re.compile(r"\.entry\s+([\w$.]+)\s*\(([^)]*)\)", re.S)
_PARAM_RE = re.compile(
    r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+(?:\.ptr\s+[.\w\s]*?)?([\w$]+)(?:\[(\d+)\])?"
)

_modules: dict[tuple[str, str, str, str], CompiledModule] = {}


def is_binary(path: str | os.PathLike[str] | None) -> bool:
    """Whether ``path`` names a module to read rather than a source to compile (by suffix)."""
    return path is not None and Path(path).suffix.lower() in BINARY_SUFFIXES


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(
            f"cannot read {path} ({exc.strerror or exc})", "check the path and its permissions"
        ) from None


def _kind(path: Path, data: bytes) -> str:
    """``ptx``, ``cubin`` or ``fatbin``: by content (a .cubin may hold a fat binary)."""
    if is_elf(data):
        return "cubin"
    if data[:4] == FATBIN_MAGIC:
        return "fatbin"
    if path.suffix.lower() == ".ptx":
        return "ptx"
    raise UsageError(
        f"{path} is not a cubin: it is neither an ELF file nor a fat binary (a corrupt or "
        "truncated file?)",
        "give the file nvcc -cubin (or -fatbin) wrote, or the kernel's PTX (nvcc -ptx)",
    )


def _ptx_text(path: Path, data: bytes) -> str:
    if b"\0" in data[: 1 << 16]:
        raise UsageError(
            f"{path} is not PTX text (it holds binary data)",
            "give the file nvcc -ptx wrote, or name a cubin .cubin",
        )
    text = data.decode("utf-8", errors="replace")
    if not re.search(r"^\s*\.version\s", text, re.M) or not _TARGET_RE.search(text):
        raise UsageError(
            f"{path} is not PTX: it has no .version and .target directives",
            "give the file nvcc -ptx (-lineinfo) wrote",
        )
    return text


def elf_sm(data: bytes) -> int | None:
    """The SM version a cubin's ELF header names (90 for sm_90), or None when unreadable:
    ``e_flags`` holds it in bits 8-15 from ELF ABI version 8 (CUDA 12.8+), else in bits 0-7."""
    if len(data) < 0x34 or not is_elf(data):
        return None
    (flags,) = struct.unpack_from("<I", data, 0x30)
    sm = (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF
    return sm or None


def binary_arch(path: str | os.PathLike[str], tc: Toolchain | None = None) -> str | None:
    """The architecture a cubin is for (``sm_90``); None for PTX (it is compiled for any device
    at or above its ``.target``) and for a fat binary (its cubin is picked per device)."""
    p = Path(path)
    data = _read(p)
    if _kind(p, data) != "cubin":
        return None
    sm = elf_sm(data)
    return None if sm is None else f"sm_{sm}"


def has_line_info(module: CompiledModule) -> bool:
    """Whether the module's kernels carry line info of their own (not the PTX lines given by
    :func:`with_ptx_lines`)."""
    return "// gpuadvise: line info of the PTX itself" not in module.ptx


# ---------------------------------------------------------------------------------------------
# PTX


def with_ptx_lines(ptx: str, path: str) -> str:
    """``ptx`` with a ``.loc`` before every instruction giving its own line in the file, and a
    ``.file`` naming ``path``: PTX without line info is located at its PTX lines. An instruction
    spread over several lines (a ``call`` with its arguments) gets one, before its first line."""
    used = {int(n) for n in _FILE_RE.findall(ptx)}
    index = max(used, default=0) + 1
    out: list[str] = []
    depth = 0
    complete = True  # the previous statement ended: a new one may start here
    for number, line in enumerate(ptx.splitlines(), start=1):
        code = line.split("//", 1)[0].strip()
        if depth > 0 and code and complete and _is_instruction(code):
            out.append(f"\t.loc\t{index} {number} 0")
        out.append(line)
        if not code:
            continue
        depth += code.count("{") - code.count("}")
        complete = code.endswith((";", "{", "}", ":")) or code.startswith((".", "$", "{", "}"))
    out.append("\t// gpuadvise: line info of the PTX itself")
    out.append(f"\t.file\t{index} {_ptx_string(path)}")
    return "\n".join(out) + "\n"


def _is_instruction(code: str) -> bool:
    if code.startswith((".", "{", "}", "(", ")")) or code.endswith(":"):
        return False
    return bool(re.match(r"^(?:@!?%\w+\s+)?[a-z]", code))


def _ptx_string(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _sm(arch: str) -> int:
    m = re.match(r"(?:sm_|compute_)?(\d+)", arch)
    return int(m.group(1)) if m else 0


def _check_target(path: Path, ptx: str, arch: str) -> None:
    m = _TARGET_RE.search(ptx)
    target = int(m.group(1)) if m else 0
    if target > _sm(arch):
        raise UsageError(
            f"{path.name} is PTX for sm_{target}, newer than the device's {arch}",
            f"analyze it with --arch sm_{target} (or a --gpu of that architecture), or "
            f"regenerate it with nvcc -ptx -arch={arch}",
        )


def _from_ptx(path: Path, ptx: str, options: CompileOptions, tc: Toolchain) -> CompiledModule:
    _check_target(path, ptx, options.arch)
    if not _LOC_RE.search(ptx):
        ptx = with_ptx_lines(ptx, str(path))
    work = keep_until_exit("gpuadvise-ptx-")
    source = work / "module.ptx"
    source.write_text(ptx, encoding="utf-8")
    cubin = work / "module.cubin"
    flags = [f"-arch={options.arch}", "-v", "--generate-line-info"]
    flags += [f for x in options.xptxas for f in x.split(",") if f]
    if options.maxrregcount is not None:
        flags.append(f"--maxrregcount={options.maxrregcount}")
    proc = run_tool([str(tc.ptxas), *flags, str(source), "-o", str(cubin)], "ptxas")
    out = (proc.stdout + "\n" + proc.stderr).strip().replace(str(source), path.name)
    if proc.returncode != 0 or not cubin.is_file():
        first = next(
            (ln.strip() for ln in out.splitlines() if "error" in ln or "fatal" in ln),
            out.splitlines()[0] if out else f"exit status {proc.returncode}",
        )
        first = " ".join(first.replace("; ", ": ").split())
        raise CompileError(
            f"ptxas cannot compile {path.name} for {options.arch}: {first}",
            "give PTX that nvcc -ptx wrote (a damaged or hand-edited file fails here)",
        )
    entries = re.findall(r"Compiling entry function '([^']+)'", out)
    names = demangle(list(dict.fromkeys(entries)), tc)
    kernels = kernel_infos(ptx, out, cubin.read_bytes(), path, names)
    return CompiledModule(
        source=path,
        arch=options.arch,
        cubin_path=cubin,
        ptx=ptx,
        kernels=kernels,
        toolchain_version=tc.version,
        flags=(),
        compile_time_s=0.0,
        dependencies=(path,),
        log=out,
    )


# ---------------------------------------------------------------------------------------------
# cubin


def _res_usage(cubin: Path, tc: Toolchain) -> dict[str, dict[str, int]]:
    """``cuobjdump -res-usage``: mangled name -> {REG, SHARED, LOCAL, STACK, CONSTANT[0] ...}."""
    if tc.cuobjdump is None:
        raise ToolchainError(
            "cuobjdump was not found, so a cubin's resources cannot be read",
            'pip install "gpuadvise[toolkit]" (nvidia-cuda-cuobjdump), or use a full CUDA toolkit',
        )
    proc = run_tool([str(tc.cuobjdump), "-res-usage", str(cubin)], "cuobjdump")
    if proc.returncode != 0:
        raise UsageError(
            f"cuobjdump cannot read {cubin.name}: {proc.stderr.strip() or proc.returncode}",
            "give the file nvcc -cubin wrote (a damaged file fails here)",
        )
    out: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in proc.stdout.splitlines():
        if m := _RES_FUNC_RE.match(line):
            current = m.group(1)
            out[current] = {}
        elif current is not None and "REG:" in line:
            out[current] = {k: int(v) for k, v in _RES_VALUE_RE.findall(line)}
    return out


def _barriers(cubin: Path, mangled: str, tc: Toolchain) -> int:
    """Named barriers the SASS uses: the highest ``BAR`` id + 1 (1 for ``BAR.SYNC`` 0)."""
    from gpuadvise.toolchain import sass

    try:
        instrs = sass.disassemble(cubin, mangled, tc)
    except Exception:  # noqa: BLE001 - no SASS: no barrier count (the analysis reads it again)
        return 0
    top = -1
    for i in instrs:
        if i.base_opcode in ("BAR", "BARRIER") or i.opcode.startswith("BAR."):
            m = re.match(r"\s*(0x[0-9a-fA-F]+|\d+)", i.operands)
            top = max(top, int(m.group(1), 0) if m else 0)
    return top + 1


_BAR_LINE_RE = re.compile(r"\s(?:BAR|BARRIER)(?:\.[A-Z_.]+)?\s+(0x[0-9a-fA-F]+|\d+)?")


def _barrier_counts(cubin: Path, tc: Toolchain) -> dict[str, int] | None:
    """Every function's named barriers (as :func:`_barriers`) from one ``nvdisasm -c`` run read
    as text: a library's module of hundreds of kernels (a recorded CuPy program's CUB module)
    took minutes when each kernel was disassembled and parsed in turn. None without nvdisasm or
    when it fails."""
    from gpuadvise.toolchain.sass import _FUNC_NVDISASM_RE

    if tc.nvdisasm is None:
        return None
    try:
        proc = run_tool([str(tc.nvdisasm), "-c", str(cubin)], "nvdisasm")
    except ToolchainError:
        return None
    if proc.returncode != 0:
        return None
    out: dict[str, int] = {}
    current: str | None = None
    for line in proc.stdout.splitlines():
        if m := _FUNC_NVDISASM_RE.match(line):
            current = m.group(1)
            out.setdefault(current, 0)
        elif current is not None and "BAR" in line and (b := _BAR_LINE_RE.search(line)):
            out[current] = max(out[current], (int(b.group(1), 0) if b.group(1) else 0) + 1)
    return out


def _from_cubin(
    path: Path, data: bytes, options: CompileOptions, tc: Toolchain, ptx: str = ""
) -> CompiledModule:
    sm = elf_sm(data)
    if sm is not None and sm != _sm(options.arch):
        raise UsageError(
            f"{path.name} holds SASS for sm_{sm}, not for the device's {options.arch}",
            f"analyze it with --arch sm_{sm} (or a --gpu of that architecture), or rebuild it "
            f"with nvcc -cubin -arch={options.arch}",
        )
    try:
        info = read_cubin(data)
    except ValueError as exc:
        raise UsageError(
            f"{path.name} is not a readable cubin: {exc}", "give the file nvcc -cubin wrote"
        ) from None
    work = keep_until_exit("gpuadvise-cubin-")
    cubin = work / "module.cubin"
    cubin.write_bytes(data)
    usage = _res_usage(cubin, tc)
    names = demangle(list(info.kernels), tc)
    from gpuadvise.toolchain.resources import elf_section_sizes

    sections = elf_section_sizes(data)
    kernels = []
    many = len(info.kernels) > NARROW_ABOVE
    counts = _barrier_counts(cubin, tc) if many else None
    for sym in info.kernels:
        res = usage.get(sym)
        if res is None:  # a device function's code, not a kernel
            continue
        signature = names.get(sym, sym)
        kernels.append(
            KernelInfo(
                name=display_name(signature),
                mangled=sym,
                signature=signature,
                resources=KernelResources(
                    registers=res.get("REG", 0),
                    static_smem_bytes=res.get("SHARED", 0),
                    local_bytes=max(res.get("LOCAL", 0), res.get("STACK", 0)),
                    spill_store_bytes=0,
                    spill_load_bytes=0,
                    const_bytes=sections.get(f".nv.constant0.{sym}", res.get("CONSTANT[0]", 0)),
                    barriers=counts.get(sym, 0)
                    if counts is not None
                    else _barriers(cubin, sym, tc),
                ),
            )
        )
    return CompiledModule(
        source=path,
        arch=options.arch,
        cubin_path=cubin,
        ptx=ptx,
        kernels=tuple(kernels),
        toolchain_version=tc.version,
        flags=(),
        compile_time_s=0.0,
        dependencies=(path,),
    )


def _from_fatbin(path: Path, options: CompileOptions, tc: Toolchain) -> CompiledModule:
    """The fat binary's cubin for the device (with its PTX, when it holds PTX the device can
    run), else its PTX compiled by ptxas."""
    if tc.cuobjdump is None:
        raise ToolchainError(
            "cuobjdump was not found, so a fat binary cannot be opened",
            'pip install "gpuadvise[toolkit]" (nvidia-cuda-cuobjdump), or use a full CUDA toolkit',
        )
    work = keep_until_exit("gpuadvise-fatbin-")
    for what in ("-xelf", "-xptx"):
        proc = run_tool(
            [str(tc.cuobjdump), what, "all", str(path.resolve())], "cuobjdump", cwd=work
        )
        if proc.returncode != 0:
            raise UsageError(
                f"cuobjdump cannot open {path.name}: {proc.stderr.strip() or proc.returncode}",
                "give the file nvcc -fatbin (or -cubin) wrote (a damaged file fails here)",
            )
    want = _sm(options.arch)
    texts = (p.read_text(errors="replace") for p in sorted(work.glob("*.ptx")))
    usable = sorted((t for t in texts if 0 < _target(t) <= want), key=_target, reverse=True)
    ptx = usable[0] if usable else ""
    for elf in sorted(work.glob("*.cubin")):
        data = elf.read_bytes()
        if elf_sm(data) == want:
            return _from_cubin(path, data, options, tc, ptx)
    if ptx:
        return _from_ptx(path, ptx, options, tc)
    archs = sorted({f"sm_{elf_sm(e.read_bytes())}" for e in work.glob("*.cubin")})
    raise UsageError(
        f"{path.name} holds no SASS for {options.arch} and no PTX it can be built from "
        f"(SASS for: {', '.join(archs) or 'none'})",
        f"analyze it with --arch {archs[0]}" if archs else "rebuild it with -arch=" + options.arch,
    )


def _target(ptx: str) -> int:
    m = _TARGET_RE.search(ptx)
    return int(m.group(1)) if m else 0


def load_binary(
    source: str | os.PathLike[str], options: CompileOptions, tc: Toolchain
) -> CompiledModule:
    """The module a ``.ptx``, ``.cubin`` or ``.fatbin`` holds, for ``options.arch`` (see the
    module's docstring); kept for the process by content and architecture."""
    path = Path(source).expanduser()
    if not path.is_file():
        raise UsageError(f"{source} is not a file", "check the path to the .ptx or .cubin")
    path = path.resolve()
    data = _read(path)
    tools = f"{tc.version}|{options.xptxas}|{options.maxrregcount}"
    key = (str(path), hashlib.sha256(data).hexdigest(), options.arch, tools)
    if key in _modules:
        return _modules[key]
    kind = _kind(path, data)
    if kind == "ptx":
        module = _from_ptx(path, _ptx_text(path, data), options, tc)
    elif kind == "cubin":
        module = _from_cubin(path, data, options, tc)
    else:
        module = _from_fatbin(path, options, tc)
    log.info("read %s (%s) for %s: %d kernels", path.name, kind, options.arch, len(module.kernels))
    _modules[key] = module
    return module


# ---------------------------------------------------------------------------------------------
# parameters


@dataclass(frozen=True)
class BinaryParam:
    """One kernel parameter as the module declares it: its PTX type (``u64``, ``f32``; ``b8``
    with ``size_bytes`` for an aggregate; None from a cubin without PTX) and its size."""

    ordinal: int
    ptx_type: str | None
    size_bytes: int
    align: int = 0


_PTX_SIZES = {"8": 1, "16": 2, "32": 4, "64": 8}


def binary_params(module: CompiledModule, mangled: str) -> tuple[BinaryParam, ...] | None:
    """The parameters of kernel ``mangled``: from its PTX ``.entry``, else from the cubin's
    parameter slots; None when neither says."""
    for m in _ENTRY_RE.finditer(module.ptx):
        if m.group(1) != mangled:
            continue
        out = []
        for i, p in enumerate(_PARAM_RE.finditer(m.group(2))):
            align, kind, count = p.group(1), p.group(2), p.group(4)
            size = _PTX_SIZES.get(kind[1:], 0) * (int(count) if count else 1)
            out.append(BinaryParam(i, kind, size, int(align) if align else 0))
        return tuple(out)
    try:
        slots = read_cubin(module.cubin_path.read_bytes()).kernels.get(mangled)
    except (OSError, ValueError):
        return None
    if slots is None:
        return None
    return tuple(BinaryParam(s.ordinal, None, s.size_bytes) for s in slots)

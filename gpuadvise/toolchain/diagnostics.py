"""What nvcc's diagnostics mean, in one line: compile errors, missing headers, templates.

:func:`compile_error` turns a failed nvcc run into a :class:`CompileError`. EDG's
``file(line): error`` is rewritten as ``file:line: error``. Two failures get a line of their own
instead of nvcc's output: a missing header (which package provides it: CUB/Thrust/libcu++ come
with ``nvidia-cuda-cccl``, cuBLAS with ``nvidia-cublas``, ...) and texture or surface references
(removed in CUDA 12: use texture objects). :func:`instantiation_error` says why a template
instance asked for by name does not compile, from nvcc's first error in the user's file.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuadvise.errors import CompileError, GpuAdviseError, KernelNotFoundError, ToolchainError
from gpuadvise.toolchain.find import INSTALL_HINT, Toolchain
from gpuadvise.toolchain.names import base_name, display_name, norm, split_qualified
from gpuadvise.words import counted

__all__ = [
    "HeaderSource",
    "compile_error",
    "first_error",
    "header_source",
    "instantiation_error",
]


@dataclass(frozen=True)
class HeaderSource:
    """Where a header comes from: ``library`` (people's name for it) and the pip ``package``;
    ``in_toolkit_extra``: ``pip install "gpuadvise[toolkit]"`` installs that package."""

    library: str
    package: str
    in_toolkit_extra: bool = False


_HEADER_SOURCES: tuple[tuple[re.Pattern[str], HeaderSource], ...] = tuple(
    (re.compile(pattern), source)
    for pattern, source in (
        (
            r"^(cub|thrust|nv|cuda)/",
            HeaderSource("CCCL (CUB, Thrust, libcu++)", "nvidia-cuda-cccl", True),
        ),
        (r"^cublas(_v2|_api|Lt|Xt)?\.h$", HeaderSource("cuBLAS", "nvidia-cublas")),
        (r"^cufft(Xt|w)?\.h$", HeaderSource("cuFFT", "nvidia-cufft")),
        (r"^curand\w*\.h$", HeaderSource("cuRAND", "nvidia-curand")),
        (r"^cusparse\w*\.h$", HeaderSource("cuSPARSE", "nvidia-cusparse")),
        (r"^cusolver\w*\.h$", HeaderSource("cuSOLVER", "nvidia-cusolver")),
        (r"^nvrtc\.h$", HeaderSource("NVRTC", "nvidia-cuda-nvrtc")),
        (r"^(nvtx3/|nvToolsExt)", HeaderSource("NVTX", "nvidia-nvtx")),
        (r"^cupti\w*\.h$", HeaderSource("CUPTI", "nvidia-cuda-cupti")),
        (r"^npp\w*\.h$", HeaderSource("NPP", "nvidia-npp")),
        (r"^nvjpeg\.h$", HeaderSource("nvJPEG", "nvidia-nvjpeg")),
        (r"^cudnn\w*\.h$", HeaderSource("cuDNN", "nvidia-cudnn-cu13")),
        (r"^nccl\.h$", HeaderSource("NCCL", "nvidia-nccl-cu13")),
        (
            r"^(crt/|cuda_runtime|cuda_fp|cuda_bf16|cuda_occupancy|cooperative_groups|"
            r"cuda_pipeline|cuda_awbarrier|device_launch_parameters|vector_types|mma\.h)",
            HeaderSource("the CUDA runtime headers", "nvidia-cuda-runtime", True),
        ),
    )
)


def header_source(header: str) -> HeaderSource | None:
    """The library and pip package that provide ``header`` (as written in ``#include``)."""
    name = header.strip().lstrip("/")
    for pattern, source in _HEADER_SOURCES:
        if pattern.search(name):
            return source
    return None


def missing_header_hint(header: str, tc: Toolchain | None) -> str:
    """How to get ``header``: the package that provides it, else an include folder."""
    source = header_source(header)
    if source is None:
        return f"add the folder that holds {header} to the include dirs (-I DIR)"
    if source.package == "nvidia-cuda-cccl" and tc is not None and tc.cccl_include_dir:
        return (
            f"CCCL is installed ({tc.cccl_include_dir}) but has no {header}: check the name, "
            "or the CCCL version that provides it"
        )
    if source.in_toolkit_extra:
        if tc is not None and tc.from_wheels:
            pin = f"{source.package}=={tc.version}"
            return (
                f"it is part of {source.library}: pip install {pin} (it comes with "
                'pip install "gpuadvise[toolkit]"), or use a full CUDA toolkit'
            )
        return (
            f"it is part of {source.library}, which a full CUDA toolkit includes: reinstall the "
            f'toolkit, or pip install "gpuadvise[toolkit]" ({source.package}) and use its nvcc'
        )
    return (
        f"it is part of {source.library}, not of gpuadvise[toolkit]: pip install "
        f"{source.package} (or use a full CUDA toolkit), or add its include folder (-I DIR)"
    )


# --------------------------------------------------------------------------------------------
# Reading nvcc's output


_EDG_LOC_RE = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<rest>(?:catastrophic )?error|warning|remark|note)", re.M
)
_NOISE_RE = re.compile(r"^(ptxas info\s*:.*|\s+\d+ bytes stack frame.*|\s*$)")
_ERROR_RE = re.compile(
    r"^(?P<file>.+?):(?P<line>\d+):(?:\d+:)? (?:catastrophic |fatal )?error(?: #[\w-]+)?: "
    r"(?P<msg>.*)$",
    re.M,
)
_PTXAS_ERROR_RE = re.compile(r"^ptxas (?:fatal|error)\s*: (?P<msg>.*)$", re.M)
_MISSING_HEADER_RES = (
    re.compile(
        r"^(?P<file>.+?):(?P<line>\d+):(?:\d+:)? fatal error: (?P<header>[^\n]+?): "
        r"No such file or directory",
        re.M,
    ),
    re.compile(
        r"^(?P<file>.+?):(?P<line>\d+): catastrophic error: cannot open source file "
        r'"(?P<header>[^"\n]+)"',
        re.M,
    ),
)
_TEXREF_RE = re.compile(
    r"^(?P<file>.+?):(?P<line>\d+): error(?: #[\w-]+)?: (?:(?P<kind>texture|surface) is not a "
    r'template|identifier "(?P<api>texture|surface|cuda(?:Bind|Unbind)\w*|'
    r'cudaGet(?:Texture|Surface)Reference\w*)" is undefined)',
    re.M,
)


def readable_log(log: str) -> str:
    """nvcc's output without ptxas's report, in ``file:line: error`` style."""
    lines = [ln for ln in log.splitlines() if not _NOISE_RE.match(ln)]
    text = _EDG_LOC_RE.sub(lambda m: f"{m['file']}:{m['line']}: {m['rest']}", "\n".join(lines))
    return text.strip()


# The first line of one diagnostic, and the file it is located in: EDG's ``file(12): error``,
# GCC's ``file:12:5: error`` (and its context lines ``In file included from file:3:``,
# ``from file:3,``, ``file: In function ...``). The lines after it, up to the next such line,
# are its own (the quoted source line, the caret, notes).
_DIAG_HEAD_RE = re.compile(
    r"^(?:"
    r"(?P<edg>.+?)\(\d+\): (?:catastrophic error|error|warning|remark|note)"
    r"|(?P<gcc>[^\s].*?):\d+(?::\d+)?: (?:fatal error|error|warning|note)"
    r"|In file included from (?P<inc>.+?):\d+[:,]"
    r"|\s+from (?P<from>.+?):\d+[:,]"
    r"|(?P<ctx>[^\s].*?): (?:In |At global scope)"
    r")"
)
_DIAG_END_RE = re.compile(
    r'^\d+ errors? detected in the compilation of "|^ptxas (?:info|warning|error|fatal)\s*:'
    r"|^nvcc (?:fatal|error|warning)\s*:"
)


_DISK_FULL_RE = re.compile(
    r"(?:(?:writing output to|write to|writing|to) (?P<path>/[^\s:]+):? ?)?"
    r"(?P<why>No space left on device|Disk quota exceeded)"
)


def _mount_of(path: str) -> str:
    """The mount point of the file system holding ``path`` (or its nearest existing parent)."""
    here = Path(path)
    while not here.exists() and here.parent != here:
        here = here.parent
    while not os.path.ismount(here) and here.parent != here:
        here = here.parent
    return str(here)


def hide_diagnostics(log: str, shown: Callable[[str], bool]) -> str:
    """``log`` without the diagnostics located in a file ``shown`` refuses, each left out whole
    (its message, the source line it quotes, its caret and notes); a last line says how many."""
    return _hidden(log, shown)[0]


def _hidden(log: str, shown: Callable[[str], bool]) -> tuple[str, str]:
    """:func:`hide_diagnostics`'s text and its note on what it left out ("" when nothing)."""
    out: list[str] = []
    hidden = 0
    keep = True
    for line in log.splitlines():
        m = _DIAG_HEAD_RE.match(line)
        if m is not None:
            file = next(v for v in m.groupdict().values() if v is not None).strip('"')
            keep = shown(file)
            hidden += not keep
        elif _DIAG_END_RE.match(line):
            keep = True
        if keep:
            out.append(line)
    note = (
        f"{counted(hidden, 'diagnostic')} in files that are not the kernel's sources: not shown"
        if hidden
        else ""
    )
    if note:
        out.append(f"({note})")
    return "\n".join(out), note


def compile_error(
    src: Path,
    arch: str,
    returncode: int,
    log: str,
    tc: Toolchain | None = None,
    shown: Callable[[str], bool] | None = None,
) -> GpuAdviseError:
    """The error for a failed nvcc run on ``src`` (``log``: nvcc's output). ``shown``: whether
    a diagnostic located in a file may be shown (:func:`hide_diagnostics`; default: all)."""
    hidden_note = ""
    if shown is not None:
        log, note = _hidden(log, shown)
        if note:
            hidden_note = "; " + note  # the one line says it too (gate shows no more)
    if m := _DISK_FULL_RE.search(log):
        where = f"the disk mounted at {_mount_of(m['path'])}" if m["path"] else "a disk nvcc uses"
        return ToolchainError(
            f"{where} is full: nvcc could not write its files for {src.name} ({m['why'].strip()})",
            "free space there, or set GPUADVISE_CACHE_DIR (TMPDIR with --no-cache) to a folder "
            "on another disk",
        )
    if "cicc" in log and ("not found" in log or "No such file" in log):
        return ToolchainError(f"nvcc cannot run its front end (cicc): {log.strip()}", INSTALL_HINT)
    text = readable_log(log)
    for rx in _MISSING_HEADER_RES:
        if m := rx.search(text):
            header = m["header"].strip()
            return CompileError(
                f"{m['file']}:{m['line']}: cannot find the header {header} (#include)",
                missing_header_hint(header, tc),
            )
    if m := _TEXREF_RE.search(text):
        api = m["api"] or ""
        surface = m["kind"] == "surface" or api == "surface" or "Surface" in api
        what, kind = ("surface", "Surface") if surface else ("texture", "Texture")
        read = "surf2Dread(&value, obj, x_bytes, y)" if surface else "tex1Dfetch<float>(obj, i)"
        return CompileError(
            f"{m['file']}:{m['line']}: {what} references ({what}<...> variables and the "
            "functions that bind them) were removed in CUDA 12",
            f"use {what} objects: create a cuda{kind}Object_t with cudaCreate{kind}Object, "
            f"pass it to the kernel and read it with {read}",
        )
    errors = len(_ERROR_RE.findall(text))
    first = first_error(text, prefer=src)
    what = f"{errors} error{'s' if errors != 1 else ''}" if errors else f"nvcc exit {returncode}"
    return CompileError(
        f"{src} does not compile for {arch} ({what}"
        + (f"; the first: {first}" if first else "")
        + f"{hidden_note})",
        "fix the errors nvcc reports below",
        details=log.strip("\n") or None,
    )


def first_error(text: str, prefer: Path | None = None, avoid: Path | None = None) -> str | None:
    """nvcc's first error as ``file:line: message`` (file by name), or ptxas's first error.

    ``prefer``: an error located in this file comes first; ``avoid``: one in this file (a
    generated one) comes last and is shown without its location. ``text``: a
    :func:`readable_log`.
    """
    errors = [(m["file"], m["line"], m["msg"].strip()) for m in _ERROR_RE.finditer(text)]

    def rank(item: tuple[str, str, str]) -> int:
        file = item[0]
        if prefer is not None and _same(file, prefer):
            return 0
        if avoid is not None and _same(file, avoid):
            return 2
        return 1

    if errors:
        file, line, msg = min(errors, key=rank)
        return msg if rank((file, line, msg)) == 2 else f"{Path(file).name}:{line}: {msg}"
    if m := _PTXAS_ERROR_RE.search(text):
        return f"ptxas: {m['msg'].strip()}"
    return None


def _same(file: str, path: Path) -> bool:
    return file == str(path) or Path(file).name == path.name and Path(file).resolve() == path


_MANGLED_RE = re.compile(r"'(_Z\w+)'")


def instantiation_error(
    exc: CompileError,
    src: Path,
    wrapper: Path,
    missing: Sequence[str],
    templates: Sequence[str],
    demangled: Mapping[str, str] | None = None,
) -> KernelNotFoundError:
    """Why the kernels ``missing`` could not be instantiated from ``src``, in one line.

    ``exc``: the error compiling the generated ``wrapper``; ``templates``: the kernels of the
    file, closest to the name first, for the hint; ``demangled``: mangled -> demangled names
    (ptxas names kernels by their symbol).
    """
    text = readable_log(exc.details) if exc.details else exc.message  # nvcc's output verbatim
    detail = first_error(text, prefer=src, avoid=wrapper)
    if detail is None:
        detail = next((ln.strip() for ln in text.splitlines()[1:] if ln.strip()), "nvcc failed")
    for mangled, shown in (demangled or {}).items():
        detail = detail.replace(f"'{mangled}'", f"'{display_name(shown)}'")
    asked = ", ".join(missing)
    in_user_file = detail.startswith(f"{src.name}:")
    if in_user_file:
        hint = f"the template rejects these arguments: choose others that {src.name} accepts"
    elif detail.startswith("ptxas:"):
        hint = "choose template arguments whose resources fit the GPU"
    else:
        hint = "check the template's name and arguments (qualify it with its namespace)"
        if templates:
            listing = available_hint(missing[0] if missing else "", templates)
            hint += "; " + listing.replace("available:", "kernels in the file:")
    return KernelNotFoundError(f"cannot instantiate kernel {asked} from {src.name}: {detail}", hint)


def available_hint(name: str, listing: Sequence[str]) -> str:
    """``did you mean 'X'? available: X, Y`` for the kernels ``listing`` (closest to ``name``
    first), the question only when X is close to it (:func:`closeness` >= 0.6)."""
    hint = f"available: {', '.join(listing)}"
    if listing and closeness(name, listing[0]) >= 0.6:
        hint = f"did you mean {listing[0]!r}? {hint}"
    return hint


def closeness(name: str, shown: str) -> float:
    """How close ``name`` is to the kernel ``shown`` (0..1), with or without its namespaces and
    template arguments."""
    want = norm(name)
    last = norm(split_qualified(shown)[-1])
    forms = {norm(shown), last, base_name(last)}
    return max(difflib.SequenceMatcher(None, want, c).ratio() for c in forms)


def mangled_names(text: str) -> list[str]:
    """Symbols ptxas quotes in ``text`` (``'_Z6reduceILi7ELb1EEvPf'``)."""
    return list(dict.fromkeys(_MANGLED_RE.findall(text)))

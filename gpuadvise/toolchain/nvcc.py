"""Find the CUDA toolchain, compile a ``.cu`` file to cubin + PTX, read per-kernel resources.

This is one of the three modules that touch the outside world (it runs nvcc). Everything it
returns is a frozen dataclass that round-trips through JSON (``to_dict``/``from_dict``).

Finding the toolchain (:func:`find_toolchain`)
    nvcc is looked for, in order: the explicit argument (``--nvcc``), ``$GPUADVISE_NVCC``,
    ``$CUDA_HOME/bin`` then ``$CUDA_PATH/bin``, ``PATH``, the pip wheels of the ``toolkit`` extra
    (through ``cuda.pathfinder``, else ``site-packages/nvidia/cu13/bin``), and last
    ``/usr/local/cuda/bin``. An explicit nvcc that does not exist is an error, never silently
    replaced. The environment variables are read directly, not through
    ``cuda.pathfinder.get_cuda_path_or_home`` (which caches them for the life of the process).
    nvcc is then asked (``--dryrun``, no compilation) where it really lives, so wrapper scripts
    and symlinks are seen through: ptxas is nvcc's own, nvdisasm/cuobjdump/cu++filt are taken
    from nvcc's real bin directory when there, else from the other sources in the same order;
    the host compiler is the one nvcc will call; the front end ``cicc`` is checked to exist (the
    wheel nvcc needs the ``nvidia-nvvm`` wheel, and its ``nvcc.profile`` finds it at
    ``../nvvm/bin``: no environment has to be set up for the wheels).

Per-kernel resources (:class:`KernelResources`): one source, ptxas's own ``-v`` report
    nvcc always runs with ``-Xptxas -v``; the report is parsed per entry function. It is the only
    place that states spill stores/loads, and it gives registers, the stack frame
    (``local_bytes``), static shared memory (``static_smem_bytes``: the user's ``__shared__``
    bytes, without the 1 KB the cubin reserves on sm_80+) and the number of named barriers
    (``used N barriers``: highest barrier id + 1; ``bar.sync 3`` counts 4). Where an older ptxas
    prints no barrier count, ``barriers`` is 1 if the kernel's PTX uses ``bar``/``barrier``,
    else 0. ptxas 13 no longer prints ``cmem[0]``, so ``const_bytes`` alone is read from the cubin:
    the size of the kernel's ``.nv.constant0.<kernel>`` ELF section (constant bank 0: the
    parameters plus the driver's area, what ``cuobjdump -res-usage`` calls ``CONSTANT[0]``).
    The cubin's ``.nv.info`` attributes were not chosen: they carry no spill counts.

Compiling (:func:`compile_source`)
    One nvcc run: ``-cubin -arch=sm_XX -lineinfo -Xptxas -v -MD -keep``; the kept ``.ptx`` is the
    exact PTX ptxas compiled, ``-MD`` lists every included file. Compile errors raise
    :class:`CompileError` holding nvcc's diagnostics, with EDG's ``file(line): error`` rewritten
    as ``file:line: error``.

Cache (``$GPUADVISE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuadvise``, else ``~/.cache/gpuadvise``)
    An entry's key is the SHA-256 of the toolchain version, the arch, the nvcc flags (and
    ``$NVCC_PREPEND_FLAGS``/``$NVCC_APPEND_FLAGS``/``$NVCC_CCBIN``) and the path and bytes of the
    source and of every file it includes (the paths matter: line info embeds
    them). Finding the key must not cost an nvcc run, so a small manifest keyed by (source path,
    source bytes, flags, version) remembers the included files and their hashes from the last
    compile; a lookup re-hashes them (about 10 ms for 200 headers) and, if all match, loads the
    entry. Any change runs nvcc again. Like ccache's direct mode, a header newly created earlier on
    the include path is not noticed while the old one is unchanged. Files are written to a temp
    name and ``os.replace``-d; ``meta.json`` is written last and marks a complete entry.
    ``use_cache=False`` neither reads nor writes the cache: it compiles into a fresh temporary
    directory, which then holds the returned cubin.

Kernel names and templates (:func:`select_kernel`)
    Names are demangled with ``cu++filt`` or ``c++filt`` (a small built-in fallback handles plain
    names when neither exists) and shown without return type and parameters:
    ``ns::reduce<256, true>``. A requested name with template arguments that the file does not
    instantiate is instantiated by gpuadvise: ``compile_source(..., kernels=[name])`` compiles a
    generated file that ``#include``-s the user's file and takes the address of the
    specialization, which makes nvcc instantiate it; line info still points into the user's file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuadvise.errors import (
    CompileError,
    GpuAdviseError,
    KernelNotFoundError,
    ToolchainError,
    UsageError,
)
from gpuadvise.fileio import write_atomic

__all__ = [
    "CompileOptions",
    "CompiledModule",
    "KernelInfo",
    "KernelResources",
    "Toolchain",
    "cache_root",
    "compile_source",
    "demangle",
    "find_toolchain",
    "select_kernel",
]

CACHE_FORMAT = 1
"""Bumped whenever the cache layout or ``meta.json`` changes; part of every key."""

_INSTALL_HINT = (
    'pip install "gpuadvise[toolkit]" for the CUDA compiler wheels, '
    "or set CUDA_HOME (or pass --nvcc) to a CUDA toolkit"
)
_RUN_TIMEOUT_S = 900.0
DEFAULT_CUDA_ROOT = Path("/usr/local/cuda")
"""Where the CUDA installer puts the toolkit; the last place nvcc is looked for."""


# --------------------------------------------------------------------------------------------
# The toolchain


@dataclass(frozen=True)
class Toolchain:
    """The CUDA tools gpuadvise runs.

    ``nvcc`` is the path that was found (possibly a wrapper script); ``bin_dir`` is where nvcc
    really lives (its ``_HERE_``). ``nvdisasm`` and ``cuobjdump`` may be missing; disassembly
    needs one of them. ``host_compiler`` is the C++ compiler nvcc will call (None: not found).
    ``origin`` says which search step found nvcc.
    """

    nvcc: Path
    ptxas: Path
    nvdisasm: Path | None
    cuobjdump: Path | None
    version: str
    include_dir: Path | None
    bin_dir: Path
    host_compiler: Path | None = None
    demangler: Path | None = None
    origin: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in _fields(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Toolchain:
        def path(key: str) -> Path | None:
            value = data.get(key)
            return Path(value) if value else None

        return cls(
            nvcc=Path(data["nvcc"]),
            ptxas=Path(data["ptxas"]),
            nvdisasm=path("nvdisasm"),
            cuobjdump=path("cuobjdump"),
            version=data["version"],
            include_dir=path("include_dir"),
            bin_dir=Path(data["bin_dir"]),
            host_compiler=path("host_compiler"),
            demangler=path("demangler"),
            origin=data.get("origin", ""),
        )


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def find_toolchain(nvcc: str | os.PathLike[str] | None = None) -> Toolchain:
    """Find nvcc and its companions; see the module docstring for the search order.

    Raises :class:`ToolchainError` when no nvcc is found, an explicit one does not exist or
    does not run, or its front end (cicc) is missing.
    """
    path, origin = _locate_nvcc(nvcc)
    env_key = tuple(
        os.environ.get(k, "")
        for k in ("PATH", "CUDA_HOME", "CUDA_PATH", "NVCC_CCBIN", "NVCC_PREPEND_FLAGS")
    )
    try:
        stat = path.stat()
    except OSError as exc:
        raise ToolchainError(f"cannot read nvcc at {path}: {exc}", _INSTALL_HINT) from None
    return _probe_toolchain(str(path), origin, stat.st_mtime_ns, env_key)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _env_cuda_roots() -> list[tuple[str, Path]]:
    roots = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(var)
        if value:
            roots.append((var, Path(value)))
    return roots


def _wheel_tool(name: str) -> Path | None:
    """A tool from the NVIDIA pip wheels (``nvidia/cu13/bin``), through cuda.pathfinder."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        found = find_nvidia_binary_utility(name)
        if found:
            return Path(found)
    except Exception:  # pathfinder missing or failing: fall back to the known layout
        pass
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for base in list(spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13/bin", "cuda_nvcc/bin", "cu12/bin"):
            candidate = Path(base) / sub / name
            if _executable(candidate):
                return candidate
    return None


def _locate_nvcc(explicit: str | os.PathLike[str] | None) -> tuple[Path, str]:
    for value, origin in (
        (explicit, "--nvcc"),
        (os.environ.get("GPUADVISE_NVCC"), "$GPUADVISE_NVCC"),
    ):
        if not value:
            continue
        candidate = Path(value).expanduser()
        if candidate.is_dir():
            for sub in ("nvcc", "bin/nvcc"):
                if _executable(candidate / sub):
                    return (candidate / sub).absolute(), origin
        elif _executable(candidate):
            return candidate.absolute(), origin
        elif os.sep not in str(value) and (which := shutil.which(str(value))):
            return Path(which), origin
        raise ToolchainError(
            f"nvcc given by {origin} ({value}) does not exist or is not executable",
            "point it at an nvcc binary or a CUDA toolkit directory, or leave it unset",
        )
    for var, root in _env_cuda_roots():
        if _executable(root / "bin" / "nvcc"):
            return root / "bin" / "nvcc", f"${var}"
    which = shutil.which("nvcc")
    if which:
        return Path(which), "PATH"
    wheel = _wheel_tool("nvcc")
    if wheel is not None:
        return wheel, "wheel"
    default = DEFAULT_CUDA_ROOT / "bin" / "nvcc"
    if _executable(default):
        return default, "/usr/local/cuda"
    raise ToolchainError("no CUDA compiler (nvcc) found", _INSTALL_HINT)


def _run(cmd: Sequence[str], what: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(cmd),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=kw.pop("timeout", _RUN_TIMEOUT_S),
            **kw,
        )
    except FileNotFoundError:
        raise ToolchainError(f"{what} not found at {cmd[0]}", _INSTALL_HINT) from None
    except PermissionError:
        raise ToolchainError(f"{what} at {cmd[0]} is not executable", _INSTALL_HINT) from None
    except subprocess.TimeoutExpired:
        raise ToolchainError(
            f"{what} did not finish in {kw.get('timeout', _RUN_TIMEOUT_S):.0f} s", "retry"
        ) from None
    except OSError as exc:
        raise ToolchainError(f"cannot run {what} ({cmd[0]}): {exc}", _INSTALL_HINT) from None


_VERSION_RE = re.compile(r"release\s+(\d+\.\d+)(?:,\s*V(\d+\.\d+(?:\.\d+)?))?")
_DRYRUN_VAR_RE = re.compile(r"^#\$ (_HERE_|TOP|CICC_PATH|INCLUDES)=(.*)$", re.M)


@functools.lru_cache(maxsize=16)
def _probe_toolchain(nvcc: str, origin: str, _mtime_ns: int, _env: tuple[str, ...]) -> Toolchain:
    nvcc_path = Path(nvcc)
    proc = _run([nvcc, "--version"], "nvcc", timeout=60)
    m = _VERSION_RE.search(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not m:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise ToolchainError(
            f"nvcc at {nvcc} does not run: {detail[-1] if detail else 'no output'}",
            _INSTALL_HINT,
        )
    version = m.group(2) or m.group(1)

    # Ask nvcc where it lives and what it will call; --dryrun compiles nothing.
    with tempfile.TemporaryDirectory(prefix="gpuadvise-probe-") as tmp:
        dry = _run(
            [nvcc, "--dryrun", "-cubin", "-arch=sm_90", "-o", f"{tmp}/p.cubin", f"{tmp}/p.cu"],
            "nvcc",
            timeout=60,
            cwd=tmp,
        )
    text = dry.stdout + dry.stderr
    found = {k: v.strip() for k, v in _DRYRUN_VAR_RE.findall(text)}
    bin_dir = Path(found["_HERE_"]) if "_HERE_" in found else nvcc_path.resolve().parent
    bin_dir = Path(os.path.normpath(bin_dir))

    cicc_dir = found.get("CICC_PATH")
    if cicc_dir and not (Path(cicc_dir) / "cicc").exists():
        hint = (
            f"pip install nvidia-nvvm=={version}"
            if "site-packages" in str(bin_dir)
            else "reinstall the CUDA toolkit, or " + _INSTALL_HINT
        )
        raise ToolchainError(
            f"nvcc at {nvcc} has no front end: {os.path.normpath(cicc_dir)}/cicc is missing", hint
        )

    ptxas = bin_dir / "ptxas"
    if not _executable(ptxas):
        other = _find_tool("ptxas", bin_dir)
        if other is None:
            raise ToolchainError(f"ptxas not found next to nvcc ({bin_dir})", _INSTALL_HINT)
        ptxas = other

    include_dir = None
    inc = re.search(r'-I"?([^"\s]+)', found.get("INCLUDES", ""))
    if inc and (Path(inc.group(1)) / "cuda_runtime.h").exists():
        include_dir = Path(os.path.normpath(inc.group(1)))
    elif (bin_dir.parent / "include" / "cuda_runtime.h").exists():
        include_dir = bin_dir.parent / "include"
    else:
        try:
            from cuda.pathfinder import find_nvidia_header_directory

            hdr = find_nvidia_header_directory("cudart")
            include_dir = Path(hdr) if hdr else None
        except Exception:
            include_dir = None

    host = None
    for line in text.splitlines():
        if line.startswith("#$ ") and " -E " in line and "-D__CUDA_ARCH__" in line:
            token = line[3:].split()[0].strip('"')
            host_path = shutil.which(token)
            host = Path(host_path) if host_path else None
            break
    else:  # dry run not understood: what nvcc calls by default
        default = shutil.which("gcc")
        host = Path(default) if default else None

    demangler_path = bin_dir / "cu++filt"
    demangler = demangler_path if _executable(demangler_path) else None
    if demangler is None and (cxxfilt := shutil.which("c++filt")):
        demangler = Path(cxxfilt)

    return Toolchain(
        nvcc=nvcc_path,
        ptxas=ptxas,
        nvdisasm=_find_tool("nvdisasm", bin_dir),
        cuobjdump=_find_tool("cuobjdump", bin_dir),
        version=version,
        include_dir=include_dir,
        bin_dir=bin_dir,
        host_compiler=host,
        demangler=demangler,
        origin=origin,
    )


def _find_tool(name: str, bin_dir: Path) -> Path | None:
    """``name`` next to nvcc, else from $CUDA_HOME/$CUDA_PATH, PATH, the wheels, /usr/local/cuda."""
    candidates = [bin_dir / name] + [root / "bin" / name for _, root in _env_cuda_roots()]
    for candidate in candidates:
        if _executable(candidate):
            return candidate
    which = shutil.which(name)
    if which:
        return Path(which)
    wheel = _wheel_tool(name)
    if wheel is not None:
        return wheel
    default = DEFAULT_CUDA_ROOT / "bin" / name
    return default if _executable(default) else None


# --------------------------------------------------------------------------------------------
# Options, results


_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(\d+)([a-z]?)$")
_DEFINE_RE = re.compile(r"^[A-Za-z_]\w*(?:\([^)]*\))?(?:=.*)?$", re.S)
_RESERVED_FLAGS = (
    "-o",
    "-c",
    "-cubin",
    "-ptx",
    "-fatbin",
    "-arch",
    "--gpu-architecture",
    "-gencode",
    "--generate-code",
    "-code",
    "--gpu-code",
    "-rdc",
    "--relocatable-device-code",
    "-dc",
    "-E",
    "-M",
    "-MD",
    "-MF",
)


def normalize_arch(arch: str | int) -> str:
    """``sm_90``, ``90``, ``9.0``, ``compute_90``, ``sm_90a`` -> ``sm_90`` / ``sm_90a``."""
    text = str(arch).strip().lower()
    if re.fullmatch(r"\d+\.\d", text):
        text = text.replace(".", "")
    m = _ARCH_RE.match(text)
    if not m:
        raise UsageError(
            f"unknown GPU architecture {arch!r}", "give one such as sm_90, sm_80 or 9.0"
        )
    return f"sm_{m.group(1)}{m.group(2)}"


def _tuple(value: str | Iterable[Any] | None) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, str | os.PathLike):
        return (value,)
    return tuple(value)


@dataclass(frozen=True)
class CompileOptions:
    """How to compile. Sequences are stored as tuples; relative include dirs are made absolute.

    ``defines``: ``"N=256"`` or ``"USE_X"``. ``std``: ``"c++17"`` (or ``"17"``). ``xptxas``:
    options for ptxas (``"-O3"``, ``"--warn-on-spills"``). ``extra_flags``: anything else for
    nvcc, except the flags gpuadvise sets itself (arch, output kind, output file, -rdc).
    """

    arch: str = "sm_90"
    include_dirs: Sequence[str | os.PathLike[str]] = ()
    defines: Sequence[str] = ()
    std: str | None = None
    use_fast_math: bool = False
    xptxas: Sequence[str] = ()
    extra_flags: Sequence[str] = ()
    maxrregcount: int | None = None
    use_cache: bool = True
    cache_dir: Path | None = None

    @classmethod
    def from_nvcc_flags(cls, arch: str, flags: Sequence[str]) -> CompileOptions:
        """The options whose :meth:`nvcc_flags` are ``flags`` (a compiled module's flags): how a
        rule rebuilds a variant of the kernel exactly as the analysis built it."""
        flags = list(flags)
        inc: list[str] = []
        defs: list[str] = []
        xptxas: list[str] = []
        extra: list[str] = []
        std: str | None = None
        fast = False
        maxrreg: int | None = None
        i = 0
        while i < len(flags):
            f = flags[i]
            nxt = flags[i + 1] if i + 1 < len(flags) else None
            if f.startswith("-arch=") or f == "-lineinfo":
                pass
            elif f == "-Xptxas" and nxt is not None:
                if nxt != "-v":
                    xptxas.append(nxt)
                i += 1
            elif f.startswith("-std="):
                std = f.split("=", 1)[1]
            elif f == "-use_fast_math":
                fast = True
            elif f.startswith("-maxrregcount="):
                maxrreg = int(f.split("=", 1)[1])
            elif f.startswith("-I") and len(f) > 2:
                inc.append(f[2:])
            elif f.startswith("-D") and len(f) > 2:
                defs.append(f[2:])
            elif f in ("-ccbin", "--compiler-bindir") and nxt is not None:
                extra += [f, nxt]
                i += 1
            else:
                extra.append(f)
            i += 1
        return cls(
            arch=arch,
            include_dirs=tuple(inc),
            defines=tuple(defs),
            std=std,
            use_fast_math=fast,
            xptxas=tuple(xptxas),
            extra_flags=tuple(extra),
            maxrregcount=maxrreg,
        )

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "arch", normalize_arch(self.arch))
        set_(
            self,
            "include_dirs",
            tuple(str(Path(d).expanduser().absolute()) for d in _tuple(self.include_dirs)),
        )
        set_(self, "defines", tuple(str(d) for d in _tuple(self.defines)))
        set_(self, "xptxas", tuple(str(x) for x in _tuple(self.xptxas)))
        set_(self, "extra_flags", tuple(str(x) for x in _tuple(self.extra_flags)))
        if self.cache_dir is not None:
            set_(self, "cache_dir", Path(self.cache_dir).expanduser())
        for d in self.defines:
            if not _DEFINE_RE.match(d):
                raise UsageError(f"bad define {d!r}", "write NAME or NAME=VALUE")
        if self.std is not None:
            std = str(self.std).strip()
            set_(self, "std", std if std.startswith(("c++", "gnu++")) else f"c++{std}")
        if self.maxrregcount is not None and not 1 <= int(self.maxrregcount) <= 255:
            raise UsageError(
                f"maxrregcount {self.maxrregcount} is out of range", "give 1 to 255 registers"
            )
        for flag in self.extra_flags:
            name = flag.split("=", 1)[0]
            if name in _RESERVED_FLAGS:
                raise UsageError(
                    f"nvcc flag {flag!r} is set by gpuadvise itself",
                    "remove it; choose the GPU with --arch/--gpu",
                )

    def nvcc_flags(self) -> tuple[str, ...]:
        """The nvcc flags these options mean (no input, output or mode flags)."""
        flags = [f"-arch={self.arch}", "-lineinfo", "-Xptxas", "-v"]
        if self.std:
            flags.append(f"-std={self.std}")
        if self.use_fast_math:
            flags.append("-use_fast_math")
        if self.maxrregcount is not None:
            flags.append(f"-maxrregcount={int(self.maxrregcount)}")
        flags += [f"-I{d}" for d in self.include_dirs]
        flags += [f"-D{d}" for d in self.defines]
        for x in self.xptxas:
            flags += ["-Xptxas", x]
        flags += list(self.extra_flags)
        return tuple(flags)


@dataclass(frozen=True)
class KernelResources:
    """Per-thread and per-block resources of one kernel, from ptxas ``-v`` (see module doc)."""

    registers: int
    static_smem_bytes: int
    local_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    const_bytes: int
    barriers: int


@dataclass(frozen=True)
class KernelInfo:
    """A kernel of a compiled module.

    ``name``: demangled, without return type and parameters (``ns::reduce<256, true>``);
    ``signature``: the full demangled name with parameter types; ``mangled``: the symbol.
    """

    name: str
    mangled: str
    signature: str
    resources: KernelResources

    @property
    def short_name(self) -> str:
        """``name`` without namespaces: ``reduce<256, true>``."""
        return _split_qualified(self.name)[-1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mangled": self.mangled,
            "signature": self.signature,
            "resources": _fields(self.resources),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelInfo:
        return cls(
            name=data["name"],
            mangled=data["mangled"],
            signature=data["signature"],
            resources=KernelResources(**data["resources"]),
        )


@dataclass(frozen=True)
class CompiledModule:
    """The result of :func:`compile_source`.

    ``cubin_path`` lies in the cache (or a temporary directory with ``use_cache=False``);
    ``ptx`` is the PTX ptxas compiled. ``flags`` are the nvcc flags used. ``compile_time_s`` is
    how long nvcc took (for a cache hit: the original compile; see ``from_cache``).
    ``dependencies`` lists the source and every file it includes. ``aliases`` maps names asked
    for in ``compile_source(kernels=...)`` to the mangled name of the instance compiled for
    them; ``wrapper_path`` is the generated file that instantiated them (None if none was needed).
    ``log`` keeps nvcc's warnings and ptxas's report.
    """

    source: Path
    arch: str
    cubin_path: Path
    ptx: str
    kernels: tuple[KernelInfo, ...]
    toolchain_version: str
    flags: tuple[str, ...]
    compile_time_s: float
    from_cache: bool = False
    dependencies: tuple[Path, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    wrapper_path: Path | None = None
    log: str = ""

    def kernel(self, name: str | None = None) -> KernelInfo:
        """Shorthand for :func:`select_kernel`."""
        return select_kernel(self, name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "arch": self.arch,
            "cubin_path": str(self.cubin_path),
            "ptx": self.ptx,
            "kernels": [k.to_dict() for k in self.kernels],
            "toolchain_version": self.toolchain_version,
            "flags": list(self.flags),
            "compile_time_s": self.compile_time_s,
            "from_cache": self.from_cache,
            "dependencies": [str(p) for p in self.dependencies],
            "aliases": [list(a) for a in self.aliases],
            "wrapper_path": str(self.wrapper_path) if self.wrapper_path else None,
            "log": self.log,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompiledModule:
        return cls(
            source=Path(data["source"]),
            arch=data["arch"],
            cubin_path=Path(data["cubin_path"]),
            ptx=data["ptx"],
            kernels=tuple(KernelInfo.from_dict(k) for k in data["kernels"]),
            toolchain_version=data["toolchain_version"],
            flags=tuple(data["flags"]),
            compile_time_s=float(data["compile_time_s"]),
            from_cache=bool(data.get("from_cache", False)),
            dependencies=tuple(Path(p) for p in data.get("dependencies", ())),
            aliases=tuple((a[0], a[1]) for a in data.get("aliases", ())),
            wrapper_path=Path(data["wrapper_path"]) if data.get("wrapper_path") else None,
            log=data.get("log", ""),
        )


# --------------------------------------------------------------------------------------------
# Compiling


def cache_root(options: CompileOptions | None = None) -> Path:
    """The cache directory: ``options.cache_dir``, ``$GPUADVISE_CACHE_DIR``, XDG, ``~/.cache``."""
    if options is not None and options.cache_dir is not None:
        return options.cache_dir
    env = os.environ.get("GPUADVISE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "gpuadvise"


def compile_source(
    source: str | os.PathLike[str],
    options: CompileOptions | None = None,
    toolchain: Toolchain | None = None,
    kernels: Sequence[str] | None = None,
) -> CompiledModule:
    """Compile ``source`` to cubin + PTX for ``options.arch`` and read every kernel's resources.

    ``kernels``: names the caller will select; any with template arguments (``reduce<256,
    true>``) that the file does not instantiate is instantiated through a generated wrapper file
    (see the module docstring), and the returned module is the wrapper's (it holds every kernel
    of the file plus the new instances). Raises :class:`CompileError` with nvcc's diagnostics,
    :class:`KernelNotFoundError` when a requested template cannot be instantiated, and
    :class:`ToolchainError` when the tools are missing.
    """
    options = options or CompileOptions()
    src = Path(source).expanduser()
    if not src.is_file():
        raise UsageError(f"source file {str(source)!r} not found", "check the path")
    src = src.resolve()
    tc = toolchain or find_toolchain()
    module = _compile(src, options, tc)
    wanted = [k for k in (kernels or ()) if k]
    missing = [
        k for k in wanted if _has_template_args(k) and not _matches(module, k, aliases=False)
    ]
    if not missing:
        return module
    return _instantiate(module, src, missing, options, tc)


def _compile(src: Path, options: CompileOptions, tc: Toolchain) -> CompiledModule:
    flags = _effective_flags(options, tc)
    if not options.use_cache:
        out_dir = Path(tempfile.mkdtemp(prefix="gpuadvise-"))
        try:
            return _run_nvcc(src, flags, options, tc, out_dir, out_dir / "work")
        except BaseException:
            shutil.rmtree(out_dir, ignore_errors=True)
            raise

    root = cache_root(options)
    src_bytes = src.read_bytes()
    manifest_key = _sha(
        json.dumps(
            [CACHE_FORMAT, tc.version, options.arch, flags, _nvcc_env(), str(src), _sha(src_bytes)]
        )
    )
    manifest = root / "manifests" / manifest_key[:2] / f"{manifest_key}.json"
    hit = _lookup(root, manifest)
    if hit is not None:
        return hit
    try:
        (root / "tmp").mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="build-", dir=root / "tmp"))
    except OSError as exc:
        raise ToolchainError(
            f"cannot write the compile cache at {root}: {exc}",
            "set GPUADVISE_CACHE_DIR to a writable directory, or use --no-cache",
        ) from None
    try:
        staging = work / "out"
        staging.mkdir()
        module = _run_nvcc(src, flags, options, tc, staging, work / "nvcc")
        return _store(root, manifest, module, staging)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _effective_flags(options: CompileOptions, tc: Toolchain) -> tuple[str, ...]:
    flags = list(options.nvcc_flags())
    has_ccbin = any(
        f in ("-ccbin", "--compiler-bindir") or f.startswith(("-ccbin=", "--compiler-bindir="))
        for f in flags
    )
    if not has_ccbin and not os.environ.get("NVCC_CCBIN") and tc.host_compiler is None:
        alt = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
        if alt is None:
            raise ToolchainError(
                "no host C++ compiler found: nvcc needs one (gcc/g++) even for device code",
                "install g++ (apt install g++), or pass -ccbin /path/to/g++ in the nvcc flags",
            )
        flags += ["-ccbin", alt]
    return tuple(flags)


def _nvcc_env() -> list[str]:
    """The environment variables that change what nvcc does; part of every cache key."""
    names = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")
    return [os.environ.get(v, "") for v in names]


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _file_sha(path: Path) -> str | None:
    try:
        return _sha(path.read_bytes())
    except OSError:
        return None


def _lookup(root: Path, manifest: Path) -> CompiledModule | None:
    try:
        data = json.loads(manifest.read_text())
        for path, digest in data["deps"]:
            if _file_sha(Path(path)) != digest:
                return None
        entry = root / "entries" / data["entry"][:2] / data["entry"]
        meta = json.loads((entry / "meta.json").read_text())
        if meta.get("format") != CACHE_FORMAT:
            return None
        module = CompiledModule.from_dict(meta["module"])
        cubin = entry / "module.cubin"
        if not cubin.is_file():
            return None
        ptx = (entry / "module.ptx").read_text()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return dataclasses.replace(module, cubin_path=cubin, ptx=ptx, from_cache=True)


def _store(root: Path, manifest: Path, module: CompiledModule, staging: Path) -> CompiledModule:
    deps = [(str(p), _file_sha(p)) for p in module.dependencies]
    entry_key = _sha(
        json.dumps(
            [CACHE_FORMAT, module.toolchain_version, module.arch, module.flags, _nvcc_env(), deps]
        )
    )
    entry = root / "entries" / entry_key[:2] / entry_key
    try:
        entry.mkdir(parents=True, exist_ok=True)
        cubin = entry / "module.cubin"
        write_atomic(cubin, (staging / "module.cubin").read_bytes())
        write_atomic(entry / "module.ptx", module.ptx)
        stored = dataclasses.replace(module, cubin_path=cubin)
        meta = stored.to_dict()
        meta["ptx"] = ""  # kept in module.ptx
        write_atomic(
            entry / "meta.json", json.dumps({"format": CACHE_FORMAT, "module": meta}, indent=1)
        )
        if all(d is not None for _, d in deps):
            write_atomic(manifest, json.dumps({"deps": deps, "entry": entry_key}))
    except OSError as exc:
        raise ToolchainError(
            f"cannot write the compile cache at {root}: {exc}",
            "set GPUADVISE_CACHE_DIR to a writable directory, or use --no-cache",
        ) from None
    return stored


def _run_nvcc(
    src: Path,
    flags: tuple[str, ...],
    options: CompileOptions,
    tc: Toolchain,
    out_dir: Path,
    keep_dir: Path,
) -> CompiledModule:
    keep_dir.mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    cubin = out_dir / "module.cubin"
    deps_file = keep_dir / "deps.d"
    cmd = [
        str(tc.nvcc),
        *flags,
        "-cubin",
        "-MD",
        "-MF",
        str(deps_file),
        "-keep",
        "-keep-dir",
        str(keep_dir),
        "-o",
        str(cubin),
        str(src),
    ]
    start = time.perf_counter()
    proc = _run(cmd, "nvcc")
    elapsed_s = time.perf_counter() - start
    log = (proc.stdout + ("\n" if proc.stdout and proc.stderr else "") + proc.stderr).strip()
    if proc.returncode != 0 or not cubin.is_file():
        raise _compile_error(src, options.arch, proc.returncode, log)
    ptx_files = sorted(keep_dir.glob("*.ptx"))
    if not ptx_files:
        raise ToolchainError(
            f"nvcc left no PTX for {src.name} in its keep directory",
            "report this with your nvcc version (nvcc --version)",
        )
    ptx = ptx_files[0].read_text(errors="replace")
    write_atomic(out_dir / "module.ptx", ptx)
    deps = _parse_depfile(deps_file.read_text(errors="replace")) if deps_file.exists() else []
    if str(src) not in deps:
        deps.insert(0, str(src))
    report = parse_ptxas_report(log)
    sections = _elf_section_sizes(cubin.read_bytes())
    mangled = list(report)
    names = demangle(mangled, tc)
    kernels = []
    for sym in mangled:
        res = report[sym]
        barriers = res.get("barriers")
        if barriers is None:
            barriers = 1 if _PTX_BARRIER_RE.search(_ptx_entry_body(ptx, sym)) else 0
        kernels.append(
            KernelInfo(
                name=_display_name(names[sym]),
                mangled=sym,
                signature=names[sym],
                resources=KernelResources(
                    registers=res.get("registers", 0),
                    static_smem_bytes=res.get("smem", 0),
                    local_bytes=res.get("stack", 0),
                    spill_store_bytes=res.get("spill_stores", 0),
                    spill_load_bytes=res.get("spill_loads", 0),
                    const_bytes=sections.get(f".nv.constant0.{sym}", 0),
                    barriers=barriers,
                ),
            )
        )
    if not options.use_cache:
        shutil.rmtree(keep_dir, ignore_errors=True)
    order = _entry_source_order(ptx, src)
    kernels.sort(key=lambda k: order.get(k.mangled, (2, 0)))
    return CompiledModule(
        source=src,
        arch=options.arch,
        cubin_path=cubin,
        ptx=ptx,
        kernels=tuple(kernels),
        toolchain_version=tc.version,
        flags=flags,
        compile_time_s=elapsed_s,
        from_cache=False,
        dependencies=tuple(Path(d) for d in deps),
        log=log,
    )


_EDG_LOC_RE = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<rest>(?:catastrophic )?error|warning|remark|note)", re.M
)
_NOISE_RE = re.compile(r"^(ptxas info\s*:.*|\s+\d+ bytes stack frame.*|\s*$)")
_CCCL_RE = re.compile(r"(nv/target|cuda/std/|cub/|thrust/|cuda/__)\S*: No such file")


def _compile_error(src: Path, arch: str, returncode: int, log: str) -> GpuAdviseError:
    if "cicc" in log and ("not found" in log or "No such file" in log):
        return ToolchainError(f"nvcc cannot run its front end (cicc): {log.strip()}", _INSTALL_HINT)
    lines = [ln for ln in log.splitlines() if not _NOISE_RE.match(ln)]
    text = _EDG_LOC_RE.sub(lambda m: f"{m['file']}:{m['line']}: {m['rest']}", "\n".join(lines))
    hint = "fix the errors above"
    missing = re.search(r"fatal error: (\S+): No such file or directory", text)
    if missing:
        hint = f"add the folder that holds {missing.group(1)} to the include dirs (-I DIR)"
    if _CCCL_RE.search(text):
        hint = "a CCCL header is missing: pip install nvidia-cuda-cccl (or use a full CUDA toolkit)"
    return CompileError(
        f"{src} does not compile for {arch} (nvcc exit {returncode}):\n{text.strip()}", hint
    )


def _parse_depfile(text: str) -> list[str]:
    """Prerequisites of a make rule written by ``nvcc -MD``/``-M``."""
    text = text.replace("\\\r\n", " ").replace("\\\n", " ")
    _, sep, rest = text.partition(": ")
    if not sep:
        _, _, rest = text.partition(":")
    out: list[str] = []
    for token in re.findall(r"(?:\\.|[^\s\\])+", rest):
        path = re.sub(r"\\(.)", r"\1", token).replace("$$", "$")
        if path and path not in out:
            out.append(os.path.normpath(path))
    return out


_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_NUM_RES = {
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "registers": re.compile(r"Used (\d+) registers"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "smem": re.compile(r"(\d+) bytes smem"),
}


def parse_ptxas_report(text: str) -> dict[str, dict[str, int]]:
    """ptxas ``-v`` output -> {mangled entry name: {registers, stack, spill_stores, ...}}.

    Only entry functions (``Compiling entry function``) are reported; the properties of
    non-inlined device functions that ptxas prints along are skipped.
    """
    result: dict[str, dict[str, int]] = {}
    current: str | None = None
    props_for: str | None = None
    for line in text.splitlines():
        if m := _ENTRY_RE.search(line):
            current = m.group(1)
            result.setdefault(current, {})
            props_for = None
            continue
        if m := _PROPS_RE.search(line):
            props_for = m.group(1)
            continue
        if current is None:
            continue
        is_props = "bytes stack frame" in line
        if is_props and props_for != current:
            continue
        if is_props or "Used " in line:
            for key, rx in _NUM_RES.items():
                if (m := rx.search(line)) is not None:
                    result[current][key] = int(m.group(1))
    return result


_PTX_BARRIER_RE = re.compile(r"^\s*(?:@!?%p\d+\s+)?(?:bar|barrier)\.", re.M)


def _ptx_entry_body(ptx: str, mangled: str) -> str:
    m = re.search(rf"\.entry\s+{re.escape(mangled)}\s*\(", ptx)
    if not m:
        return ""
    end = re.search(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s", ptx[m.end() :], re.M)
    return ptx[m.start() : m.end() + end.start()] if end else ptx[m.start() :]


_PTX_FILE_RE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.M)
_PTX_LOC_RE = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)", re.M)


def _entry_source_order(ptx: str, src: Path) -> dict[str, tuple[int, int]]:
    """Mangled entry -> (0 if defined in ``src`` else 1, first line) from the PTX line info."""
    files = {int(n): os.path.normpath(p) for n, p in _PTX_FILE_RE.findall(ptx)}
    order = {}
    for m in re.finditer(r"\.entry\s+([\w$]+)\s*\(", ptx):
        loc = _PTX_LOC_RE.search(_ptx_entry_body(ptx, m.group(1)))
        if loc:
            in_src = files.get(int(loc.group(1))) == str(src)
            order[m.group(1)] = (0 if in_src else 1, int(loc.group(2)))
    return order


def _elf_section_sizes(data: bytes) -> dict[str, int]:
    """Section name -> size of a 64-bit little-endian ELF file (a cubin)."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ToolchainError(
            "nvcc wrote a cubin that is not a 64-bit ELF file",
            "report this with your nvcc version (nvcc --version)",
        )
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = []
    for i in range(shnum):
        name, _type, _flags, _addr, offset, size = struct.unpack_from(
            "<IIQQQQ", data, shoff + i * shentsize
        )
        headers.append((name, offset, size))
    str_off = headers[shstrndx][1] if shstrndx < len(headers) else 0
    sizes = {}
    for name, _offset, size in headers:
        end = data.find(b"\0", str_off + name)
        sizes[data[str_off + name : end].decode(errors="replace")] = size
    return sizes


# --------------------------------------------------------------------------------------------
# Names


def demangle(names: Sequence[str], toolchain: Toolchain | None = None) -> dict[str, str]:
    """Mangled -> demangled (with parameters) for all ``names``, with one demangler run.

    Uses ``toolchain.demangler`` (cu++filt or c++filt); without one, or if it fails, a small
    built-in demangler handles plain (non-template) names and leaves others mangled.
    """
    out = {n: n for n in names}
    todo = [n for n in names if n.startswith("_Z")]
    if not todo:
        return out
    tool = toolchain.demangler if toolchain else None
    if tool is None and (cxxfilt := shutil.which("c++filt")):
        tool = Path(cxxfilt)
    if tool is not None:
        try:
            proc = subprocess.run(
                [str(tool)],
                input="\n".join(todo) + "\n",
                capture_output=True,
                text=True,
                timeout=60,
            )
            lines = proc.stdout.splitlines()
            if proc.returncode == 0 and len(lines) == len(todo):
                out.update(zip(todo, lines, strict=True))
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    for n in todo:
        out[n] = _fallback_demangle(n)
    return out


def _fallback_demangle(mangled: str) -> str:
    """``_Z7vec_addPf`` -> ``vec_add(...)``; ``_ZN2ns5scaleEPf`` -> ``ns::scale(...)``."""

    def ident(s: str, i: int) -> tuple[str, int] | None:
        m = re.match(r"\d+", s[i:])
        if not m:
            return None
        n = int(m.group())
        start = i + len(m.group())
        return s[start : start + n], start + n

    s = mangled
    if s.startswith("_ZN"):
        i, parts = 3, []
        while i < len(s) and s[i] != "E":
            got = ident(s, i)
            if got is None:
                return mangled
            part, i = got
            parts.append("(anonymous namespace)" if part == "_GLOBAL__N_1" else part)
        return "::".join(parts) + "(...)" if parts and i < len(s) else mangled
    got = ident(s, 2)
    if got is None or (got[1] < len(s) and s[got[1]] == "I"):
        return mangled
    return f"{got[0]}(...)"


def _display_name(signature: str) -> str:
    """``void ns::reduce<256, true>(float*)`` -> ``ns::reduce<256, true>``."""
    text = signature.strip()
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            c = text[i]
            if c == ")":
                depth += 1
            elif c == "(":
                depth -= 1
                if depth == 0:
                    if i > 0:  # "(anonymous namespace)::k" alone never ends a signature
                        text = text[:i]
                    break
    text = text.strip()
    if text.startswith("void "):
        text = text[5:]
    return _uncast(text.strip())


def _split_qualified(name: str) -> list[str]:
    """Split ``a::b<x::y>::k`` on the ``::`` outside template arguments and parentheses."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(name):
        c = name[i]
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth = max(0, depth - 1)
        elif c == ":" and depth == 0 and name.startswith("::", i):
            parts.append(name[start:i])
            i += 2
            start = i
            continue
        i += 1
    parts.append(name[start:])
    return [p for p in parts if p] or [name]


_INT_SUFFIX = re.compile(r"(?<![\w.])(\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)\b")


# cu++filt writes template arguments as casts: ``reduce<(int)256, (bool)1>``.
_CAST_LITERAL = re.compile(
    r"\((?:unsigned |signed )?(?:int|long|short|char|long long|unsigned)\)\s*(-?\d+)"
)
_CAST_BOOL = re.compile(r"\(bool\)\s*([01])")


def _uncast(name: str) -> str:
    name = _CAST_LITERAL.sub(r"\1", name)
    return _CAST_BOOL.sub(lambda m: "true" if m.group(1) == "1" else "false", name)


def _norm(name: str) -> str:
    """Whitespace, integer-literal suffixes and casts do not matter: ``reduce<256u>``,
    ``reduce<(unsigned int)256>`` and ``reduce<256>`` are one name."""
    return _INT_SUFFIX.sub(r"\1", re.sub(r"\s+", "", _uncast(name))).removeprefix("::")


def _base(component: str) -> str:
    i = component.find("<")
    return component[:i] if i > 0 else component


def _has_template_args(name: str) -> bool:
    return "<" in _split_qualified(name.strip())[-1]


def _matches(module: CompiledModule, name: str, aliases: bool = True) -> list[KernelInfo]:
    """Kernels ``name`` designates, best rule first (see :func:`select_kernel`)."""
    want = _norm(name)
    if aliases:
        for asked, mangled in module.aliases:
            if _norm(asked) == want:
                return [k for k in module.kernels if k.mangled == mangled]
    rules = (
        lambda k: k.mangled == name.strip(),
        lambda k: (
            want in (_norm(k.name), _norm(k.signature), _norm(k.signature.removeprefix("void ")))
        ),
        lambda k: (
            _norm("::".join(_split_qualified(k.name)[-len(_split_qualified(want)) :])) == want
        ),
    )
    for rule in rules:
        found = [k for k in module.kernels if rule(k)]
        if found:
            return found
    if "<" not in want:  # a template named without arguments: its instances
        n = len(_split_qualified(want))
        found = []
        for k in module.kernels:
            parts = _split_qualified(_norm(k.name))
            if "::".join(parts[-n:-1] + [_base(parts[-1])]) == want:
                found.append(k)
        return found
    return []


def select_kernel(module: CompiledModule, name: str | None = None) -> KernelInfo:
    """The kernel of ``module`` called ``name``.

    No name: the only kernel, else :class:`KernelNotFoundError` listing them. A name matches,
    in this order: a name given to ``compile_source(kernels=...)``; the mangled symbol; the
    demangled name (``ns::reduce<256, true>``, or with parameters); the name without leading
    namespaces (``reduce<256,true>``). Whitespace does not matter. A template named without
    arguments (``reduce``) matches when the module holds one instance of it. Several matches
    or none raise :class:`KernelNotFoundError` listing candidates, the closest first.
    """
    kernels = module.kernels
    where = module.source.name
    if not kernels:
        raise KernelNotFoundError(
            f"{where} has no kernels", "define a __global__ function (templates need an instance)"
        )
    if name is None or not name.strip():
        if len(kernels) == 1:
            return kernels[0]
        raise KernelNotFoundError(
            f"{where} has {len(kernels)} kernels: {', '.join(k.name for k in kernels)}",
            "choose one with --kernel NAME",
        )
    found = _matches(module, name)
    if len(found) == 1:
        return found[0]
    if found:
        raise KernelNotFoundError(
            f"kernel name {name!r} is ambiguous in {where}: {', '.join(k.name for k in found)}",
            "give the full name, with namespace and template arguments",
        )
    hint = f"available: {', '.join(_closest_first(name, kernels))}"
    if _has_template_args(name):
        hint += "; templates are instantiated only for names given when compiling"
    raise KernelNotFoundError(f"no kernel named {name!r} in {where}", hint)


def _closest_first(name: str, kernels: Sequence[KernelInfo]) -> list[str]:
    want = _norm(name)

    def score(k: KernelInfo) -> float:
        candidates = {_norm(k.name), _norm(k.short_name), _base(_norm(k.short_name))}
        return max(difflib.SequenceMatcher(None, want, c).ratio() for c in candidates)

    return [k.name for k in sorted(kernels, key=lambda k: -score(k))]


# --------------------------------------------------------------------------------------------
# Instantiating templates


def _instantiate(
    module: CompiledModule,
    src: Path,
    missing: Sequence[str],
    options: CompileOptions,
    tc: Toolchain,
) -> CompiledModule:
    if any(c in str(src) for c in '"\n'):
        raise KernelNotFoundError(
            f"cannot instantiate {missing[0]!r}: the source path contains a quote or newline",
            "rename the file",
        )
    lines = [
        "// Generated by gpuadvise: instantiates the kernel templates asked for by name.",
        f'#include "{src}"',
    ]
    need_using = False
    exprs = []
    for i, name in enumerate(missing):
        expr = _qualify(name.strip(), module)
        need_using |= expr is None
        exprs.append(f"void* __gpuadvise_instance_{i} = (void*)&{expr or name.strip()};")
    if need_using:
        texts = [src.read_text(errors="replace")]
        user_roots = [src.parent, *(Path(d) for d in options.include_dirs)]
        for dep in module.dependencies:
            if dep != src and any(_is_within(dep, r) for r in user_roots):
                with contextlib.suppress(OSError):
                    texts.append(dep.read_text(errors="replace"))
        for path in _namespace_paths("\n".join(texts)):
            lines.append(f"using namespace ::{path};")
    lines += exprs
    text = "\n".join(lines) + "\n"
    if options.use_cache:
        wrapper = cache_root(options) / "wrappers" / f"{_sha(text)[:32]}.cu"
        try:
            if not wrapper.exists():
                write_atomic(wrapper, text)
        except OSError as exc:
            raise ToolchainError(
                f"cannot write the compile cache at {cache_root(options)}: {exc}",
                "set GPUADVISE_CACHE_DIR to a writable directory, or use --no-cache",
            ) from None
    else:
        wrapper = Path(tempfile.mkdtemp(prefix="gpuadvise-wrap-")) / "instantiate.cu"
        wrapper.write_text(text)
    try:
        wmod = _compile(wrapper, options, tc)
    except CompileError as exc:
        if not options.use_cache:
            shutil.rmtree(wrapper.parent, ignore_errors=True)
        errors = re.findall(r": (?:catastrophic |fatal )?error: (.*)", exc.message)[:2]
        detail = "; ".join(errors) or "nvcc failed"
        templates = sorted({_base(k.short_name) for k in module.kernels})
        raise KernelNotFoundError(
            f"cannot instantiate kernel {', '.join(missing)} from {src.name}: {detail}",
            "check the template's name and arguments (qualify it with its namespace)"
            + (f"; kernels in the file: {', '.join(templates)}" if templates else ""),
        ) from None
    old = {k.mangled for k in module.kernels}
    new = [k for k in wmod.kernels if k.mangled not in old]
    aliases = []
    for name in missing:
        direct = [k for k in _matches(wmod, name, aliases=False) if k.mangled not in old]
        if len(direct) == 1:
            aliases.append((name, direct[0].mangled))
            continue
        base = _base(_split_qualified(_norm(name))[-1])
        same = [k for k in new if _base(k.short_name) == base]
        if len(same) == 1:
            aliases.append((name, same[0].mangled))
    return dataclasses.replace(wmod, source=src, aliases=tuple(aliases), wrapper_path=wrapper)


def _is_within(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except (ValueError, OSError):
        return False


def _qualify(name: str, module: CompiledModule) -> str | None:
    """``name`` qualified from an instance of the same template already in the module."""
    if len(_split_qualified(name)) > 1 or name.startswith("::"):
        return name
    base = _base(name)
    prefixes = {
        "::".join(_split_qualified(k.name)[:-1])
        for k in module.kernels
        if _base(k.short_name) == base
    }
    if len(prefixes) == 1:
        prefix = prefixes.pop()
        if prefix and "(anonymous namespace)" not in prefix:
            return f"::{prefix}::{name}"
        if not prefix:
            return f"::{name}"
    return None


_COMMENTS_STRINGS_RE = re.compile(
    r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|^\s*#[^\n]*', re.S | re.M
)
_NS_TOKEN_RE = re.compile(
    r"\b(?:inline\s+)?namespace\s+((?:[A-Za-z_]\w*\s*::\s*(?:inline\s+)?)*[A-Za-z_]\w*)\s*"
    r"(?:__attribute__\s*\(\(.*?\)\)\s*)?\{|\bnamespace\s*\{|[{}]"
)


def _namespace_paths(text: str) -> list[str]:
    """Fully qualified names of the named namespaces defined in C++ ``text``, outer first."""
    text = _COMMENTS_STRINGS_RE.sub(" ", text)
    stack: list[list[str] | None] = []
    paths: list[str] = []
    for m in _NS_TOKEN_RE.finditer(text):
        token = m.group(0)
        if token == "}":
            if stack:
                stack.pop()
            continue
        if token == "{":
            stack.append(None)
            continue
        if m.group(1) is None:  # anonymous namespace: its names are visible anyway
            stack.append([])
            continue
        names = [n.replace("inline", "").strip() for n in m.group(1).split("::")]
        stack.append(names)
        outer = [n for entry in stack if entry for n in entry]
        for i in range(len(outer) - len(names) + 1, len(outer) + 1):
            path = "::".join(outer[:i])
            if path not in paths:
                paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------
# Struct layouts


_LAYOUT_RE = re.compile(r"__gpuadvise_layout_(\d+)\[16\]\s*=\s*\{([^}]*)\}")


def struct_layouts(
    source: str | os.PathLike[str],
    names: Sequence[str],
    options: CompileOptions | None = None,
    toolchain: Toolchain | None = None,
    namespaces: Sequence[str] = (),
) -> dict[str, tuple[int, int]]:
    """``{name: (sizeof, alignof)}`` of types the source defines, as the compiler lays them out.

    Compiles a file that includes ``source`` and stores ``sizeof``/``alignof`` of each type in a
    ``__device__`` array, and reads the array's initializer back from the PTX (no GPU, no host
    program to run). ``namespaces`` are opened with ``using namespace`` (a kernel's own namespace,
    so that ``Cell`` finds ``sim::Cell``). An unknown type raises :class:`UsageError`.
    """
    if not names:
        return {}
    options = options or CompileOptions()
    tc = toolchain or find_toolchain()
    src = Path(source).resolve()
    lines = [f'#include "{src}"']
    lines += [f"using namespace {ns};" for ns in namespaces if ns]
    for i, name in enumerate(names):
        lines.append(
            f'extern "C" __device__ unsigned long long __gpuadvise_layout_{i}[2] = '
            f"{{sizeof({name}), alignof({name})}};"
        )
    with tempfile.TemporaryDirectory(prefix="gpuadvise-layout-") as tmp:
        probe = Path(tmp) / "layout.cu"
        probe.write_text("\n".join(lines) + "\n")
        flags = [f for f in _effective_flags(options, tc) if f not in ("-Xptxas", "-v")]
        cmd = [str(tc.nvcc), *flags, "-ptx", "-o", "-", str(probe)]
        proc = _run(cmd, "nvcc")
    if proc.returncode != 0:
        errs = [ln for ln in proc.stderr.splitlines() if "error" in ln][:2]
        raise UsageError(
            f"cannot find the layout of {', '.join(names)} in {src.name}: "
            + ("; ".join(e.split("error:", 1)[-1].strip() for e in errs) or "nvcc failed"),
            "give the element type as the source names it (with its namespace), or a CUDA type",
        )
    found: dict[str, tuple[int, int]] = {}
    for m in _LAYOUT_RE.finditer(proc.stdout):
        data = [int(v, 0) for v in m.group(2).split(",") if v.strip()]
        data += [0] * (16 - len(data))
        size, align = struct.unpack("<QQ", bytes(data[:16]))
        found[names[int(m.group(1))]] = (size, align)
    missing = [n for n in names if n not in found]
    if missing:
        raise ToolchainError(f"nvcc gave no layout for {', '.join(missing)}", "report this bug")
    return found

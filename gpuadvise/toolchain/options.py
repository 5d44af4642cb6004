"""How to compile: :class:`CompileOptions` and the nvcc flags they mean."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuadvise.errors import UsageError

__all__ = ["CompileOptions", "normalize_arch"]


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
    ``confine_to``: the folders of the source's own tree (the gate's repository): no diagnostic
    located in a file outside them and the include folders (the toolkit's, the host compiler's,
    ``include_dirs``) is shown, and unless ``includes_trusted`` (``gate --trust-config``) a file
    outside them that the source includes is refused before the compile (``includes.py``).
    Empty: neither.
    ``entry``: a kernel's mangled name: ptxas assembles that entry alone (``--entry``; its
    callees come with it), the module holds that kernel only and its cubin that kernel's SASS
    (a variant traced for its point: cicc still compiles the whole file, whose PTX the module
    keeps). Not one of :meth:`nvcc_flags` (the module's flags stay those of the whole file's
    compile, the way a rule rebuilds the kernel): :func:`~gpuadvise.toolchain.compile_source`
    takes a cached compile of the whole file where there is one, and assembles the whole PTX
    where the entry is not in it (a variant that renamed or re-typed the kernel).
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
    confine_to: Sequence[str | os.PathLike[str]] = ()
    includes_trusted: bool = False
    entry: str | None = None

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
        set_(
            self,
            "confine_to",
            tuple(str(Path(d).expanduser().resolve()) for d in _tuple(self.confine_to)),
        )
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

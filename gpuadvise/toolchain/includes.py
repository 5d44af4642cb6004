"""The files a compile reads, and keeping it to the folders it may read.

``#include "/etc/shadow"`` (or ``"../../../x"``) in a kernel made nvcc quote the file's lines in
its diagnostics, and ``gpuadvise gate`` copied them into every report, on a pull request a
stranger wrote. Two guards:

- a confined compile (:attr:`CompileOptions.confine_to`: the gate's repository, unless
  ``--trust-config``) first asks nvcc for the translation unit's dependencies (``-M``, with the
  compile's own flags, so that the same ``#if`` branches and include folders apply) and refuses
  any file outside the repository, the toolkit's include folders and the host compiler's
  (:func:`refuse_outside`), naming the include, before anything is compiled;
- compiler output never quotes a file outside those folders (:func:`diagnostic_filter`): a
  diagnostic located in such a file is left out whole, with its quoted source lines. Outside a
  confined compile (``analyze``), the files shown are those with a CUDA or C++ name
  (:data:`CUDA_SOURCE_SUFFIXES`) and those in the include folders.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from gpuadvise.errors import ConfigError
from gpuadvise.toolchain.find import Toolchain

__all__ = [
    "CUDA_SOURCE_SUFFIXES",
    "diagnostic_filter",
    "host_include_dirs",
    "include_roots",
    "parse_depfile",
    "preprocessed_files",
    "refuse_outside",
]

CUDA_SOURCE_SUFFIXES = frozenset(
    {
        ".cu", ".cuh", ".cuinl", ".h", ".hh", ".hpp", ".hxx", ".h++", ".c", ".cc", ".cpp",
        ".cxx", ".c++", ".inl", ".inc", ".ipp", ".tcc", ".tpp", ".ixx",
    }
)  # fmt: skip
"""The names of files that are CUDA or C++ source: a source without one (``/etc/passwd``) is
refused, and no diagnostic of such a file is shown outside the include folders."""


def parse_depfile(text: str) -> list[str]:
    """Prerequisites of a make rule written by ``nvcc -MD``/``-M``.

    Make's escapes as GCC writes them: ``\\ `` (a space), ``\\#``, ``$$``; any other
    backslash is part of the name (``back\\slash.cu``).
    """
    text = text.replace("\\\r\n", " ").replace("\\\n", " ")
    _, sep, rest = text.partition(": ")
    if not sep:
        _, _, rest = text.partition(":")
    out: list[str] = []
    token: list[str] = []
    i = 0
    while i <= len(rest):
        c = rest[i] if i < len(rest) else " "
        if c == "\\" and i + 1 < len(rest) and rest[i + 1] in " \t#":
            token.append(rest[i + 1])
            i += 2
            continue
        if c.isspace():
            path = "".join(token).replace("$$", "$")
            if path and os.path.normpath(path) not in out:
                out.append(os.path.normpath(path))
            token = []
        else:
            token.append(c)
        i += 1
    return out


# A line marker's file name: a line starting ``# 12 "``, then characters and backslash escapes up
# to the closing quote (the loop unrolled, and the newline before a marker part of the match, not
# ``^`` in MULTILINE mode: both let the search skip the text between markers 7x faster on a 12 MB
# translation unit). The first line has no newline before it: ``_FIRST_MARKER_RE``.
_MARKER = rb'#(?:line)?[ \t]*\d+[ \t]+"([^"\\\n]*(?:\\.[^"\\\n]*)*)"'
_FIRST_MARKER_RE = re.compile(_MARKER)
_MARKER_RE = re.compile(rb"\n" + _MARKER)
_ESCAPE_RE = re.compile(rb"\\([0-7]{1,3}|.)", re.S)


def preprocessed_files(text: bytes) -> list[str]:
    """The files a preprocessed translation unit (``gcc -E`` output, nvcc's kept ``.cpp1.ii``)
    was read from, in the order they were first entered: the file names of its line markers
    (``# 12 "/usr/include/stdio.h" 1 3 4``), unescaped as GCC escapes them (``\\``, ``\"``,
    octal), ``<built-in>`` and ``<command-line>`` left out, normalized and without repeats like
    :func:`parse_depfile`. These are the files the cubin depends on: ``nvcc -MD`` lists the
    same in the same order, plus the headers only its host pass reads (``#ifndef
    __CUDA_ARCH__``: libcu++'s ``threading_support_pthread.h`` and ``semaphore.h``, on 22 of the
    173 kernels/ and corpus sources compared on 2026-11-30), at the cost of that extra
    preprocessing pass."""
    first = _FIRST_MARKER_RE.match(text)
    written = ([first.group(1)] if first else []) + _MARKER_RE.findall(text)
    out: dict[str, None] = {}
    for raw in dict.fromkeys(written):  # each name as written once (thousands of markers)
        if b"\\" in raw:
            raw = _ESCAPE_RE.sub(_unescape, raw)
        name = raw.decode("utf-8", "surrogateescape")
        if name and not name.startswith("<"):
            out.setdefault(os.path.normpath(name), None)
    return list(out)


def _unescape(m: re.Match[bytes]) -> bytes:
    esc = m.group(1)
    return bytes([int(esc, 8) & 0xFF]) if esc[:1].isdigit() and esc[:1] < b"8" else esc


@functools.lru_cache(maxsize=8)
def host_include_dirs(compiler: str) -> tuple[Path, ...]:
    """The folders the host compiler searches for ``#include <...>`` (``-E -v``), resolved;
    empty when it cannot say."""
    try:
        proc = subprocess.run(
            [compiler, "-xc++", "-E", "-v", "-"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    out: list[Path] = []
    inside = False
    for line in proc.stderr.splitlines():
        if line.startswith("#include <...> search starts here"):
            inside = True
        elif line.startswith("End of search list"):
            break
        elif inside and line.startswith(" "):
            out.append(Path(line.strip().removesuffix(" (framework directory)")).resolve())
    return tuple(out)


# The system's header folders, when the host compiler cannot be asked for its own.
_SYSTEM_INCLUDE_DIRS = ("/usr/include", "/usr/local/include", "/usr/lib/gcc", "/usr/lib64/gcc")


def _host_compiler(flags: Sequence[str], tc: Toolchain) -> str | None:
    for i, f in enumerate(flags):
        if f in ("-ccbin", "--compiler-bindir") and i + 1 < len(flags):
            return flags[i + 1]
        if f.startswith(("-ccbin=", "--compiler-bindir=")):
            return f.split("=", 1)[1]
    env = os.environ.get("NVCC_CCBIN")
    if env:
        return env
    if tc.host_compiler is not None:
        return str(tc.host_compiler)
    return shutil.which("g++") or shutil.which("c++")


def include_roots(flags: Sequence[str], tc: Toolchain) -> tuple[Path, ...]:
    """The toolkit's include folders and the host compiler's, resolved: files there are the
    toolkit's and the system's, never the source's."""
    roots = [tc.include_dir, tc.cccl_include_dir, *tc.extra_include_dirs]
    compiler = _host_compiler(flags, tc)
    out = [Path(r).resolve() for r in roots if r is not None]
    host_dirs: tuple[Path, ...] = ()
    if compiler:
        host = Path(compiler)
        resolved = shutil.which(compiler) if not host.is_absolute() else compiler
        host_dirs = host_include_dirs(str(resolved or compiler))
    out += host_dirs or [Path(d).resolve() for d in _SYSTEM_INCLUDE_DIRS]
    return tuple(dict.fromkeys(out))


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def _resolved(name: str) -> Path | None:
    try:
        return Path(name).resolve()
    except (OSError, ValueError, RuntimeError):
        return None


def diagnostic_filter(
    confine_to: Sequence[Path], roots: Sequence[Path], own: Sequence[Path] = ()
) -> Callable[[str], bool]:
    """Whether a diagnostic located in a file (as nvcc names it) may be shown: with
    ``confine_to`` (a confined compile), a file in those folders or in ``roots`` (the include
    folders); without, a file with a CUDA or C++ name, or in ``roots``. ``own``: files gpuadvise
    generated for the compile (always shown)."""
    allowed = [r.resolve() for r in confine_to] + list(roots)
    own_paths = {p.resolve() for p in own}

    def shown(name: str) -> bool:
        if confine_to and not os.path.isabs(name):  # nvcc names the files it was given by
            return False  # their absolute paths: a relative name is a quoted line's text
        path = _resolved(name)
        if path is None:
            return False
        if path in own_paths or _under(path, allowed):
            return True
        return not confine_to and path.suffix.lower() in CUDA_SOURCE_SUFFIXES  # links followed

    return shown


_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)


def _include_site(target: Path, files: Iterable[Path]) -> str | None:
    """``file:line`` of an ``#include`` among ``files`` that names ``target`` (by its path as
    written, or its name), or None."""
    for f in files:
        try:
            if not f.is_file() or f.stat().st_size > 4 << 20:
                continue
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for m in _INCLUDE_RE.finditer(text):
            written = m.group(1)
            near = _resolved(str(f.parent / written))
            if near == target or _resolved(written) == target or Path(written).name == target.name:
                return f"{f}:{text.count(chr(10), 0, m.start()) + 1}"
    return None


def refuse_outside(
    src: Path,
    deps: Sequence[str],
    confine_to: Sequence[Path],
    roots: Sequence[Path],
    own: Sequence[Path] = (),
) -> None:
    """A :class:`~gpuadvise.errors.ConfigError` naming the first of ``deps`` (what nvcc -M
    listed for ``src``) that lies outside ``confine_to`` and the include folders ``roots``;
    ``own``: the files gpuadvise generated for the compile."""
    confined = [r.resolve() for r in confine_to]
    allowed = confined + list(roots)
    own_paths = {p.resolve() for p in own}
    inside = [p for p in (_resolved(d) for d in deps) if p is not None and _under(p, confined)]
    for dep in deps:
        path = _resolved(dep)
        if path is None or path in own_paths or _under(path, allowed):
            continue
        site = _include_site(path, inside or [src])
        where = f"{site} includes" if site else f"{src.name} includes (through an #include)"
        raise ConfigError(
            f"{where} {path}, a file outside the repository ({', '.join(map(str, confined))}) "
            "and the toolkit's and host compiler's include folders",
            "include only files of the repository; pass --trust-config if this tree is "
            "trusted (never on pull requests from forks)",
        )

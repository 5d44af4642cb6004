"""Compiling a ``.cu`` file to cubin + PTX with nvcc, and reading every kernel's resources.

One nvcc run: ``-cubin -arch=sm_XX -lineinfo -Xptxas -v -MD -keep``; the kept ``.ptx`` is the
exact PTX ptxas compiled, ``-MD`` lists every included file. Compile errors raise
:class:`CompileError` (``diagnostics.py`` says what they mean). Results are cached by content
(``cache.py``); ``use_cache=False`` compiles into a temporary folder removed at exit.

File names and nvcc's shell: nvcc runs its steps through ``sh -c``, quoting paths with double
quotes, so a ``$``, backquote, backslash or double quote in a path it is given would be
expanded by that shell (``x;$(touch pwned).cu`` ran ``touch``). gpuadvise runs nvcc from an
argv list (never a shell of its own), gives it absolute paths (a name starting with ``-`` is
never read as an option), and never gives it such a path: a source whose path has one is
compiled through a generated file in a safe temporary folder that ``#include``-s it (the
preprocessor reads the name from the file, not from a command line; line info still points at
the user's file); outputs go to a safe temporary folder; an include folder with such a
character is refused with a one-line error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gpuadvise.errors import CompileError, ToolchainError, UsageError
from gpuadvise.fileio import write_atomic
from gpuadvise.toolchain.cache import (
    cache_root,
    cache_write_error,
    lookup,
    manifest_path,
    sha256_hex,
    store,
)
from gpuadvise.toolchain.diagnostics import (
    compile_error,
    instantiation_error,
    mangled_names,
)
from gpuadvise.toolchain.find import Toolchain, find_toolchain, run_tool
from gpuadvise.toolchain.includes import (
    diagnostic_filter,
    include_roots,
    parse_depfile,
    refuse_outside,
)
from gpuadvise.toolchain.module import CompiledModule, matching_kernels
from gpuadvise.toolchain.names import demangle, has_template_args
from gpuadvise.toolchain.options import CompileOptions
from gpuadvise.toolchain.resources import kernel_infos
from gpuadvise.toolchain.scratch import keep_until_exit, release, scratch_dir
from gpuadvise.toolchain.templates import include_line, instance_aliases, instantiation_source

__all__ = ["compile_source", "effective_flags", "parse_depfile", "safe_scratch", "shell_safe"]

SHELL_SPECIAL = frozenset('"$`\\\n\r')
"""Characters that nvcc's shell would interpret inside the double quotes it puts around paths."""

_INPUT_NAME = "gpuadvise_source.cu"
"""The generated file that includes a source whose path nvcc must not see."""


def shell_safe(path: str | os.PathLike[str]) -> bool:
    """``path`` can be handed to nvcc: its shell would take it literally."""
    return not (set(os.fspath(path)) & SHELL_SPECIAL)


def compile_source(
    source: str | os.PathLike[str],
    options: CompileOptions | None = None,
    toolchain: Toolchain | None = None,
    kernels: Sequence[str] | None = None,
) -> CompiledModule:
    """Compile ``source`` to cubin + PTX for ``options.arch`` and read every kernel's resources.

    ``kernels``: names the caller will select; any with template arguments (``reduce<256,
    true>``) that the file does not instantiate is instantiated through a generated wrapper file
    (``templates.py``), and the returned module is the wrapper's (it holds every kernel of the
    file plus the new instances). Raises :class:`CompileError` with nvcc's diagnostics,
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
        k for k in wanted if has_template_args(k) and not matching_kernels(module, k, aliases=False)
    ]
    if not missing:
        return module
    return _instantiate(module, src, missing, options, tc)


def effective_flags(options: CompileOptions, tc: Toolchain) -> tuple[str, ...]:
    """The nvcc flags of ``options`` plus what the toolchain needs (a host compiler, CCCL)."""
    for d in options.include_dirs:
        if not shell_safe(d):
            raise UsageError(
                f'include folder {d!r} has a character nvcc would hand to a shell ($, `, \\ or ")',
                "rename the folder, or link it from a path without those characters",
            )
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
    for d in tc.extra_include_dirs:
        pair = ["-isystem", str(d)]
        if shell_safe(d) and not any(flags[i : i + 2] == pair for i in range(len(flags))):
            flags += pair
    return tuple(flags)


@contextlib.contextmanager
def _build_dir(root: Path) -> Iterator[Path]:
    """A fresh folder for one nvcc run: in the cache's ``tmp`` (same file system as the
    entries), or a temporary folder when the cache's path is not :func:`shell_safe`."""
    if not shell_safe(root):
        with safe_scratch("gpuadvise-build-") as work:
            yield work
        return
    try:
        (root / "tmp").mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="build-", dir=root / "tmp"))
    except OSError as exc:
        raise cache_write_error(root, exc) from None
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def safe_scratch(prefix: str) -> Iterator[Path]:
    """A :func:`~gpuadvise.toolchain.scratch.scratch_dir` whose path nvcc may be given."""
    with scratch_dir(prefix) as work:
        _check_temp_dir(work)
        yield work


def _check_temp_dir(path: Path) -> None:
    if not shell_safe(path):
        raise ToolchainError(
            f"the temporary folder {str(path.parent)!r} has a character nvcc would hand to a "
            'shell ($, `, \\ or ")',
            "set TMPDIR to a folder without those characters",
        )


def _compile(src: Path, options: CompileOptions, tc: Toolchain) -> CompiledModule:
    flags = effective_flags(options, tc)
    if options.confine_to and not options.includes_trusted:  # before the cache: a hit too
        _check_includes(src, flags, options, tc)
    if not options.use_cache:
        out_dir = keep_until_exit()  # holds the returned cubin: removed at exit
        try:
            _check_temp_dir(out_dir)
            return _run_nvcc(src, flags, options, tc, out_dir, out_dir / "work")
        except BaseException:
            release(out_dir)
            raise

    root = cache_root(options)
    try:
        src_bytes = src.read_bytes()
    except OSError as exc:
        raise UsageError(
            f"cannot read {src}: {exc.strerror}", "check the file's permissions"
        ) from None
    manifest = manifest_path(root, tc.version, options.arch, flags, src, src_bytes)
    hit = lookup(root, manifest)
    if hit is not None:
        return hit
    with _build_dir(root) as work:
        staging = work / "out"
        staging.mkdir()
        module = _run_nvcc(src, flags, options, tc, staging, work / "nvcc")
        return store(root, manifest, module, staging)


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
    nvcc_input = _nvcc_input(src, keep_dir)
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
        str(nvcc_input),
    ]
    env = {**os.environ, "TMPDIR": str(keep_dir)}  # nvcc's own temporary files: ours to remove
    start = time.perf_counter()
    proc = run_tool(cmd, "nvcc", env=env)
    elapsed_s = time.perf_counter() - start
    log = (proc.stdout + ("\n" if proc.stdout and proc.stderr else "") + proc.stderr).strip()
    if nvcc_input != src:
        log = log.replace(str(nvcc_input), str(src)).replace(_INPUT_NAME, src.name)
    if proc.returncode != 0 or not cubin.is_file():
        shown = _shown(src, flags, options, tc)
        raise compile_error(src, options.arch, proc.returncode, log, tc, shown=shown)
    ptx_files = sorted(keep_dir.glob("*.ptx"))
    if not ptx_files:
        raise ToolchainError(
            f"nvcc left no PTX for {src.name} in its keep directory",
            "report this with your nvcc version (nvcc --version)",
        )
    ptx = ptx_files[0].read_text(errors="replace")
    write_atomic(out_dir / "module.ptx", ptx)
    deps = parse_depfile(deps_file.read_text(errors="replace")) if deps_file.exists() else []
    deps = [d for d in deps if d != str(nvcc_input)]
    if str(src) not in deps:
        deps.insert(0, str(src))
    kernels = kernel_infos(ptx, log, cubin.read_bytes(), src, _names(log, tc))
    if not options.use_cache:
        shutil.rmtree(keep_dir, ignore_errors=True)
    return CompiledModule(
        source=src,
        arch=options.arch,
        cubin_path=cubin,
        ptx=ptx,
        kernels=kernels,
        toolchain_version=tc.version,
        flags=flags,
        compile_time_s=elapsed_s,
        from_cache=False,
        dependencies=tuple(Path(d) for d in deps),
        log=log,
    )


def _nvcc_input(src: Path, keep_dir: Path) -> Path:
    """The file nvcc is given for ``src``: ``src``, or a generated .cu with a safe name that
    includes it when src's path is not safe for nvcc's shell, or src is a header (.cuh, .h ...),
    which nvcc refuses as an input."""
    if shell_safe(src) and src.suffix.lower() == ".cu":
        return src
    nvcc_input = keep_dir / _INPUT_NAME
    nvcc_input.write_text(include_line(src) + "\n", encoding="utf-8")
    return nvcc_input


def _shown(src: Path, flags: Sequence[str], options: CompileOptions, tc: Toolchain) -> Any:
    """Which files' diagnostics a failed compile of ``src`` may show (includes.py)."""
    confine = tuple(Path(d) for d in options.confine_to)
    roots = include_roots(flags, tc)
    if confine:  # the -I folders too: inside the repository, or trusted (--trust-config)
        roots += tuple(Path(d).resolve() for d in options.include_dirs)
    return diagnostic_filter(confine, roots, own=(src,))


def _check_includes(
    src: Path, flags: tuple[str, ...], options: CompileOptions, tc: Toolchain
) -> None:
    """A confined compile: nvcc -M with the compile's flags lists every file the translation
    unit reads; one outside the allowed folders is refused before anything is compiled, and the
    scan's own diagnostics are filtered like the compile's."""
    with safe_scratch("gpuadvise-deps-") as work:
        nvcc_input = _nvcc_input(src, work)
        cmd = [str(tc.nvcc), *flags, "-M", str(nvcc_input)]
        proc = run_tool(cmd, "nvcc", env={**os.environ, "TMPDIR": str(work)}, timeout=120)
    if proc.returncode != 0:
        log = proc.stderr.strip()
        if nvcc_input != src:
            log = log.replace(str(nvcc_input), str(src)).replace(_INPUT_NAME, src.name)
        shown = _shown(src, flags, options, tc)
        raise compile_error(src, options.arch, proc.returncode, log, tc, shown=shown)
    deps = [d for d in parse_depfile(proc.stdout) if d != str(nvcc_input)]
    confine = tuple(Path(d) for d in options.confine_to)
    roots = include_roots(flags, tc) + tuple(Path(d).resolve() for d in options.include_dirs)
    refuse_outside(src, deps, confine, roots, own=(src,))


_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)'")


def _names(log: str, tc: Toolchain) -> dict[str, str]:
    return demangle(list(dict.fromkeys(_ENTRY_RE.findall(log))), tc)


# --------------------------------------------------------------------------------------------
# Instantiating templates


def _instantiate(
    module: CompiledModule,
    src: Path,
    missing: Sequence[str],
    options: CompileOptions,
    tc: Toolchain,
) -> CompiledModule:
    user_roots = [src.parent, *(Path(d) for d in options.include_dirs)]
    text = instantiation_source(module, src, missing, user_roots)
    wrapper_dir: Path | None = None
    if options.use_cache:
        wrapper = cache_root(options) / "wrappers" / f"{sha256_hex(text)[:32]}.cu"
        try:
            if not wrapper.exists():
                write_atomic(wrapper, text)
        except OSError as exc:
            raise cache_write_error(cache_root(options), exc) from None
    else:
        wrapper_dir = keep_until_exit("gpuadvise-wrap-")
        wrapper = wrapper_dir / "instantiate.cu"
        wrapper.write_text(text, encoding="utf-8")
    try:
        wrapped = _compile(wrapper, options, tc)
    except CompileError as exc:
        if wrapper_dir is not None:
            release(wrapper_dir)
        mangled = mangled_names(exc.message)
        raise instantiation_error(
            exc,
            src,
            wrapper,
            missing,
            [k.short_name for k in module.kernels],
            demangle(mangled, tc) if mangled else None,
        ) from None
    except BaseException:
        if wrapper_dir is not None:
            release(wrapper_dir)
        raise
    aliases = instance_aliases(module, wrapped, missing)
    return dataclasses.replace(wrapped, source=src, aliases=aliases, wrapper_path=wrapper)

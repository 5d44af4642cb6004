"""Compiling a ``.cu`` file to cubin + PTX with nvcc, and reading every kernel's resources.

One nvcc run: ``-cubin -arch=sm_XX -lineinfo -Xptxas -v -keep``; the kept ``.ptx`` is the
exact PTX ptxas compiled, the kept ``.cpp1.ii`` (the device pass's preprocessed source) names
every included file in its line markers (what ``-MD`` would list, at the cost of one more
preprocessing pass). Compile errors raise :class:`CompileError` (``diagnostics.py`` says what
they mean). Results are cached by content (``cache.py``); ``use_cache=False`` compiles into a
temporary folder removed at exit.

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
import contextvars
import dataclasses
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from gpuadvise.errors import CompileError, ToolchainError, UsageError
from gpuadvise.fileio import write_atomic
from gpuadvise.toolchain import cache_lock
from gpuadvise.toolchain.binary import BINARY_SUFFIXES, load_binary
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
from gpuadvise.toolchain.find import RUN_TIMEOUT_S, Toolchain, find_toolchain, run_tool
from gpuadvise.toolchain.includes import (
    diagnostic_filter,
    include_roots,
    parse_depfile,
    preprocessed_files,
    refuse_outside,
)
from gpuadvise.toolchain.module import (
    CompiledModule,
    closest_first,
    matching_kernels,
    user_texts,
)
from gpuadvise.toolchain.names import demangle, has_template_args
from gpuadvise.toolchain.options import CompileOptions
from gpuadvise.toolchain.resources import kernel_infos
from gpuadvise.toolchain.scratch import keep_until_exit, release, scratch_dir
from gpuadvise.toolchain.templates import (
    include_line,
    instance_aliases,
    instantiation_source,
    probe_source,
    probed_symbols,
)

_log = logging.getLogger(__name__)  # (``log`` is nvcc's output in this module)

__all__ = [
    "compile_source",
    "effective_flags",
    "parse_depfile",
    "safe_scratch",
    "shell_safe",
    "while_nvcc_runs",
]

_WHILE_NVCC: contextvars.ContextVar[Callable[[], AbstractContextManager[Any]] | None] = (
    contextvars.ContextVar("gpuadvise_while_nvcc", default=None)
)
MadeHook = Callable[[Path, Toolchain], Callable[[CompiledModule], None] | None]
"""``while_nvcc_runs``' ``made``: told a cubin nvcc has just made and the toolchain; returns what
to tell the module as stored (or None)."""
_MADE: contextvars.ContextVar[MadeHook | None] = contextvars.ContextVar(
    "gpuadvise_cubin_made", default=None
)


@contextlib.contextmanager
def while_nvcc_runs(
    work: Callable[[], AbstractContextManager[Any]],
    made: MadeHook | None = None,
) -> Iterator[None]:
    """Within the ``with`` block, every nvcc run of :func:`compile_source` is wrapped in
    ``work()``: a context entered as nvcc starts and left when it has returned, for work that
    uses the CPU nvcc leaves idle (``analyze`` imports its later stages then:
    :mod:`gpuadvise.analyze.warm`). Nothing is done on a cache hit, where no nvcc runs; the
    block's thread only waits for nvcc meanwhile (it imports nothing). ``made``: told of each
    cubin nvcc made (its path in the compile's build folder, removed once it is stored) and the
    toolchain as soon as nvcc has returned, in the compiling thread, before ``work()`` is left
    (so it must import nothing: the work may still be importing) and before the compile reads
    nvcc's output back and the cache stores the cubin, for work on the cubin that need not wait
    for those (``analyze`` starts the kernel's nvdisasm run:
    :func:`gpuadvise.toolchain.sass.life_ranges_made`); what it returns (None: nothing) is then
    told the module as stored in the cache. Neither call may raise."""
    token = _WHILE_NVCC.set(work)
    after = _MADE.set(made)
    try:
        yield
    finally:
        _MADE.reset(after)
        _WHILE_NVCC.reset(token)


LOCK_WAIT_S = RUN_TIMEOUT_S + 60.0
"""The longest a compile waits for another process's compile of the same content (its nvcc
runs at most :data:`~gpuadvise.toolchain.find.RUN_TIMEOUT_S`); then it compiles unlocked."""


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

    ``kernels``: names the caller will select; one with template arguments that no instance
    of the file is spelled as (``reduce<256, true>``, whitespace, suffixes and casts aside) is
    resolved by :func:`_resolve`: an instance it means in the user's spelling (a typedef, an
    enumerator, a macro ...) is named in ``module.aliases``; one the file does not instantiate
    is instantiated through a generated wrapper file (``templates.py``), and the returned module
    is the wrapper's (it holds every kernel of the file plus the new instances). Raises
    :class:`CompileError` with nvcc's diagnostics,
    :class:`KernelNotFoundError` when a requested template cannot be instantiated, and
    :class:`ToolchainError` when the tools are missing. A ``.ptx``, ``.cubin`` or ``.fatbin``
    is read, not compiled (:func:`gpuadvise.toolchain.binary.load_binary`).
    """
    options = options or CompileOptions()
    src = Path(source).expanduser()
    if src.suffix.lower() in BINARY_SUFFIXES:  # a module to read, not a source (binary.py)
        return load_binary(src, options, toolchain or find_toolchain())
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
    return _resolve(module, src, missing, options, tc)


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


_ENTRY_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A mangled name :attr:`CompileOptions.entry` may give ptxas (nvcc hands its ``-Xptxas``
values to a shell and splits them at commas); any other is assembled with the whole file."""


def _entry_flags(options: CompileOptions) -> tuple[str, ...]:
    """The nvcc flags that make ptxas assemble :attr:`CompileOptions.entry` alone (none: all)."""
    entry = options.entry
    if entry is None or not _ENTRY_NAME_RE.fullmatch(entry):
        return ()
    return ("-Xptxas", f"--entry={entry}")


def _compile(src: Path, options: CompileOptions, tc: Toolchain) -> CompiledModule:
    flags = effective_flags(options, tc)
    if options.confine_to and not options.includes_trusted:  # before the cache: a hit too
        _check_includes(src, flags, options, tc)
    entry = _entry_flags(options)
    if not options.use_cache:
        _log.info("compiling %s for %s (--no-cache)", src.name, options.arch)
        out_dir = keep_until_exit()  # holds the returned cubin: removed at exit
        try:
            _check_temp_dir(out_dir)
            return _run_nvcc(src, flags, options, tc, out_dir, out_dir / "work", entry=entry)
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
        _log.info("compile cache hit: %s (%s)", src.name, manifest.parent)
        return hit
    if entry:  # the whole file's compile (a rule's candidate of the same text) missed: its own
        manifest = manifest_path(root, tc.version, options.arch, flags + entry, src, src_bytes)
        hit = lookup(root, manifest)
        if hit is not None:
            _log.info("compile cache hit: %s, %s alone (%s)", src.name, entry[1], manifest.parent)
            return hit
    # one process at a time compiles this: a concurrent one's entry is read once it is stored
    with cache_lock.held(manifest.with_suffix(".lock"), LOCK_WAIT_S) as locked:
        if locked and (hit := lookup(root, manifest)) is not None:
            _log.info("compile cache hit: %s, stored meanwhile by another process", src.name)
            return hit
        _log.info(
            "compile cache miss: compiling %s for %s (cache %s)", src.name, options.arch, root
        )
        made = _MADE.get()
        stored_told: list[Callable[[CompiledModule], None]] = []

        def on_cubin(cubin: Path) -> None:  # nvcc has made it: told before it is stored
            if made is not None and (then := made(cubin, tc)) is not None:
                stored_told.append(then)

        with _build_dir(root) as work:
            staging = work / "out"
            staging.mkdir()
            module = _run_nvcc(
                src, flags, options, tc, staging, work / "nvcc", on_cubin, entry=entry
            )
            stored = store(root, manifest, module, staging)
        # within the lock: the life ranges started as nvcc returned are locked by now (their
        # sidecar's lock, sass.life_range_text_early), so the next process waits for them too
        for then in stored_told:
            then(stored)
    return stored


def _run_nvcc(
    src: Path,
    flags: tuple[str, ...],
    options: CompileOptions,
    tc: Toolchain,
    out_dir: Path,
    keep_dir: Path,
    on_cubin: Callable[[Path], None] | None = None,
    entry: tuple[str, ...] = (),
) -> CompiledModule:
    """nvcc of ``src`` (``flags``; ``entry``: :func:`_entry_flags`, ptxas on that entry alone,
    or on the whole PTX where the PTX has no such entry) into ``out_dir``."""
    keep_dir.mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    cubin = out_dir / "module.cubin"
    nvcc_input = _nvcc_input(src, keep_dir)
    out = ["-cubin", "-keep", "-keep-dir", str(keep_dir), "-o", str(cubin), str(nvcc_input)]
    cmd = [str(tc.nvcc), *flags, *entry, *out]
    env = {**os.environ, "TMPDIR": str(keep_dir)}  # nvcc's own temporary files: ours to remove
    _log.debug("running %s", " ".join(cmd))
    start = time.perf_counter()
    work = _WHILE_NVCC.get()
    with work() if work is not None else contextlib.nullcontext():
        proc = run_tool(cmd, "nvcc", env=env)
        if entry and proc.returncode != 0 and _unknown_entry(proc.stderr, entry):
            # (else the whole file compiled again, as it would have been without the entry)
            whole = [str(tc.nvcc), *flags, *out]
            proc = _assemble_whole(proc, flags, tc, keep_dir, cubin, env) or run_tool(
                whole, "nvcc", env=env
            )
        elapsed_s = time.perf_counter() - start  # nvcc's own time, not the work beside it
        if on_cubin is not None and proc.returncode == 0 and cubin.is_file():
            # before the work beside nvcc is waited for (it imports nothing: see while_nvcc_runs)
            on_cubin(cubin)
    _log.info("nvcc took %.2f s (exit %d)", elapsed_s, proc.returncode)
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
    deps = [d for d in _included_files(keep_dir, src) if d != str(nvcc_input)]
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


def _unknown_entry(stderr: str, entry: tuple[str, ...]) -> bool:
    """Whether ptxas failed only because the PTX has no entry ``entry`` names (``ptxas fatal :
    Unknown function NAME``: the variant renamed or re-typed the kernel)."""
    name = entry[-1].split("=", 1)[1]
    return (
        re.search(rf"ptxas fatal\s*:\s*Unknown function {re.escape(name)}\s*$", stderr, re.M)
        is not None
    )


_LANGUAGE_RE = re.compile(r"--?x(=.*)?")
"""nvcc's ``-x cu`` / ``--x=cu`` (a header compiled as CUDA): it would read a PTX as CUDA."""


def _assemble_whole(
    failed: subprocess.CompletedProcess[str],
    flags: tuple[str, ...],
    tc: Toolchain,
    keep_dir: Path,
    cubin: Path,
    env: Mapping[str, str],
) -> subprocess.CompletedProcess[str] | None:
    """nvcc's ptxas step alone, every entry, on the PTX the ``failed`` run's cicc step left in
    ``keep_dir`` (the same flags but the input language's: the same cubin as the whole file's
    compile); its output after what the failed run's other steps said (the preprocessor's and
    cicc's diagnostics, not ptxas'). None where it left no one PTX or that run failed too."""
    kept = sorted(keep_dir.glob("*.ptx"))
    if len(kept) != 1:
        return None
    own: list[str] = []
    skip = False
    for f in flags:
        if skip or _LANGUAGE_RE.fullmatch(f):
            skip = not skip and f in ("-x", "--x")  # (the language is the next argument)
            continue
        own.append(f)
    cmd = [str(tc.nvcc), *own, "-cubin", "-o", str(cubin), str(kept[0])]
    _log.info("ptxas had no entry for the kernel: assembling every entry of %s", kept[0].name)
    proc = run_tool(cmd, "nvcc", env=dict(env))
    if proc.returncode != 0 or not cubin.is_file():
        return None

    def before(text: str) -> str:
        lines = [line for line in text.splitlines(keepends=True) if not line.startswith("ptxas")]
        return "".join(lines)

    return subprocess.CompletedProcess(
        proc.args,
        proc.returncode,
        before(failed.stdout) + proc.stdout,
        before(failed.stderr) + proc.stderr,
    )


def _included_files(keep_dir: Path, src: Path) -> list[str]:
    """Every file the compile read, from the device pass's preprocessed file that ``-keep``
    leaves (``<name>.cpp1.ii``): the list ``nvcc -MD`` writes, without the second (host)
    preprocessing pass ``-MD`` costs (10-20 % of a small kernel's compile)."""
    kept = sorted(keep_dir.glob("*.cpp1.ii"))
    if len(kept) != 1:
        raise ToolchainError(
            f"nvcc left {len(kept)} preprocessed files (.cpp1.ii) for {src.name} in its keep "
            "directory, where gpuadvise reads the files the compile included",
            "report this with your nvcc version (nvcc --version)",
        )
    return preprocessed_files(kept[0].read_bytes())


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


def _resolve(
    module: CompiledModule,
    src: Path,
    missing: Sequence[str],
    options: CompileOptions,
    tc: Toolchain,
) -> CompiledModule:
    """The instance each name of ``missing`` means, compiling as little as possible.

    1. The parsed source (no compile): a name whose arguments resolve through typedefs,
       enumerators, constants, macros and default arguments to an instance of ``module`` is
       aliased to it.
    2. The names the source cannot resolve: one probe compile for all of them asks nvcc which
       symbol each means (``templates.probe_source``); one of ``module`` is aliased to it.
    3. The rest are instances the file lacks: one wrapper compile instantiates them, as for any
       new instance. A name the source resolved but that turns out not to be new there (the
       source's reading was short of the compiler's) is probed then.
    """
    from gpuadvise.source.kernel_names import compiler_spelling, source_names

    names = source_names(user_texts(src, module.dependencies, _user_roots(src, options)))
    aliases: dict[str, str] = {}
    spelled: dict[str, str] = {}
    for name in missing:
        spelling = compiler_spelling(names, name)
        if spelling is None:
            continue
        spelled[name] = spelling
        found = matching_kernels(module, spelling, aliases=False)
        if len(found) == 1:
            aliases[name] = found[0].mangled
    unknown = [n for n in missing if n not in aliases and n not in spelled]
    if unknown:
        aliases.update(_probe(module, src, unknown, options, tc))
    new = [n for n in missing if n not in aliases]
    if not new:
        return dataclasses.replace(module, aliases=tuple(aliases.items()))
    wrapped = _instantiate(module, src, new, options, tc, spelled)
    aliases.update(wrapped.aliases)
    late = [n for n in new if n not in aliases and n in spelled]
    if late:
        aliases.update(_probe(wrapped, src, late, options, tc))
    return dataclasses.replace(wrapped, aliases=tuple(aliases.items()))


def _user_roots(src: Path, options: CompileOptions) -> list[Path]:
    """The user's folders: the source's and the include folders (the rest is the toolkit's)."""
    return [src.parent, *(Path(d) for d in options.include_dirs)]


def _generated_file(options: CompileOptions, text: str, name: str) -> tuple[Path, Path | None]:
    """A generated source ``text``: in the cache's ``wrappers`` folder (named by its hash), or
    with ``use_cache=False`` in a temporary folder (returned second: remove it when done)."""
    if options.use_cache:
        path = cache_root(options) / "wrappers" / f"{sha256_hex(text)[:32]}.cu"
        try:
            if not path.exists():
                write_atomic(path, text)
        except OSError as exc:
            raise cache_write_error(cache_root(options), exc) from None
        return path, None
    folder = keep_until_exit("gpuadvise-wrap-")
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path, folder


def _compile_generated(
    module: CompiledModule,
    src: Path,
    names: Sequence[str],
    options: CompileOptions,
    tc: Toolchain,
    text: str,
    file_name: str,
) -> tuple[CompiledModule, Path, Path | None]:
    """Compile the generated ``text`` (a wrapper or a probe for ``names``); a compile error is
    the one-line :func:`instantiation_error`."""
    path, folder = _generated_file(options, text, file_name)
    try:
        return _compile(path, options, tc), path, folder
    except CompileError as exc:
        if folder is not None:
            release(folder)
        mangled = mangled_names(exc.message)
        raise instantiation_error(
            exc,
            src,
            path,
            names,
            closest_first(module, names[0]) if names else [],
            demangle(mangled, tc) if mangled else None,
        ) from None
    except BaseException:
        if folder is not None:
            release(folder)
        raise


def _probe(
    module: CompiledModule,
    src: Path,
    names: Sequence[str],
    options: CompileOptions,
    tc: Toolchain,
) -> dict[str, str]:
    """Name -> the mangled name of the kernel of ``module`` it means, for those of ``names``
    that mean one, by one probe compile (``templates.probe_source``)."""
    text = probe_source(module, src, names, _user_roots(src, options))
    probe, _path, folder = _compile_generated(module, src, names, options, tc, text, "probe.cu")
    if folder is not None:
        release(folder)
    have = {k.mangled for k in module.kernels}
    return {n: m for n, m in probed_symbols(probe.ptx, names).items() if m in have}


def _instantiate(
    module: CompiledModule,
    src: Path,
    missing: Sequence[str],
    options: CompileOptions,
    tc: Toolchain,
    spellings: Mapping[str, str] | None = None,
) -> CompiledModule:
    text = instantiation_source(module, src, missing, _user_roots(src, options))
    wrapped, wrapper, _folder = _compile_generated(
        module, src, missing, options, tc, text, "instantiate.cu"
    )
    aliases = instance_aliases(module, wrapped, missing, spellings)
    return dataclasses.replace(wrapped, source=src, aliases=aliases, wrapper_path=wrapper)

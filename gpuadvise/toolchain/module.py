"""A compiled module (:class:`CompiledModule`) and picking one of its kernels by name.

:func:`select_compiled_kernel` picks a kernel of a *compiled* module (by mangled or demangled
name, as nvcc built it); ``gpuadvise.source.signature.select_kernel`` is the other one: it picks
a declaration in the source text. A name asked for with template arguments in the user's own
spelling (``k<half, float>`` for the compiler's ``k<__half, float>``) is matched by
``compile_source`` (``module.aliases``); :func:`as_written` gives the kernel that name, and the
listings of a wrong name show the instances as the user's source spells them
(:func:`gpuadvise.source.kernel_names.user_spelling`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuadvise.errors import KernelNotFoundError
from gpuadvise.toolchain.diagnostics import available_hint, closeness
from gpuadvise.toolchain.names import base_name, has_template_args, norm, split_qualified
from gpuadvise.toolchain.resources import KernelInfo, field_of

if TYPE_CHECKING:  # (the source's names are read with tree-sitter: imported where they are)
    from gpuadvise.source.kernel_names import SourceNames

__all__ = [
    "CompiledModule",
    "as_written",
    "closest_first",
    "matching_kernels",
    "select_compiled_kernel",
    "user_names",
    "user_texts",
]


@dataclass(frozen=True)
class CompiledModule:
    """The result of ``compile_source``.

    ``cubin_path`` lies in the cache (or, with ``use_cache=False``, in a temporary directory
    removed when the process exits); ``ptx`` is the PTX ptxas compiled. ``flags`` are the nvcc
    flags used. ``compile_time_s`` is how long nvcc took (for a cache hit: the original compile;
    see ``from_cache``). ``dependencies`` lists the source and every file it includes.
    ``aliases`` maps names asked for in ``compile_source(kernels=...)`` to the mangled name of
    the instance compiled for them; ``wrapper_path`` is the generated file that instantiated
    them (None if none was needed). ``log`` keeps nvcc's warnings and ptxas's report.
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
        """Shorthand for :func:`select_compiled_kernel`."""
        return select_compiled_kernel(self, name)

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
        """The module ``to_dict`` wrote; ``ValueError`` if ``data`` is not such a dict."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a module is an object, not a {type(data).__name__}")

        def strings(key: str, default: Sequence[Any] = ()) -> list[str]:
            items = field_of(data, key, list) if key in data else list(default)
            if not all(isinstance(s, str) for s in items):
                raise ValueError(f"{key!r} holds a non-string")
            return items

        aliases = field_of(data, "aliases", list) if "aliases" in data else []
        if not all(
            isinstance(a, list) and len(a) == 2 and all(isinstance(s, str) for s in a)
            for a in aliases
        ):
            raise ValueError("'aliases' is not a list of name pairs")
        wrapper = data.get("wrapper_path")
        if wrapper is not None and not isinstance(wrapper, str):
            raise ValueError("'wrapper_path' is not a string")
        compile_time_s = field_of(data, "compile_time_s", (int, float))
        from_cache = data.get("from_cache", False)
        log = data.get("log", "")
        if not isinstance(from_cache, bool) or not isinstance(log, str):
            raise ValueError("'from_cache' or 'log' has the wrong type")
        return cls(
            source=Path(field_of(data, "source", str)),
            arch=field_of(data, "arch", str),
            cubin_path=Path(field_of(data, "cubin_path", str)),
            ptx=field_of(data, "ptx", str),
            kernels=tuple(KernelInfo.from_dict(k) for k in field_of(data, "kernels", list)),
            toolchain_version=field_of(data, "toolchain_version", str),
            flags=tuple(strings("flags")),
            compile_time_s=float(compile_time_s),
            from_cache=from_cache,
            dependencies=tuple(Path(p) for p in strings("dependencies")),
            aliases=tuple((a[0], a[1]) for a in aliases),
            wrapper_path=Path(wrapper) if wrapper else None,
            log=log,
        )


def matching_kernels(module: CompiledModule, name: str, aliases: bool = True) -> list[KernelInfo]:
    """Kernels ``name`` designates, best rule first (see :func:`select_compiled_kernel`)."""
    want = norm(name)
    if aliases:
        for asked, mangled in module.aliases:
            if norm(asked) == want:
                return [k for k in module.kernels if k.mangled == mangled]
    rules = (
        lambda k: k.mangled == name.strip(),
        lambda k: (
            want in (norm(k.name), norm(k.signature), norm(k.signature.removeprefix("void ")))
        ),
        lambda k: norm("::".join(split_qualified(k.name)[-len(split_qualified(want)) :])) == want,
    )
    for rule in rules:
        found = [k for k in module.kernels if rule(k)]
        if found:
            return found
    if "<" not in want:  # a template named without arguments: its instances
        n = len(split_qualified(want))
        found = []
        for k in module.kernels:
            parts = split_qualified(norm(k.name))
            if "::".join(parts[-n:-1] + [base_name(parts[-1])]) == want:
                found.append(k)
        return found
    return []


def select_compiled_kernel(module: CompiledModule, name: str | None = None) -> KernelInfo:
    """The kernel of the compiled ``module`` called ``name``.

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
        spelled = user_names(module)
        listing = ", ".join(spelled.get(k.mangled, k.name) for k in kernels)
        raise KernelNotFoundError(
            f"{where} has {len(kernels)} kernels: {listing}",
            "choose one with --kernel NAME",
        )
    found = matching_kernels(module, name)
    if len(found) == 1:
        return found[0]
    if found:
        raise KernelNotFoundError(
            f"kernel name {name!r} is ambiguous in {where}: {', '.join(k.name for k in found)}",
            "give the full name, with namespace and template arguments",
        )
    hint = available_hint(name, closest_first(module, name))
    if has_template_args(name) and not module.aliases:
        hint += "; templates are instantiated only for names given when compiling"
    raise KernelNotFoundError(f"no kernel named {name!r} in {where}", hint)


def closest_first(module: CompiledModule, name: str) -> list[str]:
    """The module's kernels, closest to ``name`` first, each as the user's source spells it
    when it spells it otherwise than the compiler (``k<half, float>``)."""
    spelled = user_names(module)
    scored: list[tuple[float, int, str]] = []
    for k in module.kernels:
        shown = spelled.get(k.mangled, k.name)
        score = max(closeness(name, k.name), closeness(name, shown))
        scored.append((-score, len(scored), shown))
    return [shown for _, _, shown in sorted(scored)]


def user_roots(module: CompiledModule) -> list[Path]:
    """The user's folders: the source's and the ``-I`` ones (others hold the toolkit's and the
    system's headers)."""
    roots = [module.source.parent]
    flags = list(module.flags)
    for i, f in enumerate(flags):
        if f == "-I" and i + 1 < len(flags):
            roots.append(Path(flags[i + 1]))
        elif f.startswith("-I") and len(f) > 2:
            roots.append(Path(f[2:]))
    return roots


def user_texts(src: Path, dependencies: Iterable[Path], roots: Iterable[Path]) -> tuple[str, ...]:
    """The text of ``src`` and of the files it includes from the folders ``roots``."""
    texts = []
    resolved = [r.resolve() for r in roots]
    for path in dict.fromkeys([src, *dependencies]):
        try:
            full = path.resolve()
            if path != src and not any(full.is_relative_to(r) for r in resolved):
                continue
            texts.append(path.read_text(errors="replace"))
        except OSError:
            continue
    return tuple(texts)


def _names(module: CompiledModule) -> SourceNames | None:
    from gpuadvise.source.kernel_names import source_names

    with contextlib.suppress(OSError):
        deps = [d for d in module.dependencies if d != module.wrapper_path]
        texts = user_texts(module.source, deps, user_roots(module))
        if texts:
            return source_names(texts)
    return None


def user_names(module: CompiledModule) -> dict[str, str]:
    """Mangled name -> the instance as the user's source spells it, for the template instances
    it spells otherwise than the compiler (``_Z16k_get_rows...`` -> ``k_get_rows_float<half,
    float>``)."""
    if not any(has_template_args(k.name) for k in module.kernels):
        return {}
    names = _names(module)
    if names is None:
        return {}
    from gpuadvise.source.kernel_names import user_spelling

    out = {}
    for k in module.kernels:
        if has_template_args(k.name):
            shown = user_spelling(names, k.name, lambda a, b: norm(a) == norm(b))
            if norm(shown) != norm(k.name):
                out[k.mangled] = shown
    return out


def as_written(module: CompiledModule, name: str, kernel: KernelInfo) -> KernelInfo:
    """``kernel``, selected for ``name``, named as the user wrote it when ``name`` means it
    through the source (``k<half, float>`` for ``k<__half, float>``): the compiler's namespaces,
    the user's template arguments. Unchanged when ``name`` is a spelling of the compiler's."""
    if not has_template_args(name) or not any(
        norm(asked) == norm(name) and mangled == kernel.mangled for asked, mangled in module.aliases
    ):
        return kernel
    if kernel.mangled == name.strip() or any(
        norm(form) == norm(name) for form in (kernel.name, kernel.short_name, kernel.signature)
    ):
        return kernel
    parts = split_qualified(" ".join(name.split()).removeprefix("::"))
    if base_name(parts[-1]) != base_name(kernel.short_name):
        return kernel
    prefix = split_qualified(kernel.name)[:-1]
    return dataclasses.replace(kernel, name="::".join([*prefix, parts[-1]]))

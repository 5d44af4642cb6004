"""``gpuadvise analyze kernel.ptx|kernel.cubin --kernel NAME``: kernels without source.

The module is read, not compiled (:mod:`gpuadvise.toolchain.binary`): the models and the rules
run on its PTX (traced by the CPU emulator) and its SASS, located by its line info when it has
some (the file the line info names is read, never written, to place findings), else at the
PTX's own lines; a cubin without PTX gives resources, occupancy and the SASS-based rules, and
says that nothing was traced.

- :func:`build_binary`: the launch spec, the device (a cubin's own architecture unless
  ``--gpu``/``--arch`` says otherwise: then they must agree) and the options;
- :func:`resolve_binary_launch`: the spec bound to the kernel's parameters, named and typed by
  the source its line info names when that file defines the kernel, else ``arg0``, ``arg1`` ...
  typed by the mangled name, else by the PTX ``.entry`` (or the cubin's parameter slots);
- :func:`run_sourceless_rules`: the rules, whose fixes that rewrite the source (a source diff,
  defines, nvcc flags, a candidate built from rewritten source) are not built: such a finding
  keeps its message and says that its fix needs the source (``--source FILE``);
- :func:`with_source`: ``--source FILE``: the kernel is analyzed from that source as a ``.cu``
  is (variants, ``--fix``), once the binary is checked to hold it.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuadvise.errors import UsageError
from gpuadvise.rules.context import ModelUnavailable
from gpuadvise.toolchain.binary import BinaryParam, binary_arch, binary_params, is_binary

if TYPE_CHECKING:
    from gpuadvise.devices import DeviceChoice
    from gpuadvise.rules.config import Config
    from gpuadvise.rules.context import RuleContext
    from gpuadvise.rules.evaluate import RulesRun
    from gpuadvise.rules.registry import Registry
    from gpuadvise.source.signature import Param
    from gpuadvise.spec.kernel_spec import KernelSpec, ResolvedLaunch
    from gpuadvise.toolchain import CompiledModule, CompileOptions, KernelInfo, Toolchain

__all__ = [
    "NEEDS_SOURCE",
    "NeedsSource",
    "binary_source",
    "build_binary",
    "check_binary_request",
    "is_binary",
    "located_file",
    "resolve_binary_launch",
    "run_sourceless_rules",
    "with_source",
]

NEEDS_SOURCE = "needs the source: pass --source FILE, the .cu that defines the kernel"


class NeedsSource(ModelUnavailable):
    """A rule asked to build a candidate from rewritten source, or with other nvcc flags, for a
    kernel analyzed from its binary alone."""


def binary_source(opts: Any) -> Path | None:
    """The ``.ptx``/``.cubin``/``.fatbin`` ``opts`` analyze: the file given, or the one its
    launch spec names as its ``source``; None for a source file."""
    if opts.source:
        return Path(opts.source) if is_binary(opts.source) else None
    if opts.spec:
        from gpuadvise.spec.kernel_spec import load_spec

        named = load_spec(opts.spec).get("source")
        return Path(named) if named is not None and is_binary(named) else None
    return None


# ---------------------------------------------------------------------------------------------
# the request


def check_binary_request(
    opts: Any,
    *,
    fix: bool = False,
    diff: bool = False,
    write_variants: str | None = None,
    measure: bool | None = None,
) -> Any:
    """``analyze``'s options for a binary input, checked: what needs the source (``--fix``,
    ``--diff``, ``--write-variants``, ``--measure``) is an error saying to pass ``--source``;
    with ``--source`` the source is analyzed (:func:`with_source`). ``opts`` unchanged for a
    source file."""
    with_src = getattr(opts, "with_source", None)
    binary = binary_source(opts)
    if binary is None:
        if with_src:
            raise UsageError(
                "--source goes with a kernel given as .ptx, .cubin or .fatbin",
                "analyze the .cu itself, or give the binary and --source FILE",
            )
        return opts
    if with_src:
        return with_source(opts, binary, Path(with_src))
    wanted = [
        name
        for name, on in (
            ("--fix", fix),
            ("--diff", diff),
            ("--write-variants", write_variants is not None),
            ("--measure", measure is True),
        )
        if on
    ]
    if wanted:
        raise UsageError(
            f"{wanted[0]} builds the kernel's variants, which {binary.name} cannot give: it "
            "holds no source",
            "pass --source FILE (the .cu that defines the kernel), or leave it out",
        )
    return opts


def with_source(opts: Any, binary: Path, source: Path) -> Any:
    """``--source FILE`` with a binary: the binary must hold the kernel (else the error names
    its kernels); the analysis then compiles ``source`` as for a ``.cu`` given by name."""
    from gpuadvise.spec.kernel_spec import _check_source

    _check_source(source)  # a .cu that exists and is text
    if is_binary(source):
        raise UsageError(
            f"--source {source} is a binary too", "give the .cu that defines the kernel"
        )
    from gpuadvise.toolchain import select_compiled_kernel

    _opts, _choice, _note, module = _device_and_module(opts, binary)
    kernel = select_compiled_kernel(module, _kernel_name(opts, binary, module))
    named = opts.kernel or kernel.name
    return dataclasses.replace(opts, source=str(source), kernel=named, with_source=None)


# ---------------------------------------------------------------------------------------------
# the spec, the device and the options


def build_binary(
    opts: Any, plain_build: Callable[[Any], Any]
) -> tuple[KernelSpec, DeviceChoice, CompileOptions]:
    """The launch spec, device and compile options of a binary input (see the module doc).
    ``plain_build``: ``analyze.options``' build of a source, which takes it from here."""
    from gpuadvise.toolchain import compile_source, find_toolchain, select_compiled_kernel

    path = binary_source(opts)
    assert path is not None
    opts, choice, note, module = _device_and_module(opts, path)
    # a kernel the binary lacks: the error names its own
    select_compiled_kernel(module, _kernel_name(opts, path, module))
    # --kernel, else the spec file's (as for a .cu), else the module's only one
    kernel = opts.kernel if opts.kernel or _spec_kernel(opts, path) else None
    if kernel is None and _spec_kernel(opts, path) is None:
        kernel = _kernel_name(opts, path, module)
    spec, choice, options = plain_build(dataclasses.replace(opts, kernel=kernel))
    tc = find_toolchain(opts.nvcc)
    found = select_compiled_kernel(compile_source(path, options, tc), spec.kernel)
    # the spec against the kernel's parameters now (a .cu's spec is checked before it compiles)
    resolve_binary_launch(spec, found, options, tc)
    if note is not None:
        choice = dataclasses.replace(choice, note=note)
    return spec, choice, options


def _device_and_module(opts: Any, path: Path) -> tuple[Any, DeviceChoice, str | None, Any]:
    """``opts`` with the cubin's architecture when no device was named, the device, the note
    that says so, and the module read for that device."""
    from gpuadvise.devices import resolve_device
    from gpuadvise.toolchain import CompileOptions, compile_source, find_toolchain

    if not path.is_file():
        raise UsageError(f"{path} does not exist", "check the path to the .ptx or .cubin")
    note = None
    arch = binary_arch(path)
    if not (opts.gpu or opts.arch) and arch is not None:
        opts = dataclasses.replace(opts, arch=arch)
        note = f"no --gpu given: the cubin's architecture {arch} was assumed"
    choice = resolve_device(opts.gpu, opts.arch)
    load = CompileOptions(
        arch=choice.device.arch, xptxas=opts.xptxas, maxrregcount=opts.maxrregcount
    )
    return opts, choice, note, compile_source(path, load, find_toolchain(opts.nvcc))


def _spec_kernel(opts: Any, path: Path) -> str | None:
    from gpuadvise.spec.kernel_spec import find_spec_for, load_spec

    spec_file = opts.spec or (find_spec_for(path) if opts.source else None)
    named = load_spec(spec_file).get("kernel") if spec_file else None
    return str(named) if named is not None else None


def _kernel_name(opts: Any, path: Path, module: Any) -> str:
    """The kernel asked for: ``--kernel``, the spec's, else the module's only one."""
    from gpuadvise.toolchain import select_compiled_kernel

    return str(opts.kernel or _spec_kernel(opts, path) or select_compiled_kernel(module, None).name)


# ---------------------------------------------------------------------------------------------
# the parameters

_PTX_SCALARS = {
    "u8": "unsigned char",
    "s8": "signed char",
    "u16": "unsigned short",
    "s16": "short",
    "u32": "unsigned int",
    "s32": "int",
    "b32": "unsigned int",
    "u64": "unsigned long long",
    "s64": "long long",
    "b64": "unsigned long long",
    "f32": "float",
    "f64": "double",
}


def located_file(module: CompiledModule, kernel: KernelInfo, tc: Toolchain | None) -> str | None:
    """The file the kernel's line info names most (its body's lines: inlined code counted at
    its call site), or None without line info."""
    from gpuadvise.toolchain import sass

    try:
        instrs = sass.disassemble(module.cubin_path, kernel.mangled, tc)
    except Exception:  # noqa: BLE001 - no SASS, no line info: the analysis reports the SASS
        return None
    files = Counter(f for f, _line in (i.call_site for i in instrs) if f)
    return files.most_common(1)[0][0] if files else None


def _source_params(file: str | None, kernel: KernelInfo, count: int | None) -> list[Param] | None:
    """The kernel's parameters as the file its line info names declares them, when it exists,
    defines the kernel and declares ``count`` parameters."""
    from gpuadvise.source.signature import parse_signature, with_compiled_types
    from gpuadvise.spec.cuda_types import lookup
    from gpuadvise.toolchain.names import split_params

    if file is None or not os.path.isfile(file):
        return None
    try:
        code = Path(file).read_text(encoding="utf-8", errors="replace")
        declared = parse_signature(code, kernel.name)
    except Exception:  # noqa: BLE001 - a file that does not define it: named arg0, arg1 ...
        return None
    if count is not None and len(declared) != count:
        return None
    compiled = split_params(kernel.signature) or []
    return with_compiled_types(declared, compiled, lambda t: lookup(t) is not None, code)


def _demangled_param(name: str, index: int, type_text: str) -> Param:
    """A parameter from its type as the demangler writes it (``float const*``, ``int``)."""
    from gpuadvise.source.signature import Param

    text = " ".join(type_text.replace("*", " * ").replace("&", " & ").split())
    if "*" not in text:
        return Param(name, type_text.strip(), False, False, None, index=index)
    words = text[: text.index("*")].split()
    pointee = " ".join(w for w in words if w not in ("const", "volatile", "__restrict__"))
    pointee = (pointee or "void") + ("*" if text.count("*") > 1 else "")
    return Param(name, type_text.strip(), True, "const" in words, pointee, index=index)


def _typed_params(
    spec: KernelSpec, kernel: KernelInfo, declared: tuple[BinaryParam, ...] | None
) -> list[Param]:
    """``arg0``, ``arg1`` ... typed by the mangled name, else by the module's declaration and
    the spec (an 8-byte parameter given a buffer is a pointer)."""
    from gpuadvise.source.signature import Param
    from gpuadvise.toolchain.names import split_params

    names = split_params(kernel.signature)
    if names is not None and (declared is None or len(names) == len(declared)):
        out = []
        for i, text in enumerate(names):
            out.append(_demangled_param(f"arg{i}", i, text))
        return out
    if declared is None:
        raise UsageError(
            f"the parameters of {kernel.name} are not in its module (no PTX, no parameter table)",
            "give the kernel's PTX (nvcc -ptx), or its source with --source FILE",
        )
    out = []
    for p in declared:
        name = f"arg{p.ordinal}"
        buffer = spec.buffer(name)
        if buffer is not None and p.size_bytes == 8:
            elem = buffer.elem_type.name
            out.append(Param(name, f"{elem}*", True, False, elem, index=p.ordinal))
            continue
        arg = spec.arg(name)
        ctype = _PTX_SCALARS.get(p.ptx_type or "")
        if p.ptx_type is None and p.size_bytes in (4, 8):
            is_float = arg is not None and isinstance(arg.value, float)
            ctype = {
                (4, False): "int",
                (8, False): "long long",
                (4, True): "float",
                (8, True): "double",
            }[(p.size_bytes, is_float)]
        if ctype is None:
            ctype = f"bytes{p.size_bytes}"  # an aggregate: given by its bytes
        out.append(Param(name, ctype, False, False, None, index=p.ordinal))
    return out


def resolve_binary_launch(
    spec: KernelSpec, kernel: KernelInfo, options: CompileOptions, tc: Toolchain
) -> ResolvedLaunch:
    """The spec bound to the parameters of a kernel read from its binary (see the module doc);
    a parameter passed by value as an aggregate takes its bytes (``{ bytes = "..." }``)."""
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.toolchain import compile_source

    module = compile_source(spec.source, options, tc)
    declared = binary_params(module, kernel.mangled)
    params = _source_params(
        located_file(module, kernel, tc), kernel, None if declared is None else len(declared)
    )
    if params is None:
        params = _typed_params(spec, kernel, declared)
    sizes = {
        p.value_type: (d.size_bytes, d.align or min(d.size_bytes & -d.size_bytes, 8))
        for p, d in zip(params, declared or (), strict=False)
        if not p.is_pointer
    }

    def struct_size(name: str) -> tuple[int, int]:
        if name in sizes:
            return sizes[name]
        raise UsageError(
            f"{name} is a type gpuadvise can only size with the compiler, and {kernel.name} was "
            "given without source",
            "pass --source FILE, or give the buffer a CUDA type (float32, uint8 ...)",
        )

    return resolve(spec, params, struct_size)


# ---------------------------------------------------------------------------------------------
# the rules


def _rewrites_source(variant: Any) -> bool:
    return bool(variant.diff or variant.defines or variant.nvcc_flags)


def run_sourceless_rules(
    analysis: Any, context: RuleContext, config: Config, registry: Registry
) -> RulesRun:
    """The rules on a kernel analyzed from its binary: a fix that rewrites the source (or was
    to be built from rewritten source) is dropped, its finding saying that it needs the source;
    a fix that changes the launch, or a proxy, stays."""
    from gpuadvise.rules.evaluate import evaluate_rules

    needs: set[tuple[str, str | None, int | None, str]] = set()
    try:
        services: Any = context.services
    except ModelUnavailable:
        services = None

    def guarded(rule: Any) -> Any:
        original = rule.transform

        def transform(ctx: Any, finding: Any) -> Any:
            if services is not None:
                services.needed_source = False
            try:
                variant = original(ctx, finding)
            except NeedsSource:
                variant, asked = None, True
            else:
                asked = bool(services is not None and services.needed_source)
            if asked or (variant is not None and _rewrites_source(variant)):
                needs.add((finding.rule, finding.file, finding.line, finding.message))
                return None
            return variant

        clone = copy.copy(rule)
        object.__setattr__(clone, "transform", transform)
        return clone

    wrapped = dataclasses.replace(registry, rules=tuple(guarded(r) for r in registry.rules))
    run = evaluate_rules(context, config, registry=wrapped)
    found = tuple(
        dataclasses.replace(f, message=f"{f.message} (its fix {NEEDS_SOURCE})")
        if (f.rule, f.file, f.line, f.message) in needs
        else f
        for f in run.findings
    )
    notes = list(run.notes)
    module = analysis.module
    if needs:
        notes.append(
            f"{len(needs)} fix{'es rewrite' if len(needs) != 1 else ' rewrites'} the source, which "
            f"{Path(analysis.spec.source).name} does not hold: {NEEDS_SOURCE}"
        )
    if not module.ptx:
        notes.append(
            f"{Path(analysis.spec.source).name} holds SASS and no PTX: resources, occupancy and "
            "the SASS-based rules ran; the memory trace (the CPU emulator runs PTX) and the rules "
            "that read it did not (give the PTX, nvcc -ptx, or a fatbin that embeds it)"
        )
    return dataclasses.replace(run, findings=found, notes=tuple(notes))

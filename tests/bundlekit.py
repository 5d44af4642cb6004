"""A test module's own kernels written as one source file, compiled once (issue 30, section 3).

Each kernel a test writes to its own ``tmp_path`` is a compile of its own (its path is part of
the compile cache's key: the line table names it) and a disassembly of its own: about 0.5 CPU-s
of nvcc and 0.5 of nvdisasm start-up whatever the kernel's size, on the 2-core machine the
largest share of a rule test's CPU. The same kernels written into one ``k.cu`` cost one nvcc
run (0.8 CPU-s for 12 small kernels against 0.5 for one) and one nvdisasm run for the whole
cubin (its output kept beside it in the run's compile cache), each test then analysing its own
kernel of it with its own launch spec (``<kernel>.toml`` beside the source: the spec discovery's
first choice).

A bundle suits kernels that a test analyses alone: the rules read a kernel's own PTX and SASS
(each kernel of a module is compiled and register-allocated apart), its own source lines, and
its own launch. Keep out of one: template kernels that the file does not instantiate (the
pipeline instantiates each one asked for in a compile of its own, so nothing would be shared);
kernels whose test reads the whole file, the module's function count, or a line by number
(a kernel's lines move in the bundle: ``rulekit.source_line`` finds them). A cubin of more than
``sass.NARROW_ABOVE`` functions has each kernel's SASS read alone (an nvdisasm run per kernel
again): keep a bundle under it, or take conftest's ``sass_read_whole`` fixture for the module
(the cubin read whole, once).

The macros a kernel's text defines are ``#undef``-ed after it, so that the next kernel's text
reads as it does alone (``#define T 256`` before a ``template <typename T>``)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from pathlib import Path

from gpuadvise.toolchain.names import base_name, split_qualified

_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)", re.M)


def bundle_text(codes: Mapping[str, str]) -> str:
    """The kernels' texts (kernel name -> its code, dedented) one after the other, each
    followed by an ``#undef`` of every macro it defines."""
    parts = []
    for code in codes.values():
        text = textwrap.dedent(code).strip("\n") + "\n"
        undef = "".join(f"#undef {m}\n" for m in dict.fromkeys(_DEFINE.findall(text)))
        parts.append(text + undef)
    return "\n".join(parts)


def write_bundle(folder: Path, codes: Mapping[str, str], specs: Mapping[str, str]) -> Path:
    """``folder/k.cu`` holding every kernel of ``codes`` (:func:`bundle_text`) and, for each
    kernel of ``specs`` (kernel name -> the TOML of its launch, without ``source`` and
    ``kernel``), ``folder/<kernel's base name>.toml`` naming ``k.cu`` and that kernel
    (``nw_tpl.toml`` for ``nw_tpl<16>``: one instance of a template per bundle). Returns the .cu
    path."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "k.cu"
    src.write_text(bundle_text(codes))
    for kernel, spec in specs.items():
        spec_file = folder / f"{base_name(split_qualified(kernel)[-1])}.toml"
        assert not spec_file.exists(), f"two kernels of one name in a bundle: {kernel}"
        spec_file.write_text(f'source = "k.cu"\nkernel = "{kernel}"\n{spec}')
    return src

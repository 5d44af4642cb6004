"""nvcc, ptxas and the disassemblers: find them, compile with line info, read resources and
SASS with source lines, and cache the results by content.

The modules, in the order a compile uses them:

- ``find.py``: finding the tools and headers (:func:`find_toolchain`, :class:`Toolchain`);
- ``options.py``: how to compile (:class:`CompileOptions`);
- ``compile.py``: one nvcc run per source, file names kept away from nvcc's shell
  (:func:`compile_source`);
- ``cache.py``: the content-hash cache of compiled modules (:func:`cache_root`);
- ``scratch.py``: temporary folders, removed in every case;
- ``diagnostics.py``: nvcc's errors in one line (missing headers, texture references, templates);
- ``templates.py``: instantiating kernel templates asked for by name, and the probe that asks
  nvcc which instance a name means;
- ``resources.py``: ptxas ``-v`` and the cubin: :class:`KernelInfo`, :class:`KernelResources`;
- ``names.py``: demangling and the spellings of a kernel name (:func:`demangle`);
- ``module.py``: :class:`CompiledModule`, :func:`select_compiled_kernel` and
  :func:`as_written` (the kernel named as the user wrote it);
- ``layout.py``: struct layouts as the compiler lays them out (:func:`struct_layouts`);
- ``sass.py``: SASS with source lines and the memory summary.

The names below are the package's API; import them from here.
"""

from __future__ import annotations

from gpuadvise.toolchain.cache import cache_root
from gpuadvise.toolchain.compile import compile_source
from gpuadvise.toolchain.find import Toolchain, find_toolchain
from gpuadvise.toolchain.layout import struct_layouts
from gpuadvise.toolchain.module import CompiledModule, as_written, select_compiled_kernel
from gpuadvise.toolchain.names import demangle
from gpuadvise.toolchain.options import CompileOptions, normalize_arch
from gpuadvise.toolchain.resources import KernelInfo, KernelResources, parse_ptxas_report

__all__ = [
    "CompileOptions",
    "CompiledModule",
    "KernelInfo",
    "KernelResources",
    "Toolchain",
    "as_written",
    "cache_root",
    "compile_source",
    "demangle",
    "find_toolchain",
    "normalize_arch",
    "parse_ptxas_report",
    "select_compiled_kernel",
    "struct_layouts",
]

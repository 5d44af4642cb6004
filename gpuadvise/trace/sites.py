"""Where the trace puts a memory instruction: its :class:`~gpuadvise.trace.access.InstrInfo`.

Both tracers (the emulator, :mod:`gpuadvise.trace.emulate`, and the GPU tracer,
:mod:`gpuadvise.trace.gpu`) describe the PTX instructions of their trace the same way, with
:func:`instr_info`. ``file``/``line`` are the innermost source location, the convention of
nvdisasm's line table that :mod:`gpuadvise.model.reconcile` matches against; for code inlined from
a header of the CUDA toolkit (``atomicAdd`` is ``device_atomic_functions.hpp``) that is the
header's line, so ``site_file``/``site_line`` name the user's line that the models report.

The user's line is the innermost location of the inlining chain in the file the kernel lives in
(the file of the chain's outermost location, the kernel's body): code inlined from a toolkit header
(``__ldg``, ``atomicAdd``), from an included header of the user's (a ``Comparator`` in
``common.h``) or from a library header is reported at the kernel's call site. When the kernel's own
file is not known (no chain), the innermost call site outside the toolkit's headers is taken.

``call_file``/``call_line`` is the chain's outermost location, the line of the kernel's body whose
call the instruction is inlined through, when it differs from the reported line: the code of a
helper function in the kernel's own file keeps its own line, and a rule that wants the user's call
site in the kernel (a reduction tail in ``warp_reduce(sdata, tid)``) reads it there.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gpuadvise.trace.access import InstrInfo, Kind, Space

if TYPE_CHECKING:
    from gpuadvise.ptx.parser import Instr

__all__ = ["instr_info", "is_toolkit_header"]


@functools.lru_cache(maxsize=256)
def is_toolkit_header(path: str) -> bool:
    """Whether ``path`` lies in a CUDA toolkit's include folder (the one holding
    ``cuda_runtime_api.h``), subfolders included (``crt/``, ``cuda/std/``, CCCL's)."""
    p = Path(os.path.normpath(path))
    return any(d.name == "include" and (d / "cuda_runtime_api.h").is_file() for d in p.parents)


def instr_info(
    inst: int,
    ins: Instr,
    files: Mapping[int, str],
    space: Space | int,
    kind: Kind | int,
    width: int,
    data_address: bool = False,
) -> InstrInfo:
    """The trace's description of PTX instruction ``ins`` (its trace index ``inst``), with the
    PTX's ``.file`` table ``files``; ``data_address``: its address comes from loaded data."""
    loc = ins.inner_loc or ins.loc
    path = files.get(loc.file) if loc is not None else None
    line = loc.line if loc is not None else None
    site_file, site_line = _site(path, ins, files)
    call_file, call_line = _call(path, line, site_file, site_line, ins, files)
    return InstrInfo(
        inst=inst,
        file=path,
        line=line,
        opcode=ins.opcode,
        space=Space(space),
        kind=Kind(kind),
        width=width,
        site_file=site_file,
        site_line=site_line,
        call_file=call_file,
        call_line=call_line,
        data_address=data_address,
    )


def _call(
    path: str | None,
    line: int | None,
    site_file: str | None,
    site_line: int | None,
    ins: Instr,
    files: Mapping[int, str],
) -> tuple[str | None, int | None]:
    """(file, line) of the kernel body's call that ``ins`` is inlined through (the outermost
    location of its chain, in the kernel's file) when it differs from the reported line, else
    (None, None)."""
    if not ins.call_sites:
        return None, None
    outer = ins.call_sites[-1]
    kernel_file = files.get(outer.file)
    if kernel_file is None or is_toolkit_header(kernel_file):
        return None, None
    reported = (site_file, site_line) if site_line is not None else (path, line)
    if reported[0] is not None and reported[1] == outer.line:
        if os.path.normpath(reported[0]) == os.path.normpath(kernel_file):
            return None, None
    return kernel_file, outer.line


def _site(path: str | None, ins: Instr, files: Mapping[int, str]) -> tuple[str | None, int | None]:
    """(file, line) of the user's call site of ``ins`` when its innermost location ``path`` is
    elsewhere, else (None, None)."""
    if path is None or not ins.call_sites:
        return None, None
    kernel_file = files.get(ins.call_sites[-1].file)
    if kernel_file is not None and not is_toolkit_header(kernel_file):
        if os.path.normpath(path) == os.path.normpath(kernel_file):
            return None, None
        for at in ins.call_sites:
            at_path = files.get(at.file)
            if at_path is not None and os.path.normpath(at_path) == os.path.normpath(kernel_file):
                return at_path, at.line
        return None, None
    if is_toolkit_header(path):
        for at in ins.call_sites:
            at_path = files.get(at.file)
            if at_path is not None and not is_toolkit_header(at_path):
                return at_path, at.line
    return None, None

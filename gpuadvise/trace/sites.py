"""Where the trace puts a memory instruction: its :class:`~gpuadvise.trace.access.InstrInfo`.

Both tracers (the emulator, :mod:`gpuadvise.trace.emulate`, and the GPU tracer,
:mod:`gpuadvise.trace.gpu`) describe the PTX instructions of their trace the same way, with
:func:`instr_info`. ``file``/``line`` are the innermost source location, the convention of
nvdisasm's line table that :mod:`gpuadvise.model.reconcile` matches against; for code inlined from
a header of the CUDA toolkit (``atomicAdd`` is ``device_atomic_functions.hpp``) that is the
header's line, so ``site_file``/``site_line`` name the user's line that the models report: the
innermost call site outside the toolkit's headers.
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
) -> InstrInfo:
    """The trace's description of PTX instruction ``ins`` (its trace index ``inst``), with the
    PTX's ``.file`` table ``files``."""
    loc = ins.inner_loc or ins.loc
    path = files.get(loc.file) if loc is not None else None
    line = loc.line if loc is not None else None
    site_file = site_line = None
    if path is not None and is_toolkit_header(path):
        for at in ins.call_sites:
            at_path = files.get(at.file)
            if at_path is not None and not is_toolkit_header(at_path):
                site_file, site_line = at_path, at.line
                break
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
    )

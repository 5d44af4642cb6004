"""Struct layouts: ``sizeof``/``alignof`` of the source's types, as the compiler lays them out."""

from __future__ import annotations

import hashlib
import os
import re
import struct
import threading
from collections.abc import Sequence
from pathlib import Path

from gpuadvise.errors import ToolchainError, UsageError
from gpuadvise.toolchain.compile import effective_flags, safe_scratch
from gpuadvise.toolchain.find import Toolchain, find_toolchain, run_tool
from gpuadvise.toolchain.options import CompileOptions
from gpuadvise.toolchain.templates import include_line

__all__ = ["struct_layouts"]

_LAYOUT_RE = re.compile(r"__gpuadvise_layout_(\d+)\[16\]\s*=\s*\{([^}]*)\}")

# the layouts probed in this process, by everything the probe is made of (see _probe_key)
_probed: dict[tuple[object, ...], dict[str, tuple[int, int]]] = {}
_probed_lock = threading.Lock()  # variants are built in a thread (analyze/ahead.py)


def struct_layouts(
    source: str | os.PathLike[str],
    names: Sequence[str],
    options: CompileOptions | None = None,
    toolchain: Toolchain | None = None,
    namespaces: Sequence[str] = (),
) -> dict[str, tuple[int, int]]:
    """``{name: (sizeof, alignof)}`` of types the source defines, as the compiler lays them out.

    Compiles a file that includes ``source`` and stores ``sizeof``/``alignof`` of each type in a
    ``__device__`` array, and reads the array's initializer back from the PTX (no GPU, no host
    program to run). ``namespaces`` are opened with ``using namespace`` (a kernel's own namespace,
    so that ``Cell`` finds ``sim::Cell``). An unknown type raises :class:`UsageError`.

    A probe is run once a process for the same file (its path and bytes), names, flags,
    namespaces and toolchain: an analysis binds the launch of the kernel, of each variant traced
    for its point and of both kernels of each layout proxy (one file), each naming the same
    types (issue 31: HeCBench interleave ran five probes, 0.4-1 CPU-s of nvcc each).
    """
    if not names:
        return {}
    options = options or CompileOptions()
    tc = toolchain or find_toolchain()
    src = Path(source).resolve()
    flags = [f for f in effective_flags(options, tc) if f not in ("-Xptxas", "-v")]
    key = _probe_key(src, names, flags, tc, namespaces)
    with _probed_lock:
        known = None if key is None else _probed.get(key)
    if known is not None:
        return dict(known)
    found = _probe(src, names, flags, tc, namespaces)
    if key is not None:
        with _probed_lock:
            _probed[key] = dict(found)
    return found


def _probe_key(
    src: Path, names: Sequence[str], flags: Sequence[str], tc: Toolchain, namespaces: Sequence[str]
) -> tuple[object, ...] | None:
    """What a probe's result follows from: the source's path (its own folder is searched for
    its quoted includes) and bytes, the names, the flags (the include folders among them), the
    environment's nvcc flags, the namespaces and the toolchain; None when the source cannot be
    read (the probe then says why)."""
    from gpuadvise.toolchain.cache import nvcc_env

    try:
        digest = hashlib.sha256(src.read_bytes()).hexdigest()
    except OSError:
        return None
    return (str(src), digest, tuple(names), tuple(flags), tuple(nvcc_env()), tuple(namespaces), tc)


def _probe(
    src: Path, names: Sequence[str], flags: Sequence[str], tc: Toolchain, namespaces: Sequence[str]
) -> dict[str, tuple[int, int]]:
    """:func:`struct_layouts`' probe: one ``nvcc -ptx`` of a file that includes ``src``."""
    lines = [include_line(src)]
    lines += [f"using namespace {ns};" for ns in namespaces if ns]
    for i, name in enumerate(names):
        lines.append(
            f'extern "C" __device__ unsigned long long __gpuadvise_layout_{i}[2] = '
            f"{{sizeof({name}), alignof({name})}};"
        )
    with safe_scratch("gpuadvise-layout-") as tmp:
        probe = tmp / "layout.cu"
        probe.write_text("\n".join(lines) + "\n", encoding="utf-8")
        cmd = [str(tc.nvcc), *flags, "-ptx", "-o", "-", str(probe)]
        proc = run_tool(cmd, "nvcc", env={**os.environ, "TMPDIR": str(tmp)})
    if proc.returncode != 0:
        errs = [ln for ln in proc.stderr.splitlines() if "error" in ln][:2]
        raise UsageError(
            f"cannot find the layout of {', '.join(names)} in {src.name}: "
            + ("; ".join(e.split("error:", 1)[-1].strip() for e in errs) or "nvcc failed"),
            "give the element type as the source names it (with its namespace), or a CUDA type",
        )
    found: dict[str, tuple[int, int]] = {}
    for m in _LAYOUT_RE.finditer(proc.stdout):
        data = [int(v, 0) for v in m.group(2).split(",") if v.strip()]
        data += [0] * (16 - len(data))
        size, align = struct.unpack("<QQ", bytes(data[:16]))
        found[names[int(m.group(1))]] = (size, align)
    missing = [n for n in names if n not in found]
    if missing:
        raise ToolchainError(f"nvcc gave no layout for {', '.join(missing)}", "report this bug")
    return found

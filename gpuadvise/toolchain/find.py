"""Finding the CUDA tools: nvcc, ptxas, the disassemblers, the demangler and the headers.

nvcc is looked for, in order: the explicit argument (``--nvcc``), ``$GPUADVISE_NVCC``,
``$CUDA_HOME/bin`` then ``$CUDA_PATH/bin``, ``PATH``, the pip wheels of the ``toolkit`` extra
(through ``cuda.pathfinder``, else ``site-packages/nvidia/cu13/bin``), and last
``/usr/local/cuda/bin``. An explicit nvcc that does not exist is an error, never silently
replaced. The environment variables are read directly, not through
``cuda.pathfinder.get_cuda_path_or_home`` (which caches them for the life of the process).

nvcc is then asked (``--dryrun``, no compilation) where it really lives, so wrapper scripts and
symlinks are seen through: ptxas is nvcc's own, nvdisasm/cuobjdump/cu++filt are taken from
nvcc's real bin directory when there, else from the other sources in the same order; the host
compiler is the one nvcc will call; the front end ``cicc`` is checked to exist (the wheel nvcc
needs the ``nvidia-nvvm`` wheel, and its ``nvcc.profile`` finds it at ``../nvvm/bin``: no
environment has to be set up for the wheels).

The CCCL headers (CUB, Thrust, libcu++): nvcc searches its own ``include/cccl`` (the
``nvidia-cuda-cccl`` wheel installs there, next to the nvcc wheel). When nvcc's own folders do
not hold them but the CCCL wheel sits elsewhere (another site-packages), its folder is found the
way the other wheels are and passed to nvcc with ``-isystem`` (``Toolchain.extra_include_dirs``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuadvise.errors import ToolchainError
from gpuadvise.fileio import lookup_problem
from gpuadvise.inputfiles import parse_json, read_cache_bytes
from gpuadvise.toolchain.cache_dir import cache_root_problem, default_cache_root
from gpuadvise.toolchain.scratch import scratch_dir

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_CUDA_ROOT",
    "INSTALL_HINT",
    "Toolchain",
    "find_toolchain",
    "run_tool",
]

INSTALL_HINT = (
    'pip install "gpuadvise[toolkit]" for the CUDA compiler wheels, '
    "or set CUDA_HOME (or pass --nvcc) to a CUDA toolkit"
)
RUN_TIMEOUT_S = 900.0
DEFAULT_CUDA_ROOT = Path("/usr/local/cuda")
"""Where the CUDA installer puts the toolkit; the last place nvcc is looked for."""

CCCL_MARKER = Path("cub") / "cub.cuh"
"""A header of every CCCL release; the folder that holds it is a CCCL include folder."""


@dataclass(frozen=True)
class Toolchain:
    """The CUDA tools gpuadvise runs.

    ``nvcc`` is the path that was found (possibly a wrapper script); ``bin_dir`` is where nvcc
    really lives (its ``_HERE_``). ``nvdisasm`` and ``cuobjdump`` may be missing; disassembly
    needs one of them. ``host_compiler`` is the C++ compiler nvcc will call (None: not found).
    ``origin`` says which search step found nvcc. ``cccl_include_dir``: the folder holding
    ``cub/``, ``thrust/`` and ``cuda/std/`` that the compiles see (None: CCCL is not
    installed); ``extra_include_dirs``: folders nvcc does not search by itself that every
    compile adds with ``-isystem`` (the CCCL wheel when it sits apart from nvcc).
    """

    nvcc: Path
    ptxas: Path
    nvdisasm: Path | None
    cuobjdump: Path | None
    version: str
    include_dir: Path | None
    bin_dir: Path
    host_compiler: Path | None = None
    demangler: Path | None = None
    origin: str = ""
    cccl_include_dir: Path | None = None
    extra_include_dirs: tuple[Path, ...] = ()

    @property
    def from_wheels(self) -> bool:
        """nvcc comes from the pip wheels (whose versions pip can pin)."""
        return "site-packages" in self.bin_dir.parts or "dist-packages" in self.bin_dir.parts

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = [str(v) for v in value]
            out[field.name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Toolchain:
        def path(key: str) -> Path | None:
            value = data.get(key)
            return Path(value) if value else None

        return cls(
            nvcc=Path(data["nvcc"]),
            ptxas=Path(data["ptxas"]),
            nvdisasm=path("nvdisasm"),
            cuobjdump=path("cuobjdump"),
            version=data["version"],
            include_dir=path("include_dir"),
            bin_dir=Path(data["bin_dir"]),
            host_compiler=path("host_compiler"),
            demangler=path("demangler"),
            origin=data.get("origin", ""),
            cccl_include_dir=path("cccl_include_dir"),
            extra_include_dirs=tuple(Path(p) for p in data.get("extra_include_dirs", ())),
        )


def find_toolchain(nvcc: str | os.PathLike[str] | None = None) -> Toolchain:
    """Find nvcc and its companions; see the module docstring for the search order.

    Raises :class:`ToolchainError` when no nvcc is found, an explicit one does not exist or
    does not run, or its front end (cicc) is missing.
    """
    path, origin = _locate_nvcc(nvcc)
    env_key = tuple(
        os.environ.get(k, "")
        for k in ("PATH", "CUDA_HOME", "CUDA_PATH", "NVCC_CCBIN", "NVCC_PREPEND_FLAGS")
    )
    try:
        stat = path.stat()
    except OSError as exc:
        raise ToolchainError(f"cannot read nvcc at {path}: {exc}", INSTALL_HINT) from None
    tc = _probe_stored(str(path), origin, stat.st_mtime_ns, env_key)
    log.info("nvcc %s (CUDA %s), found through %s", tc.nvcc, tc.version, tc.origin)
    log.debug("ptxas %s, nvdisasm %s, host compiler %s", tc.ptxas, tc.nvdisasm, tc.host_compiler)
    return tc


PROBE_FORMAT = 1
"""Bumped whenever what :func:`_probe_toolchain` finds, or how it is stored, changes."""


def _stamp(path: str | os.PathLike[str] | None) -> list[Any] | None:
    """What tells a file or folder apart from a changed one: resolved path, mtime, size, inode."""
    if path is None:
        return None
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return [real, st.st_mtime_ns, st.st_size, st.st_ino]


def _script_targets(nvcc: str) -> list[Any]:
    """For an nvcc that is a small shell script (``exec /usr/local/cuda-13.0/bin/nvcc "$@"``):
    the stamps of the absolute paths it names, so that a wrapper now pointing elsewhere (a
    symlink it goes through retargeted) is a different probe."""
    try:
        with open(nvcc, "rb") as f:
            head = f.read(65536)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    names = sorted(set(re.findall(r"(?<![\w.])/[\w./+-]+", head.decode("utf-8", "replace"))))
    return [[n, _stamp(n)] for n in names]


def _tool_stamps(tc: Toolchain) -> dict[str, Any]:
    """The stamps of everything a probe's answer names, checked again when it is reused."""
    paths = {
        "nvcc": tc.nvcc,
        "nvcc_real": tc.bin_dir / "nvcc",
        "bin_dir": tc.bin_dir,
        "ptxas": tc.ptxas,
        "nvdisasm": tc.nvdisasm,
        "cuobjdump": tc.cuobjdump,
        "host_compiler": tc.host_compiler,
        "demangler": tc.demangler,
        "include_dir": tc.include_dir,
        "cuda_runtime_h": tc.include_dir / "cuda_runtime.h" if tc.include_dir else None,
        "nvvm": tc.bin_dir.parent / "nvvm" / "bin",
        "cccl": tc.cccl_include_dir,
    }
    return {k: _stamp(v) for k, v in paths.items()}


@functools.lru_cache(maxsize=16)
def _probe_stored(nvcc: str, origin: str, mtime_ns: int, env: tuple[str, ...]) -> Toolchain:
    """:func:`_probe_toolchain`, its answer kept in the cache folder (``toolchain/``): the probe
    runs ``nvcc --version`` and ``nvcc --dryrun`` (which runs the host preprocessor), about 0.15 s
    of every analysis. The entry is keyed by nvcc's path, stamp, origin and environment (and, for
    a wrapper script, the stamps of the paths it names) and reused only while every tool, folder
    and header it names has the stamp it had; a failed probe is never stored. An entry that
    cannot be read or written is a miss, never an error."""
    key_doc = [PROBE_FORMAT, nvcc, origin, _stamp(nvcc), list(env), _script_targets(nvcc)]
    key = hashlib.sha256(json.dumps(key_doc).encode()).hexdigest()
    try:
        root = default_cache_root()
        file = root / "toolchain" / f"{key}.json" if cache_root_problem(root) is None else None
    except (OSError, RuntimeError):  # no home folder to put the cache in
        file = None
    if file is not None:
        try:
            doc = parse_json(read_cache_bytes(file, 1 << 20) or b"")
            tc = Toolchain.from_dict(doc["toolchain"])
            if doc.get("stamps") == _tool_stamps(tc) and tc.origin == origin:
                return tc
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    tc = _probe_toolchain(nvcc, origin, mtime_ns, env)
    if file is not None:
        from gpuadvise.fileio import write_atomic

        doc = {"toolchain": tc.to_dict(), "stamps": _tool_stamps(tc)}
        try:
            write_atomic(file, json.dumps(doc))
        except OSError:
            pass
    return tc


def executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _env_cuda_roots() -> list[tuple[str, Path]]:
    roots = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(var)
        if value:
            roots.append((var, Path(value)))
    return roots


def _nvidia_package_dirs() -> list[Path]:
    """The ``nvidia`` namespace package's folders (one per site-packages holding a wheel)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    return [Path(b) for b in (spec.submodule_search_locations or [])] if spec else []


def _wheel_tool(name: str) -> Path | None:
    """A tool from the NVIDIA pip wheels (``nvidia/cu13/bin``), through cuda.pathfinder."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        found = find_nvidia_binary_utility(name)
        if found:
            return Path(found)
    except Exception:  # pathfinder missing or failing: fall back to the known layout
        pass
    for base in _nvidia_package_dirs():
        for sub in ("cu13/bin", "cuda_nvcc/bin", "cu12/bin"):
            candidate = base / sub / name
            if executable(candidate):
                return candidate
    return None


def _wheel_cccl_dir() -> Path | None:
    """The CCCL headers of the ``nvidia-cuda-cccl`` wheel, found as the other wheels are.

    Only a wheel's folder counts (cuda.pathfinder's ``site-packages`` hits, else the known
    layout): a CCCL of some other CUDA installation may not match the nvcc in use.
    """
    try:
        from cuda.pathfinder import locate_nvidia_header_directory

        located = locate_nvidia_header_directory("cccl")
        if located is not None and located.found_via == "site-packages" and located.abs_path:
            path = Path(located.abs_path)
            if (path / CCCL_MARKER).is_file():
                return path
    except Exception:  # pathfinder missing, old or failing: the known layout
        pass
    for base in _nvidia_package_dirs():
        for sub in ("cu13/include/cccl", "cuda_cccl/include"):
            if (base / sub / CCCL_MARKER).is_file():
                return base / sub
    return None


def cccl_dirs(
    nvcc_dirs: Sequence[Path], wheel_dir: Path | None
) -> tuple[Path | None, tuple[Path, ...]]:
    """(the CCCL folder compiles see, folders to add with ``-isystem``).

    ``nvcc_dirs``: the folders nvcc searches by itself, in its order; ``wheel_dir``: the CCCL
    wheel's folder, if installed. nvcc's own CCCL wins; else the wheel's, added as a flag.
    """
    for d in nvcc_dirs:
        if (d / CCCL_MARKER).is_file():
            return d, ()
    if wheel_dir is not None and (wheel_dir / CCCL_MARKER).is_file():
        return wheel_dir, (wheel_dir,)
    return None, ()


def _locate_nvcc(explicit: str | os.PathLike[str] | None) -> tuple[Path, str]:
    from gpuadvise.spec.environment import nvcc as env_nvcc

    for value, origin in ((explicit, "--nvcc"), (env_nvcc(), "$GPUADVISE_NVCC")):
        if not value:
            continue
        candidate = Path(value).expanduser()
        problem = lookup_problem(candidate)
        if problem is not None:
            raise ToolchainError(
                f"nvcc given by {origin} ({value}) {problem}",
                "point it at an nvcc binary or a CUDA toolkit directory, or leave it unset",
            )
        if candidate.is_dir():
            for sub in ("nvcc", "bin/nvcc"):
                if executable(candidate / sub):
                    return (candidate / sub).absolute(), origin
        elif executable(candidate):
            return candidate.absolute(), origin
        elif os.sep not in str(value) and (which := shutil.which(str(value))):
            return Path(which), origin
        raise ToolchainError(
            f"nvcc given by {origin} ({value}) does not exist or is not executable",
            "point it at an nvcc binary or a CUDA toolkit directory, or leave it unset",
        )
    for var, root in _env_cuda_roots():
        if executable(root / "bin" / "nvcc"):
            return root / "bin" / "nvcc", f"${var}"
    which = shutil.which("nvcc")
    if which:
        return Path(which), "PATH"
    wheel = _wheel_tool("nvcc")
    if wheel is not None:
        return wheel, "wheel"
    default = DEFAULT_CUDA_ROOT / "bin" / "nvcc"
    if executable(default):
        return default, "/usr/local/cuda"
    raise ToolchainError("no CUDA compiler (nvcc) found", INSTALL_HINT)


def run_tool(cmd: Sequence[str], what: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run a tool from an argv list (never through a shell); output decoded, errors replaced.

    A missing, non-executable or hanging tool raises :class:`ToolchainError`. The tool runs with
    stdin from /dev/null, in a process group of its own with, unless ``env`` says otherwise, a
    temporary folder of its own (``TMPDIR``): when it hangs, or the run is interrupted (Ctrl-C,
    SIGTERM), the group is killed (nvcc and the compilers it runs) and the folder removed, so no
    ``tmpxft_*`` file of a killed nvcc is left behind.
    """
    timeout = kw.pop("timeout", RUN_TIMEOUT_S)
    kw.setdefault("stdin", subprocess.DEVNULL)  # never the user's stdin, open or closed
    with scratch_dir("gpuadvise-tool-") as tmp:
        kw.setdefault("env", {**os.environ, "TMPDIR": str(tmp)})
        try:
            proc = subprocess.Popen(
                list(cmd),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                start_new_session=True,
                **kw,
            )
        except FileNotFoundError:
            raise ToolchainError(f"{what} not found at {cmd[0]}", INSTALL_HINT) from None
        except PermissionError:
            raise ToolchainError(f"{what} at {cmd[0]} is not executable", INSTALL_HINT) from None
        except OSError as exc:
            raise ToolchainError(f"cannot run {what} ({cmd[0]}): {exc}", INSTALL_HINT) from None
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise ToolchainError(f"{what} did not finish in {timeout:.0f} s", "retry") from None
        except BaseException:
            _kill_group(proc)
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` and every process of its group, and reap it."""
    import signal

    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        proc.communicate(timeout=5)


_VERSION_RE = re.compile(r"release\s+(\d+\.\d+)(?:,\s*V(\d+\.\d+(?:\.\d+)?))?")
_DRYRUN_VAR_RE = re.compile(r"^#\$ (_HERE_|TOP|CICC_PATH|INCLUDES|SYSTEM_INCLUDES)=(.*)$", re.M)
_INCLUDE_FLAG_RE = re.compile(r'"?(?:-I|-isystem"?\s+"?)"?([^"\s]+)')


@functools.lru_cache(maxsize=16)
def _probe_toolchain(nvcc: str, origin: str, _mtime_ns: int, _env: tuple[str, ...]) -> Toolchain:
    nvcc_path = Path(nvcc)
    proc = run_tool([nvcc, "--version"], "nvcc", timeout=60)
    m = _VERSION_RE.search(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not m:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise ToolchainError(
            f"nvcc at {nvcc} does not run: {detail[-1] if detail else 'no output'}",
            INSTALL_HINT,
        )
    version = m.group(2) or m.group(1)

    # Ask nvcc where it lives and what it will call; --dryrun compiles nothing.
    with tempfile.TemporaryDirectory(prefix="gpuadvise-probe-") as tmp:
        dry = run_tool(
            [nvcc, "--dryrun", "-cubin", "-arch=sm_90", "-o", f"{tmp}/p.cubin", f"{tmp}/p.cu"],
            "nvcc",
            timeout=60,
            cwd=tmp,
        )
    text = dry.stdout + dry.stderr
    found = {k: v.strip() for k, v in _DRYRUN_VAR_RE.findall(text)}
    bin_dir = Path(found["_HERE_"]) if "_HERE_" in found else nvcc_path.resolve().parent
    bin_dir = Path(os.path.normpath(bin_dir))

    cicc_dir = found.get("CICC_PATH")
    if cicc_dir and not (Path(cicc_dir) / "cicc").exists():
        hint = (
            f"pip install nvidia-nvvm=={version}"
            if "site-packages" in str(bin_dir)
            else "reinstall the CUDA toolkit, or " + INSTALL_HINT
        )
        raise ToolchainError(
            f"nvcc at {nvcc} has no front end: {os.path.normpath(cicc_dir)}/cicc is missing", hint
        )

    ptxas = bin_dir / "ptxas"
    if not executable(ptxas):
        other = _find_tool("ptxas", bin_dir)
        if other is None:
            raise ToolchainError(f"ptxas not found next to nvcc ({bin_dir})", INSTALL_HINT)
        ptxas = other

    include_dir = None
    inc = re.search(r'-I"?([^"\s]+)', found.get("INCLUDES", ""))
    if inc and (Path(inc.group(1)) / "cuda_runtime.h").exists():
        include_dir = Path(os.path.normpath(inc.group(1)))
    elif (bin_dir.parent / "include" / "cuda_runtime.h").exists():
        include_dir = bin_dir.parent / "include"
    else:
        try:
            from cuda.pathfinder import find_nvidia_header_directory

            hdr = find_nvidia_header_directory("cudart")
            include_dir = Path(hdr) if hdr else None
        except Exception:
            include_dir = None

    nvcc_dirs = [
        Path(os.path.normpath(d))
        for d in _INCLUDE_FLAG_RE.findall(
            found.get("INCLUDES", "") + " " + found.get("SYSTEM_INCLUDES", "")
        )
    ]
    if include_dir is not None:
        nvcc_dirs += [include_dir / "cccl", include_dir]
    cccl_dir, extra_dirs = cccl_dirs(nvcc_dirs, None)
    if cccl_dir is None:  # the wheel's only then (importing cuda.pathfinder runs ldconfig -p)
        cccl_dir, extra_dirs = cccl_dirs(nvcc_dirs, _wheel_cccl_dir())

    host = None
    for line in text.splitlines():
        if line.startswith("#$ ") and " -E " in line and "-D__CUDA_ARCH__" in line:
            token = line[3:].split()[0].strip('"')
            host_path = shutil.which(token)
            host = Path(host_path) if host_path else None
            break
    else:  # dry run not understood: what nvcc calls by default
        default = shutil.which("gcc")
        host = Path(default) if default else None

    demangler_path = bin_dir / "cu++filt"
    demangler = demangler_path if executable(demangler_path) else None
    if demangler is None and (cxxfilt := shutil.which("c++filt")):
        demangler = Path(cxxfilt)

    return Toolchain(
        nvcc=nvcc_path,
        ptxas=ptxas,
        nvdisasm=_find_tool("nvdisasm", bin_dir),
        cuobjdump=_find_tool("cuobjdump", bin_dir),
        version=version,
        include_dir=include_dir,
        bin_dir=bin_dir,
        host_compiler=host,
        demangler=demangler,
        origin=origin,
        cccl_include_dir=cccl_dir,
        extra_include_dirs=extra_dirs,
    )


def _find_tool(name: str, bin_dir: Path) -> Path | None:
    """``name`` next to nvcc, else from $CUDA_HOME/$CUDA_PATH, PATH, the wheels, /usr/local/cuda."""
    candidates = [bin_dir / name] + [root / "bin" / name for _, root in _env_cuda_roots()]
    for candidate in candidates:
        if executable(candidate):
            return candidate
    which = shutil.which(name)
    if which:
        return Path(which)
    wheel = _wheel_tool(name)
    if wheel is not None:
        return wheel
    default = DEFAULT_CUDA_ROOT / "bin" / name
    return default if executable(default) else None

"""Starting the program under the recorder: the environment that turns recording on, the
injection library for programs that are not Python, and the child process itself.

A Python program (``python script.py``, ``python -m mod``, or a ``.py`` file) runs as
``PYTHON -c <boot> script.py ...`` so that the recorder subscribes before the script runs; the
recorder's own import path is appended to the program's (its own packages win). Every program
(a Python one's native children too) also gets ``CUDA_INJECTION64_PATH``: the injection library
``inject.c``, compiled here with the system C compiler into a temporary folder removed after
the run, which the CUDA driver loads at ``cuInit``. ``CUDA_MODULE_LOADING=EAGER`` (unless the
program's environment sets it) makes the driver load every module when the context is made,
so that each module is seen before its first launch. CuPy's kernel cache is moved into the
recording (``raw/cupy-cache``) and keeps the source of each kernel CuPy compiles, so that a
RawKernel written as a string in the program is found without ``--source``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from gpuadvise.errors import UsageError

__all__ = ["Launch", "build_injection", "find_libpython", "plan_launch"]

INJECT_SOURCE = Path(__file__).with_name("inject.c")
CUPY_CACHE = "cupy-cache"  # under OUT/raw: CuPy's kernel cache during the recording
_BOOT = (
    "import sys; sys.path.extend(p for p in {path!r} if p not in sys.path); "
    "import gpuadvise.record.boot as b; b.main()"
)


@dataclass(frozen=True)
class Launch:
    """The command to run and how: ``python`` says whether it is started through the boot."""

    argv: list[str]
    python: bool


_OPTIONS_WITH_VALUE = frozenset({"-X", "-W", "--check-hash-based-pycs"})
"""Interpreter options whose value is the next word (``python -X faulthandler app.py``)."""


def _is_python(word: str) -> bool:
    name = Path(word).name
    return name.startswith("python") and all(c.isdigit() or c == "." for c in name[6:])


def plan_launch(command: list[str]) -> Launch:
    """How ``command`` is started under the recorder."""
    if not command:
        raise UsageError("no command to record", "give it after --: gpuadvise record -- ./app ARGS")
    first = command[0]
    path = list(sys.path)
    if _is_python(first):
        rest = command[1:]
        options: list[str] = []  # the interpreter's own (-u, -O, -X faulthandler ...), kept
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            if rest[0] == "-c":
                raise UsageError(
                    "python -c cannot be recorded", "put the code in a script and record that"
                )
            takes_value = rest[0] in _OPTIONS_WITH_VALUE and len(rest) > 1
            options += rest[: 2 if takes_value else 1]
            rest = rest[2 if takes_value else 1 :]
        if not rest:
            raise UsageError("no script for python to run", "give the script: python app.py")
        return Launch([first, *options, "-c", _BOOT.format(path=path), *rest], python=True)
    if first.endswith(".py"):
        return Launch([sys.executable, "-c", _BOOT.format(path=path), *command], python=True)
    return Launch(list(command), python=False)


def find_libpython() -> Path | None:
    """The shared Python library of this interpreter, for embedding in a native program."""
    names = [sysconfig.get_config_var(v) for v in ("INSTSONAME", "LDLIBRARY")]
    dirs = [sysconfig.get_config_var(v) for v in ("LIBDIR", "LIBPL")]
    dirs += [str(Path(sys.base_prefix) / "lib"), "/usr/lib/x86_64-linux-gnu", "/usr/lib64"]
    for name in names:
        if not name or not str(name).endswith((".so", ".so.1.0")) and ".so" not in str(name):
            continue
        for d in dirs:
            if d and (Path(d) / name).is_file():
                return Path(d) / name
    return None


def build_injection(folder: Path) -> Path:
    """The injection library, compiled into ``folder``. Raises UsageError when there is no C
    compiler or it fails."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise UsageError(
            "recording a program that is not Python needs a C compiler for its 3 KB injection "
            "library, and none was found (cc, gcc, clang)",
            "install one (apt-get install gcc) or set CC",
        )
    out = folder / "libgpuadvise_record.so"
    proc = subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(INJECT_SOURCE), "-ldl"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0 or not out.is_file():
        first = (proc.stderr or proc.stdout).strip().splitlines()[:1]
        raise UsageError(
            f"the injection library did not build with {cc}: {first[0] if first else 'no output'}",
            "set CC to a working C compiler",
        )
    return out


def environment(
    base: dict[str, str],
    out: Path,
    kernel: str | None,
    max_per_kernel: int,
    max_snapshot_bytes: int,
    injection: Path | None,
    libpython: Path | None,
) -> dict[str, str]:
    """The program's environment with recording turned on."""
    env = dict(base)
    env.update(
        GPUADVISE_RECORD_OUT=str(out),
        GPUADVISE_RECORD_KERNEL=kernel or "",
        GPUADVISE_RECORD_MAX_PER_KERNEL=str(max_per_kernel),
        GPUADVISE_RECORD_MAX_SNAPSHOT_BYTES=str(max_snapshot_bytes),
        GPUADVISE_RECORD_SYSPATH=os.pathsep.join(p for p in sys.path if p),
    )
    env.setdefault("CUDA_MODULE_LOADING", "EAGER")
    # CuPy compiles its kernels at run time from source it holds in memory: its kernel cache,
    # moved into the recording, keeps each source beside its cubin (CUPY_CACHE_SAVE_CUDA_SOURCE)
    env["CUPY_CACHE_DIR"] = str(out / "raw" / CUPY_CACHE)
    env["CUPY_CACHE_SAVE_CUDA_SOURCE"] = "1"
    if injection is not None:
        env["CUDA_INJECTION64_PATH"] = str(injection)
    if libpython is not None:
        env["GPUADVISE_RECORD_LIBPYTHON"] = str(libpython)
        home = sys.base_prefix
        if sys.base_exec_prefix != sys.base_prefix:
            home += os.pathsep + sys.base_exec_prefix
        env["GPUADVISE_RECORD_PYTHONHOME"] = home
    return env

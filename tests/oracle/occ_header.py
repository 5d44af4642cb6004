"""Build and drive the cuda_occupancy.h oracle (tests/oracle/occupancy_oracle.cpp)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).parent


def find_occupancy_header() -> Path | None:
    """The directory holding cuda_occupancy.h: CUDA_HOME/CUDA_PATH, /usr/local/cuda, the wheels."""
    candidates: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        found = find_nvidia_header_directory("cudart")
        if found:
            candidates.append(Path(found))
    except Exception:
        pass
    for c in candidates:
        if (c / "cuda_occupancy.h").is_file():
            return c
    return None


def build_oracle(out_dir: Path) -> tuple[Path | None, str]:
    """Compile the harness; returns (executable, reason when it could not be built)."""
    include = find_occupancy_header()
    if include is None:
        return None, "no cuda_occupancy.h (install gpuadvise[toolkit] or set CUDA_HOME)"
    gxx = shutil.which("g++") or shutil.which("c++")
    if gxx is None:
        return None, "no g++ on PATH"
    exe = out_dir / "occupancy_oracle"
    proc = subprocess.run(
        [
            gxx,
            "-O1",
            "-std=c++11",
            f"-I{include}",
            str(HERE / "occupancy_oracle.cpp"),
            "-o",
            str(exe),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the oracle harness does not compile:\n{proc.stderr}")
    return exe, ""


def run_oracle(exe: Path, lines: list[str]) -> list[list[int]]:
    proc = subprocess.run(
        [str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True
    )
    return [[int(v) for v in row.split()] for row in proc.stdout.splitlines()]

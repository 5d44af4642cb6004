"""Where gpuadvise keeps what it caches (compiled modules, the toolchain probe): a module of its
own, so that the toolchain's finder can use it without importing the compile cache."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_cache_root"]


def default_cache_root() -> Path:
    """``$GPUADVISE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuadvise``, else ``~/.cache/gpuadvise``."""
    env = os.environ.get("GPUADVISE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "gpuadvise"

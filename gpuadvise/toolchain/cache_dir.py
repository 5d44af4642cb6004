"""Where gpuadvise keeps what it caches (compiled modules, the toolchain probe): a module of its
own, so that the toolchain's finder can use it without importing the compile cache."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_cache_root"]


def default_cache_root() -> Path:
    """``$GPUADVISE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuadvise``, else ``~/.cache/gpuadvise``.
    A blank or malformed ``GPUADVISE_CACHE_DIR`` is a UsageError (:mod:`gpuadvise.spec.environment`)."""
    from gpuadvise.spec.environment import cache_dir

    env = cache_dir()
    if env is not None:
        return env
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "gpuadvise"

"""gpuadvise: a profiler and advisor for CUDA kernels."""

from __future__ import annotations

__version__ = "0.1.0"

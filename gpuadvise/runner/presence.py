"""Whether a kernel can run here (PyCUDA installed, a GPU and its driver seen), without importing
the runner: the analysis-result cache's key asks it before the analysis (issue 31: a re-run the
cache answers, or a compile cache hit, does not import numpy for it)."""

from __future__ import annotations


def pycuda_missing() -> str | None:
    """Why no kernel can run here, or None when PyCUDA and a GPU driver look present."""
    import importlib.util

    if importlib.util.find_spec("pycuda") is None:
        return 'PyCUDA is not installed: pip install "gpuadvise[gpu]" (needs a CUDA toolkit)'
    from gpuadvise.devices import live_device

    if live_device() is None:
        return "no NVIDIA GPU or driver found (NVML sees none)"
    return None

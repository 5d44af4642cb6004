"""The execution model's warp instructions by pipe (KernelWork.pipes, per CTA) of a few kernels/ cases,
to set against Nsight Compute's per-pipe counts (docs/data/s12_window_points.md). CPU only.

Usage: python benchmarks/pipe_counts.py   (PYTHONPATH=<a checkout> to count another tree's model)
"""

from gpuadvise.analyze.options import AnalyzeSettings, KernelOptions
from gpuadvise.analyze.run import run_analysis
from gpuadvise.rules.estimates import view_traffic
from gpuadvise.trace.view import trace_view

CASES = [
    ("kernels/window7/window7.cu", "window7_rows", "kernels/window7/window7_rows.toml"),
    ("kernels/stencil/box.cu", "box3_direct", "kernels/stencil/box3_direct.toml"),
    ("kernels/stencil/box.cu", "box3_shared", "kernels/stencil/case.toml"),
    (
        "kernels/accumulate/accumulate.cu",
        "count_positive",
        "kernels/accumulate/count_positive.toml",
    ),
    # s13-sass's probe (.gpu/s13-sass): loops ptxas unrolls away from the PTX
    ("kernels/data_gather/gather.cu", "const_uniform", "kernels/data_gather/const_uniform.toml"),
    ("kernels/data_gather/gather.cu", "const_lookup", "kernels/data_gather/const_lookup.toml"),
    ("kernels/occupancy/occupancy.cu", "lut_big", "kernels/occupancy/case.toml"),
]

for src, kern, spec in CASES:
    res = run_analysis(
        KernelOptions(src, kernel=kern, spec=spec, gpu="H200"),
        AnalyzeSettings(measure=False, select=("GA305",)),
    )
    a = res.analysis
    assert a.memory is not None and a.memory.trace is not None, kern
    w = view_traffic(a.device, trace_view(a.memory.trace, a.spec)).work
    assert w is not None, kern
    per_warp = {k: round(v / w.warps_per_cta, 1) for k, v in sorted(w.pipes.items())}
    print(f"{kern}: warp instructions a warp by pipe {per_warp}")

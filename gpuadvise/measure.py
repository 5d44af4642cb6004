"""The measurement stage of ``analyze``: build each finding's variant, check that its outputs equal
the baseline's, time both A/B on the GPU, and attach the measured speedup with its interval.

Variants measured: compile-time changes (nvcc flags, defines: GA101's register cap) and source diffs
(applied to a temporary copy of the source, never to the user's file; a diff a rule marks
display-only is still only *shown* as a fix, but measuring it tells the user what it is worth).
A variant that fails to compile, to run or to verify is reported as such and never ranked by a
speedup. Launch changes are not measured yet (they change the grid, so outputs are not comparable).
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from gpuadvise.analyze_cmd import KernelOptions
from gpuadvise.errors import GpuAdviseError


def _variant_options(opts: KernelOptions, variant: Any, tmp: Path) -> KernelOptions | None:
    if variant.launch:
        return None
    changes: dict[str, Any] = {}
    if variant.nvcc_flags:
        changes["nvcc_flags"] = (*opts.nvcc_flags, *variant.nvcc_flags)
    if variant.defines:
        changes["defines"] = (*opts.defines, *variant.defines)
    if variant.diff:
        from gpuadvise.transform import apply_unified_diff

        src = Path(opts.source or "")
        patched = tmp / src.name
        patched.write_text(apply_unified_diff(src.read_text(), variant.diff))
        # the copy includes the user's headers from the original folder
        changes["source"] = str(patched)
        changes["include"] = (*opts.include, str(src.resolve().parent))
        spec = opts.spec
        if spec is None:
            from gpuadvise.spec import find_spec_for

            found = find_spec_for(src, opts.kernel)
            spec = None if found is None else str(found)
        changes["spec"] = spec
    if not changes:
        return None
    return dataclasses.replace(opts, **changes)


def measure_findings(
    opts: KernelOptions, run: Any, timeout_s: float = 60.0, max_time_s: float = 5.0
) -> tuple[Any, list[str]]:
    """``run``: a rules.RulesRun. Returns it with measured findings, re-ranked, and notes."""
    from gpuadvise.bench_cmd import live_options, prepare, time_prepared
    from gpuadvise.rules import Measurement, rank_findings
    from gpuadvise.runner.job import TimingConfig
    from gpuadvise.runner.stats import speedup_ci
    from gpuadvise.runner.verify import compare

    notes: list[str] = []
    base_opts = live_options(opts)
    timing = TimingConfig(min_samples=10, min_time_s=0.5, max_time_s=max_time_s)
    out = []
    base = None
    for f in run.findings:
        v = f.variant
        if v is None or f.error or v.safety == "proxy":
            out.append(f)
            continue
        with tempfile.TemporaryDirectory(prefix="gpuadvise-variant-") as tmp:
            try:
                vopts = _variant_options(base_opts, v, Path(tmp))
                if vopts is None:
                    out.append(f)
                    continue
                if base is None:
                    base = prepare(base_opts, "A")
                var = prepare(vopts, "B")
            except GpuAdviseError as exc:
                notes.append(f"{f.rule}: the variant could not be built: {exc.one_line()}")
                out.append(dataclasses.replace(f, verified=False))
                continue
            if [b.nbytes for b in base.buffers] != [b.nbytes for b in var.buffers]:
                notes.append(f"{f.rule}: the variant takes other buffers; not measured")
                out.append(f)
                continue
            result = time_prepared([base, var], timing, hot=False, timeout_s=timeout_s).result
        if not result.ok:
            notes.append(
                f"{f.rule}: the variant failed on the GPU: {result.cuda_error or result.error}"
            )
            out.append(dataclasses.replace(f, verified=False))
            continue
        oa, ob = result.outcomes
        comps = [
            compare(b.name, oa.outputs[b.name], ob.outputs[b.name], base.rtol, base.atol)
            for b in base.buffers
            if b.is_output
        ]
        if not all(c.ok for c in comps):
            bad = next(c for c in comps if not c.ok)
            notes.append(f"{f.rule}: the variant's outputs differ: {bad.message}; not ranked")
            out.append(dataclasses.replace(f, verified=False))
            continue
        ci = speedup_ci(oa.samples_ms, ob.samples_ms)
        import statistics

        m = Measurement(
            speedup=ci.speedup,
            baseline_ms=statistics.median(oa.samples_ms),
            variant_ms=statistics.median(ob.samples_ms),
            device=str(result.device.get("name")),
            ci_low=ci.low,
            ci_high=ci.high,
            outputs_match=True,
            samples=min(len(oa.samples_ms), len(ob.samples_ms)),
        )
        out.append(dataclasses.replace(f, measured_speedup=m, verified=True))
    return dataclasses.replace(run, findings=tuple(rank_findings(out))), notes

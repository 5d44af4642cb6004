"""JSON documents (schema_version 1). The schemas are documented in the README."""

from __future__ import annotations

import json
from typing import Any

from gpuadvise.devices import DeviceSpec
from gpuadvise.model.occupancy import INT_MAX, KernelResources, OccupancyResult, Suggestion

SCHEMA_VERSION = 1


def _limit(v: int) -> int | None:
    return None if v >= INT_MAX else v


def occupancy_json(
    device: DeviceSpec,
    k: KernelResources,
    carveout: int,
    r: OccupancyResult,
    steps: list[Suggestion],
    notes: list[str],
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "device": {"name": device.name, "arch": device.arch, "cc": device.cc},
        "input": {
            "threads_per_block": k.threads_per_block,
            "registers_per_thread": k.regs_per_thread,
            "static_smem_bytes": k.static_smem_bytes,
            "dynamic_smem_bytes": k.dynamic_smem_bytes,
            "carveout_pct": carveout,
        },
        "active_blocks_per_sm": r.active_blocks_per_sm,
        "active_warps_per_sm": r.active_warps_per_sm,
        "active_threads_per_sm": r.active_warps_per_sm * device.warp_size,
        "max_warps_per_sm": r.max_warps_per_sm,
        "occupancy": r.occupancy,
        "limiters": list(r.limiters),
        "limits": {
            name: _limit(r.limits[name])
            for name in ("warps", "registers", "shared_memory", "blocks", "barriers")
        },
        "allocation": {
            "registers_per_block": r.allocated_regs_per_block,
            "smem_per_block_bytes": r.allocated_smem_per_block,
            "smem_per_sm_bytes": r.smem_per_sm_bytes,
        },
        "next_steps": [
            {
                "resource": s.resource,
                "value": s.value,
                "active_warps_per_sm": s.active_warps_per_sm,
                "occupancy": s.occupancy,
                "text": s.text,
            }
            for s in steps
        ],
        "notes": notes,
    }


def dumps(doc: dict[str, Any], *, ensure_ascii: bool = True) -> str:
    """The one JSON writer of reports, guarded (:func:`gpuadvise.report.safe_text.guard`: a
    parser reads back the same values)."""
    from gpuadvise.report.safe_text import guard

    return guard(json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=ensure_ascii), "json")


def emit(doc: dict[str, Any]) -> None:
    """Write a JSON document to stdout (without importing rich: JSON runs start faster)."""
    from gpuadvise.report.output import write_stdout

    write_stdout(dumps(doc) + "\n")


def analyze_json(a: Any, rules_run: Any = None) -> dict[str, Any]:
    """``gpuadvise analyze --json`` (pipeline.KernelAnalysis; rules_run: rules.RulesRun),
    schema_version 1."""
    from gpuadvise.toolchain.sass import source_text

    spec, d, k = a.spec, a.device, a.kernel
    res = k.resources
    occ_doc = occupancy_json(d, a.occupancy_input, -1, a.occupancy, list(a.next_steps), [])
    w = a.waves
    return {
        "schema_version": SCHEMA_VERSION,
        "kernel": {
            "name": k.name,
            "mangled": k.mangled,
            "file": str(spec.source),
            "grid": list(spec.launch.grid.as_tuple()),
            "block": list(spec.launch.block.as_tuple()),
            "dynamic_smem_bytes": spec.launch.dynamic_smem_bytes,
        },
        "device": d.to_json(),
        "toolchain": {"version": a.module.toolchain_version, "flags": list(a.module.flags)},
        "resources": {
            "registers": res.registers,
            "static_smem_bytes": res.static_smem_bytes,
            "local_bytes": res.local_bytes,
            "spill_store_bytes": res.spill_store_bytes,
            "spill_load_bytes": res.spill_load_bytes,
            "const_bytes": res.const_bytes,
            "barriers": res.barriers,
        },
        "occupancy": occ_doc,
        "waves": None
        if w is None
        else {
            "total_ctas": w.total_ctas,
            "ctas_per_wave": w.ctas_per_wave,
            "waves": w.waves,
            "last_wave_ctas": w.last_wave_ctas,
            "last_wave_fill": w.last_wave_fill,
            "tail_idle": w.tail_idle,
        },
        "sass_lines": [
            {
                "file": m.file,
                "line": m.line,
                "space": m.space,
                "kind": m.kind,
                "width_bits": m.width_bits,
                "count": m.count,
                "opcodes": list(m.opcodes),
                "source": (source_text(m.file, m.line) or "").strip(),
            }
            for m in a.sass_lines
        ],
        # live registers along the SASS: counts per instruction, per line, the peak and the
        # values live across it (gpuadvise.model.registers; null without nvdisasm)
        "registers": None if getattr(a, "registers", None) is None else a.registers.to_dict(),
        **memory_json(a.memory),
        "findings": [] if rules_run is None else [f.to_dict() for f in rules_run.findings],
        "rules_run": [] if rules_run is None else list(rules_run.rules_run),
        # the rules that did not run, and why; "incomplete": the one line that says some were
        # skipped for a reason the user did not choose (null: the analysis is complete)
        "skipped_rules": []
        if rules_run is None
        else [s.to_dict() for s in getattr(rules_run, "skipped", ())],
        "incomplete": None if rules_run is None else getattr(rules_run, "incomplete_text", None),
        # each note once (a note repeated for every rule or CTA is one note)
        "notes": list(dict.fromkeys([*a.notes, *([] if rules_run is None else rules_run.notes)])),
        "timings_s": {**a.timings_s, "compile_cached": a.module.from_cache},
        # --time-budget: what was skipped or cut short (empty: the analysis is complete)
        "skipped": list(getattr(a, "skipped", ())),
    }


def bench_json(r: Any) -> dict[str, Any]:
    """``gpuadvise bench --json`` (bench_cmd.BenchReport), schema_version 1."""
    kernels = []
    for i, p in enumerate(r.prepared):
        st = r.stats[i] if i < len(r.stats) else None
        entry: dict[str, Any] = {
            "label": p.launch.label,
            "name": p.kernel_name,
            "file": str(p.spec.source),
            "grid": list(p.launch.grid),
            "block": list(p.launch.block),
            "dynamic_smem_bytes": p.launch.dynamic_smem_bytes,
            "repeat": p.launch.repeat,
            "timing": None if st is None else st.to_dict(),
        }
        if st is not None and st.median_ms > 0:
            entry["achieved_gbps"] = r.bytes_moved / (st.median_ms * 1e-3) / 1e9
            entry["gflops"] = None if r.flops is None else r.flops / (st.median_ms * 1e-3) / 1e9
        kernels.append(entry)
    return {
        "schema_version": SCHEMA_VERSION,
        "device": r.device_info,
        "kernels": kernels,
        "bytes_in_buffers": r.bytes_moved,
        "ceiling_gbps": r.ceiling_gbps,
        "ceiling_source": r.ceiling_source,
        "cold_l2": not r.hot,
        "clocks": r.clocks,
        "speedup": None if r.speedup is None else r.speedup.to_dict(),
        "outputs_agree": None if not r.comparisons else all(c.ok for c in r.comparisons),
        "comparisons": [c.to_dict() for c in r.comparisons],
        "unwritten": r.unwritten,
        "error": r.error,
        "cuda_error": r.cuda_error,
        "notes": r.notes,
    }


def memory_json(m: Any) -> dict[str, Any]:
    """The ``shared_memory``, ``global_memory`` and ``emulation`` sections of analyze --json."""
    if m is None:
        return {"emulation": None, "shared_memory": None, "global_memory": None, "l2": None}
    emulation = {
        "tracer": m.tracer,
        "ctas_traced": m.ctas_run,
        "total_ctas": m.total_ctas,
        "complete": m.complete,
        # long loops whose iterations were skipped (their last iteration weighted): totals are
        # estimates even when every CTA was traced
        "sampled_loops": list(getattr(m, "sampled_loops", ())),
        "lane_instructions": m.lane_instructions,
        "time_s": m.time_s,
        "error": m.error,
        "error_kind": m.error_kind,
        "notes": list(dict.fromkeys(m.notes)),
        "reconciled": [
            {"file": n.file, "line": n.line, "action": n.action, "detail": n.detail}
            for n in m.reconcile_notes
        ],
    }
    if m.banks is None:
        return {"emulation": emulation, "shared_memory": None, "global_memory": None, "l2": None}
    b, c = m.banks, m.coalescing
    shared = {
        "lines": [
            {
                "file": ln.file,
                "line": ln.line,
                "kind": ln.kind.name.lower(),
                "instructions": ln.instructions,
                "wavefronts": ln.wavefronts,
                "ideal_wavefronts": ln.ideal,
                "excess_pct": ln.excess_pct,
                "worst_ways": ln.worst_ways,
            }
            for ln in b.lines
        ],
        "total_wavefronts": b.launch.all.wavefronts,
        "total_ideal_wavefronts": b.launch.all.ideal,
        "totals": b.launch.to_dict(),
        "extrapolated": b.extrapolated,
    }
    glob = {
        "lines": [
            {
                "file": ln.file,
                "line": ln.line,
                "kind": ln.kind.name.lower(),
                "requests": ln.requests,
                "sectors": ln.sectors,
                "ideal_sectors": ln.ideal,
                "excess_pct": ln.excess_pct,
            }
            for ln in c.lines
        ],
        "totals": c.launch.to_dict(),
        "extrapolated": c.extrapolated,
    }
    l2 = None if m.l2 is None else m.l2.to_json()
    return {"emulation": emulation, "shared_memory": shared, "global_memory": glob, "l2": l2}

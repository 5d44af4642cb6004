"""Live registers validated against ptxas's allocation and nvdisasm's own counts (issue 33).

For every kernel of ``kernels/`` and ten kernels of the stranger corpus, compiled the way
``gpuadvise analyze`` compiles them (sm_90 by default), it reads nvdisasm's life ranges and the
SASS with lines (:mod:`gpuadvise.model.registers`) and prints one row per kernel:

- ``ptxas``: the registers ptxas reports (``Used N registers``);
- ``peak``: the most general registers nvdisasm counts live at one instruction;
- ``reserved``: ``ptxas - highest``, where ``highest`` is the highest register number any
  instruction reads or writes, + 1 (ptxas's own two on every kernel so far);
- ``slack``: ``highest - peak`` (the peak without the reserved registers it may hold: a call's
  return address), register numbers below the highest free at the peak: those no
  instruction uses (``holes``) and those used elsewhere (the allocator keeps a value in one
  register over its whole range; 64- and 128-bit values take aligned pairs and quads);
- ``ours``: the peak of our liveness dataflow over the SASS control flow (from the reads and
  writes the table marks; a predicated write does not kill) and on how many instructions of
  the kernel's own code it gives nvdisasm's count (subroutines called with ``CALL.REL`` are left
  out of the comparison: there nvdisasm also counts registers no instruction names).

    python benchmarks/registers_validation.py [--corpus-src DIR] [--arch sm_90] [--json OUT]

``--corpus-src``: the folder ``benchmarks/corpus/fetch.py`` fills (default
benchmarks/corpus/src); corpus kernels whose sources are not there are listed as missing.
Prints a Markdown table (docs/registers.md holds a run of it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "corpus"))

CORPUS_KERNELS = (
    "hecbench/libor/Pathcalc_Portfolio_KernelGPU",
    "hecbench/md/md",
    "hecbench/md5hash/md5hash_kernel",
    "hecbench/d2q9-bgk/d2q9_bgk",
    "hecbench/binomial/binomialOptionsKernel",
    "hecbench/attention/attention_kernel1",
    "hecbench/dct8x8/DCT8x8_kernel",
    "hecbench/chacha20/test_keystreams",
    "hecbench/murmurhash3/MurmurHash3_x64_128_kernel",
    "hecbench/layernorm/layernorm_forward_kernel2",
)


def row(name: str, source: Path, kernel: str, options: Any, tc: Any) -> dict[str, Any]:
    from gpuadvise.analyze.pipeline import live_registers
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.toolchain import compile_source, select_compiled_kernel
    from gpuadvise.toolchain.sass import disassemble

    try:
        module = compile_source(source, options, tc, kernels=[kernel])
        k = select_compiled_kernel(module, kernel)
        instrs = tuple(disassemble(module.cubin_path, k.mangled, tc))
        rp, why = live_registers(module, k, instrs, tc)
    except GpuAdviseError as exc:
        return {"kernel": name, "error": exc.one_line()}
    if rp is None:
        return {"kernel": name, "error": why}
    agree, own = rp.agreement
    return {
        "kernel": name,
        "ptxas": rp.allocated,
        "peak": rp.peak,
        "reserved": rp.reserved,
        "highest": rp.highest,
        "slack": rp.slack,
        "holes": list(rp.holes),
        "ours": rp.dataflow_peak,
        "agree": agree,
        "instructions": own,
        "subroutine_instructions": rp.subroutine_instructions,
        "reserved_at_peak": rp.reserved_at_peak,
        "spill_bytes": k.resources.spill_store_bytes + k.resources.spill_load_bytes,
        "peak_line": rp.peak_line,
    }


def explain(r: dict[str, Any]) -> str:
    if "error" in r:
        return r["error"]
    parts = []
    if r["reserved_at_peak"]:
        parts.append(
            f"the peak (a call) counts {r['reserved_at_peak']} of ptxas's reserved registers: "
            f"{r['peak'] - r['reserved_at_peak']} + {r['reserved']} + {r['slack']}"
        )
    if r["reserved"] != 2:
        parts.append(f"ptxas reserves {r['reserved']}, not 2")
    if r["slack"]:
        used = r["slack"] - len(r["holes"])
        if r["holes"]:
            parts.append(f"{len(r['holes'])} never used ({', '.join(f'R{h}' for h in r['holes'])})")
        if used:
            parts.append(f"{used} used elsewhere, free at the peak")
    if r["ours"] is not None and r["ours"] < r["peak"]:
        parts.append("the peak lies in a called subroutine (not compared)")
    if r["agree"] != r["instructions"]:
        parts.append(f"dataflow differs on {r['instructions'] - r['agree']} instruction(s)")
    if r["subroutine_instructions"]:
        parts.append(f"{r['subroutine_instructions']} subroutine instruction(s) not compared")
    return "; ".join(parts) if parts else "peak + 2 = ptxas"


def markdown(rows: list[dict[str, Any]], header: str) -> str:
    out = [
        header,
        "",
        "| kernel | ptxas | peak | + reserved | + slack | ours | agree | peak line | why they differ |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['kernel']} | | | | | | | | {r['error']} |")
            continue
        out.append(
            f"| {r['kernel']} | {r['ptxas']} | {r['peak']} | {r['reserved']} | {r['slack']} | "
            f"{r['ours']} | {r['agree']}/{r['instructions']} | {r['peak_line']} | "
            f"{explain(r)} |"
        )
    ok = [r for r in rows if "error" not in r]
    total = sum(r["instructions"] for r in ok)
    agree = sum(r["agree"] for r in ok)
    exact = sum(1 for r in ok if r["peak"] + r["reserved"] == r["ptxas"])
    same = sum(1 for r in ok if r["ours"] == r["peak"])
    out += [
        "",
        f"{len(ok)} kernels: peak + reserved = ptxas on {exact} (elsewhere the slack, explained "
        f"per row); reserved = ptxas - highest register named = 2 on "
        f"{sum(1 for r in ok if r['reserved'] == 2)}; our dataflow's peak = nvdisasm's on "
        f"{same}, its count = nvdisasm's on {agree} of {total} instructions.",
    ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus-src", type=Path, default=HERE / "corpus" / "src")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--json", type=Path)
    opts = p.parse_args(argv)

    import corpus

    from gpuadvise.source.signature import list_kernels
    from gpuadvise.toolchain import CompileOptions, find_toolchain

    tc = find_toolchain()
    rows = []
    kernels_dir = ROOT / "kernels"
    for cu in sorted(kernels_dir.rglob("*.cu")):
        for k in list_kernels(cu.read_text()):
            options = CompileOptions(arch=opts.arch, include_dirs=(str(cu.parent),))
            rows.append(row(f"{cu.relative_to(kernels_dir)}:{k}", cu, k, options, tc))
    entries = {k.name: k for k in corpus.load().kernels}
    for name in CORPUS_KERNELS:
        k = entries[name]
        base = opts.corpus_src / k.repo
        source = base / k.path
        if not source.is_file():
            rows.append({"kernel": name, "error": f"not fetched ({source})"})
            continue
        flags = tuple(k.entry.get("nvcc_flags", ()))
        incs = [str(base / i) for i in k.entry.get("include", [])] + [str(source.parent)]
        options = CompileOptions.from_nvcc_flags(opts.arch, flags)
        options = CompileOptions(**{**options.__dict__, "include_dirs": tuple(incs)})
        rows.append(row(name, source, str(k.entry["kernel"]), options, tc))
    header = (
        f"Run {dt.date.today().isoformat()}, {opts.arch}, CUDA {tc.version} "
        f"(nvcc {tc.nvcc}, nvdisasm {tc.nvdisasm}); no GPU needed: "
        "`python benchmarks/registers_validation.py --corpus-src benchmarks/corpus/src`"
    )
    print(markdown(rows, header))
    if opts.json:
        opts.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

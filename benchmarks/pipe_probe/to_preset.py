"""Put a pipe_probe measurement into gpuadvise/data/pipes.toml (issue 29).

    python benchmarks/pipe_probe/to_preset.py pipe_probe.json [--gpu NAME] [--date YYYY-MM-DD]

Reads the JSON that benchmarks/pipe_probe/run.sh wrote on the GPU and updates the measured part
of data/pipes.toml (everything after its "--- measured" line): in the [gpu.NAME] table of that GPU
(NAME: the preset whose NVML names match the JSON's "device", or --gpu) each measured key's line is
replaced or added; every other line is kept as written: other GPUs' tables, keys the probe does not
measure (``cta_turnaround_ns``, fitted by benchmarks/loaded_latency), comments. Keys:
lanes_per_clock (per pipe: merged into the table's earlier values), latency_cycles (per class,
merged likewise), shared_wavefront_cycles, cta_launch_ns, launch_floor_us; a value the probe could
not measure (zero or negative) is left out, so the earlier value or the default stays.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIPES = ROOT / "gpuadvise" / "data" / "pipes.toml"
MARK = "# --- measured"
PIPE_KEYS = ("fp32", "fp16", "fp64", "int", "imad", "mufu", "xu", "shuffle", "tensor")
LATENCY_KEYS = ("fp32", "fp16", "fp64", "int", "mufu", "xu", "shuffle", "shared", "l1", "l2",
                "dram", "tensor", "barrier")  # fmt: skip
SCALARS = ("shared_wavefront_cycles", "cta_launch_ns", "launch_floor_us")


def preset_for(device: str) -> str | None:
    """The device preset whose NVML names match the probed GPU's name."""
    sys.path.insert(0, str(ROOT))
    from gpuadvise.devices import _data

    best = None
    for key, entry in _data()["gpu"].items():
        for pat in entry.get("nvml", []):
            if pat.lower() in device.lower() and (best is None or len(pat) > best[0]):
                best = (len(pat), key)
    return None if best is None else best[1]


def _line(key: str, value: float | dict) -> str:
    if isinstance(value, dict):
        inner = ", ".join(f"{k} = {v:g}" for k, v in value.items())
        return f"{key} = {{ {inner} }}"
    return f"{key} = {value:g}"


def update(measured_part: str, name: str, values: dict, old: dict, note: str) -> str:
    """The measured part with [gpu.``name``]'s measured keys replaced or added, every other line
    kept (``old``: that table as parsed, for merging the per-pipe and per-class tables)."""
    lines = measured_part.splitlines()
    header = f"[gpu.{name}]"
    at = next((i for i, ln in enumerate(lines) if ln.strip() == header), None)
    if at is None:
        if lines and lines[-1].strip():
            lines.append("")
        lines += [header, f"# pipe_probe: {note}"]
        lines += [_line(k, v) for k, v in values.items()]
        return "\n".join(lines) + "\n"
    end = next(
        (i for i in range(at + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines)
    )
    while end > at + 1 and not lines[end - 1].strip():
        end -= 1
    block = lines[at + 1 : end]
    block = [ln for ln in block if not ln.startswith("# pipe_probe:")]
    block.insert(0, f"# pipe_probe: {note}")
    for key, value in values.items():
        if isinstance(value, dict):
            value = {**old.get(key, {}), **value}
        pat = re.compile(rf"^{re.escape(key)}\s*=")
        hit = next((i for i, ln in enumerate(block) if pat.match(ln)), None)
        if hit is None:
            block.append(_line(key, value))
        else:
            block[hit] = _line(key, value)
    return "\n".join([*lines[: at + 1], *block, *lines[end:]]) + "\n"


def measured(probe: dict) -> dict:
    out: dict = {}
    lanes = {k: float(probe["lanes_per_clock"][k]) for k in PIPE_KEYS
             if float(probe.get("lanes_per_clock", {}).get(k, 0)) > 0}  # fmt: skip
    lat = {k: float(probe["latency_cycles"][k]) for k in LATENCY_KEYS
           if float(probe.get("latency_cycles", {}).get(k, 0)) > 0}  # fmt: skip
    if lanes:
        out["lanes_per_clock"] = {k: round(v, 2) for k, v in lanes.items()}
    if lat:
        out["latency_cycles"] = {k: round(v, 1) for k, v in lat.items()}
    for k in SCALARS:
        v = float(probe.get(k, 0) or 0)
        if v > 0:
            out[k] = round(v, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("json", type=Path)
    ap.add_argument("--gpu", help="the preset to write (default: from the probed GPU's name)")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--pipes", type=Path, default=PIPES, help="the presets file to rewrite")
    a = ap.parse_args(argv)
    probe = json.loads(a.json.read_text())
    name = a.gpu or preset_for(probe.get("device", ""))
    if name is None:
        print(f"error: no preset matches {probe.get('device')!r}; give --gpu NAME", file=sys.stderr)
        return 2
    text = a.pipes.read_text()
    head, mark, rest = text.partition(MARK)
    if not mark:
        rest = " (benchmarks/pipe_probe/to_preset.py updates this part) ---\n"
    old = tomllib.loads(text).get("gpu", {}).get(name, {})
    note = (
        f"measured on an {probe.get('device')} ({probe.get('sm_count')} SMs at "
        f"{probe.get('sm_clock_mhz')} MHz) on {a.date} by benchmarks/pipe_probe (run.sh)"
    )
    a.pipes.write_text(head + MARK + update(rest, name, measured(probe), old, note))
    print(f"wrote [gpu.{name}] to {a.pipes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

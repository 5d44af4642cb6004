"""Put a pipe_probe measurement into gpuadvise/data/pipes.toml (issue 29).

    python benchmarks/pipe_probe/to_preset.py pipe_probe.json [--gpu NAME] [--date YYYY-MM-DD]

Reads the JSON that benchmarks/pipe_probe/run.sh wrote on the GPU and rewrites the measured part
of data/pipes.toml (everything after its "--- measured" line): the [gpu.NAME] table of that GPU
(NAME: the preset whose NVML names match the JSON's "device", or --gpu) gets every measured key,
the other GPUs' tables are kept. Keys: lanes_per_clock (per pipe), latency_cycles (per class),
shared_wavefront_cycles, cta_launch_ns, launch_floor_us; a value the probe could not measure
(zero or negative) is left out, so the default stays.
"""

from __future__ import annotations

import argparse
import datetime
import json
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


def table(name: str, values: dict, note: str) -> str:
    lines = [f"[gpu.{name}]", f"# {note}"]
    for k in SCALARS:
        if k in values:
            lines.append(f"{k} = {values[k]:g}")
    for group in ("lanes_per_clock", "latency_cycles"):
        got = values.get(group) or {}
        if got:
            inner = ", ".join(f"{k} = {v:g}" for k, v in got.items())
            lines.append(f"{group} = {{ {inner} }}")
    return "\n".join(lines) + "\n"


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
    head, _, _ = text.partition(MARK)
    old = tomllib.loads(text).get("gpu", {})
    note = (
        f"measured on an {probe.get('device')} ({probe.get('sm_count')} SMs at "
        f"{probe.get('sm_clock_mhz')} MHz) on {a.date} by benchmarks/pipe_probe (run.sh)"
    )
    tables = []
    for gpu, values in old.items():
        if gpu != name:
            tables.append(table(gpu, values, "kept from an earlier measurement"))
    tables.append(table(name, measured(probe), note))
    body = MARK + " (benchmarks/pipe_probe/to_preset.py rewrites this part) ---\n"
    a.pipes.write_text(head + body + "\n".join(tables))
    print(f"wrote [gpu.{name}] to {a.pipes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

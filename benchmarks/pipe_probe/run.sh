#!/bin/sh
# Measure the execution model's pipe rates and latencies on this machine's GPU (issue 29):
#     sh benchmarks/pipe_probe/run.sh [OUTDIR]        (default: $OUT, else .)
# Builds probe.cu with nvcc for the GPU it runs on and writes OUTDIR/pipe_probe.json (and the
# GPU's name, driver and clocks in OUTDIR/pipe_probe_device.txt). About a minute; then, on any
# machine: python benchmarks/pipe_probe/to_preset.py OUTDIR/pipe_probe.json
set -eu
here=$(dirname "$0")
out=${1:-${OUT:-.}}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv \
    >"$out/pipe_probe_device.txt" 2>&1 || true
nvcc -O3 -std=c++17 -arch=native -o /tmp/pipe_probe "$here/probe.cu"
/tmp/pipe_probe | tee "$out/pipe_probe.json"

#!/bin/bash
# Run from the repository root on the GPU machine: OUT=<folder> bash benchmarks/cta_launch/ramp.sh.
# s11-launch (issue 29): the first round's CTA launches with work in the CTAs (n CTAs an SM, each
# spinning 0-8,000 cycles: is the ramp added to a CTA's critical path?), HeCBench gaussian fan1
# against GA102's spreads, and the judged rows_template tile (as is, padded, direct reads).
# ~5 s. Output: docs/data/cta_ramp_h200_2026-11-30.txt.
D=benchmarks/cta_launch; L="$OUT/cta_ramp"; mkdir -p "$L"; B=$(mktemp -d)
NVCC=$(command -v nvcc || { python3 -m pip install -q --no-index --no-deps --target /tmp/site .device-wheels/*.whl; PYTHONPATH=/tmp/site python3 -c "from gpuadvise.toolchain.find import find_toolchain; print(find_toolchain().nvcc)"; })
{ $NVCC -O3 -arch=sm_90 -std=c++17 -o $B/p $D/ramp.cu && timeout 50 $B/p; echo "rc $?"; } > "$L/probe.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$L/probe.txt" 2>&1
rm -rf $B

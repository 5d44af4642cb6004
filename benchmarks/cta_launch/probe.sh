#!/bin/bash
# Run from the repository root on the GPU machine: OUT=<folder> bash benchmarks/cta_launch/probe.sh;
# then python benchmarks/cta_launch/fit.py <folder>/cta_launch/probe.txt (the fits; docs/execution-model.md).
# s10-launch (issue 29): the launch floor, the block scheduler's cost per CTA an SM and per wave
# (empty and one-store kernels, blocks of 16..1024 threads, 1 CTA .. 64 waves, occupancy limited
# by shared memory), and kernels/fuse's and kernels/merge16's launches timed as the runner does
# (spin first, L2 flushed, one launch between events, medians). ~15 s.
D=benchmarks/cta_launch; L="$OUT/cta_launch"; mkdir -p "$L"; B=$(mktemp -d)
NVCC=$(command -v nvcc || { python3 -m pip install -q --no-index --no-deps --target /tmp/site .device-wheels/*.whl; PYTHONPATH=/tmp/site python3 -c "from gpuadvise.toolchain.find import find_toolchain; print(find_toolchain().nvcc)"; })
{ $NVCC -O3 -arch=sm_90 -std=c++17 -o $B/p $D/probe.cu && timeout 45 $B/p; echo "rc $?"; } > "$L/probe.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$L/probe.txt" 2>&1
rm -rf $B

#!/bin/bash
# s11-fuse (issue 29): does the H200's L1 keep what a warp stores (full, half, quarter sectors, a
# sector filled by two stores, the sector's unwritten words), and do a warp's misses that fall on
# the same wait cost one L2 trip or two (two float streams crossing sectors together or apart).
# One warp, clock64, medians of 21. ~5 s. Output: $OUT/s11-fuse/probe.txt
D=benchmarks/store_reload_probe; L="${OUT:-.}/s11-fuse"; mkdir -p "$L"; B=$(mktemp -d)
NVCC=$(command -v nvcc || { python3 -m pip install -q --no-index --no-deps --target /tmp/site .device-wheels/*.whl; PYTHONPATH=/tmp/site python3 -c "from gpuadvise.toolchain.find import find_toolchain; print(find_toolchain().nvcc)"; })
{ $NVCC -O3 -arch=sm_90 -std=c++17 -o $B/p $D/probe.cu && timeout 40 $B/p; echo "rc $?"; } > "$L/probe.txt" 2>&1
{ $NVCC -O3 -arch=sm_90 -std=c++17 -cubin -o $B/p.cubin $D/probe.cu && $(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump") -sass $B/p.cubin | grep -A400 "two_streams" | grep -E "LDG|FADD|BRA|CS2R" | head -40; } > "$L/sass.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$L/probe.txt" 2>&1
rm -rf $B

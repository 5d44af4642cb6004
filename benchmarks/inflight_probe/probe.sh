#!/bin/bash
# s12-inflight (issue 29): W warps of one CTA loading the same lines at once: cycles a load (see probe.cu).
# ~3 s. Output: $OUT/s12-inflight/probe.txt
D=benchmarks/inflight_probe; L="${OUT:-.}/s12-inflight"; mkdir -p "$L"; B=$(mktemp -d)
NVCC=$(command -v nvcc || { python3 -m pip install -q --no-index --no-deps --target /tmp/site .device-wheels/*.whl; PYTHONPATH=/tmp/site python3 -c "from gpuadvise.toolchain.find import find_toolchain; print(find_toolchain().nvcc)"; })
{ $NVCC -O3 -arch=sm_90 -std=c++17 -o $B/p $D/probe.cu && timeout 40 $B/p; echo "rc $?"; } > "$L/probe.txt" 2>&1
{ $NVCC -O3 -arch=sm_90 -std=c++17 -cubin -o $B/p.cubin $D/probe.cu && $(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump") -sass $B/p.cubin | grep -E "LDG|BAR|CS2R|BRA" | head -40; } > "$L/sass.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$L/probe.txt" 2>&1
rm -rf $B

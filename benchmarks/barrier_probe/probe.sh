#!/usr/bin/env bash
# s10-scan (~20 s; run from the repository root, as .gpu/s10-scan/probe.sh was): barrier and Blelloch-step costs an SM on the H200 (bench_bar.cu's header says
# what each mode does). Output: $OUT/s10-scan/bar.txt.
set -u
mkdir -p "$OUT/s10-scan"
d=$(mktemp -d)
nvcc -O3 -std=c++17 -arch=sm_90 -o "$d/bbar" "$(dirname "$0")/bench_bar.cu" > "$OUT/s10-scan/build.txt" 2>&1
timeout 45 "$d/bbar" > "$OUT/s10-scan/bar.txt" 2>&1
echo "rc=$?" >> "$OUT/s10-scan/bar.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >> "$OUT/s10-scan/bar.txt" 2>&1
rm -rf "$d"

#!/bin/bash
# On the device machine (CUDA 13, an H200): build probe.cu, run it; results into $OUT (or here).
set -u
D="$(cd "$(dirname "$0")" && pwd)"
O="${OUT:-$D}"; mkdir -p "$O"
nvcc -O3 -arch=sm_90 -o "$O/probe" "$D/probe.cu" > "$O/build.txt" 2>&1 || { cat "$O/build.txt"; exit 1; }
timeout 45 "$O/probe" 2>&1 | tee "$O/results.txt"
rm -f "$O/probe"

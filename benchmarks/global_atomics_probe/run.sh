#!/bin/bash
# On the device machine: build, keep the SASS of the atomics, time every (op, pattern).
set -u
cd "$(dirname "$0")"
nvcc -O3 -arch=sm_90 -o probe probe.cu 2>&1 | tail -5
cuobjdump -sass probe | grep -E "Function|ATOM|RED|REDUX|POPC|VOTE|SHFL" | sed 's/^ *//' > ${OUT:-.}/global_atomics_sass.txt
./probe | tee ${OUT:-.}/global_atomics_results.txt

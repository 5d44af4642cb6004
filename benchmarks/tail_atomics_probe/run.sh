#!/bin/bash
# (A) HeCBench scan_bcao at several grids (GA102's tail), (B) filter and (C) jacobi_step with
# fewer global atomics (GA208); results.txt holds the H200 run of 2026-11-30. About 30 s.
set -eu
H=$(dirname "$0")
nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/tail_atomics_probe "$H/probe.cu"
timeout 120 /tmp/tail_atomics_probe
rm -f /tmp/tail_atomics_probe

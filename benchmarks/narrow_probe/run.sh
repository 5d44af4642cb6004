#!/bin/sh
# GA303 narrow-load probe (issue 28): nvcc -O3 -arch=sm_90; prints ms and GB/s per variant.
set -e
cd "$(dirname "$0")"
nvcc -O3 -arch=sm_90 -std=c++17 -o narrow_probe narrow_probe.cu
./narrow_probe

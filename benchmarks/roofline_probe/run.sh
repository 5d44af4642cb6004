#!/bin/sh
# Build and run the roofline probe on the GPU machine: benchmarks/roofline_probe/run.sh [OUT.txt]
set -e
here=$(dirname "$0")
nvcc -O3 -std=c++17 -arch=native -o /tmp/roofline_probe "$here/probe.cu"
/tmp/roofline_probe | tee "${1:-/dev/null}"

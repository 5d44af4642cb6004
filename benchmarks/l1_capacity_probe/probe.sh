#!/bin/bash
# s9-est: (1) the L1's capacity (re-reads after F bytes an SM), (2) the L2's time per RED request
# by its lanes/sectors/lines (one 512-byte region), (3) a serial warp's loop (chemv's shape), and
# HeCBench chemv_kernel1 as written and with __restrict__. ~25 s.
D=benchmarks/l1_capacity_probe; L="${OUT:-/tmp}/s9-est"; mkdir -p "$L"; B=$(mktemp -d)
NVCC=$(command -v nvcc || { python3 -m pip install -q --no-index --no-deps --target /tmp/site .device-wheels/*.whl; PYTHONPATH=/tmp/site python3 -c "from gpuadvise.toolchain.find import find_toolchain; print(find_toolchain().nvcc)"; })
{ $NVCC -O3 -arch=sm_90 -o $B/p $D/probe.cu && timeout 30 $B/p; } > "$L/probe.txt" 2>&1
C=benchmarks/corpus/src/hecbench/src/chemv-cuda
{
  cp $C/kernel.cu $B/k.cu
  sed 's/struct ComplexFloat \*AT, struct ComplexFloat \*X, struct ComplexFloat \*Y/struct ComplexFloat *__restrict__ AT, struct ComplexFloat *__restrict__ X, struct ComplexFloat *__restrict__ Y/' $C/kernel.cu > $B/kr.cu
  grep -c __restrict__ $B/kr.cu
  $NVCC -O3 -arch=sm_90 -std=c++17 -I$C -o $B/c1 $D/chemv_time.cu $B/k.cu && timeout 10 $B/c1
  $NVCC -O3 -arch=sm_90 -std=c++17 -I$C -DKR=1 -o $B/c2 $D/chemv_time.cu $B/kr.cu && timeout 10 $B/c2
} > "$L/chemv.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$L/probe.txt" 2>&1
rm -rf $B

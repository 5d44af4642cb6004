#!/bin/bash
# The FP64 division probe: HeCBench zeropoint's zero_point, double (corpus) vs its GA404 float build, on inputs that
# send ptxas's FP64 division to its slow path (zero numerators) or not; division microbenchmarks;
# ncu's instruction counts by pipe when ncu is there. ~30 s.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device-wheels/*.whl && export PYTHONPATH=/tmp/site:$PWD
D=benchmarks/fp64_division; L="${OUT:-/tmp}/fp64_division"; mkdir -p "$L"; B=$(mktemp -d)
NVCC=$(command -v nvcc || python3 -c "from gpuadvise.toolchain.find import find_toolchain; print(find_toolchain().nvcc)")
{ $NVCC -O3 -std=c++17 -arch=sm_90 -lineinfo -o $B/zp $D/zp.cu && timeout 40 $B/zp; } > "$L/zeropoint.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$L/zeropoint.txt" 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  timeout 40 $NCU -k regex:zp_ -c 2 --metrics smsp__inst_executed.sum,smsp__inst_executed_pipe_fp64.sum,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_cbu.sum,sm__cycles_elapsed.max,smsp__warps_launched.sum,gpu__time_duration.sum $B/zp > "$L/ncu.txt" 2>&1
else
  echo "no ncu" > "$L/ncu.txt"
fi
rm -rf $B

#!/bin/bash
# s14-local (issue 29, GA401 local array): hist_local vs hist_unrolled (its hand fix) on the H200,
# plus the SASS's LDL/STL per kernel and ncu's local hit rates and cycles. Writes $OUT/s14-local/probe.txt.
D=benchmarks/local_array_probe; L="${OUT:-/tmp}/local_array_probe"; mkdir -p "$L"; B=$(mktemp -d)
NVCC=$(command -v nvcc || { python3 -m pip install -q --no-index --no-deps --target /tmp/site .device-wheels/*.whl; PYTHONPATH=/tmp/site python3 -c "from gpuadvise.toolchain.find import find_toolchain; print(find_toolchain().nvcc)"; })
CUDA_BIN=$(dirname "$NVCC")
{ $NVCC -O3 -arch=sm_90 -std=c++17 -Xptxas -v -o $B/p $D/probe.cu 2>&1 | grep -E -A2 "hist_|loop_" | grep -E "Compiling|spill|Used" | head -24
  for i in 1 2; do timeout 8 $B/p; echo "rc $?"; done
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
  CUOBJ=$(command -v cuobjdump || ls $CUDA_BIN/cuobjdump /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
  $CUOBJ -sass $B/p 2>/dev/null | awk '/Function : /{f=$3} /(LDL|STL|LDG|ATOM|RED)/{op=$0; sub(/^[^*]*\/\*[0-9a-f]+\*\/ +/,"",op); sub(/^@!?U?P[0-9T] +/,"",op); sub(/ .*/,"",op); c[f" "op]++} END{for (k in c) print k, c[k]}' | grep -E "hist_|loop_" | sort
  NCU=$(command -v ncu || ls $CUDA_BIN/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  timeout 15 $NCU --clock-control none --csv -k regex:"hist_|loop_" --metrics gpu__time_duration.sum,sm__cycles_active.avg,smsp__inst_executed_op_local_ld.sum,smsp__inst_executed_op_local_st.sum,l1tex__t_sector_pipe_lsu_mem_local_op_ld_hit_rate.pct,l1tex__t_sector_pipe_lsu_mem_local_op_st_hit_rate.pct,l1tex__data_pipe_lsu_wavefronts.sum,smsp__inst_executed.sum,dram__bytes.sum $B/p ncu; echo "rc $?"
} > "$L/probe.txt" 2>&1
rm -rf $B

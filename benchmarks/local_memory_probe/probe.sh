#!/bin/bash
# s14-spill (issue 29, GA401): local memory's throughput on an H200 (probe.cu), ncu's local
# requests/sectors/hit rates of the same launches, and kernels/spills moments_capped's.
D=benchmarks/local_memory_probe; L="${OUT:-/tmp}/local_memory_probe"; mkdir -p "$L"; B=$(mktemp -d)
NVCC=$(command -v nvcc || { python3 -m pip install -q --no-index --no-deps --target /tmp/site .device-wheels/*.whl; PYTHONPATH=/tmp/site python3 -c "from gpuadvise.toolchain.find import find_toolchain; print(find_toolchain().nvcc)"; })
CUDA_BIN=$(dirname "$NVCC")
{ $NVCC -O3 -arch=sm_90 -std=c++17 -Xptxas -v -o $B/p $D/probe.cu 2>&1 | grep -E "Function properties|spill|Used" | head -40; timeout 25 $B/p; echo "rc $?"; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv; } > "$L/probe.txt" 2>&1
NCU=$(command -v ncu || ls $CUDA_BIN/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
{ timeout 28 $NCU --clock-control none --csv --metrics gpu__time_duration.sum,sm__cycles_active.avg,l1tex__t_requests_pipe_lsu_mem_local_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum,l1tex__t_sector_pipe_lsu_mem_local_op_ld_hit_rate.pct,l1tex__t_requests_pipe_lsu_mem_local_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum,l1tex__t_sector_pipe_lsu_mem_local_op_st_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes.sum $B/p ncu; echo "rc $?";
  timeout 20 $NCU --clock-control none --csv --metrics l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_local_ld.sum,smsp__inst_executed_op_local_st.sum $B/p ncu; echo "rc $?"; } > "$L/ncu.txt" 2>&1
CUOBJ=$(command -v cuobjdump || ls $CUDA_BIN/cuobjdump /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
{ $CUOBJ -sass $B/p 2>/dev/null | awk '/Function : /{f=$3} /(LDL|STL)/{op=$0; sub(/^.*\*\/ +/,"",op); sub(/ .*/,"",op); c[f" "op]++} END{for (k in c) print k, c[k]}' | sort; } >> "$L/probe.txt" 2>&1
rm -rf $B

#!/bin/bash
# On an H100 (the device machine): build, dump the SASS of the atomics, count with Nsight Compute.
set -u
cd "$(dirname "$0")"
nvcc -O3 -arch=sm_90 -diag-suppress 177 -o probe probe.cu 2>&1 | tail -5
cuobjdump -sass probe | grep -E "Function|ATOMS|REDUX|POPC|SHFL|VOTE" > $OUT/sass.txt
ncu --query-metrics --chip gh100 2>/dev/null | grep -iE "shared" > $OUT/metrics.txt
C="l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom l1tex__data_pipe_lsu_wavefronts_mem_shared smsp__inst_executed_op_shared_atom l1tex__data_pipe_lsu_wavefronts_mem_shared_cmd_read l1tex__data_pipe_lsu_wavefronts_mem_shared_cmd_write l1tex__data_bank_reads l1tex__data_bank_writes smsp__sass_inst_executed_op_shared_atom smsp__sass_inst_executed_op_shared_red"
M=""
for m in $C; do
  if grep -qw "$m" $OUT/metrics.txt; then M="$M,$m.sum"; else echo "missing $m"; fi
done
M=${M#,}
echo "metrics: $M"
./probe > $OUT/launches.txt
time ncu --clock-control none --csv --metrics "$M" ./probe > $OUT/ncu.csv 2> $OUT/ncu.err
tail -3 $OUT/ncu.err
wc -l $OUT/ncu.csv

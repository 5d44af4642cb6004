#!/bin/bash
# s12-soa (issue 29): the L1 data path's cycles per global request by the request's shape (stride,
# active lanes; L1-resident) beside the candidate models, and the kernels/cells GA301 layout
# proxies timed, then both under Nsight Compute (requests, sectors, wavefronts, the L1's busiest
# unit). Run from the repository root; ~45 s; writes $OUT/l1_shapes/{probe,ncu,sass}.txt; removes
# what it built. Clocks are left as they are (--clock-control none).
set -u
D=benchmarks/l1_shapes_probe; L="${OUT:-.}/l1_shapes"; mkdir -p "$L"; B=$(mktemp -d)
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
{ $NVCC -O3 -arch=sm_90 -std=c++17 -lineinfo -o $B/p $D/probe.cu && timeout 20 $B/p; echo "rc $?"; } > "$L/probe.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$L/probe.txt" 2>&1
{ $NVCC -O3 -arch=sm_90 -std=c++17 -cubin -o $B/p.cubin $D/probe.cu && $(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump") -sass $B/p.cubin | grep -E "Function|LDG|STG" ; } > "$L/sass.txt" 2>&1
{
  ncu --query-metrics 2>/dev/null | awk '{print $1}' | grep -E '^l1tex__(data_pipe_lsu_wavefronts|t_(sectors|requests)_pipe_lsu_mem_global_op_ld$|data_bank_reads$|t_set_accesses|t_set_conflicts|m_xbar2l1tex_read_sectors$|lsu_writeback)' > $B/names
  echo "metrics queried:"; cat $B/names | tr '\n' ' '; echo
  M="gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__inst_executed.sum,smsp__inst_executed_op_global_ld.sum"
  for n in $(cat $B/names); do M="$M,$n.sum"; done
  echo "== shapes and proxies, one launch each"
  timeout 25 ncu --clock-control none --csv --metrics "$M" $B/p ncu 2>&1 | grep -E '^"[0-9]' | python3 -c '
import csv, sys
for r in csv.reader(sys.stdin):
    print(r[0], r[4].split("(")[0].strip(), r[12], r[14].replace(",", ""))'
  echo "rc $?"
  echo "== proxies: breakdown of the L1 and SM throughputs, pipes"
  timeout 25 ncu --clock-control none --csv -k regex:301 --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --metrics "breakdown:l1tex__throughput.avg.pct_of_peak_sustained_elapsed,breakdown:sm__throughput.avg.pct_of_peak_sustained_elapsed" $B/p ncu 2>&1 | grep -E '^"[0-9]' | python3 -c '
import csv, sys
for r in csv.reader(sys.stdin):
    print(r[0], r[4].split("(")[0].strip(), r[12], r[14].replace(",", ""))'
  echo "rc $?"
} > "$L/ncu.txt" 2>&1
rm -rf $B

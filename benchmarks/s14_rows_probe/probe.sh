#!/bin/bash
# s14-rows probe: one-wave grid-stride loops in step or not (flip_pow2 GA206). Run from the repo root.
set -u
D=${D:-benchmarks/s14_rows_probe}
O="$OUT/s14-rows"
mkdir -p "$O"
B=$(mktemp -d)
nvcc -O3 -arch=sm_90 -std=c++17 -o "$B/probe" "$D/probe.cu" > "$O/times.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$O/times.txt" 2>&1
timeout 30 "$B/probe" >> "$O/times.txt" 2>&1
echo "probe rc $?" >> "$O/times.txt"
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__warps_active.avg.per_cycle_active,smsp__issue_active.avg.per_cycle_active,dram__bytes.sum
M=$M,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum
M=$M,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio
timeout 20 ncu --clock-control none --csv -k regex:"flip|particles|box3" --metrics "$M" "$B/probe" once > "$O/ncu.csv" 2>&1
echo "ncu rc $?" >> "$O/ncu.csv"
rm -rf "$B"

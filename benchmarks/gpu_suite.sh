#!/usr/bin/env bash
# Every GPU validation and seed reproduction behind docs/validation.md and docs/accuracy.md, in
# groups that each fit a 10-minute slot. Run from the repository root on the GPU machine:
#     bash benchmarks/gpu_suite.sh OUTDIR [GROUP ...]      (groups: l2 seeds rules tests; default all)
# Each step's output goes to OUTDIR/<step>.txt; a step that fails does not stop the others.
set -u
out=${1:?usage: gpu_suite.sh OUTDIR [GROUP ...]}
shift
groups=${*:-l2 seeds rules tests}
mkdir -p "$out"
py=${PYTHON:-python3}

step() {  # step NAME TIMEOUT_S COMMAND...
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" >"$out/$name.txt" 2>&1
    local rc=$?
    echo "$name: rc $rc, $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$out/device.txt" 2>&1
for g in $groups; do
    case $g in
    l2) step l2_gather 240 "$py" benchmarks/l2_gather/run.py ;;
    seeds)
        step seed002_tiling 200 "$py" benchmarks/seed002_tiling.py
        step seed003_reductions 150 "$py" benchmarks/seed003_reductions.py
        step launch_overhead 150 "$py" benchmarks/launch_overhead.py
        ;;
    rules)
        step accuracy 420 "$py" benchmarks/accuracy.py --json "$out/accuracy.json" --md "$out/accuracy.md"
        step layout_proxies 200 "$py" benchmarks/layout_proxies.py
        step codegen_rules 200 "$py" benchmarks/codegen_rules.py
        ;;
    tests) step pytest_gpu 400 "$py" -m pytest -q -m gpu -p no:cacheprovider tests ;;
    *) echo "unknown group $g (l2 seeds rules tests)" >&2 ;;
    esac
done

#!/usr/bin/env bash
# The public suite on the lent GPU machine, one kernel at a time, each result kept as soon as it is
# there (a call cut at its time limit keeps what finished). Run from the repository root, with
# benchmarks/public/src (fetched here) and .device-wheels carried to the device:
#   bash benchmarks/public/device_run.sh NAME...      (names from manifest.toml; all when none)
# Writes $OUT/progress.txt, $OUT/logs.txt (run.py's tables) and $OUT/results.jsonl (run.py's
# results.json of each kernel, one document after another).
set -u
OUT=${OUT:-/tmp/public_out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device-wheels/*.whl > "$OUT/pip.txt" 2>&1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv >> "$OUT/pip.txt"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  mapfile -t names < <(sed -n 's/^name = "\(.*\)"/\1/p' benchmarks/public/manifest.toml)
fi
i=0
for n in "${names[@]}"; do
  i=$((i+1)); d=/tmp/public_run/r$i; mkdir -p "$d"
  s=$(date +%s)
  timeout "${PER_KERNEL_S:-80}" python3 benchmarks/public/run.py --only "$n" --timeout $(( ${PER_KERNEL_S:-80} - 5 )) --out "$d" ${RUN_FLAGS:-} >> "$OUT/logs.txt" 2>&1
  echo "$n rc=$? $(( $(date +%s) - s ))s" >> "$OUT/progress.txt"
  if [ -f "$d/results.json" ]; then cat "$d/results.json" >> "$OUT/results.jsonl"; echo >> "$OUT/results.jsonl"; fi
done

#!/usr/bin/env bash
# The whole corpus twice on one machine, back to back, so that the two trees' times compare as
# ratios within one run (issue 31): this checkout ("after"), then a base in a copy of this checkout
# whose gpuadvise/, rules/ and kernels/ come from an archive:
#     git archive BASE_COMMIT gpuadvise rules kernels | gzip > base.tgz      # on your machine
#     OUT=/tmp/ab bash benchmarks/corpus/ab.sh base.tgz                      # where it runs
# Each tree gets a fresh cache (GPUADVISE_CACHE_DIR). The same runner, manifests and judgements
# (this checkout's benchmarks/) score both. Writes results_{after,base}.json, table_*.md and
# corpus_*.txt under $OUT. CORPUS_S bounds each run (default 270 s), JOBS its parallelism (15), PYTHON the interpreter,
# ORDER the order of the two runs ("after base", the default, or "base after"): the first run on a
# freshly started machine pays its cold disk cache (nvcc's files), so a before/after is two pairs in
# opposite orders, their ratios averaged. FLAGS: the runner's flags (default --fixes; "" for the
# plain command alone, whose wall is what a user waits for). PIN: CPUs of its own for each analysis
# (run.py --cpus-per-job; JOBS=8 PIN=2 on 16 CPUs: eight 2-core machines; unset: not pinned).
set -u
base_tgz=$(realpath "${1:?usage: ab.sh BASE.tgz (git archive REV gpuadvise rules kernels | gzip)}")
: "${OUT:?set OUT to a folder for the results}"
mkdir -p "$OUT"
B=$(mktemp -d /tmp/gpuadvise-ab-base.XXXXXX)
tar cf - --exclude=./.device-wheels --exclude=./.git --exclude=./.gpu --exclude=./.venv . | tar xf - -C "$B"
rm -rf "$B/gpuadvise" "$B/rules" "$B/kernels" && tar xzf "$base_tgz" -C "$B"
{ nproc; uptime; } >> "$OUT/ab.txt"
for t in ${ORDER:-after base}; do
  d=$PWD; [ "$t" = base ] && d=$B
  s=$(date +%s); o=$(mktemp -d "/tmp/gpuadvise-ab-out-$t.XXXXXX")
  ( cd "$d" && GPUADVISE_CACHE_DIR=$(mktemp -d "/tmp/gpuadvise-ab-cache-$t.XXXXXX") \
      timeout "${CORPUS_S:-270}" "${PYTHON:-python3}" benchmarks/corpus/run.py ${FLAGS---fixes} --jobs "${JOBS:-15}" \
      ${PIN:+--cpus-per-job "$PIN"} --timeout 240 --out "$o" --markdown "$OUT/table_$t.md" -- --tracer emu \
      > "$OUT/corpus_$t.txt" 2>&1 )
  echo "$t rc=$? $(( $(date +%s) - s ))s $(uptime)" >> "$OUT/ab.txt"
  cp "$o/results.json" "$OUT/results_$t.json" 2>/dev/null \
    || cp "$o/partial.jsonl" "$OUT/partial_$t.jsonl" 2>/dev/null  # cut by CORPUS_S
done
rm -rf "$B"

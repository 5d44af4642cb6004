#!/usr/bin/env bash
# Issue 34 on the GPU machine, in one call (about 4 minutes; every step is cut to fit 7.5): install the recorder's wheels
# offline, run the GPU tests of `gpuadvise record`, record a CUDA C++ program and a CuPy script,
# analyze the recorded folders (measured on the GPU), and keep every log, the recordings (small)
# and the timings under $OUT (default /tmp/record_gpu). Run from the repository root with the
# wheels in .device-wheels/ (benchmarks/README.md says which):
#     bash benchmarks/record_gpu.sh
# A step that fails does not stop the others; steps.txt lists each one's exit code and time.
set -u
out=${OUT:-/tmp/record_gpu}
mkdir -p "$out"
py=${PYTHON:-python3}
site=/tmp/gpuadvise-record-site

step() {  # step NAME TIMEOUT_S COMMAND... (skipped once 450 s are spent: the call's limit is 8 min)
    local name=$1 limit=$2
    shift 2
    if ((SECONDS + 20 > 450)); then
        echo "$name: skipped (out of time)" | tee -a "$out/steps.txt"
        return 1
    fi
    ((limit > 450 - SECONDS)) && limit=$((450 - SECONDS))
    local t0=$SECONDS
    timeout "$limit" "$@" >"$out/$name.txt" 2>&1
    local rc=$?
    echo "$name: rc $rc, $((SECONDS - t0)) s" | tee -a "$out/steps.txt"
    return $rc
}

date -u +%Y-%m-%dT%H:%M:%SZ >"$out/date.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$out/device.txt" 2>&1
step pip_install 120 "$py" -m pip install --no-index --no-deps --target "$site" .device-wheels/*.whl
export PYTHONPATH="$site:$PWD"
if ! step import_check 60 "$py" -c "
from importlib.metadata import version
from cupti import cupti
from cuda.bindings import driver
import cupti as c, cuda.bindings as b
print('cupti-python', version('cupti-python'), 'from', c.__file__)
print('cuda-bindings', version('cuda-bindings'), 'from', b.__file__)
print('nvidia-cuda-cupti', version('nvidia-cuda-cupti'))
print('CUPTI timestamp', cupti.get_timestamp())
"; then
    cat "$out/import_check.txt"
    "$py" -m pip list >"$out/pip_list.txt" 2>&1
    cat "$out/pip_list.txt"
fi
step toolchain 60 bash -c "which nvcc cc gcc; nvcc --version; $py -c 'import sysconfig; print(sysconfig.get_config_var(\"LDLIBRARY\"), sysconfig.get_config_var(\"LIBDIR\"))'; $py -c 'import cupy; print(\"cupy\", cupy.__version__)'"

# 1. the GPU tests (they keep their recordings under $out/keep, and dump raw callback bytes)
mkdir -p "$out/keep"
GPUADVISE_RECORD_KEEP="$out/keep" GPUADVISE_RECORD_DUMP=1 \
    step pytest_gpu 200 "$py" -m pytest -m gpu tests/record -x -q -p no:cacheprovider -rA

# 2. the C++ program and the CuPy script recorded and analyzed with measurement
step build_cpp 120 nvcc -lineinfo -arch=native -o "$out/streams" tests/record/data/streams.cu
step plain_cpp 60 bash -c "time '$out/streams'"
GPUADVISE_RECORD_DUMP=1 step record_cpp 120 bash -c \
    "time $py -m gpuadvise record --out '$out/rec_cpp' -- '$out/streams'"
step analyze_cpp 120 "$py" -m gpuadvise analyze "$out/rec_cpp"
mkdir -p "$out/app" && cp tests/record/data/cupy_app.py tests/record/data/gather.cu "$out/app/"
step plain_cupy 120 bash -c "time $py '$out/app/cupy_app.py' 50"
GPUADVISE_RECORD_DUMP=1 step record_cupy 180 bash -c \
    "time $py -m gpuadvise record --out '$out/rec_cupy' --source '$out/app' -- $py '$out/app/cupy_app.py' 50"
step analyze_cupy 120 "$py" -m gpuadvise analyze "$out/rec_cupy"

# what came back: the recordings (summary, cases, raw launch records, callbacks) without the
# big files (snapshots stay as the cases' .npy)
for d in "$out/rec_cpp" "$out/rec_cupy" "$out"/keep/*; do
    [ -d "$d" ] && find "$d" -name '*.bin' -size +1M -delete
done
rm -f "$out/streams"
echo "done; see $out/steps.txt"

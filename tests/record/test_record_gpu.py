"""``gpuadvise record`` on a GPU: a CUDA C++ program built here with nvcc (runtime API, a
templated kernel, a struct passed by value, two streams) and a CuPy RawKernel script are
recorded, their results unchanged by the recording, and the recorded cases analyzed: the
findings equal those of hand-written specs of the same launches. Needs an NVIDIA GPU, CUPTI's
Python bindings (``pip install 'gpuadvise[record]'``) and nvcc; skipped otherwise (CuPy for its
test). benchmarks/record_gpu.sh runs these and keeps the recordings."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).with_name("data")


def _why_not() -> str | None:
    from gpuadvise.devices import live_device
    from gpuadvise.record.run import recorder_missing

    missing = recorder_missing()
    if missing is not None:
        return f"no recorder: {missing} (pip install 'gpuadvise[record]')"
    if live_device() is None:
        return "no NVIDIA GPU or driver found (NVML sees none)"
    return None


WHY = _why_not()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(WHY is not None, reason=WHY or "")]
KEEP = os.environ.get("GPUADVISE_RECORD_KEEP")  # benchmarks/record_gpu.sh keeps the folders


def gpuadvise(
    *args: str, cwd: Path | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuadvise", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


def out_folder(tmp_path: Path, name: str) -> Path:
    return Path(KEEP) / name if KEEP else tmp_path / name


def findings(spec_or_folder: Path) -> list[tuple[str, str, int]]:
    what = ["--spec"] if spec_or_folder.suffix == ".toml" else []
    r = gpuadvise("analyze", *what, str(spec_or_folder), "--no-measure", "--format", "json",
                  timeout=400)  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    cases = doc["cases"] if "cases" in doc else [{"analysis": doc}]
    return sorted(
        (c["analysis"]["kernel"]["name"], f["rule"], f["line"])
        for c in cases
        for f in c["analysis"]["findings"]
    )


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gpuadvise.toolchain import find_toolchain

    tc = find_toolchain()
    exe = tmp_path_factory.mktemp("prog") / "streams"
    subprocess.run(
        [str(tc.nvcc), "-lineinfo", "-arch=native", "-o", str(exe), str(DATA / "streams.cu")],
        check=True,
        capture_output=True,
        text=True,
    )
    return exe


def test_cpp_program_recorded_results_unchanged_and_cases_analyze_as_specs(program, tmp_path):
    plain = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0 and plain.stdout.startswith("checksum")
    out = out_folder(tmp_path, "cpp")
    r = gpuadvise("record", "--out", str(out), "--json", "--", str(program))
    assert r.returncode == 0, r.stderr
    assert plain.stdout in r.stdout  # the program's own output, unchanged by the recording
    doc = json.loads(r.stdout[r.stdout.index("{") :])
    assert doc["exit_code"] == 0 and doc["unfinished_processes"] == 0, doc["errors"]
    by_name = {c["name"]: c for c in doc["cases"]}
    assert set(by_name) == {"gather<32>", "scaled", "saxpy"}, doc
    assert by_name["saxpy"]["launches"] == 3 and by_name["saxpy"]["gpu_time_ms"] > 0
    assert by_name["gather<32>"]["replayable"] and by_name["saxpy"]["replayable"]
    assert by_name["saxpy"]["source"] == str((DATA / "streams.cu").resolve())
    # the struct passed by value: recorded with its bytes, replayed from them
    params = (np.float32(1.5).tobytes() + np.int32(3).tobytes()).hex()
    assert by_name["scaled"]["replayable"]
    scaled = tomllib.loads((out / by_name["scaled"]["folder"] / "case.toml").read_text())
    assert scaled["args"] == {"p": {"bytes": params}, "n": 1 << 16}
    # saxpy's y is y + 16 floats: the pointer resolved to its allocation and offset
    spec = tomllib.loads((out / by_name["saxpy"]["folder"] / "case.toml").read_text())
    assert spec["args"] == {"n": 1 << 16, "a": 2.0}
    x = np.load(out / by_name["saxpy"]["folder"] / "x.npy")
    # the first saxpy reads z = gather(x): the data it saw before it ran
    h = (np.arange(1 << 16) % 97) * 0.25 - 3.0
    assert np.array_equal(x[: 1 << 16], h[(np.arange(1 << 16) * 32) % (1 << 16)].astype(np.float32))
    # the findings of the recorded cases are those of hand-written specs of the same launches
    hand = tmp_path / "hand"
    hand.mkdir()
    np.save(hand / "in.npy", h.astype(np.float32))
    (hand / "gather.toml").write_text(
        f'source = "{DATA / "streams.cu"}"\nkernel = "gather<32>"\ngrid = 256\nblock = 256\n'
        '[args]\nn = 65536\n[buffers]\nin = "in.npy"\nout = "float[65536]"\n'
    )
    recorded = findings(out / by_name["gather<32>"]["folder"] / "case.toml")
    assert recorded == findings(hand / "gather.toml") and recorded
    (hand / "scaled.toml").write_text(
        f'source = "{DATA / "streams.cu"}"\nkernel = "scaled"\ngrid = 256\nblock = 256\n'
        f'[args]\nn = 65536\np = {{ bytes = "{params}" }}\n'
        '[buffers]\nx = "in.npy"\ny = "float[65600]"\n'
    )
    recorded = findings(out / by_name["scaled"]["folder"] / "case.toml")
    assert recorded == findings(hand / "scaled.toml")


def test_cupy_script_recorded_on_a_view_and_analyzed(tmp_path):
    pytest.importorskip("cupy")
    app = tmp_path / "app"
    app.mkdir()
    for f in ("cupy_app.py", "gather.cu"):
        (app / f).write_text((DATA / f).read_text())
    plain = subprocess.run(
        [sys.executable, str(app / "cupy_app.py"), "3"], capture_output=True, text=True, timeout=120
    )
    assert plain.returncode == 0, plain.stderr
    out = out_folder(tmp_path, "cupy")
    # no --source: CuPy's kernel cache, kept in the recording, holds the RawKernel's source
    r = gpuadvise(
        "record", "--out", str(out), "--json", "--", sys.executable, str(app / "cupy_app.py"), "3"
    )
    assert r.returncode == 0, r.stderr
    assert plain.stdout in r.stdout
    doc = json.loads(r.stdout[r.stdout.index("{") :])
    (case,) = [c for c in doc["cases"] if c["name"] == "gather32"]
    assert case["launches"] == 3 and case["replayable"], case
    assert case["source"].startswith(str((out / "raw" / "cupy-cache").resolve())), case
    folder = out / case["folder"]
    spec = tomllib.loads((folder / "case.toml").read_text())
    assert spec["kernel"] == "gather32" and spec["args"] == {"n": 1 << 16}
    # y[16:]: 64 bytes into y's allocation (more if CuPy's pool carved y from a larger block)
    into = [re.search(r"out points (\d+) bytes into", n) for n in case["notes"]]
    assert any(m and int(m.group(1)) >= 64 for m in into), case["notes"]
    # the data from the pointer to the end of its allocation: the program's x first
    x = np.load(folder / "in.npy")
    assert np.array_equal(x[: 1 << 16], np.arange(1 << 16, dtype=np.float32) * 0.5 - 7.0)
    hand = tmp_path / "hand"
    hand.mkdir()
    np.save(hand / "in.npy", x[: 1 << 16])
    (hand / "gather.toml").write_text(
        f'source = "{app / "gather.cu"}"\nkernel = "gather32"\ngrid = 256\nblock = 256\n'
        '[args]\nn = 65536\n[buffers]\nin = "in.npy"\nout = "float[65536]"\n'
    )
    recorded = findings(folder / "case.toml")
    assert recorded == findings(hand / "gather.toml") and recorded
    # the folder: the RawKernel's case as above, and CUB's kernels (no source: CuPy ships them
    # built) analyzed from their cubins; CuPy's generated elementwise kernels are left out
    folder_findings = findings(out)
    assert [f for f in folder_findings if f[0] == "gather32"] == recorded
    assert all(f[0].startswith("cub::") for f in folder_findings if f[0] != "gather32")

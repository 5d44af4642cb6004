"""A recorded kernel whose source is not found (issue 34, item 3: CuPy's elementwise kernels and
CUB's reductions, recorded with their cubin only) gets a launch spec on its cubin, with its
recorded data, and ``gpuadvise analyze OUT`` analyzes it: resources, occupancy and the
SASS-based rules, with a note that nothing was traced and that source fixes need --source."""

from __future__ import annotations

import json
import subprocess
import tomllib

import pytest
from clikit import cli
from fakecuda import FakeCuda, f32, i32, ptr

from gpuadvise.record.agent import DOMAIN_DRIVER, DOMAIN_RESOURCE, Recorder
from gpuadvise.record.cases import write_cases
from gpuadvise.record.raw import RawWriter
from gpuadvise.record.sampling import SnapshotPolicy

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

ENTER = 0
SYMBOL = "_Z5twicePfi"


def test_case_without_source_gets_a_spec_on_its_cubin(tmp_path, capsys):
    from gpuadvise.toolchain import find_toolchain

    code = "__global__ void twice(float* a, int n) {\n  int i = threadIdx.x;\n"
    code += "  if (i < n) a[i] *= 2.0f;\n}\n"
    (tmp_path / "kern.cu").write_text(code)
    cubin = tmp_path / "kern.cubin"
    subprocess.run([str(find_toolchain().nvcc), "-cubin", "-arch=sm_90", "-o", str(cubin),
                    str(tmp_path / "kern.cu")], check=True, capture_output=True)  # fmt: skip
    (tmp_path / "kern.cu").unlink()  # built elsewhere, without -lineinfo: no source to find
    out = tmp_path / "rec"
    cuda = FakeCuda()
    rec = Recorder(cuda, RawWriter(out / "raw" / "7", ["./app"]), SnapshotPolicy())
    rec.on_callback(DOMAIN_RESOURCE, 6, cuda.module_loaded(1, cubin.read_bytes()))
    a = cuda.alloc(f32(*range(32)))
    cuda.functions[0xF5] = [(0, 8), (8, 4)]
    p = cuda.cu_launch_kernel(0xF5, (1, 1, 1), (32, 1, 1), 0, 0, [ptr(a), i32(32)])
    rec.on_callback(DOMAIN_DRIVER, 307, cuda.callback(ENTER, p, SYMBOL, 1))
    rec.finish()
    _, (case,), _ = write_cases(out)
    assert case.replayable and case.source is None
    assert any("analyzed from its cubin" in n and "--source" in n for n in case.notes)
    folder = out / case.folder
    spec = tomllib.loads((folder / "case.toml").read_text())
    assert spec["source"] == "twice.cubin" and (folder / "twice.cubin").is_file()
    assert spec["kernel"] == SYMBOL
    assert spec["args"] == {"arg1": 32} and spec["buffers"] == {"arg0": "arg0.npy"}
    code_, stdout, err = cli(capsys, "analyze", str(out), "--gpu", "H100", "--no-measure",
                             "--format", "json")  # fmt: skip
    assert code_ == 0, err
    (row,) = json.loads(stdout)["cases"]
    assert row["error"] is None
    report = row["analysis"]
    assert report["resources"]["registers"] > 0 and report["occupancy"]["occupancy"] > 0
    assert any("holds SASS and no PTX" in n for n in report["notes"])

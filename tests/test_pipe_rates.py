"""The execution model's pipe rates (gpuadvise.devices.pipe_rates, data/pipes.toml): the CUDA
guide's throughputs as defaults, what was measured in their place and which GPUs it stands for,
and benchmarks/pipe_probe/to_preset.py writing a probe's JSON into the presets."""

from __future__ import annotations

import importlib.util
import json
import shutil
import tomllib
from pathlib import Path

import pytest

from gpuadvise import devices
from gpuadvise.devices import for_arch, pipe_rates, preset

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_are_the_guides_throughputs() -> None:
    # CUDA C++ Programming Guide, "Arithmetic Instructions": results per clock per SM
    h100 = pipe_rates(preset("H100"))
    assert h100.lanes_per_clock["fp32"] == 128 and h100.lanes_per_clock["fp64"] == 64
    assert h100.lanes_per_clock["mufu"] == 16 and h100.lanes_per_clock["int"] == 64
    a100 = pipe_rates(preset("A100-80GB"))
    assert a100.lanes_per_clock["fp32"] == 64 and a100.lanes_per_clock["fp64"] == 32
    assert a100.measured == frozenset() and "measured: none" in a100.describe()
    rtx = pipe_rates(preset("RTX3090"))
    assert rtx.lanes_per_clock["fp64"] == 2  # a consumer GPU's FP64
    old = pipe_rates(for_arch("sm_61"))
    assert "nearest known" in old.source and old.lanes_per_clock["fp64"] == 32


def test_a_measurement_stands_for_its_compute_capability() -> None:
    h200 = pipe_rates(preset("H200"))
    assert "launch_floor_us" in h200.measured and h200.launch_floor_s == pytest.approx(2.8e-6)
    assert "measured on an H200" in h200.source
    h100 = pipe_rates(preset("H100"))  # the same SM: the H200's per-clock figures carry over
    assert h100.launch_floor_s == h200.launch_floor_s
    assert "same SM" in h100.source


def _to_preset():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "to_preset", ROOT / "benchmarks" / "pipe_probe" / "to_preset.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_to_preset_writes_the_probe_into_the_presets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipes = tmp_path / "pipes.toml"
    shutil.copy(ROOT / "gpuadvise" / "data" / "pipes.toml", pipes)
    probe = {
        "device": "NVIDIA H200",
        "cc": "9.0",
        "sm_count": 132,
        "sm_clock_mhz": 1980.0,
        "lanes_per_clock": {
            "fp32": 127.1,
            "fp16": 250.0,
            "fp64": 63.5,
            "int": 63.9,
            "mufu": 15.9,
            "xu": 15.8,
            "shuffle": 31.7,
            "tensor": 0.0,
        },  # fmt: skip
        "latency_cycles": {
            "fp32": 4.02,
            "fp64": 8.1,
            "int": 4.5,
            "mufu": 17.9,
            "xu": 13.0,
            "shuffle": 23.1,
            "fp16": 5.0,
            "tensor": 33.0,
            "shared": 29.3,
            "l1": 33.7,
            "l2": 262.0,
            "dram": 812.5,
            "barrier": 21.0,
            "store": 1,
        },  # fmt: skip
        "shared_wavefront_cycles": 1.94,
        "launch_floor_us": 2.61,
        "launch_back_to_back_us": 2.1,
        "cta_launch_ns": 38.5,
    }
    src = tmp_path / "pipe_probe.json"
    src.write_text(json.dumps(probe))
    mod = _to_preset()
    assert mod.main([str(src), "--pipes", str(pipes), "--date", "2026-11-29"]) == 0
    data = tomllib.loads(pipes.read_text())
    got = data["gpu"]["H200"]
    assert got["launch_floor_us"] == 2.61 and got["cta_launch_ns"] == 38.5
    assert got["lanes_per_clock"]["fp32"] == 127.1
    assert "tensor" not in got["lanes_per_clock"]  # not measured (0): the default stays
    assert got["latency_cycles"]["dram"] == 812.5
    assert data["cc"]["9.0"]["lanes_per_clock"]["fp32"] == 128  # the defaults kept
    assert "2026-11-29" in pipes.read_text()
    # what the probe does not measure stays as written: a fitted key and its comment
    assert got["cta_turnaround_ns"] == 280
    assert "# the CTA turnaround a round of resident CTAs" in pipes.read_text()
    # and the model reads them, each key named as measured
    monkeypatch.setattr(devices, "_pipe_data", lambda: data)
    rates = pipe_rates(preset("H200"))
    assert rates.lanes_per_clock["fp32"] == 127.1 and rates.lanes_per_clock["tensor"] == 32
    assert rates.latency_cycles["dram"] == 812.5 and rates.shared_wavefront_cycles == 1.94
    assert rates.launch_floor_s == pytest.approx(2.61e-6)
    assert {"pipe.fp32", "latency.dram", "cta_launch_ns"} <= rates.measured
    assert "pipe.tensor" not in rates.measured
    # a second run for another GPU keeps the first
    probe["device"] = "NVIDIA H100 80GB HBM3"
    src.write_text(json.dumps(probe))
    assert mod.main([str(src), "--pipes", str(pipes)]) == 0
    data = tomllib.loads(pipes.read_text())
    assert set(data["gpu"]) == {"H200", "H100"}
    assert data["gpu"]["H200"]["launch_floor_us"] == 2.61
    # a later probe of the same GPU that measured fewer pipes keeps the earlier values
    probe["device"] = "NVIDIA H200"
    probe["lanes_per_clock"] = {"fp32": 126.0}
    probe["latency_cycles"] = {}
    src.write_text(json.dumps(probe))
    before = pipes.read_text()
    assert mod.main([str(src), "--pipes", str(pipes), "--date", "2026-12-01"]) == 0
    after = pipes.read_text()
    data = tomllib.loads(after)
    h200 = data["gpu"]["H200"]
    assert h200["lanes_per_clock"]["fp32"] == 126.0 and h200["lanes_per_clock"]["fp64"] == 63.5
    assert h200["latency_cycles"]["dram"] == 812.5 and h200["cta_turnaround_ns"] == 280
    assert after.count("# pipe_probe:") == 2 and "2026-12-01" in after  # one note per GPU
    assert after.partition("[gpu.H100]")[2] == before.partition("[gpu.H100]")[2]


def test_to_preset_refuses_an_unknown_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipes = tmp_path / "pipes.toml"
    shutil.copy(ROOT / "gpuadvise" / "data" / "pipes.toml", pipes)
    src = tmp_path / "p.json"
    src.write_text(json.dumps({"device": "Some Other GPU", "lanes_per_clock": {}}))
    assert _to_preset().main([str(src), "--pipes", str(pipes)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no preset matches") and "--gpu" in err[0]
    assert pipes.read_text() == (ROOT / "gpuadvise" / "data" / "pipes.toml").read_text()

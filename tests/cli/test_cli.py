"""The CLI contract: exit codes, one-line errors, JSON schema, help everywhere.

The commands run in this process (``main(argv)``, tests/clikit.py); the entry point's smoke
tests run ``python -m gpuadvise`` as a real process: its exit status and its streams."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from clikit import cli_run


def process(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m gpuadvise ARGS`` as a process of its own, in the test's environment (the
    run's compile cache and the children's bytecode folder, tests/conftest.py, are set after
    this module is imported)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "gpuadvise", *args], capture_output=True, text=True, env=env
    )


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_run(*args)


def test_version_and_help():
    from gpuadvise import __version__

    r = run("--version")
    assert r.returncode == 0 and __version__ in r.stdout
    for cmd in ([], ["occupancy"], ["devices"]):
        r = run(*cmd, "--help")
        assert r.returncode == 0 and "Usage" in r.stdout


def test_the_entry_point_as_a_process():
    """Smoke test of ``python -m gpuadvise``: the exit status and streams of a real process, for
    a success, a user error (one line, exit 2) and an unknown command."""
    from gpuadvise import __version__

    r = process("--version")
    assert r.returncode == 0 and __version__ in r.stdout and r.stderr == ""
    r = process(
        "occupancy", "-t", "16x16", "--smem", "32KiB", "-r", "64", "--gpu", "h100", "--json"
    )
    assert r.returncode == 0 and json.loads(r.stdout)["occupancy"] == 0.5, r.stderr
    r = process("occupancy", "--threads", "0")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1
    r = process("frobnicate")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_occupancy_text():
    r = run("occupancy", "--threads", "256", "--smem", "32k", "--regs", "64", "--gpu", "H100")
    assert r.returncode == 0, r.stderr
    assert "Occupancy 50.0%" in r.stdout
    assert "limiter" in r.stdout and "48 registers" in r.stdout


def test_occupancy_json_schema():
    r = run("occupancy", "-t", "16x16", "--smem", "32KiB", "-r", "64", "--gpu", "h100", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1
    assert doc["device"] == {"name": "H100", "arch": "sm_90", "cc": "9.0"}
    assert doc["input"]["threads_per_block"] == 256
    assert doc["active_blocks_per_sm"] == 4
    assert doc["active_warps_per_sm"] == 32
    assert doc["occupancy"] == 0.5
    assert doc["limiters"] == ["registers"]
    assert set(doc["limits"]) == {"warps", "registers", "shared_memory", "blocks", "barriers"}
    assert doc["limits"]["registers"] == 4


def test_sweep_draws_three_views():
    r = run("occupancy", "-t", "128", "-r", "40", "--gpu", "A100", "--sweep")
    assert r.returncode == 0, r.stderr
    for title in ("threads per block", "registers per thread", "shared memory per block"):
        assert title in r.stdout
    j = run("occupancy", "-t", "128", "-r", "40", "--gpu", "A100", "--sweep", "--json")
    assert len(json.loads(j.stdout)["sweeps"]) == 3


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--threads", "0"], "zero or negative"),
        (["--threads", "2048"], "above the maximum"),
        (["--threads", "abc"], "not a launch dimension"),
        (["--threads", "256", "--regs", "256"], "registers per thread"),
        (["--threads", "256", "--regs", "x"], "not a number"),
        (["--threads", "256", "--smem", "64k"], "statically"),
        (["--threads", "256", "--dynamic-smem", "300k"], "opt-in maximum"),
        (["--threads", "256", "--smem", "12q"], "unknown unit"),
        (["--threads", "256", "--gpu", "H1000"], "unknown GPU"),
        (["--threads", "256", "--arch", "sm_99"], "not known"),
        (["--threads", "256", "--carveout", "101"], "carveout"),
        ([], "Missing option"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    r = run("occupancy", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and needle in lines[0]
    assert "Traceback" not in r.stderr


def test_unknown_command_is_one_line():
    r = run("frobnicate")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_devices_lists_presets_and_json():
    r = run("devices")
    assert r.returncode == 0 and "H100" in r.stdout and "RTX4090" in r.stdout
    doc = json.loads(run("devices", "--json").stdout)
    assert {p["name"] for p in doc["presets"]} >= {"H100", "B200", "L4"}
    assert "sm_90" in doc["architectures"]

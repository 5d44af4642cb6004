"""Kernels without source (issue 34, item 3): ``gpuadvise analyze kernel.ptx|kernel.cubin``.

The PTX and cubins are built here with nvcc from kernels/accumulate/accumulate.cu (GA308's case:
``atax_rows`` accumulates in ``tmp[i]`` in a loop, a fix that rewrites the source). From PTX with
line info the findings are the .cu's, each at the same line; the fix that rewrites the source is
not built, and its finding says to pass ``--source``; ``--source`` brings the variant back. PTX
without line info is located at its own lines; a cubin gives resources and occupancy, and says
that nothing was traced. Bad input is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from clikit import cli_run, one_error

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

CASE = Path(__file__).resolve().parents[2] / "kernels" / "accumulate"
SOURCE = CASE / "accumulate.cu"
LAUNCH = "grid = 132\nblock = 32\nseed = 1\n"
NAMED = '[args]\nnx = 4224\nny = 64\n[buffers]\nA = "float[270336]"\nx = "float[64]"\n'
NAMED += 'tmp = { type = "float", count = 4224, fill = "zeros" }\n'
BY_POSITION = NAMED.replace("nx =", "arg3 =").replace("ny =", "arg4 =")
BY_POSITION = BY_POSITION.replace("A =", "arg0 =").replace("x =", "arg1 =")
BY_POSITION = BY_POSITION.replace("tmp =", "arg2 =")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from gpuadvise.toolchain import find_toolchain

    nvcc = str(find_toolchain().nvcc)
    out = tmp_path_factory.mktemp("binary")
    files = {name: out / name for name in ("acc.ptx", "bare.ptx", "acc.cubin", "acc.fatbin")}
    # two nvcc runs, not four: the fatbin's kept PTX and cubin are what -ptx and -cubin with the
    # same flags write (byte for byte, nvcc 13.0)
    keep = out / "keep"
    keep.mkdir()
    for flags, target in (
        (["-fatbin", "-lineinfo", "-keep", "-keep-dir", str(keep)], files["acc.fatbin"]),
        (["-ptx"], files["bare.ptx"]),
    ):
        cmd = [nvcc, *flags, "-arch=sm_90", "-o", str(target), str(SOURCE)]
        subprocess.run(cmd, check=True, capture_output=True)
    (keep / f"{SOURCE.stem}.ptx").rename(files["acc.ptx"])
    (keep / f"{SOURCE.stem}.sm_90.cubin").rename(files["acc.cubin"])
    return files


def _spec(folder: Path, source: Path, args: str = NAMED) -> Path:
    path = folder / f"{source.stem}-{source.suffix[1:]}.toml"
    path.write_text(f'source = "{source}"\nkernel = "atax_rows"\n{LAUNCH}{args}')
    return path


def _analyze(*args: str, cache: bool = False) -> dict:
    """``gpuadvise analyze ARGS --json``, ``--no-cache`` unless ``cache``: the binary inputs'
    analyses are what the tests check, each run whole; the .cu's, which they are compared with,
    take the run's compile cache (accumulate.cu compiled and disassembled once in the run, not
    again in each test)."""
    flags = () if cache else ("--no-cache",)
    r = cli_run("analyze", *args, "--gpu", "H100", "--no-measure", "--json", *flags)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def _found(doc: dict) -> list[tuple[str, int | None]]:
    return sorted((f["rule"], f["line"]) for f in doc["findings"])


def _by_rule(doc: dict, rule: str) -> dict:
    return next(f for f in doc["findings"] if f["rule"] == rule)


def test_ptx_with_line_info_finds_what_the_source_does(built, tmp_path):
    cu = _analyze("--spec", str(_spec(tmp_path, SOURCE)), cache=True)
    ptx = _analyze("--spec", str(_spec(tmp_path, built["acc.ptx"])))
    assert _found(ptx) == _found(cu) and ("GA308", 8) in _found(ptx)
    assert {f["file"] for f in ptx["findings"]} == {str(SOURCE)}  # located by the line info
    assert ptx["emulation"] is not None  # the PTX was traced
    assert _by_rule(cu, "GA308")["variant"]["diff"]  # the .cu's fix rewrites the source ...
    fix = _by_rule(ptx, "GA308")  # ... which the PTX does not hold
    assert fix["variant"] is None and "pass --source FILE" in fix["message"]
    assert any("rewrites the source" in n for n in ptx["notes"])


def test_source_restores_the_variants(built, tmp_path):
    spec = _spec(tmp_path, built["acc.ptx"])
    doc = _analyze("--spec", str(spec), "--source", str(SOURCE))
    fix = _by_rule(doc, "GA308")
    assert fix["variant"]["diff"] and "--source" not in fix["message"]
    assert doc["kernel"]["file"] == str(SOURCE)


def test_ptx_without_line_info_is_located_at_its_own_lines(built, tmp_path):
    bare = built["bare.ptx"]
    r = cli_run("analyze", "--spec", str(_spec(tmp_path, bare)), "--gpu", "H100", "--json")
    assert r.returncode == 2 and "arg0" in one_error(r.stderr)  # no source: arg0, arg1 ...
    doc = _analyze("--spec", str(_spec(tmp_path, bare, BY_POSITION)))
    lines = bare.read_text().splitlines()
    assert doc["findings"] and all(f["file"] == str(bare) for f in doc["findings"])
    for f in doc["findings"]:  # each at an instruction of the PTX
        assert lines[f["line"] - 1].strip().split()[0].startswith(("ld.", "st.", "@"))


def test_cubin_gives_resources_and_occupancy_and_says_what_did_not_run(built, tmp_path):
    cu = _analyze("--spec", str(_spec(tmp_path, SOURCE)), "--no-trace", cache=True)
    doc = _analyze("--spec", str(_spec(tmp_path, built["acc.cubin"])))
    assert doc["resources"]["registers"] == cu["resources"]["registers"] > 0
    assert doc["occupancy"]["occupancy"] == cu["occupancy"]["occupancy"]
    assert doc["emulation"]["ctas_traced"] == 0 and doc["incomplete"]
    assert any("holds SASS and no PTX" in n for n in doc["notes"])


def test_fatbin_with_ptx_is_traced(built, tmp_path):
    doc = _analyze("--spec", str(_spec(tmp_path, built["acc.fatbin"])))
    assert ("GA308", 8) in _found(doc) and doc["emulation"] is not None


def _error(*args: str) -> str:
    r = cli_run("analyze", *args)
    assert r.returncode == 2, r.stderr
    return one_error(r.stderr)


def test_bad_input_is_one_line_and_exit_2(built, tmp_path):
    ptx, cubin = str(built["acc.ptx"]), str(built["acc.cubin"])
    launch = ("--grid", "1", "--block", "32")
    err = _error(ptx, "--kernel", "nope", *launch)
    assert "no kernel named 'nope' in acc.ptx" in err and "atax_rows" in err
    err = _error(cubin, "--kernel", "atax_rows", "--gpu", "A100", *launch)
    assert "SASS for sm_90, not for the device's sm_80" in err and "--arch sm_90" in err
    damaged = tmp_path / "damaged.cubin"
    damaged.write_bytes(built["acc.cubin"].read_bytes()[:300])
    assert "not a readable cubin" in _error(str(damaged), "--kernel", "atax_rows", *launch)
    junk = tmp_path / "junk.cubin"
    junk.write_text("hello")
    assert "neither an ELF file nor a fat binary" in _error(str(junk), *launch)
    text = tmp_path / "text.ptx"
    text.write_text("hello\n")
    assert "is not PTX" in _error(str(text), *launch)
    broken = tmp_path / "broken.ptx"
    broken.write_text(built["acc.ptx"].read_text().replace("ld.param.u64", "ld.parm.u64"))
    assert "ptxas cannot compile broken.ptx" in _error(
        str(broken), "--kernel", "atax_rows", *launch
    )
    assert "pass --source FILE" in _error(ptx, "--kernel", "atax_rows", *launch, "--fix")
    assert "--source goes with" in _error(str(SOURCE), "--source", str(SOURCE), *launch)

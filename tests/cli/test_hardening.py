"""Issue 18, data loss and security: every failure the hostile test found, replayed.

Never write over an input or a file that is not ours (``--output``, ``--write-variants``,
``gate --update-baseline``); refuse unwritable targets before the work, in one line, leaving
nothing behind; refuse nvcc flags that run programs in gate configurations unless
``--trust-config``; refuse gate cases whose argument names match no parameter; ``--fail-on``;
empty ``--gpu``; capped echoes of long input.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import cli, cli_run, digest, one_error, run_with_variant
from gate_fakes import SourceProvider

from gpuadvise.analyze.measure import write_variants
from gpuadvise.analyze.options import KernelOptions
from gpuadvise.cli.gate import gate_command
from gpuadvise.errors import ConfigError, UsageError

ROOT = Path(__file__).resolve().parents[2]

KERNEL = """\
// gate: registers=32 spill_bytes=0 occupancy=0.5 time_ms=1.0
__global__ void scale(float* out, const float* in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
"""
LAUNCH = ("--grid", "4", "--block", "256", "--arg", "n=1000", "--gpu", "H100")


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    path = tmp_path / "src" / "scale.cu"
    path.parent.mkdir()
    path.write_text(KERNEL)
    return path


def _run(*cmd: str) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, check=False).returncode == 0
    except OSError:
        return False


@pytest.fixture(params=["read-only file system", "immutable folder", "no permission"])
def unwritable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A folder nothing can be written into, made as the test's name says (skipped where this
    machine cannot make one: mounting and chattr need root, permissions do not stop root)."""
    d = tmp_path / request.param.replace(" ", "-")
    d.mkdir()
    (d / "old.json").write_text("{}\n")
    if request.param == "read-only file system":
        if os.geteuid() != 0 or not _run("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)):
            pytest.skip("cannot mount a tmpfs here")
        (d / "old.json").write_text("{}\n")
        if not _run("mount", "-o", "remount,ro", str(d)):
            _run("umount", str(d))
            pytest.skip("cannot remount a tmpfs read-only here")
        yield d
        _run("umount", str(d))
    elif request.param == "immutable folder":
        if not _run("chattr", "+i", str(d)):
            pytest.skip("chattr +i is not available here")
        yield d
        _run("chattr", "-i", str(d))
    else:
        if os.geteuid() == 0:
            pytest.skip("permissions do not stop root")
        d.chmod(0o555)
        yield d
        d.chmod(0o755)


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- analyze --output --------------------------------------------------------------------------


def test_output_never_replaces_the_analysed_source(capsys, kernel: Path) -> None:
    before = digest(kernel)
    code, out, err = cli(
        capsys, "analyze", str(kernel), "--no-trace", *LAUNCH, "--format", "json", "-o", str(kernel)
    )
    assert code == 2 and "an input of this run" in one_error(err)
    assert digest(kernel) == before


def test_output_never_replaces_the_spec_or_another_source(capsys, kernel: Path) -> None:
    spec = kernel.parent / "scale.toml"  # found beside the source: an input too
    spec.write_text("grid = 4\nblock = 256\n[args]\nn = 1000\n")
    other = kernel.parent / "other.cu"
    other.write_text(KERNEL)
    before = digest(spec, other)
    code, _, err = cli(
        capsys,
        "analyze",
        str(kernel),
        "--no-trace",
        "--gpu",
        "H100",
        "--format",
        "sarif",
        "-o",
        str(spec),
    )
    assert code == 2 and f"would replace {spec}" in one_error(err)
    code, _, err = cli(
        capsys, "analyze", str(kernel), "--no-trace", *LAUNCH, "--format", "sarif", "-o", str(other)
    )
    assert code == 2 and "existing .cu file, not a report" in one_error(err)
    assert digest(spec, other) == before


def test_output_onto_a_folder_or_below_a_file(capsys, kernel: Path, tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    code, out, err = cli(
        capsys, "analyze", str(kernel), "--no-trace", *LAUNCH, "--format", "json", "-o", str(folder)
    )
    assert code == 2 and "is a folder" in one_error(err) and out == ""
    assert _listing(folder) == [] and _listing(tmp_path) == ["reports", "src"]  # no temp file
    plain = tmp_path / "plain"
    plain.write_text("x")
    code, _, err = cli(
        capsys,
        "analyze",
        str(kernel),
        "--no-trace",
        *LAUNCH,
        "--format",
        "json",
        "-o",
        str(plain / "r.json"),
    )
    assert code == 2 and "is not a folder" in one_error(err) and plain.read_text() == "x"


def test_output_into_a_missing_folder(capsys, kernel: Path, tmp_path: Path) -> None:
    target = tmp_path / "new" / "deeper" / "r.json"
    # the analysis fails (no such kernel): the folders are not created
    code, _, err = cli(
        capsys,
        "analyze",
        str(kernel),
        "--no-trace",
        *LAUNCH,
        "-k",
        "nope",
        "--format",
        "json",
        "-o",
        str(target),
    )
    assert code == 2 and one_error(err) and not (tmp_path / "new").exists()
    code, _, err = cli(
        capsys, "analyze", str(kernel), "--no-trace", *LAUNCH, "--format", "json", "-o", str(target)
    )
    assert code == 0, err
    assert json.loads(target.read_text())["schema_version"] >= 1


def test_output_through_a_symlink_is_refused(capsys, kernel: Path, tmp_path: Path) -> None:
    """Issue 21 reversed issue 18's choice (write through the link): a link at the target is
    refused, whatever it points at (tests/cli/test_safe_writes.py)."""
    real = tmp_path / "store" / "report.json"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "report.json"
    link.symlink_to(real)
    code, _, err = cli(
        capsys, "analyze", str(kernel), "--no-trace", *LAUNCH, "--format", "json", "-o", str(link)
    )
    assert code == 2 and "is a symbolic link" in one_error(err)
    assert link.is_symlink() and real.read_text() == "old\n"


def test_output_on_an_unwritable_folder(capsys, kernel: Path, unwritable: Path) -> None:
    code, out, err = cli(
        capsys,
        "analyze",
        str(kernel),
        "--no-trace",
        *LAUNCH,
        "--format",
        "json",
        "-o",
        str(unwritable / "old.json"),
    )
    assert code == 2 and out == ""
    assert f"cannot write --output {unwritable / 'old.json'}" in one_error(err)
    assert _listing(unwritable) == ["old.json"]


# --- analyze --write-variants ------------------------------------------------------------------


def test_write_variants_never_overwrites_the_analysed_source(capsys, tmp_path: Path) -> None:
    """Re-analysing a saved variant into the folder it was saved in: the variant of the same
    finding would be written over the source being analysed."""
    saved = tmp_path / "variants" / "moments_capped-GA401-L13-minBlocks=5"
    saved.mkdir(parents=True)
    for name in ("spills.cu", "case.toml"):
        shutil.copy(ROOT / "kernels" / "spills" / name, saved / name)
    before = digest(saved / "spills.cu", saved / "case.toml")
    code, _, err = cli(
        capsys,
        "analyze",
        str(saved / "spills.cu"),
        "--no-trace",
        "--gpu",
        "H100",
        "--write-variants",
        str(tmp_path / "variants"),
    )
    assert code == 2 and "an input of this analysis" in one_error(err)
    assert digest(saved / "spills.cu", saved / "case.toml") == before
    assert _listing(tmp_path / "variants") == [saved.name]  # nothing else written either
    assert _listing(saved) == ["case.toml", "spills.cu"]


def test_write_variants_checks_the_folder_before_the_analysis(
    capsys, kernel: Path, unwritable: Path
) -> None:
    code, out, err = cli(
        capsys,
        "analyze",
        str(kernel),
        "--no-trace",
        *LAUNCH,
        "--write-variants",
        str(unwritable / "v"),
    )
    assert code == 2 and out == ""  # refused up front, not after the whole analysis
    assert "cannot write variants to" in one_error(err)
    assert _listing(unwritable) == ["old.json"]


def test_write_variants_never_overwrites_files_it_did_not_write(
    kernel: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    foreign = out / "scale-GA999-L3-x"
    foreign.mkdir(parents=True)
    (foreign / "fix.diff").write_text("my notes\n")
    opts = KernelOptions(source=str(kernel))
    with pytest.raises(UsageError, match="which gpuadvise did not write"):
        write_variants(run_with_variant(kernel), opts, out)
    assert (foreign / "fix.diff").read_text() == "my notes\n" and _listing(foreign) == ["fix.diff"]
    # a folder gpuadvise wrote (its variant.json) is ours to replace
    (foreign / "fix.diff").unlink()
    assert write_variants(run_with_variant(kernel), opts, out) == [foreign]
    assert write_variants(run_with_variant(kernel), opts, out) == [foreign]
    assert _listing(foreign) == ["fix.diff", "scale.cu", "variant.json"]
    assert (foreign / "scale.cu").read_text().startswith("// patched")


def test_write_variants_leaves_nothing_behind_when_a_write_fails(
    kernel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpuadvise.fileio as fileio

    real = fileio.write_atomic
    calls: list[Path] = []

    def failing(path, data, **kw):  # type: ignore[no-untyped-def]
        calls.append(Path(path))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(path, data, **kw)

    monkeypatch.setattr(fileio, "write_atomic", failing)
    with pytest.raises(
        UsageError, match=r"cannot write variants to .* \(No space left on device\)"
    ):
        write_variants(run_with_variant(kernel), KernelOptions(source=str(kernel)), tmp_path / "v")
    assert not (tmp_path / "v").exists()


# --- gate --update-baseline and gate outputs ---------------------------------------------------

GATE = """\
[gate]
baseline = "ci/gate-baseline.json"
metrics = ["registers", "spill_bytes", "occupancy"]

[[gate.cases]]
name = "scale"
source = "kernels/scale.cu"
kernel = "scale"
grid = 64
block = 256
{extra}
"""


def gate_repo(tmp_path: Path, extra: str = "args = { n = 16384 }") -> Path:
    root = tmp_path / "repo"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "scale.cu").write_text(KERNEL)
    (root / "gpuadvise.toml").write_text(GATE.format(extra=extra))
    return root


class Counting(SourceProvider):
    def static_metrics(self, case):  # type: ignore[no-untyped-def]
        raise AssertionError("measured although the run should have been refused first")


def test_update_baseline_never_replaces_a_file_that_is_not_a_baseline(tmp_path: Path) -> None:
    repo = gate_repo(tmp_path)
    kernel = repo / "kernels" / "scale.cu"
    notes = repo / "notes.json"
    notes.write_text('{"mine": true}\n')
    before = digest(kernel, notes)
    for target in (kernel, notes, repo / "gpuadvise.toml"):
        with pytest.raises(UsageError) as e:
            gate_command(update_baseline=True, baseline=str(target), provider=Counting(), cwd=repo)
        assert e.value.exit_code == 2
        assert "--update-baseline" in e.value.one_line() and str(target) in e.value.one_line()
    assert digest(kernel, notes) == before
    # a baseline (even of another schema version) is replaced; a missing one is created
    base = repo / "ci" / "gate-baseline.json"
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=repo) == 0
    doc = json.loads(base.read_text())
    base.write_text(json.dumps({**doc, "schema_version": 0}))
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=repo) == 0
    assert json.loads(base.read_text())["schema_version"] == 1


def test_update_baseline_on_an_unwritable_folder(tmp_path: Path, unwritable: Path) -> None:
    repo = gate_repo(tmp_path)
    with pytest.raises(UsageError, match="cannot write the baseline") as e:
        gate_command(
            update_baseline=True, baseline=str(unwritable / "b.json"), provider=Counting(), cwd=repo
        )
    assert len(e.value.one_line().splitlines()) == 1
    assert _listing(unwritable) == ["old.json"]


def test_gate_outputs_never_replace_inputs(tmp_path: Path) -> None:
    repo = gate_repo(tmp_path)
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=repo) == 0
    inputs = [
        repo / "kernels" / "scale.cu",
        repo / "gpuadvise.toml",
        repo / "ci" / "gate-baseline.json",
    ]
    before = digest(*inputs)
    for path in inputs:
        with pytest.raises(UsageError, match="an input of this run"):
            gate_command(formats=[f"sarif={path}"], provider=Counting(), cwd=repo)
        with pytest.raises(UsageError, match="an input of this run"):
            gate_command(formats=["json"], output=str(path), provider=Counting(), cwd=repo)
    with pytest.raises(UsageError, match="is a folder"):
        gate_command(formats=[f"junit={repo / 'kernels'}"], provider=Counting(), cwd=repo)
    assert digest(*inputs) == before


# --- gate: nvcc flags are code -----------------------------------------------------------------


def test_gate_refuses_flags_that_run_programs(tmp_path: Path) -> None:
    repo = gate_repo(tmp_path, 'args = { n = 16384 }\nnvcc_flags = ["-ccbin=/tmp/evil.sh"]')
    with pytest.raises(ConfigError) as e:
        gate_command(update_baseline=True, provider=Counting(), cwd=repo)
    line = e.value.one_line()
    assert e.value.exit_code == 2
    assert "'-ccbin=/tmp/evil.sh'" in line and "--trust-config" in line and "scale" in line
    assert (
        gate_command(update_baseline=True, trust_config=True, provider=SourceProvider(), cwd=repo)
        == 0
    )


def test_gate_checks_the_flags_of_the_specs_it_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = gate_repo(tmp_path, "")
    (repo / "gpuadvise.toml").write_text(
        '[gate]\nmetrics = ["registers"]\n[[gate.cases]]\nspec = "kernels/scale.toml"\n'
        'source = "kernels/scale.cu"\n'
    )
    spec = repo / "kernels" / "scale.toml"
    spec.write_text(
        'source = "scale.cu"\ngrid = 4\nblock = 256\nnvcc_flags = ["-Xcompiler", "-fopenmp"]\n'
        "[args]\nn = 1000\n"
    )
    with pytest.raises(ConfigError, match=r"'-Xcompiler' \(from .*scale\.toml\) is refused"):
        gate_command(update_baseline=True, provider=Counting(), cwd=repo)
    spec.write_text(
        'source = "scale.cu"\ngrid = 4\nblock = 256\n'
        'nvcc_flags = ["-O3", "-DTILE=16", "-Ikernels", "-Xptxas", "-O3,-v", "-std=c++17"]\n'
        "[args]\nn = 1000\n"
    )
    monkeypatch.chdir(repo)  # relative include folders are nvcc's, from the working directory
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=repo) == 0


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs sh")
def test_gate_never_runs_a_host_compiler_the_config_names(tmp_path: Path) -> None:
    """End to end, the real provider: on the old code nvcc ran evil.sh (it created pwned)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "k.cu").write_text(KERNEL)
    evil = repo / "evil.sh"
    evil.write_text('#!/bin/sh\ntouch "$(dirname "$0")/pwned"\nexit 1\n')
    evil.chmod(0o755)
    (repo / "gpuadvise.toml").write_text(
        '[gate]\nmetrics = ["registers"]\n[[gate.cases]]\nsource = "k.cu"\ngrid = 4\n'
        f'block = 256\nargs = {{ n = 1000 }}\nnvcc_flags = ["-ccbin={evil}"]\n'
    )
    with contextlib.chdir(repo):
        r = cli_run("gate", "--update-baseline", "--gates", "static")
    assert r.returncode == 2 and "--trust-config" in one_error(r.stderr)
    assert not (repo / "pwned").exists()


# --- gate: names that match no parameter -------------------------------------------------------


@pytest.mark.parametrize(
    "extra,needle",
    [
        ("args = { nn = 16384 }", "argument 'nn' matches no parameter of scale"),
        (
            'args = { n = 16384 }\nbuffers = { inn = "float[n]" }',
            "buffer 'inn' matches no parameter",
        ),
        ("args = { n = 16384, out = 3 }", "argument 'out' names a pointer parameter"),
        (
            'args = { n = 16384 }\nbuffers = { n = "float[n]" }',
            "buffer 'n' names the scalar parameter",
        ),
    ],
)
def test_gate_case_with_unknown_names_is_a_config_error(
    tmp_path: Path, extra: str, needle: str
) -> None:
    repo = gate_repo(tmp_path, extra)
    (repo / "gpuadvise.toml").write_text(
        (repo / "gpuadvise.toml").read_text().replace('"occupancy"]', '"occupancy", "l2_hit_rate"]')
    )
    for update in (True, False):
        with pytest.raises(ConfigError) as e:
            gate_command(update_baseline=update, provider=Counting(), cwd=repo)
        assert e.value.exit_code == 2 and needle in e.value.one_line(), e.value.one_line()


def test_gate_case_args_for_size_expressions_are_fine(tmp_path: Path) -> None:
    repo = gate_repo(tmp_path, 'args = { rows = 4, n = "rows*256" }\nbuffers = { in = "float[n]" }')
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=repo) == 0


def test_gate_case_missing_value_is_a_config_error_when_the_trace_needs_it(tmp_path: Path) -> None:
    repo = gate_repo(tmp_path, "")
    assert (
        gate_command(update_baseline=True, provider=SourceProvider(), cwd=repo) == 0
    )  # compile-only
    text = (
        (repo / "gpuadvise.toml")
        .read_text()
        .replace('"occupancy"]', '"occupancy", "smem_excess_wavefronts"]')
    )
    (repo / "gpuadvise.toml").write_text(text)
    with pytest.raises(ConfigError, match="needs a value for n"):
        gate_command(update_baseline=True, provider=Counting(), cwd=repo)


# --- analyze --fail-on, empty options, long input ----------------------------------------------


def test_fail_on(capsys, tmp_path: Path) -> None:
    case = tmp_path / "spills"
    shutil.copytree(ROOT / "kernels" / "spills", case)
    args = ("analyze", str(case / "spills.cu"), "--no-trace", "--gpu", "H100")
    code, out, err = cli(capsys, *args, "--format", "json")
    assert code == 0, err  # default: findings never fail the run
    severities = {f["severity"] for f in json.loads(out)["findings"]}
    assert severities == {"warning"}
    code, _, err = cli(
        capsys, *args, "--fail-on", "warning", "--format", "sarif", "-o", str(tmp_path / "r.sarif")
    )
    assert code == 1 and err == "" and json.loads((tmp_path / "r.sarif").read_text())["runs"]
    assert cli(capsys, *args, "--fail-on", "error")[0] == 0
    code, _, err = cli(capsys, *args, "--fail-on", "sometimes")
    assert code == 2 and "--fail-on" in one_error(err)


@pytest.mark.parametrize(
    "args",
    [
        ("occupancy", "-t", "256", "--gpu", ""),
        ("occupancy", "-t", "256", "--arch", " "),
        (
            "analyze",
            "KERNEL",
            "--no-trace",
            "--grid",
            "4",
            "--block",
            "256",
            "--arg",
            "n=1",
            "--gpu",
            "",
        ),
        ("analyze", "KERNEL", "--no-trace", *LAUNCH, "--format", "json", "-o", ""),
        ("gate", "--gpu", ""),
    ],
)
def test_empty_options_are_errors(capsys, kernel: Path, args: tuple[str, ...]) -> None:
    code, out, err = cli(capsys, *(str(kernel) if a == "KERNEL" else a for a in args))
    assert code == 2 and "is empty" in one_error(err) and out == ""


def test_long_input_is_capped_in_errors(capsys, kernel: Path) -> None:
    long = "x" * 5000
    for args in (
        ("occupancy", "-t", "256", "--gpu", long),
        ("analyze", str(kernel), "--no-trace", "--grid", long, "--block", "256"),
        ("analyze", str(kernel), "--no-trace", *LAUNCH, "--format", long),
    ):
        code, _, err = cli(capsys, *args)
        line = one_error(err)
        assert code == 2 and len(line) < 400 and "(5000 characters)" in line, line


def test_cap_echoes_keeps_prose_and_paths() -> None:
    from gpuadvise.errors import cap_echoes

    prose = "the kernel's parameter 'n' doesn't fit: " + "a long sentence " * 10 + "isn't it"
    assert cap_echoes(prose) == prose
    path = "/home/runner/work/" + "deep/" * 30 + "kernel.cu"
    assert cap_echoes(f"source file {path} does not exist") == f"source file {path} does not exist"
    capped = cap_echoes("(got " + repr("z" * 90) + ")")
    assert capped == "(got '" + "z" * 80 + "…' (90 characters))" and cap_echoes(capped) == capped


# --- the gate split: the CLI module only parses and renders ------------------------------------


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_gate_cli_module_does_no_work_itself() -> None:
    cli_imports = _imports(ROOT / "gpuadvise" / "cli" / "gate.py")
    assert not cli_imports & {"subprocess", "tempfile", "shutil", "importlib", "contextlib"}
    gate_files = sorted((ROOT / "gpuadvise" / "gate").glob("*.py"))
    assert not (ROOT / "gpuadvise" / "gate" / "core.py").exists()
    for path in gate_files:
        assert "click" not in _imports(path), path
        assert len(path.read_text().splitlines()) < 700, f"{path} grew large again"

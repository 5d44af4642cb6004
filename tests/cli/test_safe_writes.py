"""Issue 21, data loss: every write the hostile review found going somewhere it should not, replayed.

A report (``-o``, ``--format FMT=FILE``) is never written through a symbolic link, into a
``.git`` folder, or through a linked folder of the working tree (a pull request can commit any
of those); a baseline stays inside the repository unless the command line names it, and is never
written through a link; ``--fix`` rewrites the user's file where it is, keeping its links, mode,
owner, line endings and undecodable bytes; every failure is one line and exit 2.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import cli, digest, one_error, run_with_variant
from gate_fakes import SourceProvider

from gpuadvise.analyze.measure import write_variants
from gpuadvise.analyze.options import KernelOptions
from gpuadvise.cli.gate import gate_command
from gpuadvise.errors import ConfigError, UsageError

KERNEL = """\
// gate: registers=32 spill_bytes=0 occupancy=0.5 time_ms=1.0
__global__ void scale(float* out, const float* in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
"""
LAUNCH = ("--grid", "4", "--block", "256", "--arg", "n=1000", "--gpu", "H100")


class Refused(SourceProvider):
    def static_metrics(self, case):  # type: ignore[no-untyped-def]
        raise AssertionError("measured although the run should have been refused first")


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout: ``src/scale.cu`` and a gate configuration; the current folder."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "scale.cu").write_text(KERNEL)
    (tmp_path / "mine.cu").write_text("// my own work\n")
    (tmp_path / "gpuadvise.toml").write_text(
        '[gate]\nbaseline = "ci/gate-baseline.json"\n'
        'metrics = ["registers", "spill_bytes", "occupancy"]\n\n'
        '[[gate.cases]]\nname = "scale"\nsource = "src/scale.cu"\nkernel = "scale"\n'
        "grid = 64\nblock = 256\nargs = { n = 16384 }\n"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _analyze(capsys, *more: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    return cli(capsys, "analyze", "src/scale.cu", "--no-trace", *LAUNCH, *more)


# --- item 1: -o / --format FMT=FILE ------------------------------------------------------------


def test_output_through_a_link_is_refused(capsys, work: Path) -> None:
    """``ln -s mine.cu report.html; analyze --format html -o report.html`` wrote the page into
    mine.cu (exit 0)."""
    Path("report.html").symlink_to("mine.cu")
    before = digest(work / "mine.cu")
    code, out, err = _analyze(capsys, "--format", "html", "-o", "report.html")
    line = one_error(err)
    assert code == 2 and out == ""
    assert "--output report.html is a symbolic link (to mine.cu)" in line
    assert "never writes through a link" in line
    assert digest(work / "mine.cu") == before and Path("report.html").is_symlink()


def test_output_through_a_dangling_link_creates_nothing(capsys, work: Path) -> None:
    Path("out.json").symlink_to("elsewhere/new.json")
    code, _, err = _analyze(capsys, "--format", "json", "-o", "out.json")
    assert code == 2 and "out.json is a symbolic link" in one_error(err)
    assert not Path("elsewhere").exists() and Path("out.json").is_symlink()


def test_gate_format_file_through_a_link_is_refused(work: Path) -> None:
    """``gate --format junit=out.xml``, out.xml a committed link to a source the gate does not
    read (../mine.cu): refused before anything is measured."""
    (work / "ci").mkdir()
    Path("ci/out.xml").symlink_to("../mine.cu")
    before = digest(work / "mine.cu")
    with pytest.raises(UsageError) as e:
        gate_command(formats=["junit=ci/out.xml"], provider=Refused(), cwd=work)
    assert "--format junit=ci/out.xml is a symbolic link (to ../mine.cu)" in e.value.one_line()
    assert e.value.exit_code == 2
    assert digest(work / "mine.cu") == before


def test_output_into_git_is_refused(capsys, work: Path) -> None:
    """``--format json=.git/config`` replaced git's configuration."""
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n")
    with pytest.raises(UsageError, match=r"json=\.git/config is inside a \.git folder"):
        gate_command(formats=["json=.git/config"], provider=Refused(), cwd=work)
    code, _, err = _analyze(capsys, "--format", "json", "-o", ".git/hooks/pre-commit")
    assert code == 2 and "inside a .git folder" in one_error(err)
    assert (work / ".git" / "config").read_text() == "[core]\n"
    assert not (work / ".git" / "hooks").exists()


def test_output_through_a_linked_folder_of_the_checkout_is_refused(capsys, work: Path) -> None:
    elsewhere = work.parent / f"{work.name}-elsewhere"
    elsewhere.mkdir()
    Path("reports").symlink_to(elsewhere)
    code, _, err = _analyze(capsys, "--format", "sarif", "-o", "reports/a.sarif")
    line = one_error(err)
    assert code == 2 and "goes through" in line and "reports, a symbolic link" in line
    assert f"name the real folder: {elsewhere / 'a.sarif'}" in line
    assert list(elsewhere.iterdir()) == []


def test_output_file_keeps_its_mode(capsys, work: Path) -> None:
    """A report the user already had (0600: private) kept its contents' privacy: it became 0644."""
    report = work / "report.json"
    report.write_text("{}\n")
    report.chmod(0o600)
    code, _, err = _analyze(capsys, "--format", "json", "-o", "report.json")
    assert code == 0, err
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    assert json.loads(report.read_text())["schema_version"] >= 1


def test_output_to_dev_stdout_still_works(capsys, work: Path) -> None:
    code, out, err = _analyze(capsys, "--format", "json", "-o", "/dev/stdout")
    assert code == 0, err
    assert not Path("/dev/stdout").is_file() or Path("/dev/stdout").is_symlink()


def test_write_variants_never_writes_through_a_link(capsys, work: Path) -> None:
    src = work / "src" / "scale.cu"
    opts = KernelOptions(source=str(src))
    before = digest(work / "mine.cu")
    # the folder named is a link
    Path("linked").symlink_to(work / "src")
    code, _, err = _analyze(capsys, "--write-variants", "linked")
    assert code == 2 and "--write-variants linked is a symbolic link" in one_error(err)
    # a file of a variant folder that gpuadvise wrote is a link (to the user's file)
    assert write_variants(run_with_variant(src), opts, work / "v")
    patched = work / "v" / "scale-GA999-L3-x" / "scale.cu"
    patched.unlink()
    patched.symlink_to(work / "mine.cu")
    with pytest.raises(UsageError, match="it is a symbolic link"):
        write_variants(run_with_variant(src), opts, work / "v")
    assert digest(work / "mine.cu") == before and patched.is_symlink()


# --- item 2: the gate's baseline ---------------------------------------------------------------


def test_update_baseline_never_writes_through_a_link(work: Path) -> None:
    (work / "ci").mkdir()
    Path("ci/gate-baseline.json").symlink_to("../mine.cu")
    before = digest(work / "mine.cu")
    with pytest.raises(UsageError) as e:
        gate_command(update_baseline=True, provider=Refused(), cwd=work)
    line = e.value.one_line()
    assert "ci/gate-baseline.json is a symbolic link" in line and "never" in line
    # named on the command line: still never through a link
    with pytest.raises(UsageError, match="is a symbolic link"):
        gate_command(
            update_baseline=True, baseline="ci/gate-baseline.json", provider=Refused(), cwd=work
        )
    assert digest(work / "mine.cu") == before


def test_a_configured_baseline_stays_inside_the_repository(work: Path) -> None:
    """A baseline path in the configuration (which a pull request can change) that leads out of
    the repository, directly or through a linked folder, is refused; on the command line the
    user may name any file."""
    outside = work.parent / f"{work.name}-outside"
    outside.mkdir()
    config = work / "gpuadvise.toml"
    text = config.read_text()
    for baseline in (str(outside / "b.json"), "../" + outside.name + "/b.json", "ci/b.json"):
        if baseline == "ci/b.json":
            (work / "ci").symlink_to(outside)
        config.write_text(text.replace("ci/gate-baseline.json", baseline))
        for update in (True, False):
            with pytest.raises(ConfigError) as e:
                gate_command(update_baseline=update, provider=Refused(), cwd=work)
            assert "outside the repository" in e.value.one_line(), baseline
    assert list(outside.iterdir()) == []
    config.write_text(text)
    (work / "ci").unlink()
    chosen = outside / "chosen.json"
    assert (
        gate_command(
            update_baseline=True, baseline=str(chosen), provider=SourceProvider(), cwd=work
        )
        == 0
    )
    assert json.loads(chosen.read_text())["kind"] == "gpuadvise-gate-baseline"


def test_update_baseline_keeps_the_mode(work: Path) -> None:
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=work) == 0
    base = work / "ci" / "gate-baseline.json"
    base.chmod(0o664)
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=work) == 0
    assert stat.S_IMODE(base.stat().st_mode) == 0o664
    assert os.listdir(work / "ci") == ["gate-baseline.json"]


# --- items 3 and 4: --fix ----------------------------------------------------------------------
# (what write_fix keeps: tests/analyze/test_fix.py; line endings and bytes: tests/source/test_raw.py)


def test_fix_of_a_read_only_source_is_refused_before_the_work(capsys, work: Path) -> None:
    """As root, os.access says every file is writable: a 0444 source was replaced (and made
    0644)."""
    src = work / "src" / "scale.cu"
    src.chmod(0o444)
    code, out, err = _analyze(capsys, "--fix")
    assert code == 2 and "it is read-only (mode 0444)" in one_error(err)
    assert stat.S_IMODE(src.stat().st_mode) == 0o444 and src.read_text() == KERNEL


# --- item 4: file names too long, a full disk, stdout closed, full or gone ----------------------

LONG_NAME = "a" * 300
LONG_PATH = "/".join(["b" * 200] * 25)  # 5024 characters


@pytest.mark.parametrize("name", [LONG_NAME, LONG_PATH], ids=["300-char name", "5000-char path"])
@pytest.mark.parametrize(
    "where", ["source", "--output", "--write-variants", "--rules-dir", "--format sarif="]
)
def test_overlong_names_are_one_line_errors(capsys, work: Path, where: str, name: str) -> None:
    """Each of these was an OSError traceback (File name too long), exit 1."""
    if where == "source":
        code, out, err = cli(capsys, "analyze", name + ".cu", "--no-trace", *LAUNCH)
    elif where == "--format sarif=":
        with pytest.raises(UsageError) as e:
            gate_command(formats=[f"sarif={name}.sarif"], provider=Refused(), cwd=work)
        code, out, err = 2, "", f"error: {e.value.one_line()}\n"
    else:
        extra = ("--format", "json") if where == "--output" else ()
        code, out, err = _analyze(capsys, *extra, where, name)
    line = one_error(err)
    assert code == 2 and out == "" and "Traceback" not in err
    assert "bytes long, more than the" in line and "characters)" in line  # the echo is capped
    assert sorted(p.name for p in work.iterdir()) == ["gpuadvise.toml", "mine.cu", "src"]


def test_output_on_a_full_disk_is_one_line(capsys, work: Path, monkeypatch) -> None:
    import gpuadvise.report.output as output

    real = output.write_atomic

    def full(path, data, **kw):  # type: ignore[no-untyped-def]
        def no_space(fd: int, data: bytes) -> int:
            raise OSError(28, "No space left on device")

        with pytest.MonkeyPatch.context() as m:
            m.setattr(os, "write", no_space)
            real(path, data, **kw)

    monkeypatch.setattr(output, "write_atomic", full)
    code, out, err = _analyze(capsys, "--format", "json", "-o", "r.json")
    assert code == 2 and "cannot write r.json (No space left on device)" in one_error(err)
    assert sorted(p.name for p in work.iterdir()) == ["gpuadvise.toml", "mine.cu", "src"]


def _gpuadvise_sh(command: str) -> subprocess.CompletedProcess[str]:
    """``gpuadvise`` (python -m) run by sh with ``command``'s redirections."""
    return subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -m gpuadvise {command}'],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


@pytest.mark.parametrize("args", ["devices", "devices --json"])
def test_closed_stdout_is_one_line(args: str) -> None:
    p = _gpuadvise_sh(f"{args} >&-")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert one_error(p.stderr).startswith("error: stdout is closed")


@pytest.mark.parametrize("args", ["devices", "devices --json"])
def test_full_stdout_is_one_line(args: str) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    p = _gpuadvise_sh(f"{args} > /dev/full")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    line = one_error(p.stderr)
    assert "cannot write to stdout (No space left on device)" in line


@pytest.mark.parametrize("args", [["devices"], ["devices", "--json"]])
def test_a_reader_that_went_away_ends_quietly(args: list[str]) -> None:
    """``gpuadvise devices | head -1`` exited 1 (rich's broken-pipe handler)."""
    p = subprocess.Popen(
        [sys.executable, "-m", "gpuadvise", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # the reader is gone before the first line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and err == ""


def test_any_other_os_error_is_one_line(capsys, monkeypatch) -> None:
    import gpuadvise.cli.rules as rules

    def broken(*a: object, **k: object) -> int:
        raise OSError(5, "Input/output error", "rules/ga999.py")

    monkeypatch.setattr(rules, "run_rules_list", broken)
    code, out, err = cli(capsys, "rules")
    assert code == 2 and out == ""
    assert (
        one_error(err)
        == "error: Input/output error: 'rules/ga999.py'; check the path and the file system"
    )

"""``gpuadvise gate`` on a tree a stranger wrote (gate-inputs review, items 1 and 2): no file
outside the repository is compiled, included or read, and no line of one reaches any report.

A "secret" file sits beside the repository; the pull request's kernel or spec reaches for it
(``#include`` by absolute path or by ``../``, ``source =``, a data file), and every report format
the gate writes is searched for its content. The real metrics provider compiles (nvcc)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpuadvise.cli.gate import gate_command
from gpuadvise.cli.main import main
from gpuadvise.errors import ConfigError, GpuAdviseError
from gpuadvise.toolchain.diagnostics import compile_error, hide_diagnostics
from gpuadvise.toolchain.includes import diagnostic_filter

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("compile_cache")]

SECRET = "hunter2_SECRET_token = 0xdeadbeef; // root:x:0:0:root\n"
KERNEL = """\
{include}
__global__ void scale(float* out, const float* in, int n)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}}
"""
GATE = """\
[gate]
metrics = ["registers", "spill_bytes", "occupancy"]
[[gate.cases]]
{case}
"""
CASE = 'source = "kernels/scale.cu"\ngrid = 4\nblock = 256\nargs = { n = 1000 }'
FORMATS = ("json", "sarif", "junit", "github", "markdown", "html")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "secret").write_text(SECRET)  # outside the repository, no CUDA name
    (tmp_path / "secret.h").write_text(SECRET)  # outside, with a header's name
    root = tmp_path / "repo"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "scale.cu").write_text(KERNEL.format(include=""))
    (root / "gpuadvise.toml").write_text(GATE.format(case=CASE))
    _git(root, "init", "-q")
    return root


def _reports(repo: Path) -> list[str]:
    return [f"{fmt}={repo / 'out' / ('r.' + fmt)}" for fmt in FORMATS]


def _everything(repo: Path, capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    files = [p.read_text() for p in (repo / "out").glob("r.*")]
    return "\n".join([out, err, *files])


def _gate(repo: Path, **kw) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    try:
        return gate_command(cwd=repo, gates="static", **kw), ""
    except GpuAdviseError as exc:
        return exc.exit_code, exc.one_line()


def _leaked(text: str) -> bool:
    return "hunter2" in text or "deadbeef" in text or "root:x:0:0" in text


@pytest.mark.toolkit
@pytest.mark.parametrize("how", ["absolute", "dotdot", "header name"])
def test_an_include_outside_the_repository_is_refused_and_never_quoted(
    repo: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    assert gate_command(cwd=repo, gates="static", update_baseline=True) == 0
    secret = repo.parent / ("secret.h" if how == "header name" else "secret")
    include = {
        "absolute": f'#include "{secret}"',
        "dotdot": '#include "../../secret"',
        "header name": '#include "../../secret.h"',
    }[how]
    (repo / "kernels" / "scale.cu").write_text(KERNEL.format(include=include))
    capsys.readouterr()
    code, line = _gate(repo, formats=_reports(repo))
    text = _everything(repo, capsys) + line
    assert code == 2
    assert not _leaked(text), text
    assert f"kernels/scale.cu:1 includes {secret}" in text  # the include, named
    assert "outside the repository" in text
    # trusted: compiled (and failing), its diagnostics about the secret file still not shown
    capsys.readouterr()
    code, line = _gate(repo, formats=_reports(repo), trust_config=True)
    text = _everything(repo, capsys) + line
    assert code == 2 and not _leaked(text), text
    assert "not the kernel's sources: not shown" in text


@pytest.mark.parametrize(
    "case,what",
    [
        ('source = "../outside.cu"\ngrid = 4\nblock = 256\nargs = { n = 1000 }', "source"),
        ('spec = "kernels/scale.toml"', "source"),
        (CASE + '\nbuffers = { in = "float[1000]:DATA" }', "data file"),
    ],
)
def test_files_outside_the_repository_are_refused(repo: Path, case: str, what: str) -> None:
    (repo.parent / "outside.cu").write_text(KERNEL.format(include=""))
    (repo.parent / "data.bin").write_bytes(bytes(4000))
    (repo / "kernels" / "scale.toml").write_text(
        'source = "../../secret"\ngrid = 4\nblock = 256\n[args]\nn = 1000\n'
    )
    case = case.replace("DATA", str(repo.parent / "data.bin"))
    (repo / "gpuadvise.toml").write_text(GATE.format(case=case))
    with pytest.raises(ConfigError) as e:
        gate_command(cwd=repo, gates="static", update_baseline=True)
    line = e.value.one_line()
    assert what in line and "lies outside the repository" in line and "--trust-config" in line
    assert not _leaked(line)


@pytest.mark.toolkit
def test_trust_config_lifts_the_repository_bound(repo: Path) -> None:
    (repo.parent / "outside.cu").write_text(KERNEL.format(include=""))
    (repo / "gpuadvise.toml").write_text(
        GATE.format(case='source = "../outside.cu"\ngrid = 4\nblock = 256\nargs = { n = 1000 }')
    )
    with pytest.raises(ConfigError):
        gate_command(cwd=repo, gates="static", update_baseline=True)
    assert gate_command(cwd=repo, gates="static", update_baseline=True, trust_config=True) == 0


def test_a_spec_naming_a_file_that_is_not_a_cuda_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "secret").write_text(SECRET)
    for source in ("/etc/passwd", "../secret", "secret"):
        spec = tmp_path / "case" / "s.toml"
        spec.parent.mkdir(exist_ok=True)
        spec.write_text(f'source = "{source}"\nkernel = "k"\ngrid = 1\nblock = 32\n')
        if source == "secret":
            (tmp_path / "case" / "secret.cu").symlink_to(tmp_path / "secret")
            spec.write_text('source = "secret.cu"\nkernel = "k"\ngrid = 1\nblock = 32\n')
        capsys.readouterr()
        try:
            main(["analyze", "--spec", str(spec), "--gpu", "H100", "--no-trace"])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        assert code == 2 and not _leaked(out + err), err
        assert "is not a CUDA source file" in err and "root:" not in err


def test_hidden_diagnostics_edg_and_gcc_styles(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    src = repo / "k.cu"
    log = (
        f"In file included from {src}:1:\n"
        "/etc/shadow:1:5: error: expected ';' before 'x'\n"
        "    1 | root:$6$hash:19000:0:99999:7:::\n"
        "      |     ^\n"
        f'/etc/shadow(2): error: identifier "hunter2" is undefined\n'
        "  hunter2 = 1\n"
        "  ^\n"
        "\n"
        f"{src}(4): error: expected a ;\n"
        "  int x = 1\n"
        "          ^\n"
        f'3 errors detected in the compilation of "{src}".\n'
    )
    shown = diagnostic_filter((repo,), (), own=(src,))
    text = hide_diagnostics(log, shown)
    assert "root:" not in text and "hunter2" not in text and "/etc/shadow" not in text
    assert f"{src}(4): error: expected a ;" in text and "int x = 1" in text
    assert "3 errors detected" in text and "2 diagnostics" in text
    err = compile_error(src, "sm_90", 1, log, shown=shown)
    assert "hunter2" not in err.one_line() and "expected a ;" in err.one_line()
    # analyze (no repository bound): files without a CUDA or C++ name are not quoted either
    loose = hide_diagnostics(log, diagnostic_filter((), (), own=()))
    assert "hunter2" not in loose and "root:" not in loose and "int x = 1" in loose


def test_json_report_of_a_refused_include_is_whole(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal reaches the JSON result as the case's error (not a crash of the report)."""
    pytest.importorskip("gpuadvise.gate.metrics")
    from suitekit import toolkit_missing

    if toolkit_missing():
        pytest.skip(toolkit_missing() or "")
    assert gate_command(cwd=repo, gates="static", update_baseline=True) == 0
    (repo / "kernels" / "scale.cu").write_text(
        KERNEL.format(include=f'#include "{repo.parent / "secret"}"')
    )
    code, _ = _gate(repo, formats=[f"json={repo / 'r.json'}"])
    assert code == 2
    doc = json.loads((repo / "r.json").read_text())
    reasons = json.dumps(doc)
    assert "includes" in reasons and not _leaked(reasons)


def test_include_roots_without_an_answer_from_the_host_compiler(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from gpuadvise.toolchain import includes
    from gpuadvise.toolchain.find import Toolchain

    tc = Toolchain(
        nvcc=Path("/x/nvcc"), ptxas=Path("/x/ptxas"), nvdisasm=None, cuobjdump=None,
        version="13.0", include_dir=Path("/x/include"), bin_dir=Path("/x"),
        host_compiler=Path("/no/such/g++"),
    )  # fmt: skip
    roots = includes.include_roots((), tc)
    assert Path("/x/include").resolve() in roots and Path("/usr/include").resolve() in roots

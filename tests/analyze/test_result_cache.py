"""The analysis-result cache holds the analysis's report, never a rendering or an exit code
(gate-inputs review, item 3; issue 30: the report every format renders): a forged entry is not
replayed, an entry that is a folder is a miss, a data file is
keyed by its content, and a cache root that is not the user's own gpuadvise folder is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from clikit import cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.toolkit, pytest.mark.timeout(300)]

GATHER = """\
__global__ void gather(float* out, const float* in, const int* idx, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[idx[i]];
}
"""
N = 4096


@pytest.fixture
def case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "case"
    folder.mkdir()
    (folder / "gather.cu").write_text(GATHER)
    np.save(folder / "idx.npy", np.arange(N, dtype=np.int32))
    (folder / "gather.toml").write_text(
        f'grid = {N // 256}\nblock = 256\n[args]\nn = {N}\n[buffers]\nin = "float[n]"\n'
        'idx = "idx.npy"\nout = "float[n]"\n'
    )
    monkeypatch.setenv("GPUADVISE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(folder)
    return folder


ARGS = ("analyze", "gather.cu", "--gpu", "H100", "--no-measure")


def _stable(run: tuple[int, str, str]) -> tuple[int, dict, str]:
    """A run's exit code, JSON without the times (which a fresh analysis measures anew), stderr."""
    code, out, err = run
    doc = json.loads(out)
    doc.pop("timings_s")
    (doc.get("emulation") or {}).pop("time_s", None)
    return code, doc, err


def _entries(case: Path) -> list[Path]:
    return sorted((case.parent / "cache" / "analysis").glob("*/*.json"))


def test_a_forged_entry_is_not_replayed(capsys: pytest.CaptureFixture[str], case: Path) -> None:
    first = cli(capsys, *ARGS, "--json")
    assert first[0] == 0, first[2]
    again = cli(capsys, *ARGS, "--json")
    assert again == first  # a hit renders the same output
    (entry,) = _entries(case)
    key = entry.stem
    for forged in (
        {"format": 1, "text": "FORGED\n", "exit_code": 77},  # the old layout, replayed as is
        {"format": 2, "key": key, "text": "FORGED\n", "exit_code": 77},
        {"format": 2, "key": key, "analysis": {"format": 1, "rules": "FORGED"}},
        {"format": 3, "key": key, "report": {"kind": "FORGED", "text": "FORGED\n"}},
        {"format": 3, "key": key, "report": {"kind": "gpuadvise-analysis-report"}},
    ):
        entry.write_text(json.dumps(forged))
        code, out, err = cli(capsys, *ARGS, "--json")
        assert code == 0 and "FORGED" not in out + err, (code, out[:200], err)
        assert json.loads(out)["kernel"]["name"] == "gather"


def test_the_exit_code_comes_from_the_stored_findings(
    capsys: pytest.CaptureFixture[str], case: Path
) -> None:
    code, out, _ = cli(capsys, *ARGS, "--json")
    severities = {f["severity"] for f in json.loads(out)["findings"]}
    expected = 1 if severities & {"warning", "error"} else 0
    for _ in range(2):  # a miss, then a hit: the same exit code under --fail-on
        assert cli(capsys, *ARGS, "--fail-on", "warning", "--format", "sarif")[0] == expected
    # the stored report says there are no findings: so does the exit code (and the text)
    for e in _entries(case):
        doc = json.loads(e.read_text())
        doc["report"]["document"]["findings"] = []
        e.write_text(json.dumps(doc))
    assert cli(capsys, *ARGS, "--fail-on", "warning", "--format", "sarif")[0] == 0


def test_an_entry_that_is_a_folder_a_fifo_or_huge_is_a_miss(
    capsys: pytest.CaptureFixture[str], case: Path
) -> None:
    first = _stable(cli(capsys, *ARGS, "--json"))
    (entry,) = _entries(case)
    entry.unlink()
    (entry / "inside").mkdir(parents=True)
    assert _stable(cli(capsys, *ARGS, "--json")) == first  # analysed again, no error
    assert entry.is_file()  # and stored again
    assert _stable(cli(capsys, *ARGS, "--json")) == first
    entry.unlink()
    os.mkfifo(entry)
    assert _stable(cli(capsys, *ARGS, "--json")) == first  # a FIFO is not waited on
    entry.unlink()
    with entry.open("wb") as f:
        f.truncate(5 << 30)  # 5 GB, sparse: its size is checked before a byte of it is read
    assert _stable(cli(capsys, *ARGS, "--json")) == first


def test_a_data_file_is_keyed_by_its_content(
    capsys: pytest.CaptureFixture[str], case: Path
) -> None:
    code, coalesced, err = cli(capsys, *ARGS, "--json")
    assert code == 0, err
    data = case / "idx.npy"
    stamp = data.stat()
    rng = np.random.default_rng(1)
    np.save(data, rng.permutation(N).astype(np.int32))  # same size, scattered reads
    os.utime(data, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert data.stat().st_size == stamp.st_size and data.stat().st_mtime_ns == stamp.st_mtime_ns
    code, scattered, err = cli(capsys, *ARGS, "--json")
    assert code == 0, err

    def sectors(doc: str) -> int:
        return sum(ln["sectors"] for ln in json.loads(doc)["global_memory"]["lines"])

    assert sectors(scattered) > sectors(coalesced)  # not the stale analysis


@pytest.mark.parametrize("how", ["holds other files", "world-writable", "another user's"])
def test_a_cache_root_that_is_not_ours_is_refused(
    capsys: pytest.CaptureFixture[str], case: Path, tmp_path: Path, how: str, monkeypatch
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    if how == "holds other files":  # like GPUADVISE_CACHE_DIR=/ or a home folder
        (root / "etc").mkdir()
        (root / "notes.txt").write_text("mine")
    elif how == "world-writable":
        root.chmod(0o777)
    else:
        if os.geteuid() != 0:
            pytest.skip("needs root to give a folder to another user")
        os.chown(root, 12345, -1)
    before = sorted(p.name for p in root.iterdir())
    monkeypatch.setenv("GPUADVISE_CACHE_DIR", str(root))
    code, out, err = cli(capsys, *ARGS, "--json")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert str(root) in lines[0] and "GPUADVISE_CACHE_DIR" in lines[0], lines[0]
    assert sorted(p.name for p in root.iterdir()) == before  # nothing created there
    if how == "world-writable":  # with the sticky bit (as /tmp), an empty folder is fine
        root.chmod(0o1777)
        assert cli(capsys, *ARGS, "--json")[0] == 0
        assert (root / "CACHEDIR.TAG").is_file()


# --- property: a stored report of any shape is rendered or is a miss, never a traceback ------------


@pytest.fixture(scope="module")
def saved_doc(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("saved")
    (folder / "gather.cu").write_text(GATHER)
    np.save(folder / "idx.npy", np.arange(N, dtype=np.int32))
    (folder / "gather.toml").write_text(
        f'grid = {N // 256}\nblock = 256\n[args]\nn = {N}\n[buffers]\nin = "float[n]"\n'
        'idx = "idx.npy"\nout = "float[n]"\n'
    )
    from gpuadvise.analyze.options import AnalyzeSettings, KernelOptions
    from gpuadvise.analyze.report import build_report
    from gpuadvise.analyze.run import run_analysis

    done = run_analysis(
        KernelOptions(str(folder / "gather.cu"), gpu="H100", no_cache=True),
        AnalyzeSettings(measure=False),
    )
    return json.loads(json.dumps(build_report(done.analysis, done.rules).to_dict()))


FORMATS = ("text", "json", "html", "sarif", "junit", "github", "markdown")


@pytest.mark.parametrize("trace", [True, False], ids=["traced", "no-trace"])
def test_the_stored_report_renders_what_the_analysis_did(
    tmp_path: Path, compile_cache: Path, trace: bool
) -> None:
    """Every format of a hit is the fresh run's, byte for byte: the stored report (read back
    from JSON) holds the live registers (their chart and table) and the rules skipped by choice
    (``--no-trace``), and the command is the current run's."""
    from gpuadvise.analyze.options import AnalyzeSettings, KernelOptions
    from gpuadvise.analyze.report import build_report
    from gpuadvise.analyze.run import run_analysis
    from gpuadvise.cli.analyze import _render, _render_hit
    from gpuadvise.report.rules_text import command_line
    from gpuadvise.report_types import AnalysisReport

    (tmp_path / "gather.cu").write_text(GATHER)
    np.save(tmp_path / "idx.npy", np.arange(N, dtype=np.int32))
    (tmp_path / "gather.toml").write_text(
        f'grid = {N // 256}\nblock = 256\n[args]\nn = {N}\n[buffers]\nin = "float[n]"\n'
        'idx = "idx.npy"\nout = "float[n]"\n'
    )
    opts = KernelOptions(str(tmp_path / "gather.cu"), gpu="H100", no_cache=True)
    done = run_analysis(opts, AnalyzeSettings(measure=False, trace=trace))
    assert done.analysis.registers is not None and done.analysis.registers.gpr
    assert bool(done.rules.skipped) is not trace  # --no-trace skips the trace's rules
    argv = ["analyze", "gather.cu", "--gpu", "H100"]
    fresh = build_report(done.analysis, done.rules, None, command_line(argv))
    stored = build_report(done.analysis, done.rules, None, command_line(["analyze", "x.cu"]))
    stored = AnalysisReport.from_dict(json.loads(json.dumps(stored.to_dict())))
    hit = _render_hit(stored, [(fmt, None) for fmt in FORMATS], None, False, argv)
    assert hit is not None
    for fmt, shown in zip(FORMATS, hit[0], strict=True):
        assert shown == _render(fmt, fresh), fmt
    assert stored.document.get("registers") == fresh.document.get("registers")


def _paths(x: object, here: tuple = ()) -> list[tuple]:
    out = [here]
    if isinstance(x, dict):
        for k, v in x.items():
            out += _paths(v, (*here, k))
    elif isinstance(x, list):
        for i, v in enumerate(x[:2]):
            out += _paths(v, (*here, i))
    return out


@given(data=st.data())
@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
def test_a_forged_report_is_rendered_or_a_miss(saved_doc: dict, data: st.DataObject) -> None:
    import copy

    from gpuadvise.cli.analyze import _render_hit
    from gpuadvise.report_types import AnalysisReport

    doc = copy.deepcopy(saved_doc)
    path = data.draw(st.sampled_from(_paths(doc)[1:]))
    value = data.draw(
        st.one_of(
            st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
            st.text(max_size=5), st.just([]), st.just({}), st.lists(st.integers(), max_size=2),
        )
    )  # fmt: skip
    where = doc
    for k in path[:-1]:
        where = where[k]
    where[path[-1]] = value
    try:
        hit = AnalysisReport.from_dict(doc)
    except ValueError:
        return
    for fmt in FORMATS:
        rendered = _render_hit(hit, [(fmt, None)], "warning", False, None)
        assert rendered is None or (isinstance(rendered[0][0], str) and rendered[1] in (0, 1))


def test_the_keys_compile_is_in_the_timings(capsys: pytest.CaptureFixture[str], case: Path) -> None:
    """The result cache's key compiles the kernel before the analysis' timings begin (the
    analysis then hits the compile cache): its seconds are ``key_s`` (secp256k1: 19 CPU-s of
    nvcc that no stage showed); without the cache there is no key, and no ``key_s``."""
    code, out, err = cli(capsys, *ARGS, "--json")
    assert code == 0, err
    t = json.loads(out)["timings_s"]
    assert t["key_s"] > 0 and t["compile_cached"]  # the key's compile, then the analysis' hit
    code, out, err = cli(capsys, *ARGS, "--json", "--no-cache")
    assert code == 0, err
    assert "key_s" not in json.loads(out)["timings_s"]

"""``gpuadvise record``'s run on the CPU: the program started, its exit status and crashes
reported, the summary written, nothing written outside --out. Without CUPTI here the recorder
inside the program says it did not start and the program runs on unrecorded (what a machine
without the bindings in the program's Python gets)."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from clikit import cli

from gpuadvise.record.run import record
from gpuadvise.report.record_text import summary_markdown


@pytest.fixture
def no_check(monkeypatch):
    monkeypatch.setattr("gpuadvise.record.run.recorder_missing", lambda: None)


def test_program_status_summary_and_nothing_outside_out(tmp_path, monkeypatch, no_check, capfd):
    monkeypatch.chdir(tmp_path)
    app = tmp_path / "app.py"
    app.write_text("import sys\nprint('hello from', sys.argv[1:])\nsys.exit(3)\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    result = record([sys.executable, str(app), "--n", "4"], tmp_path / "rec")
    out, err = capfd.readouterr()
    assert "hello from ['--n', '4']" in out  # the program's own argv and stdout
    if importlib.util.find_spec("cupti") is None:  # the program ran on, unrecorded, and said so
        assert "gpuadvise record: the recorder did not start: ModuleNotFoundError" in err
    assert result.exit_code == 3 and result.signal is None and result.cases == []
    assert any("nothing was recorded" in n for n in result.notes)
    doc = json.loads((tmp_path / "rec" / "summary.json").read_text())
    assert doc["exit_code"] == 3 and doc["command"][-2:] == ["--n", "4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "rec"])
    assert not (tmp_path / "rec" / "raw" / "inject").exists()  # the injection library is removed


def test_a_crash_is_reported_and_record_exits_1(tmp_path, monkeypatch, no_check, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "boom.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    code, out, err = cli(
        capsys, "record", "--out", "rec", "--json", "--", sys.executable, "boom.py"
    )
    assert code == 1, err
    doc = json.loads(out[out.index("{") :])
    assert doc["signal"] == 11 and doc["exit_code"] == 139
    text = summary_markdown(doc)
    assert "crashed (signal 11); what was recorded until then is kept" in text
    assert (tmp_path / "rec" / "summary.md").read_text() == text


def test_default_out_folder_is_never_reused(tmp_path, monkeypatch, no_check, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ok.py").write_text("pass\n")
    for expected in ("gpuadvise-record", "gpuadvise-record-2"):
        code, out, err = cli(capsys, "record", "--", sys.executable, "ok.py")
        assert code == 0, err
        assert (tmp_path / expected / "summary.json").is_file()
        assert f"next: gpuadvise analyze {expected}" in out

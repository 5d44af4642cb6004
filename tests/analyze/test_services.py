"""The services rules call (``gpuadvise.analyze.services``) where they touch the shared compile
cache: a candidate's rewritten source, which two analyses at once (two ``gpuadvise analyze``
runs, two pytest-xdist workers) may write to the same place."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuadvise.analyze.services import AnalysisServices

CANDIDATE = "// the candidate\r\n__global__ void k(float* out) { out[0] = 1.0f; }  // \u00e9\n"


def _services(source: Path) -> AnalysisServices:
    """The services of an analysis of ``source`` (only what the candidate's path reads)."""
    module = SimpleNamespace(arch="sm_90", flags=("-arch=sm_90", "-lineinfo"))
    analysis = SimpleNamespace(module=module, spec=SimpleNamespace(source=str(source)))
    return AnalysisServices(analysis)  # type: ignore[arg-type]


def test_a_candidate_source_is_replaced_whole_never_rewritten_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUADVISE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "src").mkdir()
    source = tmp_path / "src" / "k.cu"
    source.write_text("// the original\n")
    services = _services(source)
    path, options = services._candidate(CANDIDATE, ())
    assert path.parent.parent == tmp_path / "cache" / "candidates" and path.name == "k.cu"
    assert path.read_bytes() == CANDIDATE.encode("utf-8")  # byte for byte, CRLF kept
    assert str(source.parent) in options.include_dirs  # the original's headers still found
    # a damaged copy that another compile has open is replaced, not truncated under it
    path.write_bytes(b"// half of the cand")
    with path.open("rb") as reader:
        again, _ = services._candidate(CANDIDATE, ())
        assert reader.read() == b"// half of the cand"
    assert again == path and path.read_bytes() == CANDIDATE.encode("utf-8")
    # an intact copy is left alone (the same file, not a new one)
    inode = path.stat().st_ino
    assert services._candidate(CANDIDATE, ())[0] == path and path.stat().st_ino == inode
    assert sorted(p.name for p in path.parent.iterdir()) == ["k.cu"]  # no temporary file left

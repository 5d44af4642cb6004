"""``analyze --fix/--diff/--unsafe-fixes`` (gpuadvise.analyze.fix): which fixes are taken, how
they compose, and what is written."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import io
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import suitekit
from clikit import cli_run

from gpuadvise.analyze.fix import (
    FixResult,
    FixStep,
    fix_candidates,
    fixed_spec,
    may_offer_new,
    write_fix,
)
from gpuadvise.analyze.options import AnalyzeSettings, KernelOptions
from gpuadvise.errors import UsageError
from gpuadvise.rules import Estimate, Finding, Variant
from gpuadvise.rules.findings import Measurement, Proxy

ROOT = Path(__file__).resolve().parents[2]
DIFF = "--- a/k.cu\n+++ b/k.cu\n@@ -1,1 +1,1 @@\n-a\n+b\n"


def _finding(rule: str, variant: Variant | None, est: float | None = 2.0, m: Measurement | None = None,
             verified: bool | None = None, kind: str = "point") -> Finding:  # fmt: skip
    return Finding(
        rule,
        rule.lower(),
        "title",
        "warning",
        "message",
        line=3,
        variant=variant,
        estimated_speedup=None if est is None else Estimate(est, kind, "test"),  # type: ignore[arg-type]
        measured_speedup=m,
        verified=verified,
    )


def _m(speedup: float, low: float) -> Measurement:
    return Measurement(speedup, 2.0, 2.0 / speedup, "H100", ci_low=low, ci_high=speedup + 0.1)


def test_without_a_gpu_only_source_fixes_that_keep_the_launch_and_gain() -> None:
    auto = _finding("GA1", Variant("automatic-and-verified", "x", diff=DIFF))
    shown = _finding("GA2", Variant("display-only", "y", diff=DIFF))
    flags = _finding(
        "GA3", Variant("automatic-and-verified", "cap", nvcc_flags=("-maxrregcount=64",))
    )
    launch = _finding(
        "GA4", Variant("automatic-and-verified", "l", diff=DIFF, launch={"grid": [1, 1, 1]})
    )
    small = _finding(
        "GA5", Variant("automatic-and-verified", "s", diff=DIFF), est=1.0, kind="upper-bound"
    )
    proxy = Proxy("src", "a", "b", "", "")
    layout = _finding("GA6", Variant("proxy", "soa", proxy=proxy))
    take, advice = fix_candidates(
        [auto, shown, flags, launch, small, layout], unsafe=False, measured=False
    )
    assert [f.rule for f in take] == ["GA1"]
    text = "\n".join(advice)
    assert "GA2" in text and "--unsafe-fixes" in text
    assert "build change (-maxrregcount=64)" in text
    assert "GA4" in text and "launch change" in text
    assert "GA5" in text and "at most 1.00x" in text
    assert "GA6" in text and "layout change" in text
    take, _ = fix_candidates([auto, shown], unsafe=True, measured=False)
    assert [f.rule for f in take] == ["GA1", "GA2"]


def test_without_a_gpu_a_launch_change_checked_as_totals_is_taken() -> None:
    """A per-block reduction's grid change (Variant.totals) is verified by the CPU emulator over
    both whole launches, so it is a fix without a GPU; the same launch change without totals
    stays advice."""
    totals = _finding(
        "GA206",
        Variant("automatic-and-verified", "t", diff=DIFF, launch={"grid": [8, 1, 1]},
                totals={"out": "+"}),
    )  # fmt: skip
    plain = _finding(
        "GA4", Variant("automatic-and-verified", "l", diff=DIFF, launch={"grid": [8, 1, 1]})
    )
    smem = _finding(
        "GA201",
        Variant("automatic-and-verified", "p", diff=DIFF, launch={"dynamic_smem_bytes": 4224}),
    )  # the same CTAs with more dynamic shared memory: both whole launches emulated
    take, advice = fix_candidates([totals, plain, smem], unsafe=False, measured=False)
    assert [f.rule for f in take] == ["GA206", "GA201"]
    assert "GA4" in "\n".join(advice)
    v = totals.variant
    assert v is not None and Variant.from_dict(v.to_dict()) == v


def test_on_a_gpu_only_verified_and_faster_fixes() -> None:
    fast = _finding(
        "GA1", Variant("automatic-and-verified", "x", diff=DIFF), m=_m(2.0, 1.8), verified=True
    )
    noisy = _finding(
        "GA2", Variant("automatic-and-verified", "x", diff=DIFF), m=_m(1.02, 0.97), verified=True
    )
    wrong = _finding("GA3", Variant("automatic-and-verified", "x", diff=DIFF), verified=False)
    launch = _finding(
        "GA4", Variant("automatic-and-verified", "l", diff=DIFF, launch={"grid": [8, 1, 1]}), m=_m(1.5, 1.4),
        verified=True,
    )  # fmt: skip
    shown_launch = _finding(
        "GA5",
        Variant("display-only", "l", diff=DIFF, launch={"grid": [8, 1, 1]}),
        m=_m(3.0, 2.9),
        verified=True,
    )
    take, advice = fix_candidates(
        [fast, noisy, wrong, launch, shown_launch], unsafe=True, measured=True
    )
    assert [f.rule for f in take] == ["GA1", "GA4"]  # a launch change of an automatic fix: yes
    text = "\n".join(advice)
    assert "GA2" in text and "not faster" in text
    assert "GA3" in text and "not verified" in text
    assert "GA5" in text and "host code" in text


def test_a_new_fix_may_come_only_from_a_variant_no_estimate_rules_out() -> None:
    """``analyze --diff``'s analysis of the composed kernel traces its variants for their points
    only when a finding may offer a fix not yet tried: one whose estimate alone now rules it out
    may (its variant's trace can raise the estimate); advice, a fix tried, a variant needing a
    GPU, an error may not."""
    small = _finding(
        "GA5", Variant("automatic-and-verified", "s", diff=DIFF), est=1.0, kind="upper-bound"
    )
    assert fix_candidates([small], unsafe=False, measured=False)[0] == []
    assert may_offer_new([small], set(), unsafe=False)
    assert not may_offer_new([small], {("GA5", DIFF)}, unsafe=False)
    shown = _finding("GA2", Variant("display-only", "y", diff=DIFF))
    flags = _finding("GA3", Variant("automatic-and-verified", "c", nvcc_flags=("-O1",)))
    launch = _finding(
        "GA4", Variant("automatic-and-verified", "l", diff=DIFF, launch={"grid": [1, 1, 1]})
    )
    needs = _finding(
        "GA7", Variant("automatic-and-verified", "r", diff=DIFF, needs_measurement=True)
    )
    error = dataclasses.replace(
        _finding("GA8", Variant("automatic-and-verified", "e", diff=DIFF)), error="boom"
    )
    advice = [shown, flags, launch, needs, error, _finding("GA9", None)]
    assert not may_offer_new(advice, set(), unsafe=False)
    assert may_offer_new(advice, set(), unsafe=True)  # the display-only diff, with --unsafe-fixes


def test_no_analysis_of_the_composed_kernel_once_the_steps_are_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round that brings the steps to MAX_STEPS ends the composition: the composed kernel is
    not analysed for a next round, which could take nothing."""
    import gpuadvise.analyze.fix as F

    src = tmp_path / "k.cu"
    src.write_text("a\n")
    analysed: list[int] = []

    def spent(comp: Any, take: Any, analysis: Any) -> list[FixStep]:
        comp.text = "b\n"
        return [FixStep("GA1", 1, "d", "automatic-and-verified", "applied", "ok")] * F.MAX_STEPS

    def findings_of(*a: Any) -> tuple[Any, ...]:
        analysed.append(1)
        return ()

    monkeypatch.setattr(F, "_compose_emulated", spent)
    monkeypatch.setattr(F, "_findings_of", findings_of)
    f = _finding("GA1", Variant("automatic-and-verified", "x", diff=DIFF))
    res = F.compose_fixes(KernelOptions(source=str(src)), [f], measured=False)
    assert len(res.steps) == F.MAX_STEPS and analysed == []
    # one step short of the limit: the composed kernel is analysed for the next round
    monkeypatch.setattr(
        F, "_compose_emulated", lambda comp, take, analysis: spent(comp, take, analysis)[:1]
    )
    F.compose_fixes(KernelOptions(source=str(src)), [f], measured=False)
    assert analysed == [1]


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_an_analysis_traces_its_variants_only_when_its_findings_want_them() -> None:
    """run_analysis's ``points_wanted`` is told the rules' findings; when it says no, no variant
    is traced and each finding keeps the rule's own estimate (kernels/accumulate's GA308 gets
    its point from its variant's trace otherwise: test_variant_trace)."""
    from gpuadvise.analyze.run import run_analysis
    from gpuadvise.analyze.variant_trace import TRACE_POINT

    k = ROOT / "kernels" / "accumulate"
    told: list[tuple[str, ...]] = []

    def no(run: Any) -> bool:
        told.append(tuple(f.rule for f in run.findings))
        return False

    res = run_analysis(
        KernelOptions(str(k / "accumulate.cu"), spec=str(k / "case.toml"), gpu="H100"),
        AnalyzeSettings(measure=False, select=("GA308",)),
        points_wanted=no,
    )
    assert told == [("GA308",)]
    (f,) = [f for f in res.rules.findings if f.rule == "GA308"]
    assert f.estimated_speedup is None or TRACE_POINT not in f.estimated_speedup.inputs
    assert res.analysis.timings_s["variant_traces_s"] == 0.0


def test_fixed_spec_replaces_the_launch_keys_only(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(int* p) {}\n")
    (tmp_path / "k.toml").write_text(
        '# mine\nsource = "k.cu"\nkernel = "k"\ngrid = "ceil_div(n, 256)"\nblock = 256\n\n[args]\nn = 4096\n'
    )
    opts = KernelOptions(source=str(src), kernel="k")
    path, text = fixed_spec(opts, {"grid": [264, 1, 1], "block": [512, 1, 1]})
    assert path == tmp_path / "k.fixed.toml"
    assert "grid = 264\n" in text and "block = 512\n" in text
    assert "[args]\nn = 4096" in text and "ceil_div" not in text
    import tomllib

    doc = tomllib.loads(text)
    assert doc["grid"] == 264 and doc["kernel"] == "k" and doc["args"] == {"n": 4096}


def _result(tmp_path: Path, original: str, fixed: str, spec: str | None = None) -> FixResult:
    src = tmp_path / "k.cu"
    src.write_text(original)
    step = FixStep("GA1", 1, "d", "automatic-and-verified", "applied", "ok")
    return FixResult(
        source=src, kernel="k", original=original, fixed=fixed, steps=(step,), measured=False,
        spec_text=spec, spec_path=None if spec is None else tmp_path / "k.fixed.toml",
    )  # fmt: skip


def test_write_fix_writes_the_source_and_the_spec(tmp_path: Path) -> None:
    r = _result(tmp_path, "a\n", "b\n", spec="# written by gpuadvise analyze --fix: x\ngrid = 2\n")
    assert r.diff is not None and "-a" in r.diff and "+b" in r.diff
    written = write_fix(r)
    assert (tmp_path / "k.cu").read_text() == "b\n"
    assert (tmp_path / "k.fixed.toml").read_text().startswith("# written by gpuadvise")
    assert written == [tmp_path / "k.cu", tmp_path / "k.fixed.toml"]


def test_write_fix_writes_nothing_when_a_file_is_in_the_way(tmp_path: Path) -> None:
    r = _result(tmp_path, "a\n", "b\n", spec="# written by gpuadvise analyze --fix\n")
    (tmp_path / "k.fixed.toml").write_text("mine\n")
    with pytest.raises(UsageError, match="did not write"):
        write_fix(r)
    assert (tmp_path / "k.cu").read_text() == "a\n"  # nothing written


def test_write_fix_refuses_a_source_changed_meanwhile(tmp_path: Path) -> None:
    r = _result(tmp_path, "a\n", "b\n")
    (tmp_path / "k.cu").write_text("edited\n")
    with pytest.raises(UsageError, match="changed during"):
        write_fix(r)
    assert (tmp_path / "k.cu").read_text() == "edited\n"


# --- issue 21: what --fix keeps ----------------------------------------------------------------


def _fix_of(path: Path, fixed_text: str) -> FixResult:
    """The FixResult compose_fixes makes for ``path`` (read as it reads it) with ``fixed_text``."""
    from gpuadvise.source.raw import read_source

    read = read_source(path)
    step = FixStep("GA1", 1, "d", "automatic-and-verified", "applied", "ok")
    return FixResult(
        source=path, kernel="k", original=read.text, fixed=fixed_text, steps=(step,),
        measured=False, raw=read.raw,
    )  # fmt: skip


def _one_line(e: pytest.ExceptionInfo[UsageError]) -> str:
    line = e.value.one_line()
    assert "\n" not in line and e.value.exit_code == 2
    return line


def test_write_fix_writes_the_file_a_link_leads_to(tmp_path: Path) -> None:
    """--fix on a symlinked source replaced the link with a regular file (the real file kept
    the old text)."""
    real = tmp_path / "lib" / "k.cu"
    real.parent.mkdir()
    real.write_text("a\n")
    link = tmp_path / "k.cu"
    link.symlink_to(real)
    write_fix(_fix_of(link, "b\n"))
    assert link.is_symlink() and real.read_text() == "b\n"


def test_write_fix_keeps_hard_links(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("a\n")
    other = tmp_path / "copy.cu"
    os.link(src, other)
    write_fix(_fix_of(src, "b\n"))
    assert other.read_text() == "b\n" and os.path.samefile(src, other)


@pytest.mark.parametrize("mode", [0o755, 0o600])
def test_write_fix_keeps_the_mode(tmp_path: Path, mode: int) -> None:
    """0755 and 0600 became 0644 (a private file world-readable)."""
    src = tmp_path / "k.cu"
    src.write_text("a\n")
    src.chmod(mode)
    write_fix(_fix_of(src, "b\n"))
    assert stat.S_IMODE(src.stat().st_mode) == mode and src.read_text() == "b\n"


@pytest.mark.parametrize(
    ("raw", "fixed", "want"),
    [
        (b"x\r\na\r\ny\r\n", "x\nb\ny\n", b"x\r\nb\r\ny\r\n"),
        (b"x\ra\ry\r", "x\nb\ny\n", b"x\rb\ry\r"),
        (b"x\r\na\ny\rz", "x\nb\nnew\ny\nz", b"x\r\nb\nnew\ny\rz"),
    ],
    ids=["crlf", "cr", "mixed"],
)
def test_write_fix_keeps_each_lines_ending(
    tmp_path: Path, raw: bytes, fixed: str, want: bytes
) -> None:
    src = tmp_path / "k.cu"
    src.write_bytes(raw)
    write_fix(_fix_of(src, fixed))
    assert src.read_bytes() == want


def test_write_fix_keeps_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    """A Latin-1 comment crashed --fix (UnicodeDecodeError)."""
    src = tmp_path / "k.cu"
    src.write_bytes(b"// r\xe9duction \xe0 deux\nint a;\n")
    r = _fix_of(src, "// r\ufffdduction \ufffd deux\nint b;\n")
    write_fix(r)
    assert src.read_bytes() == b"// r\xe9duction \xe0 deux\nint b;\n"


def test_write_fix_refuses_a_read_only_file_in_one_line(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("a\n")
    src.chmod(0o444)
    with pytest.raises(UsageError) as e:
        write_fix(_fix_of(src, "b\n"))
    assert "--fix cannot write" in _one_line(e) and "read-only (mode 0444)" in _one_line(e)
    assert src.read_text() == "a\n" and stat.S_IMODE(src.stat().st_mode) == 0o444


def test_write_fix_on_an_append_only_file_in_one_line(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("a\n")
    if subprocess.run(["chattr", "+a", str(src)], capture_output=True).returncode != 0:
        pytest.skip("chattr +a is not available here")
    try:
        with pytest.raises(UsageError) as e:
            write_fix(_fix_of(src, "b\n"))
        assert "chattr -a" in _one_line(e) and "left as it was" in _one_line(e)
        assert src.read_text() == "a\n"
    finally:
        subprocess.run(["chattr", "-a", str(src)], check=False)


@pytest.mark.parametrize("linked", [False, True], ids=["atomic", "in place"])
def test_write_fix_on_a_full_disk_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linked: bool
) -> None:
    src = tmp_path / "k.cu"
    src.write_text("a\n")
    if linked:
        os.link(src, tmp_path / "other.cu")
    r = _fix_of(src, "a longer fixed text\n")

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(UsageError) as e:
        write_fix(r)
    monkeypatch.undo()
    assert "No space left on device" in _one_line(e)
    assert src.read_text() == "a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.cu", *(["other.cu"] if linked else [])]


def test_write_fix_when_the_source_was_removed_in_one_line(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("a\n")
    r = _fix_of(src, "b\n")
    src.unlink()
    with pytest.raises(UsageError) as e:
        write_fix(r)
    assert "was removed during the analysis" in _one_line(e)
    assert not src.exists()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``gpuadvise analyze ARGS`` in this process, in ``cwd``."""
    with contextlib.chdir(cwd):
        return cli_run("analyze", *args)


def test_unsafe_fixes_alone_is_a_usage_error(tmp_path: Path) -> None:
    p = _cli(str(ROOT / "kernels/tail/tail.cu"), "--unsafe-fixes", cwd=tmp_path)
    assert p.returncode == 2
    assert "--unsafe-fixes needs --fix" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_fix_without_a_gpu_applies_the_emulator_verified_padding(tmp_path: Path) -> None:
    """moments.cu's split tiles: GA201's padding keeps the outputs (the emulator checks every CTA
    of a 64x64 frame: 64 CTAs of 8x8, border and interior ones) and is written; --diff shows the
    same change and writes nothing. (The frame was 192x128, 384 CTAs: the padding, its check
    over every CTA and the fixed kernel's silence do not depend on the frame's size.)"""
    case = tmp_path / "case"
    shutil.copytree(ROOT / "kernels/fp16_neighbourhood", case)
    src = case / "moments.cu"
    before = src.read_text()
    args = (
        str(src),
        "--kernel",
        "moments_split",
        "--arg",
        "w=64",
        "--arg",
        "h=64",
        "--no-measure",
    )
    j = _cli(*args, "--diff", "--json", cwd=tmp_path)
    assert j.returncode == 0, j.stderr
    doc = json.loads(j.stdout)
    assert [s["status"] for s in doc["fix"]["steps"]] == ["applied"]
    assert "outputs equal on the CPU emulator (64 CTAs)" in doc["fix"]["steps"][0]["reason"]
    assert doc["fix"]["measured"] is False and src.read_text() == before
    assert doc["fix"]["diff"].startswith("---")
    assert "+    __shared__ unsigned s_rg[TILE][TILE + " in doc["fix"]["diff"]
    f = _cli(*args, "--fix", cwd=tmp_path)
    assert f.returncode == 0, f.stderr
    assert "fixed: wrote" in f.stderr
    after = src.read_text()
    assert after != before and "s_rg[TILE][TILE + " in after
    # the fixed kernel has nothing left to fix of that kind
    again = _cli(*args, "--diff", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.strip() == ""


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_fix_of_a_linked_crlf_latin1_private_source(tmp_path: Path) -> None:
    """Issue 21 end to end: moments.cu as a link to a private (0600) file with CRLF line endings
    and a Latin-1 comment. The analysis reads it, --fix writes GA201's padding into the file the
    link leads to, in place of the one line it changes: every other byte, the link and the mode
    stay. (A 64x64 frame, 64 CTAs: the bytes written are the point, not the frame's size.)"""
    case = tmp_path / "case"
    shutil.copytree(ROOT / "kernels/fp16_neighbourhood", case)
    store = tmp_path / "store" / "moments.cu"
    store.parent.mkdir()
    text = (case / "moments.cu").read_text()
    raw = b"// moyenne et variance \xe0 9x9 (r\xe9f\xe9rence)\r\n" + text.replace(
        "\n", "\r\n"
    ).encode("utf-8")
    store.write_bytes(raw)
    store.chmod(0o600)
    (case / "moments.cu").unlink()
    (case / "moments.cu").symlink_to(store)
    args = (str(case / "moments.cu"), "--kernel", "moments_split", "--arg", "w=64",
            "--arg", "h=64", "--no-measure", "--fix")  # fmt: skip
    f = _cli(*args, cwd=tmp_path)
    assert f.returncode == 0, f.stderr
    assert (case / "moments.cu").is_symlink()
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    after = store.read_bytes()
    old_lines, new_lines = raw.split(b"\r\n"), after.split(b"\r\n")
    assert len(old_lines) == len(new_lines) and b"\n" not in after.replace(b"\r\n", b"")
    changed = [(a, b) for a, b in zip(old_lines, new_lines, strict=True) if a != b]
    assert len(changed) == 1 and b"s_rg[TILE][TILE + " in changed[0][1]
    assert new_lines[0] == b"// moyenne et variance \xe0 9x9 (r\xe9f\xe9rence)"


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_fix_composes_the_reduction_chain_without_a_gpu(tmp_path: Path) -> None:
    """reduce1 (interleaved): --unsafe-fixes takes GA202's sequential addressing and, on the
    composed kernel analyzed again, GA205's shuffles; every step is verified on the emulator, and
    --fix writes the result. GA204's first add during the load is offered too but not taken at
    this size: on its variant's own trace (issue 29) 64 CTAs of a 16K-element sum run 0.88x (a
    launch-bound grid halved), so it waits for a GPU; it is taken at 2^22 ints (measured 1.62x on
    an H200, reduce3), and the composition of a partials-as-totals step is GA206's below."""
    case = tmp_path / "case"
    shutil.copytree(ROOT / "kernels/reduction", case)
    src = case / "reduce.cu"
    args = (str(src), "-k", "reduce1", "--arg", "n=16384", "--sample-ctas", "all", "--no-measure",
            "--unsafe-fixes")  # fmt: skip
    p = _cli(*args, "--diff", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    fix = json.loads(p.stdout)["fix"]
    assert [(s["rule"], s["status"]) for s in fix["steps"]] == [
        ("GA202", "applied"),
        ("GA205", "applied"),
    ], fix["steps"]
    assert all("outputs equal on the CPU emulator" in s["reason"] for s in fix["steps"])
    f = _cli(*args, "--fix", cwd=tmp_path)
    assert f.returncode == 0, f.stderr
    fixed = src.read_text()
    body = fixed[fixed.index("void reduce1") : fixed.index("void reduce2")]
    assert "__shfl_down_sync" in body and "tid % (2 * s)" not in body and "ga204_" not in body
    # the written kernel, launched as before (64 CTAs: no launch change, no spec written), sums
    # 256 inputs per CTA (emulated, every CTA)
    from rulekit import compiled, reduction_block_sums

    assert not (case / "reduce1.fixed.toml").exists()
    a = compiled(src, "reduce1", ("n=16384",))
    got, want = reduction_block_sums(a, 64, 256)
    assert np.array_equal(got, want)


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_fix_without_a_gpu_applies_the_grid_stride_reduction_checked_as_totals(
    tmp_path: Path,
) -> None:
    """reduce3 on 1.5M ints (5860 CTAs, over 4 waves): GA206's grid-stride variant writes one
    partial per CTA of a smaller grid; without a GPU it is verified over both whole launches on
    the emulator, its partials as their total, and GA205's shuffles are verified on top of it
    at the new launch; the result says the host must add the partials and writes the spec.
    (GA204's half grid, ranked first by its estimate, is left out: it leaves 2.8 waves, too
    few for GA206; test_fix_composes_the_reduction_chain_without_a_gpu applies it.)
    --diff writes nothing, so the case is analysed where it is (compiled once for the run under
    its path, as the other tests of kernels/reduction compile it), not copied."""
    case = ROOT / "kernels/reduction"
    before = {f.name: f.read_bytes() for f in case.iterdir()}
    src = case / "reduce.cu"
    args = (str(src), "-k", "reduce3", "--arg", "n=1500000", "--no-measure", "--ignore", "GA204")
    p = _cli(*args, "--diff", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert {f.name: f.read_bytes() for f in case.iterdir()} == before  # nothing written there
    fix = json.loads(p.stdout)["fix"]
    # both applied, in rank order: neither has an estimate without a GPU (GA206's is not
    # bounded on reductions), so the registry's order puts GA205 first; GA206's diff, stale
    # after GA205's, is made again on the composed source in the next round
    applied = [s for s in fix["steps"] if s["status"] == "applied"]
    steps = {s["rule"]: s for s in applied}
    assert len(applied) == 2 and set(steps) == {"GA205", "GA206"}, fix["steps"]
    grid_stride = steps["GA206"]["reason"]
    assert "checked as totals" in grid_stride and "host must combine" in grid_stride
    assert "both whole launches (5860 and 733 CTAs)" in grid_stride
    notes = "\n".join(fix["notes"])
    assert "grid 733x1x1" in notes and "reduce3.fixed.toml" in notes


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_the_advice_chain_without_a_gpu(tmp_path: Path) -> None:
    """benchmarks/advice_chain.py --no-measure on 2^22 ints: reduce1 -> GA202 (sequential) ->
    GA205 (shuffles) -> GA206 (a grid-stride loop of int4 loads over one wave, partials checked
    as totals), each step verified over whole launches on the CPU emulator. GA206's estimate is
    the launch model on its variant's own trace (analyze.variant_trace): 2.09x, ahead of
    GA204's first add during the load, which the grid-stride loop makes moot (the
    chain had taken GA204 first, then GA206, while GA206's estimate was the rule's own 1.00x
    point). The script runs in this process (its ``main()`` under the command line it would
    have, in ``tmp_path``; its analyses are in-process anyway): no interpreter and imports to
    start for it."""
    chain = suitekit.load_script(ROOT / "benchmarks/advice_chain.py", "advice_chain")
    argv = ["advice_chain.py", "--no-measure", "--log2n", "22", "--verify-log2n", "20",
            "--keep", str(tmp_path / "steps")]  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    with (
        pytest.MonkeyPatch.context() as mp,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        mp.setattr(sys, "argv", argv)
        mp.chdir(tmp_path)
        code = chain.main()
    p = subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
    assert p.returncode == 0, p.stderr
    rows = [ln for ln in p.stdout.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    applied = [r.split(" | ")[1].split(" ")[0] for r in rows[1:]]
    assert applied == ["GA202", "GA205", "GA206"], p.stdout
    assert "(partials checked as totals) | 1056x1x1 x 256" in rows[-1]
    assert p.stdout.count("outputs equal on the CPU emulator over both whole launches") == 3
    assert "out checked as totals" in p.stdout and "match exactly" in p.stdout
    final = (tmp_path / "steps" / "step3" / "reduce.cu").read_text()
    body = final[final.index("void reduce1") : final.index("void reduce2")]
    assert "__shfl_down_sync" in body and "gridDim.x" in body


def test_on_a_gpu_a_totals_fix_is_measured_and_combined_as_totals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--fix on a GPU: the grid change of a per-block reduction is measured with its partials
    compared as totals, at the step and in the final check against the original."""
    import gpuadvise.analyze.fix as F
    import gpuadvise.analyze.measure as M
    from gpuadvise.rules.findings import Trial

    src = tmp_path / "k.cu"
    src.write_text("a\n")
    seen: list[Variant] = []

    def fake_measure(opts: KernelOptions, v: Variant, timeout_s: float = 60.0) -> Trial:
        seen.append(v)
        return Trial(None, v.description, _m(2.0, 1.9), True, None)

    monkeypatch.setattr(M, "measure_variant", fake_measure)
    monkeypatch.setattr(F, "_live", lambda o: o)
    monkeypatch.setattr(F, "_findings_of", lambda comp, measured, tried, unsafe: ())
    v = Variant("automatic-and-verified", "t", diff=DIFF,
                launch={"grid": [8, 1, 1]}, totals={"out": "+"})  # fmt: skip
    f = _finding("GA206", v, m=_m(2.0, 1.9), verified=True)
    res = F.compose_fixes(KernelOptions(source=str(src)), [f], measured=True)
    assert [s.status for s in res.steps] == ["applied"]
    assert "checked as totals" in res.steps[0].reason and "host must" in res.steps[0].reason
    assert [x.totals for x in seen] == [{"out": "+"}, {"out": "+"}]  # the step, the combination
    assert seen[1].launch == {"grid": [8, 1, 1]} and res.fixed == "b\n"


GROWING = """\
#define T 32
__global__ void grow(const float* in, float* out, int n)
{
    __shared__ float tile[T][T];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = (blockIdx.x * T + ty) * T + tx;
    out[i] = 0.0f;  // written first: a CTA cut short has written it
    float acc = 0.0f;
    for (int r = 0; r <= blockIdx.x; ++r) {  // later CTAs take longer
        tile[ty][tx] = in[(r * T + ty) * T + tx];
        __syncthreads();
        acc += tile[tx][ty];  // a column: a 32-way bank conflict
        __syncthreads();
    }
    out[i] = acc;
}
"""


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_fix_without_a_gpu_compares_the_same_ctas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27: the default sample's trace budget cut the first wave, and the batch that
    overflowed was dropped from the trace after its CTAs had written ``out[i] = 0.0f``: the
    analysis's outputs held those writes, the candidate run on the traced CTAs did not, and a
    correct padding was rejected ("expected 0.0, got nan"). The original now runs again on
    exactly the CTAs each candidate runs."""
    import gpuadvise.trace.emulate as emulate_mod
    from gpuadvise.analyze.fix import compose_fixes
    from gpuadvise.analyze.options import AnalyzeSettings
    from gpuadvise.analyze.run import run_analysis
    from gpuadvise.analyze.services import AnalysisServices

    src = tmp_path / "grow.cu"
    src.write_text(GROWING)
    # CTA b of the 64 makes 96 (b + 1) + 64 warp records; room for 1280: CTAs 0-2 are kept,
    # and the batch of CTAs 3-4 overflows in its loop, after writing out[i] = 0
    monkeypatch.setattr(
        emulate_mod, "DEFAULT_SAMPLE_TRACE_BYTES", 1280 * emulate_mod.RECORD.itemsize
    )
    opts = KernelOptions(
        source=str(src), kernel="grow", grid="64", block="32x32", gpu="H100",
        args=("n=65536",), buffers=("in=float[n]", "out=float[n]"),
    )  # fmt: skip
    done = run_analysis(opts, AnalyzeSettings(measure=False, select=("GA201",)))
    mem = done.analysis.memory
    assert tuple(mem.trace.ctas) == (0, 1, 2), mem.notes
    # the analysis's outputs held the dropped CTAs' first writes (not a reference for them);
    # since s20-mem analyze keeps none at all (keep_outputs=False): the fix must run the original
    assert mem.outputs is None
    runs: list[tuple[str | None, tuple[int, ...]]] = []
    real = AnalysisServices.emulate_candidate

    def spy(self, text, ctas, trace=True, sample_loops=True, models=True):  # type: ignore[no-untyped-def]
        runs.append((text, tuple(ctas)))
        assert not sample_loops  # outputs compared: every loop iteration runs
        assert not models  # their outputs alone are read
        return real(self, text, ctas, trace, sample_loops, models)

    monkeypatch.setattr(AnalysisServices, "emulate_candidate", spy)
    result = compose_fixes(opts, done.rules.findings, measured=False, analysis=done.analysis)
    assert [(s.rule, s.status) for s in result.steps] == [("GA201", "applied")], result.steps
    assert "tile[T][T + 1]" in (result.diff or "")
    # the original and the candidate ran the same CTAs
    assert [c for _, c in runs] == [(0, 1, 2), (0, 1, 2)] and runs[0][0] is None

"""``analyze --fix``/``--diff``: the findings' fixes composed into one source, step by step.

The fixes taken are source diffs (a rule's variant with a ``diff``) of findings in rank order:

- ``automatic-and-verified`` variants, and with ``unsafe`` also ``display-only`` ones; never a
  proxy (a layout change reaches into host code), never a compile-flag change (a build-system
  change: it stays advice), and a display-only variant never with a launch change;
- on a GPU, only the variants the measurement stage verified and found faster (95% interval above
  1). Each is applied on top of the fixes kept so far, and the composition is built, its outputs
  compared with the previous composition's (which equal the original's, step by step) and timed
  A/B against it: the step is kept only when it is verified and faster. A diff that no longer
  applies after earlier steps is made again by re-running its rule on the composed source. The
  final source is then timed against the original: the combined speedup with its interval;
- without a GPU, only the fixes whose safety needs no measurement: source diffs that keep the
  launch (``automatic-and-verified``; ``display-only`` too with ``unsafe``), whose outputs the CPU
  emulator finds equal to the original's on the traced CTAs (every output when the trace covers
  the whole launch), unless their estimate is an upper bound of 1.0x (no gain possible); and
  those whose launch change keeps the grid and the block (more dynamic shared memory: GA201's
  padding of an ``extern __shared__`` array), verified over both whole launches as below.
  Nothing is measured, and the result says so.

A launch change (GA206's grid-stride loop, GA304's tiles) is applied to the kernel's launch spec:
the new spec is written beside the source (``<kernel>.fixed.toml``), never over the user's, and
the host code's launch must be changed to match (the result says so). A variant whose per-block
partial outputs change count with the grid (``Variant.totals``: GA206 on a per-block reduction) is
verified on the totals of the partials each grid writes; without a GPU, both whole launches are
run on the CPU emulator when each has at most ``MAX_EMULATED_CTAS`` CTAs, and the step says the
host must combine the new launch's gridDim.x partials.

Nothing here writes the user's file: :func:`write_fix` does that, and only when every step ended
(a step that fails to build or verify is rejected, not fatal; an error in the final check writes
nothing). It writes the file a symbolic link leads to, in place when the file has several names,
keeping its mode, owner and group (:func:`gpuadvise.fileio.rewrite_file`), and only the lines that
changed: each other line keeps its bytes and its own ending, and bytes that are not UTF-8 are
kept (:mod:`gpuadvise.source.raw`). A failure (a read-only or append-only file, a full disk, the
source removed meanwhile) is one line, and the file is as it was.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gpuadvise.analyze.options import KernelOptions
from gpuadvise.errors import GpuAdviseError, UsageError
from gpuadvise.ptx.errors import EmulationError

# Without a GPU, a fix whose estimate is an upper bound at or below this is not applied: it
# cannot gain. Others (a point, no estimate, a higher bound) are applied once the emulator verified
# them, and the result says they were not measured.
NO_GPU_MAX_BOUND = 1.0
# Steps at most (each re-verifies and re-times the composition).
MAX_STEPS = 12
# Without a GPU, a variant whose partial outputs are checked as totals (Variant.totals) is run
# on the CPU emulator over both whole launches, when each has at most this many CTAs.
MAX_EMULATED_CTAS = 8192

StepStatus = Literal["applied", "rejected"]


@dataclass(frozen=True)
class FixStep:
    """One fix tried on top of the steps kept before it. ``measurement``: the composition with
    this step against the composition before it (None without a GPU or when it failed);
    ``reason``: why it was rejected, or how it was checked."""

    rule: str
    line: int | None
    description: str
    safety: str
    status: StepStatus
    reason: str
    label: str | None = None
    measurement: Any = None
    launch: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "line": self.line,
            "description": self.description,
            "label": self.label,
            "safety": self.safety,
            "status": self.status,
            "reason": self.reason,
            "measurement": None if self.measurement is None else self.measurement.to_dict(),
            "launch": None if self.launch is None else dict(self.launch),
        }


@dataclass(frozen=True)
class FixResult:
    """The composed fixes of one kernel. ``combined``: the final source timed against the
    original (a Measurement; None without a GPU or when nothing was applied); ``measured``:
    whether a GPU decided the steps; ``launch``: the final launch change (grid/block/dynamic
    shared memory) when a step changed it, with ``spec_text`` the launch spec that runs it."""

    source: Path
    kernel: str
    original: str
    fixed: str
    steps: tuple[FixStep, ...]
    measured: bool
    combined: Any = None
    launch: Mapping[str, Any] | None = None
    spec_text: str | None = None
    spec_path: Path | None = None
    notes: tuple[str, ...] = ()
    # the source's bytes when it was read (None: read again when writing)
    raw: bytes | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def applied(self) -> tuple[FixStep, ...]:
        return tuple(s for s in self.steps if s.status == "applied")

    @property
    def changed(self) -> bool:
        return self.fixed != self.original or self.launch is not None

    @property
    def diff(self) -> str | None:
        from gpuadvise.source.edit import unified_diff

        return unified_diff(
            self.original.split("\n"), self.fixed.split("\n"), _display_path(self.source)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "kernel": self.kernel,
            "measured": self.measured,
            "steps": [s.to_dict() for s in self.steps],
            "combined": None if self.combined is None else self.combined.to_dict(),
            "launch": None if self.launch is None else dict(self.launch),
            "spec_path": None if self.spec_path is None else str(self.spec_path),
            "diff": self.diff,
            "notes": list(self.notes),
        }


def _display_path(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p.resolve())


# ---------------------------------------------------------------------------------------------
# Which fixes


def fix_candidates(
    findings: Sequence[Any], unsafe: bool, measured: bool
) -> tuple[list[Any], list[str]]:
    """The findings whose variant ``--fix`` may apply, in rank order, and a note per finding
    with a variant that stays advice (why)."""
    take: list[Any] = []
    advice: list[str] = []
    for f in findings:
        v = f.variant
        if v is None or f.is_error:
            continue
        why = _not_a_fix(f, v, unsafe, measured)
        if why is None:
            take.append(f)
        else:
            advice.append(f"{f.rule} (line {f.line}): {why}")
    return take, advice


def _not_a_fix(f: Any, v: Any, unsafe: bool, measured: bool) -> str | None:
    why = _never_a_fix(f, v, unsafe, measured)
    if why is not None or measured:
        return why
    est = f.estimated_speedup
    if est is not None and est.kind == "upper-bound" and est.like_for_like is not None:
        if est.like_for_like <= NO_GPU_MAX_BOUND:
            return (
                f"{est.like_for_like:.2f}x by its estimate (at most {est.speedup:.2f}x): nothing "
                "to gain without a GPU to say"
            )
    return None


def _never_a_fix(f: Any, v: Any, unsafe: bool, measured: bool) -> str | None:
    """:func:`_not_a_fix` without a GPU's estimate test: why ``v`` is no fix whatever the
    finding's estimate (the variant traces of :func:`gpuadvise.analyze.run.run_analysis` change
    only estimates, and set ``needs_measurement``, never clear it)."""
    if v.proxy is not None:
        return "a layout change: the proxy measures it, the host code must change (advice)"
    if not v.diff:
        if v.nvcc_flags or v.defines:
            flags = " ".join((*v.nvcc_flags, *(f"-D{d}" for d in v.defines)))
            return f"a build change ({flags}): add it to your build (advice)"
        return "no source change to apply (advice)"
    if v.launch_specific and not unsafe:
        return (
            "launch-specific: it writes this launch into the kernel (use --unsafe-fixes to "
            "apply it too)"
        )
    if v.safety == "display-only":
        if not unsafe:
            return "display-only (use --unsafe-fixes to apply it too)"
        if v.launch:
            return "display-only with a launch change: it reaches into host code (advice)"
    if measured:
        m = f.measured_speedup
        if f.verified is not True or m is None:
            return "not verified on the GPU"
        if not (m.ci_low if m.ci_low is not None else m.speedup) > 1.0:
            return f"measured {m.speedup:.2f}x: not faster"
        return None
    if v.launch and not v.totals and not same_ctas(v.launch):
        return "a launch change: its safety needs a GPU measurement"
    if v.needs_measurement:
        return "whether it pays depends on the registers ptxas allots: it needs a GPU measurement"
    return None


def may_offer_new(findings: Sequence[Any], tried: set[tuple[str, str]], unsafe: bool) -> bool:
    """Whether, without a GPU, ``findings`` (the rules' run, before their variants are traced
    for their points) may offer a fix not in ``tried`` once they are: a finding whose variant
    :func:`_never_a_fix` takes. False means :func:`fix_candidates` offers none new whatever the
    variant traces say, so they need not run."""
    for f in findings:
        v = f.variant
        if v is None or f.is_error or (f.rule, v.diff) in tried:
            continue
        if _never_a_fix(f, v, unsafe, measured=False) is None:
            return True
    return False


def same_ctas(launch: Mapping[str, Any]) -> bool:
    """A launch change that keeps the grid and the block (GA201's grown dynamic shared memory):
    the same CTAs run the same threads, so both whole launches emulated give its outputs."""
    return not set(launch) & {"grid", "block"}


# ---------------------------------------------------------------------------------------------
# Composition


@dataclass
class _Composer:
    """The composition so far: its source text and launch, and the options that build it."""

    original_opts: KernelOptions
    source: Path
    text: str
    launch: dict[str, Any]
    tmp: Path
    steps: int = 0
    # outputs of per-block partials whose count the applied launch changes (Variant.totals)
    totals: dict[str, str] = dataclasses.field(default_factory=dict)
    # the user's rule choice (--select, --ignore, --rules-dir), kept in every round
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    rules_dirs: tuple[str, ...] = ()

    def options_for(self, text: str, launch: Mapping[str, Any]) -> KernelOptions:
        """Options that build ``text`` with ``launch`` (the spec: the original's)."""
        from gpuadvise.analyze.measure import copy_options, launch_changes

        opts = copy_options(self.original_opts, self._file_of(text))
        return dataclasses.replace(opts, **launch_changes(launch))

    def _file_of(self, text: str) -> Path:
        """A file holding ``text``, named as the source: the candidate's file in the compile
        cache (named by its content, as the analysis services write a candidate: each text is
        compiled once, however many steps and runs build it), or with ``--no-cache`` (or a cache
        that cannot be written) a new folder of ``tmp`` for each step."""
        if not self.original_opts.no_cache:
            from gpuadvise.analyze.services import candidate_path, write_candidate
            from gpuadvise.toolchain import cache_root

            try:
                path = candidate_path(cache_root(), text, self.source.name)
                write_candidate(path, text)
            except (OSError, GpuAdviseError):
                pass
            else:
                return path
        folder = self.tmp / f"step{self.steps}"
        self.steps += 1
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / self.source.name
        path.write_text(text)
        return path


def _apply(text: str, diff: str) -> str | None:
    from gpuadvise.source.patch import PatchError, apply_unified_diff

    try:
        return apply_unified_diff(text, diff)
    except PatchError:
        return None


def _regenerate(opts: KernelOptions, rule: str, line: int | None) -> Any | None:
    """The variant ``rule`` proposes on the composed source ``opts`` (the diff of the original
    analysis no longer applies there): the finding of that rule nearest ``line``."""
    from gpuadvise.analyze.options import AnalyzeSettings
    from gpuadvise.analyze.run import run_analysis

    try:
        done = run_analysis(opts, AnalyzeSettings(select=(rule,), measure=False))
    except GpuAdviseError:
        return None
    found = [f for f in done.rules.findings if f.rule == rule and f.variant and f.variant.diff]
    if not found:
        return None
    return min(found, key=lambda f: abs((f.line or 0) - (line or 0))).variant


def _findings_of(
    comp: _Composer, measured: bool, tried: set[tuple[str, str]], unsafe: bool
) -> tuple[Any, ...]:
    """The ranked findings of the composition so far (measured on a GPU when ``measured``).
    Without a GPU their variants are traced for their points only when one may be a fix not in
    ``tried`` (:func:`may_offer_new`): otherwise the points could change no fix taken, and the
    findings returned are the rules' own (no fix in them is new either)."""
    from gpuadvise.analyze.options import AnalyzeSettings
    from gpuadvise.analyze.run import run_analysis

    settings = AnalyzeSettings(
        select=comp.select, ignore=comp.ignore, rules_dirs=comp.rules_dirs, measure=measured
    )
    wanted = None if measured else (lambda run: may_offer_new(run.findings, tried, unsafe))
    try:
        done = run_analysis(
            comp.options_for(comp.text, comp.launch), settings, points_wanted=wanted
        )
    except GpuAdviseError:
        return ()
    return tuple(done.rules.findings)


def _step_variant(
    diff: str | None,
    launch: Mapping[str, Any] | None,
    totals: Mapping[str, str] | None = None,
) -> Any:
    from gpuadvise.rules import Variant

    return Variant(
        "automatic-and-verified",
        "composed fixes",
        diff=diff,
        launch=launch or None,
        totals=dict(totals) if totals else None,
    )


def compose_fixes(
    opts: KernelOptions,
    findings: Sequence[Any],
    *,
    unsafe: bool = False,
    measured: bool,
    analysis: Any = None,
    timeout_s: float = 60.0,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    rules_dirs: tuple[str, ...] = (),
) -> FixResult:
    """Compose the fixes of ``findings`` (ranked, measured when ``measured``) on the kernel of
    ``opts`` (see the module docstring). ``analysis``: the KernelAnalysis (its services emulate
    the candidates when there is no GPU). ``select``, ``ignore``, ``rules_dirs``: the user's
    rule choice, which every round's analysis of the composed kernel keeps."""
    if not opts.source:
        raise UsageError("--fix needs a kernel source file", "give the .cu file to fix")
    source = Path(opts.source)
    read = _read_source(source)
    original = read.text
    notes: list[str] = []
    steps: list[FixStep] = []
    tried: set[tuple[str, str]] = set()
    with tempfile.TemporaryDirectory(prefix="gpuadvise-fix-") as tmpdir:
        comp = _Composer(
            opts, source, original, {}, Path(tmpdir), select=select, ignore=ignore,
            rules_dirs=rules_dirs,
        )  # fmt: skip
        # rounds: the findings' fixes composed, then the composed kernel analyzed again, since
        # a fix can make the next one possible (interleaved -> sequential -> shuffles)
        for _round in range(MAX_STEPS):
            take, advice = fix_candidates(findings, unsafe, measured)
            take = [f for f in take if (f.rule, f.variant.diff) not in tried]
            tried.update((f.rule, f.variant.diff) for f in take)
            if _round == 0:
                notes += [f"advice, not applied: {a}" for a in advice]
            if not take or len(steps) >= MAX_STEPS:
                break
            if measured:
                new = _compose_measured(comp, take[: MAX_STEPS - len(steps)], timeout_s)
            else:
                new = _compose_emulated(comp, take[: MAX_STEPS - len(steps)], analysis)
            steps += new
            if not any(s.status == "applied" for s in new) or len(steps) >= MAX_STEPS:
                break  # (at MAX_STEPS the next round would take nothing: no analysis for it)
            findings = _findings_of(comp, measured, tried, unsafe)
        if steps and not measured:
            notes.append(
                "no GPU: nothing measured; fixes applied only where the CPU emulator found "
                "the outputs of the traced CTAs equal to the original's (of both whole "
                "launches for a launch change, partials checked as totals)"
            )
        combined = None
        if measured and any(s.status == "applied" for s in steps):
            combined = _combined(comp, original, timeout_s)
    launch = dict(comp.launch) or None
    spec_text = spec_path = None
    if launch is not None:
        spec_path, spec_text = fixed_spec(opts, launch)
        notes.append(
            f"the launch changed ({_launch_text(launch)}): change the host code's launch to "
            "match; the launch spec that runs the fixed kernel is "
            f"{spec_path.name} (written with --fix)"
        )
    return FixResult(
        source=source,
        kernel=opts.kernel or "",
        original=original,
        fixed=comp.text,
        steps=tuple(steps),
        measured=measured,
        combined=combined,
        launch=launch,
        spec_text=spec_text,
        spec_path=spec_path,
        notes=tuple(notes),
        raw=read.raw,
    )


def _read_source(source: Path) -> Any:
    """The source's bytes and text (:class:`gpuadvise.source.raw.SourceBytes`); a one-line error
    when it cannot be read."""
    from gpuadvise.source.raw import read_source

    try:
        return read_source(source)
    except FileNotFoundError:
        raise UsageError(f"{source} does not exist (any more)", "check the path") from None
    except OSError as err:
        raise UsageError(
            f"--fix cannot read {source} ({err.strerror or err})", "check the file"
        ) from None


def _compose_measured(comp: _Composer, take: Sequence[Any], timeout_s: float) -> list[FixStep]:
    from gpuadvise.analyze.measure import measure_variant
    from gpuadvise.source.edit import unified_diff

    steps: list[FixStep] = []
    for f in take[:MAX_STEPS]:
        v = f.variant
        new = _apply(comp.text, v.diff)
        if new is None:
            regen = _regenerate(comp.options_for(comp.text, comp.launch), f.rule, f.line)
            new = None if regen is None else _apply(comp.text, regen.diff)
            if new is None:
                steps.append(_step(f, "rejected", "no longer applies after the fixes before it"))
                continue
            v = regen
        launch = {**comp.launch, **dict(v.launch or {})}
        before = comp.options_for(comp.text, comp.launch)
        diff = unified_diff(comp.text.split("\n"), new.split("\n"), comp.source.name)
        trial = measure_variant(
            _live(before), _step_variant(diff, v.launch, v.totals if v.launch else None), timeout_s
        )
        m = trial.measurement
        if m is None:
            steps.append(_step(f, "rejected", trial.note or "could not be measured"))
            continue
        if not (m.ci_low if m.ci_low is not None else m.speedup) > 1.0:
            steps.append(
                _step(
                    f, "rejected", f"on top of the fixes before it: {m.speedup:.2f}x, not faster", m
                )
            )
            continue
        comp.text, comp.launch = new, launch
        how = "verified and faster on top of the fixes before it"
        if v.totals and v.launch:
            comp.totals.update(v.totals)
            how += (
                f" ({', '.join(sorted(v.totals))} checked as totals of the partials; the host "
                "must combine the gridDim.x partials of the new launch)"
            )
        steps.append(_step(f, "applied", how, m))
    return steps


def _compose_emulated(comp: _Composer, take: Sequence[Any], analysis: Any) -> list[FixStep]:
    steps: list[FixStep] = []
    if not take:
        return steps
    mem = None if analysis is None else analysis.memory
    if mem is None or mem.trace is None or not mem.trace.ctas:
        return [
            _step(f, "rejected", "no trace to verify it on (run without --no-trace)") for f in take
        ]
    ctas = tuple(mem.trace.ctas)
    try:
        # the original run again on exactly the CTAs each candidate runs: the analysis's own
        # outputs may hold writes of CTAs its trace does not list (a batch dropped when the
        # default sample's trace overflowed), and a padding that is correct was rejected for
        # elements only those CTAs wrote ("expected 0.0, got nan")
        reference = _changed_outputs(_emulated(analysis, None, ctas))
    except GpuAdviseError as exc:
        failed = f"the original could not be emulated: {exc.one_line()}"
        return [_step(f, "rejected", failed) for f in take]
    for f in take[:MAX_STEPS]:
        new = _apply(comp.text, f.variant.diff)
        v = f.variant
        if new is None:
            regen = _regenerate(comp.options_for(comp.text, comp.launch), f.rule, f.line)
            new = None if regen is None or regen.launch else _apply(comp.text, regen.diff)
            if new is None:
                steps.append(_step(f, "rejected", "no longer applies after the fixes before it"))
                continue
            v = regen
        if v.launch or comp.launch:
            # a totals variant (fix_candidates), or any step after one: the traced CTAs of the
            # analysed launch are not the composition's, so both whole launches are emulated
            before = comp.options_for(comp.text, comp.launch)
            after = comp.options_for(new, {**comp.launch, **dict(v.launch or {})})
            try:
                why, checked = emulated_totals_check(before, after, dict(v.totals or {}), analysis)
            except GpuAdviseError as exc:
                steps.append(_step(f, "rejected", f"could not be emulated: {exc.one_line()}"))
                continue
            if why is not None:
                steps.append(_step(f, "rejected", why))
                continue
            comp.text, comp.launch = new, {**comp.launch, **dict(v.launch or {})}
            comp.totals.update(v.totals or {})
            host = (
                "; the host must combine the gridDim.x partials of the new launch"
                if v.totals
                else ""
            )
            steps.append(_step(f, "applied", f"{checked}{host}; not measured"))
            continue
        try:
            bad = _emulated_difference(analysis, reference, new, ctas)
        except GpuAdviseError as exc:
            steps.append(_step(f, "rejected", f"could not be emulated: {exc.one_line()}"))
            continue
        if bad is not None:
            steps.append(
                _step(
                    f,
                    "rejected",
                    f"outputs of the traced CTAs differ on the CPU emulator ({bad}); a fix "
                    "that moves work between CTAs needs a GPU run of the whole launch",
                )
            )
            continue
        comp.text = new
        n = len(ctas)
        steps.append(
            _step(f, "applied", f"outputs equal on the CPU emulator ({n} CTAs); not measured")
        )
    return steps


def emulate_launch(opts: KernelOptions) -> tuple[dict[str, Any], int, int]:
    """The output buffers after emulating every CTA of the launch ``opts`` builds, its
    ``gridDim.x`` and its CTA count (UsageError when it has more than MAX_EMULATED_CTAS)."""
    from gpuadvise.analyze.models import resolve_launch
    from gpuadvise.analyze.options import build
    from gpuadvise.toolchain import compile_source, find_toolchain, select_compiled_kernel
    from gpuadvise.trace.emulate import emulate

    spec, choice, options = build(opts)
    grid = spec.launch.grid.as_tuple()
    ctas = int(grid[0]) * int(grid[1]) * int(grid[2])
    if ctas > MAX_EMULATED_CTAS:
        raise UsageError(
            f"the launch has {ctas} CTAs, more than the {MAX_EMULATED_CTAS} the CPU emulator "
            "runs to check totals",
            "measure on a GPU, or analyze a smaller problem size",
        )
    tc = find_toolchain(opts.nvcc)
    module = compile_source(Path(spec.source), options, tc, kernels=[spec.kernel])
    kernel = select_compiled_kernel(module, spec.kernel)
    launch = resolve_launch(spec, kernel, options, tc)
    emu = emulate(
        module,
        kernel,
        launch,
        choice.device,
        sample_ctas="all",
        trace=False,
        sample_loops=False,
        models=False,
    )
    return dict(emu.outputs), int(grid[0]), ctas


def emulated_totals_check(
    before: KernelOptions,
    after: KernelOptions,
    totals: Mapping[str, str],
    analysis: Any = None,
) -> tuple[str | None, str]:
    """Both whole launches run on the CPU emulator and their outputs compared, those in
    ``totals`` (name -> combine op) as totals of the partials each grid writes
    (:func:`gpuadvise.runner.verify.compare_outputs`). Returns (why they differ, or None; what
    was checked)."""
    from gpuadvise.runner.verify import compare_outputs

    try:
        ref, grid_a, ctas_a = emulate_launch(before)
        out, grid_b, ctas_b = emulate_launch(after)
    except UsageError as exc:
        return f"not verified without a GPU: {exc.one_line()}", ""
    rtol = analysis.spec.rtol if analysis is not None else 1e-5
    atol = analysis.spec.atol if analysis is not None else 1e-8
    names = [n for n in ref if n in out]
    comps = compare_outputs(ref, out, names, rtol, atol, totals, (grid_a, grid_b))
    bad = next((c for c in comps if not c.ok), None)
    if bad is not None:
        return f"outputs differ on the CPU emulator (whole launches): {bad.message}", ""
    shown = "; ".join(c.message for c in comps if c.name in totals)
    checked = (
        f"outputs equal on the CPU emulator over both whole launches ({ctas_a} and {ctas_b} CTAs)"
    )
    if totals:
        checked += f", {', '.join(sorted(totals))} checked as totals ({shown})"
    return None, checked


def _emulated(analysis: Any, text: str | None, ctas: Sequence[int]) -> Any:
    """The emulation of exactly the CTAs ``ctas`` of ``analysis``'s launch on ``text`` (None:
    the analysed source), without a trace; the baseline and every candidate are compared on
    outputs made this way, from the same CTAs."""
    from gpuadvise.analyze.services import AnalysisServices

    # every loop iteration runs (sampled loops leave outputs that are not the kernel's)
    emu = AnalysisServices(analysis).emulate_candidate(
        text, ctas, trace=False, sample_loops=False, models=False
    )
    if tuple(emu.ctas_run) != tuple(sorted(set(ctas))):
        raise EmulationError(
            f"the emulator ran {len(emu.ctas_run)} CTAs where {len(ctas)} were asked for",
            "verify the fix on a GPU",
        )
    return emu


def _changed_outputs(emu: Any) -> dict[str, Any] | None:
    """The elements each output of ``emu`` changed, and their values (None: not known)."""
    if emu.changes is None:
        return None
    return {name: emu.changes.changes(name) for name in emu.outputs}


def _emulated_difference(
    analysis: Any, reference: dict[str, Any] | None, text: str, ctas: Sequence[int]
) -> str | None:
    """The first output that the candidate ``text`` computes differently from the analysed
    source on ``ctas`` (None: none does), as :func:`_first_difference` finds it on the whole
    buffers. ``reference``: the analysed source's changed elements (:func:`_changed_outputs`).

    The elements neither run changed hold the same start data in both, and equal bytes always
    compare equal, so the elements either run changed decide: the whole buffers (two copies of
    each and every page of its heap: 4 GB for HeCBench nw's 1 GiB matrix) are made only to name
    a difference found there, in the words the whole comparison gives."""
    import numpy as np

    from gpuadvise.arrays import distinct
    from gpuadvise.runner.verify import compare

    emu = _emulated(analysis, text, ctas)
    rtol, atol = analysis.spec.rtol, analysis.spec.atol
    if reference is not None and emu.changes is not None:
        differs = False
        for name, ref in reference.items():
            if name not in emu.outputs:
                differs = True
                break
            new = emu.changes.changes(name)
            # distinct by one sort: np.union1d's hash table took 10 of 23 s on HeCBench rmsnorm
            p = distinct(np.concatenate([ref.positions, new.positions]))
            start = emu.changes.start_values(name, p)
            want, got = start.copy(), start.copy()
            want[np.searchsorted(p, ref.positions)] = ref.after
            got[np.searchsorted(p, new.positions)] = new.after
            if not compare(name, want, got, rtol, atol).ok:
                differs = True
                break
        if not differs:
            return None
    outputs = dict(emu.outputs)
    del emu
    return _first_difference(dict(_emulated(analysis, None, ctas).outputs), outputs, rtol, atol)


def _first_difference(
    a: Mapping[str, Any], b: Mapping[str, Any], rtol: float, atol: float
) -> str | None:
    """The first output buffer of ``b`` that differs from ``a``'s, as the GPU measurement
    compares outputs (:func:`gpuadvise.runner.verify.compare`, the spec's tolerances)."""
    from gpuadvise.runner.verify import compare

    for name, x in a.items():
        y = b.get(name)
        if y is None:
            return f"buffer {name} is gone"
        c = compare(name, x, y, rtol, atol)
        if not c.ok:
            return c.message
    return None


def _live(opts: KernelOptions) -> KernelOptions:
    from gpuadvise.analyze.prepare import live_options

    return live_options(opts)


def _combined(comp: _Composer, original: str, timeout_s: float) -> Any:
    """The final composition timed against the original (its Measurement), or a UsageError
    naming why the combination could not be confirmed (then nothing is written)."""
    from gpuadvise.analyze.measure import measure_variant
    from gpuadvise.source.edit import unified_diff

    base = comp.options_for(original, {})
    diff = unified_diff(original.split("\n"), comp.text.split("\n"), comp.source.name)
    trial = measure_variant(
        _live(base), _step_variant(diff, comp.launch or None, comp.totals), timeout_s
    )
    if trial.measurement is None:
        raise UsageError(
            f"the combined fixes could not be confirmed against the original: {trial.note}",
            "nothing was written; apply the fixes one at a time (--write-variants)",
        )
    return trial.measurement


def _step(f: Any, status: StepStatus, reason: str, m: Any = None) -> FixStep:
    v = f.variant
    return FixStep(
        rule=f.rule,
        line=f.line,
        description=v.description,
        safety=v.safety,
        status=status,
        reason=reason,
        label=v.label,
        measurement=m,
        launch=None if not v.launch else dict(v.launch),
    )


# ---------------------------------------------------------------------------------------------
# The launch spec of a fixed kernel


def _launch_text(launch: Mapping[str, Any]) -> str:
    parts = []
    for key in ("grid", "block"):
        if key in launch:
            parts.append(f"{key} " + "x".join(str(int(v)) for v in launch[key]))
    if "dynamic_smem_bytes" in launch:
        parts.append(f"dynamic shared memory {int(launch['dynamic_smem_bytes'])} B")
    return ", ".join(parts)


def fixed_spec(opts: KernelOptions, launch: Mapping[str, Any]) -> tuple[Path, str]:
    """The path (beside the source) and text of the launch spec that runs the fixed kernel: the
    spec the analysis read, with its grid/block/dynamic_smem keys replaced."""
    import re

    from gpuadvise.spec.kernel_spec import find_spec_for

    source = Path(opts.source or "")
    kernel = (opts.kernel or source.stem).split("<")[0].split("::")[-1].strip()
    spec = Path(opts.spec) if opts.spec else find_spec_for(source, opts.kernel)
    text = spec.read_text() if spec is not None else f'source = "{source.name}"\n'
    values = {
        "grid": "grid" in launch and _dims(launch["grid"]),
        "block": "block" in launch and _dims(launch["block"]),
        "dynamic_smem": "dynamic_smem_bytes" in launch and str(int(launch["dynamic_smem_bytes"])),
    }
    lines = text.split("\n")
    first_table = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("[")), len(lines))
    head, tail = lines[:first_table], lines[first_table:]
    for key, value in values.items():
        if not value:
            continue
        pat = re.compile(rf"^\s*{key}\s*=")
        new = f"{key} = {value}"
        idx = next((i for i, ln in enumerate(head) if pat.match(ln)), None)
        if idx is None:
            head.append(new)
        else:
            head[idx] = new
    if not any(re.match(r"^\s*kernel\s*=", ln) for ln in head) and opts.kernel:
        head.append(f"kernel = {_toml_str(opts.kernel)}")
    if not any(re.match(r"^\s*source\s*=", ln) for ln in head):
        head.insert(0, f"source = {_toml_str(source.name)}")
    header = "# written by gpuadvise analyze --fix: the launch of the fixed kernel"
    body = "\n".join([header, *head, *tail])
    return source.parent / f"{kernel}.fixed.toml", body if body.endswith("\n") else body + "\n"


def _dims(v: Sequence[int]) -> str:
    vals = [int(x) for x in v]
    while len(vals) > 1 and vals[-1] == 1:
        vals.pop()
    return str(vals[0]) if len(vals) == 1 else f'"{"x".join(str(x) for x in vals)}"'


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------------------------
# Writing


def write_fix(result: FixResult) -> list[Path]:
    """Write the fixed source over the user's and, when the launch changed, the new spec beside
    it (never over a file gpuadvise did not write). Only the changed lines of the source change
    (their neighbours' line endings, the bytes that were not UTF-8 kept), written where the file
    is (a link followed, hard links kept), with its mode and owner. Returns the files written;
    any failure is a one-line UsageError and leaves the source as it was."""
    from gpuadvise.fileio import rewrite_file, write_atomic
    from gpuadvise.source.raw import SourceBytes

    written: list[Path] = []
    if result.spec_text is not None and result.spec_path is not None:
        p = result.spec_path
        if p.exists() and "written by gpuadvise analyze --fix" not in p.read_text(errors="replace"):
            raise UsageError(
                f"--fix would overwrite {p}, which gpuadvise did not write",
                "move that file away, or apply the launch change by hand",
            )
    if result.fixed != result.original:
        try:
            now = SourceBytes(result.source.read_bytes())
        except FileNotFoundError:
            raise UsageError(
                f"{result.source} was removed during the analysis",
                "nothing was written; restore it and run gpuadvise analyze --fix again",
            ) from None
        except OSError as err:
            raise UsageError(
                f"--fix cannot read {result.source} ({err.strerror or err})",
                "nothing was written; check the file",
            ) from None
        changed = now.raw != result.raw if result.raw is not None else now.text != result.original
        if changed:
            raise UsageError(
                f"{result.source} changed during the analysis",
                "run gpuadvise analyze --fix again",
            )
        try:
            rewrite_file(result.source, now.encode(result.fixed))
        except OSError as err:
            raise _write_error(result.source, err) from None
        written.append(result.source)
    if result.spec_text is not None and result.spec_path is not None:
        try:
            write_atomic(result.spec_path, result.spec_text)
        except OSError as err:
            raise _write_error(result.spec_path, err) from None
        written.append(result.spec_path)
    return written


def _write_error(path: Path, err: OSError) -> UsageError:
    import errno

    why = err.strerror or str(err)
    if err.errno == errno.ENOSPC:
        hint = "free some space and run it again, or apply the change by hand (--diff)"
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = (
            "make it writable (chmod u+w; chattr -a/-i for an append-only or immutable file), "
            "or apply the change by hand (--diff)"
        )
    else:
        hint = "apply the change by hand (--diff)"
    return UsageError(f"--fix cannot write {path} ({why}); it was left as it was", hint)

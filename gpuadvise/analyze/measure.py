"""The measurement stage of ``analyze``: build each finding's variants, check that their outputs
equal the baseline's, time them A/B on the GPU, and attach the measured speedup with its interval.

What is measured:

- compile-time changes (nvcc flags, defines: GA101's register cap) and source diffs (applied to a
  temporary copy of the source, never to the user's file; a diff a rule marks display-only is
  still only *shown* as a fix, but measuring it tells the user what it is worth);
- proxies (GA301/GA302/GA305's layout changes): the two kernels the rule synthesized, ``before``
  against ``after``, verified against each other; the measurement is labelled ``proxy``. The
  user's kernel is timed alone in the same stage (``Measurement.kernel_ms``): a proxy whose
  baseline runs more than ``PROXY_TOLERANCE`` (10%) away from the kernel's own time does not
  reproduce it, so its speedup is not the kernel's (issue 29: AoS-to-SoA proxies whose baseline
  ran 0.33 ms where the kernel runs 0.45 ms measured 22-33% below the real fix); the trial keeps
  it and says so, and the finding is not ranked by it;
- a launch sequence replayed as a CUDA graph (GA501: ``launch={"graph": True}``) against the
  same launches from the stream;
- every candidate of a finding (``Variant.alternatives``: GA304's tile sizes): the fastest
  verified one becomes the finding's variant, and every candidate's result is listed
  (``Finding.trials``).

A variant that fails to compile, to run or to verify is reported as such and never ranked by a
speedup. A launch change (GA103's block shapes) is measured like any variant: its outputs must
equal the kernel's, which holds only when the kernel's work does not depend on the launch (bounds
checks, grid-stride loops); when they differ the trial says so and nothing is ranked. A finding
marked ``recommend_only_if_faster`` by its rule (GA305: on modern GPUs
L1 often serves the reuse a shared tile would) is demoted to a note when the measured gain's 95%
interval does not lie above 1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from gpuadvise.analyze.options import KernelOptions
from gpuadvise.errors import GpuAdviseError

log = logging.getLogger(__name__)

PROXY_TOLERANCE = 0.10
"""How far a proxy's baseline may run from the kernel's own time for its speedup to stand for
the kernel's (a fraction of the kernel's time)."""


def proxy_refused(m: Any) -> str | None:
    """Why a proxy measurement does not stand for the kernel's speedup (its baseline more than
    :data:`PROXY_TOLERANCE` away from the kernel's own time), or None when it does, or when it
    is no proxy or the kernel's time is not known."""
    off = m.proxy_off
    if off is None or abs(off) <= PROXY_TOLERANCE:
        return None
    return (
        f"the proxy's baseline ran {m.baseline_ms:.3g} ms where the kernel runs "
        f"{m.kernel_ms:.3g} ms ({off:+.0%}, more than {PROXY_TOLERANCE:.0%} away): it does not "
        f"reproduce the kernel's time, so its {m.speedup:.2f}x is the pattern's, not the "
        "kernel's"
    )


def measurable(variant: Any) -> bool:
    """Whether the measurement stage can build and time this variant."""
    if variant.proxy is not None:
        return True
    return bool(variant.diff or variant.nvcc_flags or variant.defines or variant.launch)


def launch_changes(launch: Any) -> dict[str, Any]:
    """The KernelOptions fields a variant's ``launch`` sets (grid, block, dynamic shared memory)."""
    changes: dict[str, Any] = {}
    launch = launch or {}
    for key in ("grid", "block"):
        if key in launch:
            changes[key] = "x".join(str(int(v)) for v in launch[key])
    if "dynamic_smem_bytes" in launch:
        changes["dynamic_smem"] = str(int(launch["dynamic_smem_bytes"]))
    return changes


def copy_options(opts: KernelOptions, path: Path) -> KernelOptions:
    """``opts`` building the rewritten copy ``path`` of its source: the original folder stays on
    the include path (the user's headers), and the launch spec stays the original's."""
    src = Path(opts.source or "")
    spec = opts.spec
    if spec is None:
        from gpuadvise.spec.kernel_spec import find_spec_for

        found = find_spec_for(src, opts.kernel)
        spec = None if found is None else str(found)
    return dataclasses.replace(
        opts, source=str(path), include=(*opts.include, str(src.resolve().parent)), spec=spec
    )


def variant_options(opts: KernelOptions, variant: Any, tmp: Path) -> KernelOptions:
    """The options that build ``variant`` of the kernel ``opts`` describes (files in ``tmp``)."""
    changes = launch_changes(variant.launch)
    if variant.nvcc_flags:
        changes["nvcc_flags"] = (*opts.nvcc_flags, *variant.nvcc_flags)
    if variant.defines:
        changes["defines"] = (*opts.defines, *variant.defines)
    if variant.diff:
        from gpuadvise.source.patch import apply_unified_diff

        src = Path(opts.source or "")
        patched = tmp / src.name
        patched.write_text(apply_unified_diff(src.read_text(), variant.diff))
        opts = copy_options(opts, patched)
    return dataclasses.replace(opts, **changes)


def write_proxy(proxy: Any, folder: Path) -> tuple[Path, Path, Path]:
    """The proxy's source and its two launch specs, written to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "proxy.cu"
    src.write_text(proxy.source)
    before, after = folder / "before.toml", folder / "after.toml"
    before.write_text(proxy.spec_before)
    after.write_text(proxy.spec_after)
    return src, before, after


def _proxy_options(opts: KernelOptions, proxy: Any, tmp: Path) -> tuple[KernelOptions, ...]:
    src, before, after = write_proxy(proxy, tmp)
    base = KernelOptions(source=str(src), gpu=opts.gpu, arch=opts.arch, nvcc=opts.nvcc)
    return (
        dataclasses.replace(base, kernel=proxy.before, spec=str(before)),
        dataclasses.replace(base, kernel=proxy.after, spec=str(after)),
    )


def _merge_buffers(a: Any, b: Any) -> tuple[Any, ...] | None:
    """The buffers of two prepared launches, by name; None when a shared name differs."""
    out = {x.name: x for x in a.buffers}
    for x in b.buffers:
        if x.name in out and out[x.name].nbytes != x.nbytes:
            return None
        out.setdefault(x.name, x)
    return tuple(out.values())


class _NotComparable(Exception):
    """A variant whose launches cannot be timed against the baseline's (``verified``: how the
    trial reports it)."""

    def __init__(self, note: str, verified: bool | None) -> None:
        super().__init__(note)
        self.verified = verified


# The measurement's time (issue 17: analyze with every finding measured in at most the time of
# `ncu --set full`). Each finding's candidates race against the baseline in one worker job
# (runner.stats.Race) and stop once the intervals decide; these bound the races that do not.
MEASURE_BUDGET_S = 20.0
"""Wall seconds the measurement stage of one analysis aims at, over all its findings: each
finding's race may take at most its share of what is left (never under ``MIN_RACE_S``)."""
MIN_RACE_S = 0.5
"""The shortest time cap a race gets, however little of the budget is left (enough for the
minimum samples of kernels up to ~10 ms)."""
COMPILE_WORKERS = max(4, min(16, os.cpu_count() or 1))
"""nvcc processes building the candidates of every finding at once, before the first race (4,
up to 16 where there are as many CPUs: reduce2's nine candidates in one round on the GPU
machine's 16 CPUs, not two: the measurement waited 1.35 s for them after the rules, the ninth
compile starting when one of the first eight ended)."""


AHEAD_MIN_CPUS = 4
"""The CPUs this process may run on for :func:`compile_variants_ahead` to compile candidates
before their finding: a speculation is paid in nvcc's CPU while the L2 model's child and the
rules' child run, worth it only where CPUs are to spare (the GPU machine's 16; not a corpus
run's 2 CPUs per job, where the compiles would slow the model they wait beside)."""


def _key(variant: Any) -> str:
    """What identifies a candidate across ``Variant.candidates()`` calls (new objects each)."""
    return repr(dataclasses.replace(variant, alternatives=()))


def _build_key(variant: Any) -> str:
    """What a candidate's build depends on (:func:`_build_candidate`: its diff, nvcc flags,
    defines, launch and proxy; not its description, label or totals): a candidate compiled
    ahead of its finding (:func:`compile_variants_ahead`, GA304's tile sizes before the L2
    model says which is best) is the build of every candidate with the same key."""
    return repr((variant.diff, variant.nvcc_flags, variant.defines, variant.launch, variant.proxy))


@dataclasses.dataclass
class _Built:
    """What building one candidate gave: the prepared launches, or the error that stopped it."""

    value: Any = None
    error: BaseException | None = None


@dataclasses.dataclass
class _Stage:
    """Builds, verifies and times the candidates of an analysis's findings.

    ``max_time_s``: the time cap of one finding's race; ``budget_s`` (None: none): the wall
    seconds the whole stage aims at, shared out between the findings still to measure
    (:meth:`set_share`), and never past ``--time-budget`` (``spec.budget``).
    """

    opts: KernelOptions
    timeout_s: float
    max_time_s: float
    baseline: Any = None
    budget_s: float | None = None
    compile_workers: int = COMPILE_WORKERS
    cap_s: float | None = None  # this finding's race cap (set_share); None: max_time_s
    started: float = dataclasses.field(default_factory=time.monotonic)
    _built: dict[str, _Built] = dataclasses.field(default_factory=dict)  # by _key(variant)
    _baseline_error: BaseException | None = None
    _tmp: Path | None = None
    _kernel_ms: float | None = None
    _kernel_timed: bool = False
    _early: _Early | None = None  # what start_early set up for these options

    def close(self) -> None:
        """Remove the folder of the candidates' sources."""
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        if self._early is not None:
            self._early.close()

    def set_share(self, findings_left: int) -> float:
        """The race cap of the next finding: ``max_time_s``, at most its share of the stage's
        budget left (at least ``MIN_RACE_S``), at most what ``--time-budget`` leaves."""
        from gpuadvise.spec.budget import time_left_s

        cap = self.max_time_s
        if self.budget_s is not None:
            left = self.budget_s - (time.monotonic() - self.started)
            cap = min(cap, max(MIN_RACE_S, left / max(1, findings_left)))
        left_total = time_left_s()
        if left_total is not None:
            cap = min(cap, max(0.0, left_total))
        self.cap_s = cap
        return cap

    def timing(self) -> Any:
        from gpuadvise.runner.job import TimingConfig
        from gpuadvise.runner.stats import RacePolicy

        cap = self.max_time_s if self.cap_s is None else self.cap_s
        race = RacePolicy(min_time_s=min(0.2, cap), max_time_s=cap)
        return TimingConfig(min_samples=10, min_time_s=0.5, max_time_s=cap, race=race)

    def run(self, variant: Any) -> Any:
        """A :class:`Trial` of one candidate."""
        return self.run_all([variant])[0]

    def run_all(self, variants: list[Any]) -> list[Any]:
        """A :class:`Trial` of each candidate (of one finding): those that share the kernel's
        buffers race against it in one worker job; a proxy races against its own ``before``."""
        self.build_all(variants)
        trials: dict[int, Any] = {}
        group: list[tuple[int, Any, Any]] = []
        for i, v in enumerate(variants):
            try:
                a, b = self._pair(v)
            except GpuAdviseError as exc:
                trials[i] = self._trial(v, None, False, f"could not be built: {exc.one_line()}")
                continue
            except _NotComparable as exc:
                trials[i] = self._trial(v, None, exc.verified, str(exc))
                continue
            if a is self.baseline:
                group.append((i, v, b))
            else:
                trials[i] = self._time(a, [(v, b)])[0]
        if group:
            timed = self._time(self.baseline, [(v, b) for _, v, b in group])
            trials.update({i: t for (i, _, _), t in zip(group, timed, strict=True)})
        return [trials[i] for i in range(len(variants))]

    def build_all(self, variants: list[Any]) -> None:
        """Compile the baseline and every candidate not built yet, ``compile_workers`` nvcc
        processes at a time (each candidate in a folder of its own)."""
        import contextvars
        from concurrent.futures import ThreadPoolExecutor

        early = _EARLY.pop(repr(self.opts), None)  # set up ahead (start_early): taken now
        if early is not None:
            self._early = early
        todo = list({_key(v): v for v in variants if _key(v) not in self._built}.values())
        # the baseline also for proxies: the kernel's own time checks that they reproduce it
        need_base = self.baseline is None and self._baseline_error is None
        if not todo:
            return
        if self._early is not None:  # the candidates compiled while the rules ran
            ahead = self._early.take(todo)
            self._built.update(ahead)
            todo = [v for v in todo if _key(v) not in ahead]
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="gpuadvise-variants-"))
        start = len(self._built)

        def build(v: Any, folder: Path) -> _Built:
            folder.mkdir()
            t0 = time.perf_counter()
            try:
                return _Built(self._build(v, folder))
            except (GpuAdviseError, _NotComparable) as exc:
                return _Built(error=exc)
            finally:
                log.info("measure: %s built in %.2f s", v.label or "the variant", _since(t0))

        def base() -> _Built:
            if self._early is not None:  # built, and its data made on the GPU, ahead
                t0 = time.perf_counter()
                ready: _Built = self._early.base.result()
                log.info("measure: waited %.2f s for the kernel set up ahead", _since(t0))
                return ready
            try:  # the timing's own kernels compiled with it, while the candidates are
                return _Built(_prepared(self.opts))
            except GpuAdviseError as exc:
                return _Built(error=exc)

        if not todo and not need_base:
            return
        workers = max(1, min(self.compile_workers, len(todo) + need_base))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            # each task in a copy of this context: the time budget and progress reach it
            base_job = pool.submit(contextvars.copy_context().run, base) if need_base else None
            jobs = [
                pool.submit(contextvars.copy_context().run, build, v, self._tmp / f"v{start + k}")
                for k, v in enumerate(todo)
            ]
            if base_job is not None:
                got = base_job.result()
                self.baseline, self._baseline_error = got.value, got.error
            for v, job in zip(todo, jobs, strict=True):
                self._built[_key(v)] = job.result()

    def _build(self, variant: Any, tmp: Path) -> Any:
        """Compile one candidate (in a pool thread): a proxy's two launches, or the variant's."""
        return _build_candidate(self.opts, variant, tmp)

    def _pair(self, variant: Any) -> tuple[Any, Any]:
        """The two prepared launches to time A/B (_NotComparable: why they cannot be)."""
        built = self._built[_key(variant)]
        if built.error is not None:
            raise built.error
        if variant.proxy is not None:
            a, b = built.value
            buffers = _merge_buffers(a, b)
            if buffers is None:
                raise _NotComparable("the proxies' buffers differ", verified=False)
            return dataclasses.replace(a, buffers=buffers), b
        if self._baseline_error is not None:
            raise self._baseline_error
        a = self.baseline
        if variant.launch and variant.launch.get("graph"):
            # GA501: the same launch sequence, captured once and replayed as a CUDA graph
            from gpuadvise.runner.job import as_graph

            return a, dataclasses.replace(a, launch=as_graph(a.launch, "B"))
        b = built.value
        if [x.nbytes for x in a.buffers] != [x.nbytes for x in b.buffers]:
            raise _NotComparable("the variant takes other buffers", verified=None)
        return a, b

    def kernel_ms(self) -> float | None:
        """The user's kernel's median time, timed alone as the races time it (cold L2), once
        per stage; None when it could not be built or run."""
        if self._kernel_timed:
            return self._kernel_ms
        self._kernel_timed = True
        if self.baseline is None:
            return None
        from gpuadvise.analyze.prepare import time_prepared
        from gpuadvise.runner.job import TimingConfig

        cap = min(1.0, self.max_time_s if self.cap_s is None else self.cap_s)
        timing = TimingConfig(min_samples=10, min_time_s=min(0.2, cap), max_time_s=cap)
        try:
            run = time_prepared(
                [self.baseline], timing, hot=False, timeout_s=self.timeout_s, outputs=False
            )
        except GpuAdviseError:
            return None
        if run.result.ok and run.result.outcomes and len(run.result.outcomes[0].samples_ms) >= 2:
            self._kernel_ms = statistics.median(run.result.outcomes[0].samples_ms)
        return self._kernel_ms

    def _time(self, a: Any, entries: list[tuple[Any, Any]]) -> list[Any]:
        """Trials of ``entries`` (variant, prepared launch), raced against ``a`` in one job.

        A variant that fails on the GPU takes the job's CUDA context with it: it gets the
        failure and the others race again without it (each alone when the culprit is unknown,
        as after a timeout)."""
        from gpuadvise.analyze.prepare import time_prepared

        labelled = [
            dataclasses.replace(
                b,
                launch=dataclasses.replace(
                    b.launch, label=f"B{k}", totals=tuple(sorted((v.totals or {}).items()))
                ),
            )
            for k, (v, b) in enumerate(entries, 1)
        ]
        t0 = time.perf_counter()
        run = time_prepared(
            [a, *labelled],
            self.timing(),
            hot=False,
            timeout_s=self.timeout_s,
            matching=(a.rtol, a.atol),
            outputs=False,  # compared in the worker, once
        )
        result = run.result
        log.info(
            "measure: race of %d in %.2f s (worker: %s)",
            len(labelled),
            _since(t0),
            _worker_times(result),
        )
        if not result.ok:
            why = result.cuda_error or result.error
            labels = [b.launch.label for b in labelled]
            if len(entries) > 1 and result.failed_label in labels:
                bad = labels.index(result.failed_label)
                rest = self._time(a, entries[:bad] + entries[bad + 1 :])
                failed = self._trial(entries[bad][0], None, False, f"failed on the GPU: {why}")
                return [*rest[:bad], failed, *rest[bad:]]
            if len(entries) > 1 and result.failed_label != a.launch.label:
                return [self._time(a, [e])[0] for e in entries]
            return [self._trial(v, None, False, f"failed on the GPU: {why}") for v, _ in entries]
        oa, *obs = result.outcomes
        return [
            self._verify(v, a, b, oa, ob, result.device)
            for (v, _), b, ob in zip(entries, labelled, obs, strict=True)
        ]

    def _verify(self, variant: Any, a: Any, b: Any, oa: Any, ob: Any, device: Any) -> Any:
        """The trial of one variant from its outcome: outputs verified, then the speedup."""
        from gpuadvise.rules.findings import Measurement
        from gpuadvise.runner.stats import speedup_ci
        from gpuadvise.runner.verify import compare_outputs

        got = getattr(ob, "output_names", None)
        names = [x.name for x in a.buffers if x.is_output and x.name in (got or ob.outputs)]
        if not names:
            return self._trial(variant, None, False, "no output buffer to verify")
        compared = getattr(ob, "comparisons", None)
        if compared is not None:  # compared in the worker (Job.return_outputs False)
            comps = [c for c in compared if c.name in names]
        else:
            # a per-block reduction's partials, whose count follows the grid: compared as totals
            grids = (int(a.launch.grid[0]), int(b.launch.grid[0]))
            comps = compare_outputs(
                oa.outputs, ob.outputs, names, a.rtol, a.atol, variant.totals, grids
            )
        bad = next((c for c in comps if not c.ok), None)
        if bad is not None:
            return self._trial(variant, None, False, f"outputs differ: {bad.message}")
        if len(ob.samples_ms) < 2 or len(oa.samples_ms) < 2:
            # verified, but a trial is "verified" only with its measurement (report invariant)
            return self._trial(variant, None, None, "not timed (no time left)")
        totals = [c.message for c in comps if variant.totals and c.name in variant.totals]
        ci = speedup_ci(oa.samples_ms, ob.samples_ms)
        m = Measurement(
            speedup=ci.speedup,
            baseline_ms=statistics.median(oa.samples_ms),
            variant_ms=statistics.median(ob.samples_ms),
            device=str(device.get("name")),
            ci_low=ci.low,
            ci_high=ci.high,
            outputs_match=True,
            samples=min(len(oa.samples_ms), len(ob.samples_ms)),
            kind="proxy" if variant.proxy is not None else "variant",
            label=variant.label,
            stop_reason=ob.stop_reason,
            kernel_ms=self.kernel_ms() if variant.proxy is not None else None,
        )
        note = "outputs checked as totals: " + "; ".join(totals) if totals else None
        return self._trial(variant, m, True, proxy_refused(m) or note)

    @staticmethod
    def _trial(variant: Any, m: Any, verified: bool | None, note: str | None) -> Any:
        from gpuadvise.rules.findings import Trial

        return Trial(variant.label, variant.description, m, verified, note)


def _since(t0: float) -> float:
    return time.perf_counter() - t0


def _worker_times(result: Any) -> str:
    """The worker's own seconds of one job (``Result.timings_s``), for the log."""
    got = getattr(result, "timings_s", None) or {}
    return " ".join(
        f"{k.removesuffix('_s')} {v:.2f}" if k.endswith("_s") else f"{k}={int(v)}"
        for k, v in got.items()
    )


def _build_candidate(opts: KernelOptions, variant: Any, tmp: Path) -> Any:
    """One candidate of the kernel ``opts`` builds, compiled (files in ``tmp``): a proxy's two
    launches, or the variant's (None: a graph replay of the kernel's, nothing to compile)."""
    from gpuadvise.analyze.prepare import prepare

    if variant.proxy is not None:
        a_opts, b_opts = _proxy_options(opts, variant.proxy, tmp)
        return prepare(a_opts, "A"), prepare(b_opts, "B")
    if variant.launch and variant.launch.get("graph"):
        return None  # the baseline's launches replayed as a graph: nothing to compile
    return prepare(variant_options(opts, variant, tmp), "B")


@dataclasses.dataclass
class _Early:
    """What :func:`start_early` set up for one kernel's measurement: the kernel's build
    (``base``, a future: built, its data made in the worker) and the candidates compiled as the
    rules named them (:meth:`submit`), in folders under ``tmp``."""

    opts: KernelOptions
    base: Any  # Future[_Built]
    pool: Any = None  # ThreadPoolExecutor, made at the first candidate
    built: dict[str, Any] = dataclasses.field(default_factory=dict)  # Future[_Built] by _build_key
    tmp: Path | None = None

    def submit(self, findings: Any) -> None:
        """Compile the candidates of ``findings`` (a rule's, just found) in the pool."""
        self.submit_variants([c for f in findings for c in _candidates(f)])

    def submit_variants(self, variants: Any) -> None:
        """Compile ``variants`` (measurable candidates) in the pool, each build once."""
        import contextvars
        from concurrent.futures import ThreadPoolExecutor

        todo = {_build_key(c): c for c in variants}
        todo = {k: c for k, c in todo.items() if k not in self.built}
        if not todo:
            return
        if self.pool is None:
            self.tmp = Path(tempfile.mkdtemp(prefix="gpuadvise-variants-"))
            self.pool = ThreadPoolExecutor(
                max_workers=COMPILE_WORKERS, thread_name_prefix="gpuadvise-measure-build"
            )
        for k, c in todo.items():
            assert self.tmp is not None
            folder = self.tmp / f"e{len(self.built)}"
            run = contextvars.copy_context().run
            self.built[k] = self.pool.submit(run, _build_early, self.opts, c, folder)

    def take(self, variants: list[Any]) -> dict[str, _Built]:
        """The builds of those of ``variants`` compiled here (waited for)."""
        t0 = time.perf_counter()
        got = {
            _key(v): self.built[_build_key(v)].result()
            for v in variants
            if _build_key(v) in self.built
        }
        if got:
            log.info(
                "measure: waited %.2f s for %d candidates compiled ahead", _since(t0), len(got)
            )
        return got

    def close(self) -> None:
        """Stop compiling (what has not started; a compile no race took is not waited for),
        remove the candidates' folder."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def _build_early(opts: KernelOptions, variant: Any, folder: Path) -> _Built:
    from gpuadvise.spec.progress import reporting

    folder.mkdir()
    t0 = time.perf_counter()
    try:
        with reporting(None):  # no progress from this thread (the display's steps nest)
            return _Built(_build_candidate(opts, variant, folder))
    except (GpuAdviseError, _NotComparable) as exc:
        return _Built(error=exc)
    finally:
        log.info("measure: %s built ahead in %.2f s", variant.label or "the variant", _since(t0))


_EARLY: dict[str, _Early] = {}
"""What :func:`start_early` set up, by the repr of the live options: the stage that measures
those options takes it (``_Stage.build_all``)."""


def _early_for(opts: KernelOptions) -> _Early | None:
    """What :func:`start_early` set up for the measurement of ``opts``, or None."""
    from gpuadvise.analyze.prepare import live_options

    try:
        return _EARLY.get(repr(live_options(opts)))
    except GpuAdviseError:
        return None


def compile_ahead(opts: KernelOptions) -> Any:
    """A callback for the rules (``evaluate_rules``'s ``on_findings``) that compiles each
    finding's candidates for the GPU as soon as its rule is done, when :func:`start_early` set
    up the measurement of ``opts``; None when it did not."""
    early = _early_for(opts)
    if early is None:
        return None

    def told(findings: Any) -> None:
        try:
            early.submit(findings)
        except Exception:  # the measurement builds them itself
            log.debug("compiling candidates ahead failed", exc_info=True)

    return told


def compile_variants_ahead(opts: KernelOptions) -> Any:
    """A callback for the rules (``evaluate_rules``'s ``on_variants_ahead``) that compiles the
    candidates a rule names before its finding (``Rule.variants_ahead``: GA304's tile sizes
    while the L2 model is computed) for the GPU, when :func:`start_early` set up the
    measurement of ``opts``, with :data:`AHEAD_MIN_CPUS` or more here; None otherwise. The
    finding's own candidates, when it comes, take these builds (:func:`_build_key`); builds no
    finding takes are thrown away."""
    from gpuadvise.analyze.cases import jobs_default  # (the CPUs this process may run on)

    early = _early_for(opts) if jobs_default() >= AHEAD_MIN_CPUS else None
    if early is None:
        return None

    def told(variants: Any) -> None:
        todo = [v for v in variants if measurable(v)]
        log.info(
            "measure: compiling %d candidates ahead of their finding (%s)",
            len(todo),
            " ".join(v.label or "-" for v in todo),
        )
        try:
            early.submit_variants(todo)
        except Exception:  # the measurement builds them itself
            log.debug("compiling candidates ahead failed", exc_info=True)

    return told


def start_early(opts: KernelOptions, timeout_s: float = 60.0) -> None:
    """Start, in a thread, what the measurement of ``opts``' findings needs before any variant
    exists: the kernel compiled for the live GPU (``prepare``: the compile cache's entry when
    the analysis compiled the same), the timing's own kernels, and one job in the prewarmed
    worker that makes the buffers' data, uploads it and verifies the kernel once (the worker
    keeps all of it for the races: ``runner.worker._Kept``). ``analyze`` calls it right after
    the kernel's compile, so that this runs while the kernel is traced and the rules run on the
    CPU (HeCBench f16max's 3 GiB of half data took seconds to make). Nothing here changes what
    is measured: the races verify and time as before."""
    import threading
    from concurrent.futures import Future

    from gpuadvise.analyze.prepare import live_options

    try:
        live = live_options(opts)
    except GpuAdviseError:
        return  # the measurement reports it, if it runs
    key = repr(live)
    if key in _EARLY:
        return
    fut: Future[_Built] = Future()
    _EARLY[key] = _Early(live, fut)

    def work() -> None:
        from gpuadvise.spec.progress import reporting

        try:
            with reporting(None):  # no progress from this thread (the display's steps nest)
                fut.set_result(_set_up_early(live, timeout_s))
        except BaseException as exc:  # raised where the measurement takes it
            fut.set_exception(exc)

    import contextvars

    run = contextvars.copy_context().run  # the time budget
    threading.Thread(target=run, args=(work,), daemon=True, name="gpuadvise-measure-ahead").start()


def forget_early(opts: KernelOptions) -> None:
    """Drop what :func:`start_early` started for ``opts`` when nothing took it (no finding was
    measured): a later analysis in this process sets up its own."""
    from gpuadvise.analyze.prepare import live_options

    with contextlib.suppress(GpuAdviseError):
        early = _EARLY.pop(repr(live_options(opts)), None)
        if early is not None:
            early.close()


def _prepared(opts: KernelOptions) -> Any:
    """The kernel built for the live GPU (:func:`~gpuadvise.analyze.prepare.prepare`'s side "A"),
    and the timing's own kernels for its architecture compiled beside it (a failure of those is
    left to ``time_prepared`` to report); a failure to build the kernel raises."""
    from gpuadvise.analyze.prepare import prepare, timing_kernels

    got = prepare(opts, "A")
    arch = getattr(got.device, "arch", None)
    with contextlib.suppress(GpuAdviseError):  # time_prepared reports a failure
        if arch:
            timing_kernels(arch)
    return got


def _set_up_early(live: KernelOptions, timeout_s: float) -> _Built:
    from gpuadvise.runner.client import run_in_worker
    from gpuadvise.runner.job import Job

    t0 = time.perf_counter()
    try:
        base = _prepared(live)
    except GpuAdviseError as exc:
        return _Built(error=exc)
    built = _since(t0)
    t0 = time.perf_counter()
    job = Job(
        launches=(base.launch,),
        buffers=base.buffers,
        seed=base.spec.seed,  # the races' (time_prepared): the worker keeps this data for them
        verify=True,
        timing=None,
        return_inputs=False,
        return_outputs=False,
    )
    run = run_in_worker(job, timeout_s + 60)
    log.info(
        "measure: kernel built in %.2f s, set up on the GPU ahead in %.2f s (ok %s; worker: %s)",
        built,
        _since(t0),
        run.result.ok,
        _worker_times(run.result),
    )
    return _Built(base)


def measure_variant(
    opts: KernelOptions, variant: Any, timeout_s: float = 60.0, max_time_s: float = 5.0
) -> Any:
    """One variant of the kernel ``opts`` builds (live options: compiled for this GPU) built,
    verified against it and timed A/B: a :class:`~gpuadvise.rules.findings.Trial` (its measurement is
    None when the variant could not be built, run or verified; its note says why)."""
    stage = _Stage(opts, timeout_s, max_time_s)
    try:
        return stage.run(variant)
    finally:
        stage.close()


def measure_finding(stage: Any, f: Any) -> tuple[Any, list[str]]:
    """``f`` with its candidates measured (``stage.run_all``: one race), the best verified one
    as its variant. Every finding with a measurable variant is measured, whatever its estimate
    says: the measurement, not the estimate, ranks it (issue 16)."""
    v = f.variant
    if v is None or f.is_error:
        return f, []
    every = v.candidates()
    cands = [c for c in every if measurable(c)]
    if not cands:
        return f, []
    trials = stage.run_all(cands)
    notes = [
        f"{f.rule}: {'variant ' + t.label if t.label else 'the variant'} {t.note}"
        + ("; not ranked" if t.verified is False else "; not measured")
        for t in trials
        if t.measurement is None
    ]
    notes += [
        f"{f.rule}: {'variant ' + t.label if t.label else 'the variant'}: {why}; not ranked"
        for t in trials
        if t.measurement is not None and (why := proxy_refused(t.measurement))
    ]
    done = [
        (c, t)
        for c, t in zip(cands, trials, strict=True)
        if t.measurement is not None and proxy_refused(t.measurement) is None
    ]
    if not done:
        failed = any(t.verified is False for t in trials)
        return dataclasses.replace(
            f, trials=tuple(trials), verified=False if failed else None
        ), notes
    best_c, best_t = max(done, key=lambda ct: ct[1].measurement.speedup)
    if best_c.totals and best_t.note:  # verified as totals: the host combines the partials
        notes.append(
            f"{f.rule}: {'variant ' + best_t.label if best_t.label else 'the variant'} "
            f"{best_t.note}; the host must combine the gridDim.x partials the new launch writes"
        )
    others = tuple(c for c in every if c is not best_c)
    variant = dataclasses.replace(best_c, alternatives=others)
    m = best_t.measurement
    g = dataclasses.replace(
        f, variant=variant, measured_speedup=m, verified=True, trials=tuple(trials)
    )
    if f.recommend_only_if_faster and not (m.ci_low or m.speedup) > 1.0:
        # a rule whose fix often does not pay on modern GPUs (GA305: L1 serves the reuse)
        # recommends it only when the measurement says so
        g = dataclasses.replace(
            g,
            severity="note",
            message=f"{f.message} (measured {m.speedup:.2f}x on {m.device}: no gain, "
            "not recommended here)",
        )
    return g, notes


def _candidates(f: Any) -> list[Any]:
    if f.variant is None or f.is_error:
        return []
    return [c for c in f.variant.candidates() if measurable(c)]


def measure_findings(
    opts: KernelOptions,
    run: Any,
    timeout_s: float = 60.0,
    max_time_s: float = 5.0,
    budget_s: float | None = MEASURE_BUDGET_S,
    stage: Any = None,
) -> tuple[Any, list[str]]:
    """``run``: a rules.RulesRun. Returns it with measured findings, re-ranked, and notes.

    Every candidate of every finding is compiled first, ``COMPILE_WORKERS`` at a time; then each
    finding's candidates race against the kernel, its race capped at ``max_time_s`` and at its
    share of ``budget_s``. Under ``--time-budget``, the findings left when it runs out are not
    measured (the analysis's ``skipped`` says so). ``stage``: the measurement stage (tests give a
    fake one; default: the GPU's). The two halves, :func:`measure_trials` (the GPU's work) and
    :func:`apply_trials`, can run apart: ``analyze`` measures while it traces the variants."""
    return apply_trials(run, measure_trials(opts, run, timeout_s, max_time_s, budget_s, stage))


def findings_key(f: Any, cands: list[Any]) -> str:
    """What identifies a finding's measurement across the estimate's later changes (the
    variant-trace points replace the finding, re-rank it and may mark its variant
    ``needs_measurement``, which changes nothing that is built or timed)."""
    norm = [repr(dataclasses.replace(c, alternatives=(), needs_measurement=False)) for c in cands]
    return repr((f.rule, f.kernel, f.line, norm))


def measure_trials(
    opts: KernelOptions,
    run: Any,
    timeout_s: float = 60.0,
    max_time_s: float = 5.0,
    budget_s: float | None = MEASURE_BUDGET_S,
    stage: Any = None,
) -> dict[str, list[Any] | None]:
    """The GPU's half of :func:`measure_findings`: every measurable finding's trials (one race
    each), by :func:`findings_key`; None for a finding the time budget left unmeasured."""
    from gpuadvise.analyze.prepare import live_options
    from gpuadvise.spec.budget import out_of_time, skip

    if stage is None:
        stage = _Stage(live_options(opts), timeout_s, max_time_s, budget_s=budget_s)
    done: dict[str, list[Any] | None] = {}
    try:
        stage.build_all([c for f in run.findings for c in _candidates(f)])
        left = sum(1 for f in run.findings if _candidates(f))
        for f in run.findings:
            cands = _candidates(f)
            if not cands:
                continue
            key = findings_key(f, cands)
            if key in done:  # the same candidates twice: measured once
                left -= 1
                continue
            if out_of_time() or stage.set_share(left) < MIN_RACE_S / 5:
                skip("measuring the findings' variants on the GPU")
                done[key] = None
                continue
            done[key] = stage.run_all(cands)
            left -= 1
    finally:
        stage.close()
    return done


@dataclasses.dataclass
class _Measured:
    """A stage whose races were run already (:func:`measure_trials`)."""

    trials: list[Any]

    def run_all(self, variants: list[Any]) -> list[Any]:
        return self.trials


def apply_trials(run: Any, done: dict[str, list[Any] | None]) -> tuple[Any, list[str]]:
    """``run`` with the trials :func:`measure_trials` gave (measured on this ``run``'s findings
    or on the same findings before their estimates changed), re-ranked, and the notes."""
    from gpuadvise.rules.ranking import rank_findings

    out, notes = [], []
    for f in run.findings:
        cands = _candidates(f)
        key = findings_key(f, cands) if cands else None
        trials = None if key is None else done.get(key)
        if trials is None:
            if key in done:  # left out by the time budget
                notes.append(f"{f.rule}: not measured, the time budget ran out")
            out.append(f)
            continue
        g, n = measure_finding(_Measured(trials), f)
        out.append(g)
        notes += n
    return dataclasses.replace(run, findings=tuple(rank_findings(out))), notes


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_") or "variant"


def analysis_inputs(opts: KernelOptions) -> tuple[Path, ...]:
    """The files an analysis of ``opts`` reads (the source, its spec, the spec's source), which
    nothing it writes may replace."""
    from gpuadvise.spec.kernel_spec import find_spec_for, load_spec

    found: list[Path] = []
    if opts.source:
        found.append(Path(opts.source))
    spec: Path | None = Path(opts.spec) if opts.spec else None
    if spec is None and opts.source:
        try:
            spec = find_spec_for(opts.source, opts.kernel)
        except (GpuAdviseError, OSError):
            spec = None  # the analysis reports a broken spec itself
    if spec is not None:
        found.append(spec)
        try:
            named = load_spec(spec).get("source")
        except (GpuAdviseError, OSError):
            named = None
        if named is not None:
            found.append(Path(named))
    return tuple(dict.fromkeys(p.resolve() for p in found))


def check_variants_folder(folder: str | Path) -> None:
    """Refuse (one-line UsageError) a ``--write-variants`` folder that cannot be written, before
    the analysis runs: a file, a read-only file system, an immutable or unwritable folder."""
    from gpuadvise.errors import UsageError
    from gpuadvise.fileio import folder_write_problem, path_name_problem, target_problem

    text = str(folder)
    if not text.strip():
        raise UsageError("--write-variants is empty", "name a folder, or leave the option out")
    problem = path_name_problem(folder)
    if problem is not None:
        raise UsageError(f"cannot write variants to {text!r}: {problem}", "use a shorter name")
    refused = target_problem(folder)  # a link there would put the variants elsewhere
    if refused is not None:
        raise UsageError(f"--write-variants {text} {refused[0]}", refused[1])
    problem = folder_write_problem(folder)
    if problem is not None:
        raise UsageError(
            f"cannot write variants to {text}: {problem}",
            "choose a writable folder for --write-variants",
        )


def _same_file(a: Path, b: Path) -> bool:
    import os

    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except (OSError, RuntimeError):
        return False


def _written_by_us(folder: Path) -> bool:
    """Whether ``folder`` holds a variant gpuadvise wrote (a ``variant.json`` of ours)."""
    import json

    try:
        doc = json.loads((folder / "variant.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and "finding" in doc and "trial" in doc


def _variant_files(run: Any, opts: KernelOptions, root: Path) -> list[tuple[Path, str]]:
    """Every file ``write_variants`` writes, with its text, in order (nothing written yet)."""
    import json

    from gpuadvise.source.patch import apply_unified_diff

    files: list[tuple[Path, str]] = []
    for f in run.findings:
        if f.variant is None or f.is_error:
            continue
        trials = {t.label: t for t in f.trials}
        for c in f.variant.candidates():
            if not (c.diff or c.proxy or c.nvcc_flags or c.defines or c.launch):
                continue
            name = f"{f.kernel or 'kernel'}-{f.rule}-L{f.line or 0}"
            if c.label:
                name += f"-{c.label}"
            d = root / _slug(name)
            if c.diff and opts.source:
                src = Path(opts.source)
                files.append((d / src.name, apply_unified_diff(src.read_text(), c.diff)))
                files.append((d / "fix.diff", c.diff))
            if c.proxy is not None:
                files.append((d / "proxy.cu", c.proxy.source))
                files.append((d / "before.toml", c.proxy.spec_before))
                files.append((d / "after.toml", c.proxy.spec_after))
            info = c.to_dict()
            info.pop("alternatives", None)
            if c.proxy is not None:
                info["proxy"] = {k: info["proxy"][k] for k in ("before", "after")}
                info["proxy"]["files"] = ["proxy.cu", "before.toml", "after.toml"]
            t = trials.get(c.label)
            info["trial"] = None if t is None else t.to_dict()
            info["finding"] = {"rule": f.rule, "line": f.line, "message": f.message}
            files.append((d / "variant.json", json.dumps(info, indent=2) + "\n"))
    return files


def write_variants(run: Any, opts: KernelOptions, folder: str | Path) -> list[Path]:
    """``--write-variants DIR``: every candidate variant of every finding, as files a user can
    build: the patched source and its diff, a proxy's kernels and launch specs, or the compile
    flags; and ``variant.json`` (the variant, with its measurement when there is one). One folder
    per candidate, ``<kernel>-<rule>-L<line>[-<label>]``. Returns the folders written.

    Nothing is written over an input of the analysis (re-analysing a saved variant into the same
    folder would replace the source being analysed), over a file gpuadvise did not write (a
    folder of that name without our ``variant.json``), or through a symbolic link: every file is
    checked before the first is written, and a refusal is a one-line UsageError. A write that
    fails removes what this call created.
    """
    from gpuadvise.errors import UsageError
    from gpuadvise.fileio import target_problem, write_atomic

    root = Path(folder)
    files = _variant_files(run, opts, root)
    inputs = analysis_inputs(opts)
    for path, _ in files:
        refused = target_problem(path)
        if refused is not None:
            raise UsageError(f"--write-variants cannot write {path}: it {refused[0]}", refused[1])
        for p in inputs:
            if _same_file(path, p):
                raise UsageError(
                    f"--write-variants would overwrite {path}, an input of this analysis",
                    "write the variants to another folder",
                )
        if path.is_dir() or (path.parent.exists() and not path.parent.is_dir()):
            raise UsageError(
                f"--write-variants cannot write {path}: a folder or file is in the way",
                "write the variants to another folder, or remove it",
            )
        if path.exists() and not _written_by_us(path.parent):
            raise UsageError(
                f"--write-variants would overwrite {path}, which gpuadvise did not write",
                "write the variants to an empty folder, or remove that file",
            )
    created: list[Path] = []
    made_dirs: list[Path] = []
    written: list[Path] = []
    try:
        for path, text in files:
            for parent in reversed((path.parent, *path.parent.parents)):
                if not parent.exists():
                    parent.mkdir()
                    made_dirs.append(parent)
            existed = path.exists()
            write_atomic(path, text)
            if not existed:
                created.append(path)
            if path.parent not in written:
                written.append(path.parent)
    except OSError as err:
        for path in created:
            path.unlink(missing_ok=True)
        for d in reversed(made_dirs):
            with contextlib.suppress(OSError):
                d.rmdir()
        raise UsageError(
            f"cannot write variants to {root} ({err.strerror or err})",
            "choose a writable folder for --write-variants",
        ) from None
    return written

"""A variant's point from its own trace (issue 29): the launch model run on the variant.

Most rules estimate their change on the kernel's trace: the records the change touches are
swapped for what they would be after it (fewer sectors, fewer wavefronts, fewer requests). That
follows the mechanism a rule knows (a conflict, a stride, a contended address) and nothing else.
Some changes rewrite what the kernel executes in ways no rule can follow on the original trace:
a loop that accumulates in a register (GA308) can be folded or vectorised by the compiler once
the stores are gone; values hoisted into registers (GA309) change the registers, the occupancy
and what the L1 was already serving; a grid-stride loop over one wave (GA206) changes the
CTAs, their turnaround and the instructions of each thread. Measured on an H200 (2026-11-29,
docs/accuracy.md), those rules' own points were 1.00x for every GA206 variant (measured
0.81-1.77x), 1.12-1.89x for GA309's hoists that measured 0.72-1.12x, and 1.46-4.31x for GA308
on loops the compiler then folded (measured 5.6-1830x).

A rule whose change is of that kind says so (``Rule.point_from_variant_trace``). For its
findings with an automatic variant (a source diff, a launch change, or both), analyze builds
the variant, traces it on the CPU emulator as it traced the kernel (the same CTAs sampled, the
same loop sampling), and runs both traces through the same launch model
(:func:`gpuadvise.model.roofline.launch_estimate`). A variant's first wave that the emulator's
default budget cuts is cut further, every k-th of its CTAs, to about twice the kernel's trace,
in bytes and in cost (:data:`VARIANT_TRACE_FACTOR`), and all the variants together to about
twice the kernel's emulator cost, an equal share each (:func:`variant_budget_emu`); its live
registers are not read. A kernel
whose own trace cost more than :data:`MAX_TRACE_COST` (warp accesses plus warp steps: a count,
the same on every machine) has no variant traced. The point is then the model's time of the
kernel over the variant's; an upper bound stays the larger of the rule's and the model's; a
variant the model finds slower is not recommended without a measurement: its estimate gives no
speedup (never a value below 1 as a speedup), the variant waits for a GPU
(``needs_measurement``), and the finding is a note unless a measurement says it is faster.

Global atomics serialised at an address or on the lines of a 512-byte region, which the launch
model does not see, are taken from each trace as GA208 counts them
(:func:`gpuadvise.rules.global_atomics_serial.launch_serial_s`): each side's time is the larger of the
launch model's and that serial time. A one-wave grid's histogram flush pays one request per
line and CTA of one wave instead of one per CTA of the whole grid (HeCBench bincount_shared:
39,063 CTAs' flushes, 156 us in turn, against the launch model's 83 us; measured 381 us
before, 31 us after, 12.3x, where the launch model alone said 3.59x).

What is left out: the launch model's other blind spots (bank conflicts off the critical path,
what ptxas makes of a local array the PTX keeps in memory): rules whose change is one of those
keep their own estimate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuadvise.errors import GpuAdviseError

if TYPE_CHECKING:
    from gpuadvise.analyze.ahead import Built, VariantsAhead
    from gpuadvise.analyze.options import KernelOptions
    from gpuadvise.analyze.pipeline import KernelAnalysis
    from gpuadvise.model.roofline import LaunchEstimate, LaunchTimes, Traffic
    from gpuadvise.rules.evaluate import RulesRun
    from gpuadvise.rules.findings import Estimate, Finding, Variant

log = logging.getLogger(__name__)

# a variant's side: its launch traffic, and its serial atomics' time and whether they follow its
# one wave's loops (traced_side)
Side = tuple["Traffic | None", tuple[float, bool]]

# what the estimate's inputs call the model's point on the variant's own trace
TRACE_POINT = "variant_trace_point"

# a variant's trace costs about what the kernel's did: past this cost of the kernel's own trace
# (MemoryAnalysis.trace_cost: its warp accesses plus warp steps, the default sample's unit,
# trace.emulate.trace_cost), the rules' estimates stay theirs (issue 31: an analysis answers in
# seconds). A count of what the trace did, not the seconds it took, so that no machine's speed or
# load decides the findings (the gate read 30 CPU-s of the trace until the seventeenth session:
# softmax's took 38 s at load 20; contraction's GA309:44 flipped between a warning and a note
# with its trace's seconds). 1.5 million: about 30 CPU-s of the trace stage on the 2-core machine
# is 1.09 million at the median of 10 corpus kernels' 5-131 us a unit (27.5 us; the fit in
# docs/data/s17-s17-gate.md), raised so that every corpus kernel whose variants were traced
# still is: HeCBench interleave's two kernels cost 1,050,755 (5 CPU-s on the 16-CPU machine)
MAX_TRACE_COST = 1_500_000

# a variant's first wave that the default sample's budget cuts anyway is cut further, to about
# the CTAs whose records fit in twice the kernel's trace (never under 16 MiB, ~58,000 warp
# accesses): every k-th of the CTAs the default keeps, in the same mix
# (gpuadvise.trace.emulate.sample_trace_bytes). A grid-stride variant's one wave is its whole
# launch (vanGenuchten: 1056 CTAs of 62 elements per thread where the kernel traced 1056 CTAs
# of one; 65.6 s against the kernel's 4.3 s, issue 31). A wave the default traces whole is traced
# whole: cut to a prefix, its first CTAs, which carry one iteration more, would stand for all
# (BlackScholes' variant, 7.4 elements per thread: 0.94x on its first CTAs against 1.01x on all)
VARIANT_TRACE_FACTOR = 2
VARIANT_TRACE_FLOOR_BYTES = 16 << 20
# and, in the same way, to about the CTAs whose cost (warp accesses plus warp steps) fits in
# twice the kernel's trace cost, never under the default sample's own bound (DEFAULT_SAMPLE_COST):
# the bytes above count the accesses only, where a grid-stride variant's few CTAs step through
# their loop. A variant whose first CTA alone costs more (contraction's, CTA 0 alone like the
# kernel) is not cut: the first CTA always runs
VARIANT_TRACE_FLOOR_COST = 1 << 17
# and all of a kernel's variants together to about the CTAs whose emulation fits in twice the
# kernel's own emulator cost (MemoryAnalysis.emu_cost: its batches' instructions, warp accesses
# and steps costed, trace.emu_cost.emulator_cost; a count, the same on every machine), an equal
# share each (variant_budget_emu), never under a quarter of a CPU-s a variant (so that a small
# kernel's variant keeps a few CTAs): the accesses and steps above do not see a step's length,
# where a grid-stride variant's CTA loops over many elements (HeCBench glu: its variant's 2 CTAs
# of 528 elements a thread, 1.8x the kernel's accesses and steps, took 4.9 CPU-s; vanGenuchten's
# 32 CTAs 2.14x); all of them together, since a bound on each alone let the variants together
# cost several times the kernel (llm.c layernorm_backward's three: 0.7-1.65x its kernel's
# emulator cost each, 3.4x together; 2.1x shared). The first CTA always runs; one that alone
# passes its share has its long loops whose results steer nothing sampled from there, as the
# kernel's own first CTA has past the default sample's bound (HeCBench glu's variant: 0.91 s of
# its 0.25 s share -> 0.29 s, gpuadvise.trace.emulate.sample_emu_cost). Where its loops cannot
# be sampled so, or the rest after them is long, it costs what it costs: contraction's variant
# (one CTA like the kernel: 8.45 s; in its loops nested three deep the outer two keep 16 of 64
# iterations each and the innermost, unrolled to 16 trips, none), layernorm_backward's GA208:174
# (3.15 s; its long loop's results steer a branch, gpuadvise.ptx.steering: not sampled)
VARIANT_TRACE_FLOOR_EMU_NS = 250_000_000


def launch_traffic(analysis: KernelAnalysis) -> Traffic | None:
    from gpuadvise.rules.estimates import view_traffic
    from gpuadvise.trace.view import trace_view

    mem = analysis.memory
    if mem is None or mem.trace is None:
        return None
    return view_traffic(analysis.device, trace_view(mem.trace, analysis.spec))


def forget_kernel_view(analysis: KernelAnalysis) -> None:
    """The kernel's trace view freed before its variants are traced (its traffic is made):
    :func:`gpuadvise.trace.view.forget_view`."""
    from gpuadvise.trace.view import forget_view

    mem = analysis.memory
    if mem is not None and mem.trace is not None:
        forget_view(mem.trace)


def over_trace_cost(analysis: KernelAnalysis) -> int | None:
    """The kernel's trace cost (:attr:`MemoryAnalysis.trace_cost`) when it is over
    :data:`MAX_TRACE_COST`, and its variants are then not traced; None when they may be."""
    mem = analysis.memory
    cost = 0 if mem is None else mem.trace_cost
    return cost if cost > MAX_TRACE_COST else None


def variant_budget_bytes(analysis: KernelAnalysis) -> int:
    """The trace bytes a variant's default sample may take (:data:`VARIANT_TRACE_FACTOR`)."""
    from gpuadvise.trace.access import RECORD

    mem = analysis.memory
    records = 0 if mem is None or mem.trace is None else len(mem.trace.records)
    return max(VARIANT_TRACE_FLOOR_BYTES, VARIANT_TRACE_FACTOR * records * RECORD.itemsize)


def variant_budget_cost(analysis: KernelAnalysis) -> int:
    """The cost a variant's default sample may take (:data:`VARIANT_TRACE_FLOOR_COST`)."""
    mem = analysis.memory
    cost = 0 if mem is None else mem.trace_cost
    return max(VARIANT_TRACE_FLOOR_COST, VARIANT_TRACE_FACTOR * cost)


def variant_budget_emu(analysis: KernelAnalysis, variants: int = 1) -> int | None:
    """The emulator's cost each of a kernel's ``variants`` traced variants' default sample may
    take: an equal share of :data:`VARIANT_TRACE_FACTOR` times the kernel's own emulator cost,
    a bound on all of them together, never under :data:`VARIANT_TRACE_FLOOR_EMU_NS` a variant;
    None where the kernel's trace did not count it (not the emulator's). Equal shares, fixed
    before any variant is traced, so that a variant's trace is the same whichever process
    traces it and in whatever order (:func:`traced_in_two`)."""
    mem = analysis.memory
    cost = 0 if mem is None else mem.emu_cost
    if cost <= 0:
        return None
    return max(VARIANT_TRACE_FLOOR_EMU_NS, VARIANT_TRACE_FACTOR * cost // max(1, variants))


def trace_alone(
    vopts: KernelOptions,
    device: Any,
    sample_ctas: int | str | None,
    budget: int,
    built: Built | None = None,
    cost: int | None = None,
    emu: int | None = None,
) -> KernelAnalysis:
    """The kernel of ``vopts`` built and traced on the emulator as the kernel's own trace was
    (the same sample, its first wave cut to ``budget`` trace bytes and, given, to ``cost`` warp
    accesses and steps and to ``emu`` of the emulator's cost), the trace model only and no live
    registers (the launch model reads the trace, not them): a variant's side, or a proxy's.
    ``built``: ``vopts`` already built and compiled (:class:`gpuadvise.analyze.ahead.Ahead`), its
    SASS read beside the trace."""
    from gpuadvise.analyze.options import build
    from gpuadvise.analyze.pipeline import analyze_kernel
    from gpuadvise.trace.emulate import (
        entry_only_parse,
        sample_emu_cost,
        sample_trace_bytes,
        sample_trace_cost,
    )

    if built is None:
        spec, _, options = build(vopts)
        head, sass = None, None
    else:
        spec, options, head, sass = built.spec, built.options, built.head, built.sass
    with contextlib.ExitStack() as bounds:
        bounds.enter_context(sample_trace_bytes(budget))
        # its module parsed for this kernel alone (the other kernels of its source are not run)
        bounds.enter_context(entry_only_parse())
        if cost is not None:
            bounds.enter_context(sample_trace_cost(cost))
        if emu is not None:
            bounds.enter_context(sample_emu_cost(emu))
        return analyze_kernel(
            spec,
            device,
            options,
            nvcc=vopts.nvcc,
            trace=True,
            sample_ctas=sample_ctas,
            tracer="emu",
            models=frozenset({"trace"}),
            registers=False,
            head=head,
            line_models=False,
            keep_outputs=False,  # (its trace is read, not its outputs: issue 31)
            # its SASS read in the compiling thread while this traces (its block costs added
            # up once it has come)
            sass_ahead=sass,
        )


def traced_side(
    vopts: KernelOptions,
    device: Any,
    sample_ctas: int | str | None,
    budget: int,
    serial: bool = True,
    built: Built | None = None,
    cost: int | None = None,
    emu: int | None = None,
) -> tuple[Traffic | None, tuple[float, bool]]:
    """:func:`trace_alone`'s launch traffic and (``serial``) serial atomics
    (:func:`_serial_s`), the analysis itself (its trace, its view) freed on return: the next
    variant is traced without this one held (issue 31: llm.c layernorm_backward's three
    variants, 0.8 GB each). ``built``, ``cost`` and ``emu``: as :func:`trace_alone`'s.

    Both under :func:`~gpuadvise.ptx.emulator.malloc_tuned`, as the kernel's own trace and its
    traffic (in the rules) are: the view's and the traffic's temporaries of megabytes reuse the
    memory the emulation freed rather than fault fresh pages in and give them back each time
    (glibc's mmap threshold, set back to 128 KB by the kernel's trace, no longer rises with
    them: a variant's traffic took as much system CPU as user CPU on a loaded machine)."""
    from gpuadvise.ptx.emulator import malloc_tuned

    with malloc_tuned():
        va = trace_alone(vopts, device, sample_ctas, budget, built, cost, emu)
        mem = getattr(va, "memory", None)
        if mem is not None:
            log.debug(
                "variant traced: %d of %d CTAs, emulator cost %.2f s (bound %s)",
                mem.ctas_run,
                mem.total_ctas,
                mem.emu_cost / 1e9,
                None if emu is None else f"{emu / 1e9:.2f} s",
            )
            del mem
        side = launch_traffic(va), _serial_s(va) if serial else (0.0, False)
        del va  # (freed before the heap is trimmed)
    return side


def _serial_s(analysis: KernelAnalysis) -> tuple[float, bool]:
    """The L2's serial time for the analysis's global atomics (0 without them or a trace), and
    whether it follows the rest of a one-wave launch (:func:`launch_serial`)."""
    from gpuadvise.rules.global_atomics import combined_lines
    from gpuadvise.rules.global_atomics_serial import launch_serial

    mem = analysis.memory
    if mem is None or mem.trace is None:
        return 0.0, False
    wave = 0 if analysis.waves is None else analysis.waves.ctas_per_wave
    return launch_serial(mem.trace, combined_lines(analysis.sass_instructions), wave)


def _variant_options(
    opts: KernelOptions, v: Variant, folder: Path, spec_path: str | Path | None = None
) -> KernelOptions | None:
    """The command line's options for the variant ``v``: its patched source (the original's
    folder searched for its includes after the module's own include folders; :func:`variant_source`:
    in the compile cache, else in ``folder``) and its launch; None when the variant is not a
    source or launch change analyze can build alone (a proxy, compile flags). The patched source
    is built as the rules build a candidate of the same text
    (:meth:`gpuadvise.analyze.services.AnalysisServices.compile_candidate`, ``check_candidate``,
    ``compare_launch``: its file named by its content, the original's resolved folder last on the
    include path), so that a variant a rule has already built and checked (GA103's merged
    launch, GA403's) is a hit of the compile cache and of the disassembly's, not a second nvcc
    and nvdisasm (issue 31). ``spec_path``:
    the launch spec the kernel's analysis read, named for the variant where the command line
    named none (a spec found beside the original source is not beside the patched copy: the
    variant then had no launch, and kernels/' GA208 rows kept the rule's own point)."""
    from gpuadvise.source.patch import apply_unified_diff

    if v.proxy is not None or v.nvcc_flags or v.defines or not (v.diff or v.launch):
        return None
    if opts.source is None:
        return None
    src = Path(opts.source)
    changes: dict[str, Any] = {}
    if v.diff:
        patched = variant_source(
            src.name, apply_unified_diff(src.read_text(), v.diff), folder, opts
        )
        changes["source"] = str(patched)
        # after every include folder of the kernel's own flags, as a rule's candidate has it
        # (AnalysisServices._candidate: the module's flags, then this folder): the same flags
        changes["nvcc_flags"] = (*opts.nvcc_flags, f"-I{src.resolve().parent}")
        if opts.spec is None and spec_path is not None:
            changes["spec"] = str(spec_path)
    launch = dict(v.launch or {})
    for key in ("grid", "block"):
        if key in launch:
            changes[key] = "x".join(str(int(d)) for d in launch[key])
    if "dynamic_smem_bytes" in launch:
        changes["dynamic_smem"] = str(int(launch["dynamic_smem_bytes"]))
    return dataclasses.replace(opts, **changes)


def variant_source(name: str, text: str, folder: Path, opts: KernelOptions) -> Path:
    """A variant's patched source ``text`` written as ``name``: in the compile cache's folder
    of the candidates, named by its content (:func:`gpuadvise.analyze.services.candidate_path`,
    the path a rule's candidate and a ``--fix`` step of the same text have), so that an analysis
    run again, or a rule that built the same text first, compiles it from the same path and the
    compile is a cache hit (a temporary folder's random name was part of the key: every run
    compiled every variant again); in ``folder`` with ``--no-cache`` or a cache that cannot be
    written."""
    if not opts.no_cache:
        from gpuadvise.analyze.services import candidate_path, write_candidate
        from gpuadvise.toolchain.cache import cache_root

        with contextlib.suppress(OSError, GpuAdviseError):
            path = candidate_path(cache_root(), text, name)
            write_candidate(path, text)
            return path
    patched = folder / name
    patched.write_text(text)
    return patched


def _bound_by(times: LaunchTimes, serial_s: float) -> str:
    """What decides a launch's time, the L2's serial atomics (``L2 atomics``) where its L2
    term is theirs and decides."""
    if serial_s <= times.l2_s:
        return times.bound_by
    by = dataclasses.replace(times, l2_s=serial_s).bound_by
    return "L2 atomics" if by == "l2" else by


def trace_point_estimate(
    rule_estimate: Estimate | None,
    est: LaunchEstimate,
    what: str,
    serial: tuple[float, float] = (0.0, 0.0),
    follows: tuple[bool, bool] = (False, False),
) -> Estimate:
    """The finding's estimate with the launch model's point on both traces (``est``), each
    side at least the L2's serial time for its global atomics (``serial``: before, after): a
    point estimate becomes that point; an upper bound keeps the larger of the two bounds with
    the point beside it; a point below 1 gives no speedup (the variant is predicted slower)."""
    from gpuadvise.model.atomic_serial import after_loops_s
    from gpuadvise.model.roofline import ceiling_s
    from gpuadvise.rules.findings import Estimate
    from gpuadvise.rules.global_atomics import with_serial_s

    sb, sa = serial
    # a one-wave launch's flushes after every CTA's loop add to it in part (launch_serial)
    before_s = after_loops_s(est.before, sb) if follows[0] else with_serial_s(est.before, sb)
    after_s = after_loops_s(est.after, sa) if follows[1] else with_serial_s(est.after, sa)
    floor_s = with_serial_s(est.after_floor, sa)
    point = round(before_s / after_s, 3)
    top_s = (
        ceiling_s(est.before)
        if sb <= est.before.l2_s
        else ceiling_s(dataclasses.replace(est.before, l2_s=sb))
    )
    bound = round(max(top_s / floor_s, point), 3)
    peak = (
        None
        if est.peak is None or est.before_floor is None
        else with_serial_s(est.before_floor, sb) / floor_s
    )
    old = rule_estimate
    inputs: dict[str, Any] = dict(old.inputs) if old is not None else {}
    inputs.update(
        {
            TRACE_POINT: point,
            # the point every reader takes (accuracy rows, like-for-like): the rule's own went
            "point_speedup": point,
            "variant_trace_bound": bound,
            "rule_speedup": None if old is None else old.speedup,
            "rule_kind": None if old is None else old.kind,
            "bound_by_before": _bound_by(est.before, sb),
            "bound_by_after": _bound_by(est.after, sa),
            "atomics_serial_before_us": round(sb * 1e6, 3),
            "atomics_serial_after_us": round(sa * 1e6, 3),
        }
    )
    how = (
        f"the launch model on the kernel's trace and on the variant's own emulated trace "
        f"({what}): before {est.before.describe()}, bound by {est.before.bound_by}; after "
        f"{est.after.describe()}, bound by {est.after.bound_by}"
        + (
            f"; the L2's serial global atomics (GA208's count) {sb * 1e6:.1f} us before, "
            f"{sa * 1e6:.1f} us after, each side's L2 term where longer"
            + "".join(
                f" (the {side}: after its one wave's loops, 45% added)"
                for side, yes in zip(("before", "after"), follows, strict=True)
                if yes
            )
            + ": "
            f"{before_s * 1e6:.1f} us before, {after_s * 1e6:.1f} us after"
            if max(sb, sa) > 0.0
            else ""
        )
    )
    was = (
        ""
        if old is None or old.speedup is None
        else f". The rule's own estimate, on the kernel's trace alone: {old.speedup:.2f}x ({old.kind})"
    )
    if point < 1.0:
        return Estimate(
            None,
            "none",
            f"predicted slower, {point:.2f}x: {how}{was}. Not recommended unless a GPU measures "
            "it faster",
            inputs,
        )
    inputs.pop("peak_speedup", None)  # the rule's, on its own trace
    if old is not None and old.kind == "upper-bound" and old.speedup is not None:
        if peak is not None:
            inputs["peak_speedup"] = round(peak, 3)
        top = max(old.speedup, bound, point)
        return Estimate(
            round(top, 3),
            "upper-bound",
            f"upper bound {top:.2f}x (the larger of the rule's and the launch model's on both "
            f"traces), point {point:.2f}x: {how}{was}",
            inputs,
        )
    return Estimate(point, "point", f"point {point:.2f}x: {how}{was}", inputs)


def with_trace_points(
    analysis: KernelAnalysis,
    run: RulesRun,
    opts: KernelOptions,
    sample_ctas: int | str | None,
    rules: Sequence[str],
    early: VariantsAhead | None = None,
) -> RulesRun:
    """``run`` with the findings of ``rules`` (ids of rules with ``point_from_variant_trace``)
    estimated on their variant's own trace (the first candidate; its alternatives keep the
    rule's). A variant that does not build or trace keeps the rule's estimate. Findings with the
    same variant (:func:`gpuadvise.analyze.ahead.variant_key`) share its build and trace.
    ``early``: the variants compiled while the rules ran
    (:class:`gpuadvise.analyze.ahead.VariantsAhead`)."""
    from gpuadvise.analyze.ahead import Ahead, variant_key
    from gpuadvise.devices import memory_rates

    todo = [f for f in run.findings if f.rule in rules and f.variant is not None and not f.is_error]
    rates = memory_rates(analysis.device)
    mem = analysis.memory
    if not todo or mem is None or mem.trace is None or rates is None:
        return run
    with contextlib.ExitStack() as stack:
        # the variants compiled in a thread, in order, while this one models and traces
        ahead = stack.enter_context(Ahead())
        builds: dict[tuple[Any, ...], tuple[KernelOptions, Future[Built]]] = {}
        tried: set[tuple[Any, ...]] = set()
        for f in todo:
            assert f.variant is not None
            v = f.variant.candidates()[0]
            key = variant_key(v)
            if key in tried:  # an earlier finding's variant: built once
                continue
            tried.add(key)
            took = early.take(v) if early is not None else None
            if took is not None:
                builds[key] = took
                continue
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="gpuadvise-variant-"))
            vopts = _variant_options(opts, v, Path(tmp), analysis.spec.spec_path)
            if vopts is not None:
                # (the kernel's entry alone assembled, as VariantsAhead's: ahead._build)
                entry = analysis.kernel.mangled
                builds[key] = (vopts, ahead.submit(vopts, analysis.device, entry=entry))
        if not builds:
            return run
        made = _traced_points(analysis, todo, builds, sample_ctas, rates)
    if not made:
        return run
    from gpuadvise.rules.ranking import rank_findings

    out = [made.get(id(f), f) for f in run.findings]
    return dataclasses.replace(run, findings=tuple(rank_findings(out)))


def _traced_points(
    analysis: KernelAnalysis,
    todo: Sequence[Finding],
    builds: dict[tuple[Any, ...], tuple[KernelOptions, Future[Built]]],
    sample_ctas: int | str | None,
    rates: Any,
) -> dict[int, Finding]:
    """:func:`with_trace_points`' findings (by ``id``) estimated on their variants' traces
    (``builds``: each variant's options and compile, by
    :func:`~gpuadvise.analyze.ahead.variant_key`; a variant is traced once, the findings that
    offer it all take its traffic)."""
    from gpuadvise.analyze.ahead import variant_key
    from gpuadvise.model.roofline import launch_estimate
    from gpuadvise.spec.budget import out_of_time

    made: dict[int, Finding] = {}
    before = launch_traffic(analysis)
    serial_before, follows_before = _serial_s(analysis)
    forget_kernel_view(analysis)
    if before is None:
        return made
    budget, cost = variant_budget_bytes(analysis), variant_budget_cost(analysis)
    # the variants' emulations bounded together: each its share of the bound (builds: the
    # variants this traces, one each)
    emu = variant_budget_emu(analysis, len(builds))

    def side_of(f: Finding, key: tuple[Any, ...]) -> Side | None:
        """The variant's side (None: it did not trace)."""
        vopts, compiled = builds[key]
        try:
            return traced_side(
                vopts,
                analysis.device,
                sample_ctas,
                budget,
                built=compiled.result(),
                cost=cost,
                emu=emu,
            )
        except GpuAdviseError as exc:
            log.debug("%s:%s variant not traced: %s", f.rule, f.line, exc.one_line())
            return None

    # each variant's side once traced (None: it did not trace): a second finding with the same
    # variant takes it (the same kernel, launch and sample make the same trace); several
    # variants traced two at a time where two CPUs are there (traced_in_two)
    sides: dict[tuple[Any, ...], Side | None] = traced_in_two(todo, builds, side_of)
    # the rest here, each as soon as its compile is done (compiled_first): not in the findings'
    # order, which waited for a variant still compiling while others were ready
    first = _first_findings(todo, builds)
    for key in compiled_first([k for k in first if k not in sides], builds):
        if out_of_time():
            break
        sides[key] = side_of(first[key], key)
    for f in todo:
        assert f.variant is not None
        v = f.variant.candidates()[0]
        key = variant_key(v)
        side = sides.get(key)
        if side is None:  # not built, not traced, or out of time before it was
            continue
        after, (serial_after, follows_after) = side
        if after is None:
            continue
        est = launch_estimate(before, after, analysis.device, rates)
        if est is None:
            continue
        what = "the variant" + (f" {v.label}" if v.label else "")
        new = trace_point_estimate(
            f.estimated_speedup,
            est,
            what,
            (serial_before, serial_after),
            (follows_before, follows_after),
        )
        changes: dict[str, Any] = {"estimated_speedup": new}
        if new.speedup is None:
            changes["recommend_only_if_faster"] = True
            changes["variant"] = dataclasses.replace(f.variant, needs_measurement=True)
        made[id(f)] = dataclasses.replace(f, **changes)
    return made


def _first_findings(
    todo: Sequence[Finding],
    builds: dict[tuple[Any, ...], tuple[KernelOptions, Future[Built]]],
) -> dict[tuple[Any, ...], Finding]:
    """The first finding of ``todo`` offering each variant of ``builds`` (by
    :func:`~gpuadvise.analyze.ahead.variant_key`), in the findings' order."""
    from gpuadvise.analyze.ahead import variant_key

    first: dict[tuple[Any, ...], Finding] = {}
    for f in todo:
        assert f.variant is not None
        key = variant_key(f.variant.candidates()[0])
        if key in builds:
            first.setdefault(key, f)
    return first


def compiled_first(
    keys: Sequence[tuple[Any, ...]],
    builds: dict[tuple[Any, ...], tuple[KernelOptions, Future[Built]]],
) -> Iterator[tuple[Any, ...]]:
    """``keys`` in the order their compiles (``builds``) are done: the first of them already
    done (in ``keys``' order), else the first to be done, waited for. The variants are
    compiled in a thread, one after the other, in the order their rules told them
    (:class:`~gpuadvise.analyze.ahead.VariantsAhead`), not in the findings' order: traced in
    the findings' order, llm.c layernorm_backward's first finding's variant was the last of
    three compiled, and the two ready ones waited for its nvcc (3.7 CPU-s with the cuBLAS
    headers) with this process idle. A variant's side does not depend on when it is traced
    (its bounds are fixed before the first: :func:`variant_budget_emu`), so the sides are the
    same."""
    from concurrent.futures import FIRST_COMPLETED, wait

    left = list(keys)
    while left:
        done = next((k for k in left if builds[k][1].done()), None)
        if done is None:
            wait([builds[k][1] for k in left], return_when=FIRST_COMPLETED)
            continue
        left.remove(done)
        yield done


def traced_in_two(
    todo: Sequence[Finding],
    builds: dict[tuple[Any, ...], tuple[KernelOptions, Future[Built]]],
    side_of: Callable[[Finding, tuple[Any, ...]], Side | None],
) -> dict[tuple[Any, ...], Side | None]:
    """The sides of ``todo``'s variants (by :func:`~gpuadvise.analyze.ahead.variant_key`), two
    traced at a time (:func:`gpuadvise.analyze.split.in_two`, ``claimed``: this process traces
    the first variant while a forked child takes the next of those already compiled with their
    SASS read, in the findings' order, whenever it is free, and this process too once it is
    done with the first; then this process traces those still compiling at the fork: a
    variant's trace costs what it
    costs, 6 to 12.5 CPU-s for llm.c layernorm_backward's three, so the queue, not every other
    variant, evens the two out) where there are two or more to trace, two CPUs
    (:func:`~gpuadvise.analyze.split.processes`) and no time budget (its cut-off between traces
    stays the one process's); empty where no variant would go to the child (:func:`_traced_points`
    traces them in turn). No compile is waited for: a variant still compiling is traced here,
    after this process's share. Each side is the one :func:`_traced_points` traces itself, bit
    for bit: the child's variants were made before the fork, and it touches no thread's work."""
    from gpuadvise.analyze.split import in_two, processes
    from gpuadvise.spec.budget import time_left_s

    first = _first_findings(todo, builds)
    if len(first) < 2 or processes() < 2 or time_left_s() is not None:
        return {}
    keys = list(first)
    shared = [i for i, key in enumerate(keys) if i > 0 and _ready(builds[key][1])]
    if not shared:
        return {}
    jobs = [lambda key=key: side_of(first[key], key) for key in keys]
    return dict(zip(keys, in_two(jobs, shared, claimed=True), strict=True))


def _ready(compiled: Future[Built]) -> bool:
    """Whether a variant's compile is done and its SASS read (or failed: raised again where
    its side is traced), without waiting."""
    if not compiled.done():
        return False
    if compiled.cancelled() or compiled.exception() is not None:
        return True
    sass = compiled.result().sass
    return sass is None or sass.done()


def predicted_slower(f: Finding) -> bool:
    """Whether the launch model on ``f``'s variant's own trace predicted it slower."""
    e = f.estimated_speedup
    p = None if e is None else e.inputs.get(TRACE_POINT)
    return isinstance(p, int | float) and p < 1.0


def demote_unmeasured_slower(run: RulesRun) -> RulesRun:
    """Warnings whose variant the model predicted slower and no GPU measured become notes."""
    changed = False
    out = []
    for f in run.findings:
        if f.severity == "warning" and predicted_slower(f) and f.measured_speedup is None:
            f = dataclasses.replace(f, severity="note")
            changed = True
        out.append(f)
    return dataclasses.replace(run, findings=tuple(out)) if changed else run

"""A layout proxy's own point from its own traces (issue 29: proxies reproduce their time).

A layout rule (GA301, GA302) measures its change through a *proxy*: two kernels it synthesizes
from the trace of one line (:mod:`gpuadvise.rules.proxy`), the line's loads in the old layout and
in the new one, each folding what it loads into one word per thread. The rule's estimate gives
the proxy pair a point of its own (``inputs["proxy_point_speedup"]``, the like-for-like
comparison for a proxy measurement), made on the kernel's trace: the line's records alone, on
the memory roofline. That leaves out everything the proxy executes besides its loads: the bounds
test of each visit, the hash that picks the conditional fields, the fold, and the chain those
make between a visit's loads. On a proxy whose new layout leaves little memory work, that is
the whole time: kernels/cells cells_fields GA301's SoA proxy ran 48.6 us on an H200 where its
loads alone make 10 us, and the pair's point was 6.03x for 1.09x measured (cells_packed: 5.39x
for 2.35x).

For the findings of rules that say so (``Rule.proxy_point_from_trace``) and whose variant is a
proxy, analyze writes the proxy, traces both of its kernels on the CPU emulator as it traced the
kernel (the same CTAs sampled, the same loop sampling and trace budget as a variant's,
:mod:`gpuadvise.analyze.variant_trace`), and runs both through the launch model
(:func:`gpuadvise.model.roofline.launch_estimate`): the proxy's point and bound are then the
model's on the proxy's own instructions, memory and chains. The finding's own estimate (the
whole kernel with the layout changed) is not touched; the rule's roofline value stays in
``inputs["proxy_point_rule"]``. A proxy that does not build or trace keeps the rule's value.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuadvise.errors import GpuAdviseError

if TYPE_CHECKING:
    from concurrent.futures import Future

    from gpuadvise.analyze.ahead import Built, VariantsAhead
    from gpuadvise.analyze.options import KernelOptions
    from gpuadvise.analyze.pipeline import KernelAnalysis
    from gpuadvise.model.roofline import LaunchEstimate
    from gpuadvise.rules.evaluate import RulesRun
    from gpuadvise.rules.findings import Estimate, Finding, Proxy

log = logging.getLogger(__name__)

# what the estimate's inputs call the proxy pair's point on its own traces
PROXY_TRACE_POINT = "proxy_trace_point"


def proxy_point_inputs(old: Estimate, est: LaunchEstimate) -> Estimate:
    """``old`` (the finding's estimate, unchanged in value and kind) with the proxy pair's point
    and bound from the launch model on the proxy's two traces (``est``) in its inputs, and
    said in its method."""
    inputs: dict[str, Any] = dict(old.inputs)
    point, bound = round(est.point, 3), round(est.bound, 3)
    inputs.update(
        {
            "proxy_point_rule": inputs.get("proxy_point_speedup"),
            "proxy_bound_rule": inputs.get("proxy_bound_speedup"),
            "proxy_point_speedup": point,
            "proxy_bound_speedup": bound,
            PROXY_TRACE_POINT: point,
            "proxy_bound_by_before": est.before.bound_by,
            "proxy_bound_by_after": est.after.bound_by,
            "proxy_before_us": round(est.before.time_s * 1e6, 3),
            "proxy_after_us": round(est.after.time_s * 1e6, 3),
        }
    )
    # a ratio below 1 is no speedup: said as the new layout's proxy predicted slower
    said = (
        f"point {point:.2f}x, bound {bound:.2f}x"
        if point >= 1.0
        else f"the new layout's kernel predicted slower ({point:.2f}x; at best {bound:.2f}x)"
    )
    method = (
        f"{old.method}. The proxy pair on its own emulated traces (its loads, bounds tests, "
        f"field picks and folds, the same launch model): before {est.before.describe()}, "
        f"bound by {est.before.bound_by}; after {est.after.describe()}, bound by "
        f"{est.after.bound_by}: {said}"
    )
    return dataclasses.replace(old, method=method, inputs=inputs)


def proxy_sides(opts: KernelOptions, proxy: Proxy, folder: Path) -> list[KernelOptions]:
    """The options of the proxy's two kernels (before, after), compiled for the kernel's device:
    its source and launch specs written to a folder of the compile cache named by their
    content (:func:`gpuadvise.toolchain.cache.content_folder`: a re-run compiles the same files,
    a cache hit), or to ``folder`` with ``--no-cache`` or a cache that cannot be written."""
    from gpuadvise.analyze.measure import write_proxy
    from gpuadvise.analyze.options import KernelOptions

    named = _named_proxy(proxy, opts)
    if named is not None:
        src, before, after = named
    else:
        src, before, after = write_proxy(proxy, folder)
    base = KernelOptions(source=str(src), gpu=opts.gpu, arch=opts.arch, nvcc=opts.nvcc)
    return [
        dataclasses.replace(base, kernel=kernel, spec=str(spec_path))
        for kernel, spec_path in ((proxy.before, before), (proxy.after, after))
    ]


def _named_proxy(proxy: Proxy, opts: KernelOptions) -> tuple[Path, Path, Path] | None:
    """The proxy's source and launch specs (as :func:`gpuadvise.analyze.measure.write_proxy`
    names them) in a folder of the compile cache named by their content; None with
    ``--no-cache`` or a cache that cannot be written."""
    if opts.no_cache:
        return None
    from gpuadvise.toolchain.cache import cache_root, content_folder

    files = {"proxy.cu": proxy.source, "before.toml": proxy.spec_before}
    files["after.toml"] = proxy.spec_after
    try:
        folder = content_folder(cache_root(), "proxies", files)
    except (OSError, GpuAdviseError):
        return None
    return folder / "proxy.cu", folder / "before.toml", folder / "after.toml"


def _proxy_traffic(
    opts: KernelOptions,
    proxy: Proxy,
    device: Any,
    sample_ctas: int | str | None,
    budget: int,
    folder: Path,
    early: Sequence[tuple[KernelOptions, Future[Built]]] | None = None,
) -> tuple[Any, Any]:
    """The launch traffic of the proxy's two kernels, each traced on the emulator (trace model
    only) and freed before the other is traced (:func:`traced_side`); the second compiled in a
    thread while the first is traced (:class:`gpuadvise.analyze.ahead.Ahead`). ``early``: the
    two sides' options and compiles started while the rules ran
    (:meth:`gpuadvise.analyze.ahead.VariantsAhead.take_proxy`)."""
    from gpuadvise.analyze.ahead import Ahead
    from gpuadvise.analyze.variant_trace import traced_side

    with Ahead() as ahead:
        if early is not None:
            built = list(early)
        else:
            built = [
                (side, ahead.submit(side, device)) for side in proxy_sides(opts, proxy, folder)
            ]
        out = [
            traced_side(side, device, sample_ctas, budget, serial=False, built=b.result())[0]
            for side, b in built
        ]
    return out[0], out[1]


def sides_in_two(
    todo: Sequence[Finding],
    early: VariantsAhead | None,
    device: Any,
    sample_ctas: int | str | None,
    budget: int,
) -> dict[Proxy, tuple[Any, Any]]:
    """The before and after traffic of ``todo``'s proxies compiled while the rules ran
    (``early``), by proxy, their sides traced two at a time (:func:`gpuadvise.analyze.split.
    in_two`, ``claimed``: this process traces the first side while a forked child takes the
    next side already compiled with its SASS read whenever it is free, and this process too
    once it is done with the first; then this process the others), as
    :func:`gpuadvise.analyze.variant_trace.traced_in_two` traces the variants; None for a side
    that did not build or trace. Empty where no side would go to the child, with one CPU or
    under a time budget (its cut-off between proxies stays the one process's):
    :func:`with_proxy_points` traces them in turn.
    Each side is the one :func:`_proxy_traffic` makes, bit for bit: the sides were compiled
    before the fork, and the child touches no thread's work."""
    from gpuadvise.analyze.split import in_two, processes
    from gpuadvise.analyze.variant_trace import _ready, traced_side
    from gpuadvise.spec.budget import time_left_s

    if early is None or processes() < 2 or time_left_s() is not None:
        return {}
    built: dict[Proxy, list[tuple[KernelOptions, Future[Built]]]] = {}
    for f in todo:
        assert f.variant is not None and f.variant.proxy is not None
        took = early.take_proxy(f.variant.proxy)
        if took is not None and len(took) == 2:
            built.setdefault(f.variant.proxy, list(took))
    sides = [side for pair in built.values() for side in pair]
    shared = [i for i, (_, compiled) in enumerate(sides) if i > 0 and _ready(compiled)]
    if not shared:
        return {}

    def traffic(side: KernelOptions, compiled: Future[Built]) -> Any:
        try:
            return traced_side(
                side, device, sample_ctas, budget, serial=False, built=compiled.result()
            )[0]
        except GpuAdviseError as exc:
            log.debug("a proxy's side (%s) not traced: %s", side.kernel, exc.one_line())
            return None

    jobs: list[Callable[[], Any]] = [functools.partial(traffic, s, c) for s, c in sides]
    got = in_two(jobs, shared, claimed=True)
    return {proxy: (got[2 * k], got[2 * k + 1]) for k, proxy in enumerate(built)}


def with_proxy_points(
    analysis: KernelAnalysis,
    run: RulesRun,
    opts: KernelOptions,
    sample_ctas: int | str | None,
    rules: Sequence[str],
    early: VariantsAhead | None = None,
) -> RulesRun:
    """``run`` with the findings of ``rules`` whose variant is a proxy given the proxy pair's
    point and bound on its own traces (:func:`proxy_point_inputs`). ``early``: the proxies
    compiled while the rules ran (:class:`gpuadvise.analyze.ahead.VariantsAhead`)."""
    from gpuadvise.analyze.variant_trace import forget_kernel_view, variant_budget_bytes
    from gpuadvise.devices import memory_rates
    from gpuadvise.model.roofline import launch_estimate
    from gpuadvise.spec.budget import out_of_time

    todo = [
        f
        for f in run.findings
        if f.rule in rules
        and f.variant is not None
        and f.variant.proxy is not None
        and f.estimated_speedup is not None
        and not f.is_error
    ]
    rates = memory_rates(analysis.device)
    if not todo or rates is None:
        return run
    budget = variant_budget_bytes(analysis)
    forget_kernel_view(analysis)  # the proxies' traces hold their own views
    made: dict[int, Any] = {}
    # each proxy's two sides' traffic once made (None: a side did not build or trace): a second
    # finding with the same proxy takes them; the sides of the proxies compiled while the rules
    # ran traced two at a time where two CPUs are there (sides_in_two)
    pairs = sides_in_two(todo, early, analysis.device, sample_ctas, budget)
    for f in todo:
        if out_of_time():
            break
        assert f.variant is not None and f.variant.proxy is not None
        assert f.estimated_speedup is not None
        proxy = f.variant.proxy
        if proxy not in pairs:
            took = early.take_proxy(proxy) if early is not None else None
            with tempfile.TemporaryDirectory(prefix="gpuadvise-proxy-") as tmp:
                try:
                    pairs[proxy] = _proxy_traffic(
                        opts, proxy, analysis.device, sample_ctas, budget, Path(tmp), took
                    )
                except GpuAdviseError as exc:
                    log.debug("%s:%s proxy not traced: %s", f.rule, f.line, exc.one_line())
                    pairs[proxy] = None, None
        before, after = pairs[proxy]
        if before is None or after is None:
            continue
        est = launch_estimate(before, after, analysis.device, rates)
        if est is None:
            continue
        made[id(f)] = dataclasses.replace(
            f, estimated_speedup=proxy_point_inputs(f.estimated_speedup, est)
        )
    if not made:
        return run
    return dataclasses.replace(run, findings=tuple(made.get(id(f), f) for f in run.findings))

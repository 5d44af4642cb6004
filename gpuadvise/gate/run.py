"""``gpuadvise gate`` without the printing: read and check the configuration (:func:`prepare_gate`),
then record a baseline or compare with one (:func:`execute_gate`). The CLI renders the
:class:`GateRun` it gets back.

Everything that can be refused is refused in :func:`prepare_gate`, before anything is compiled or
timed: conflicting options, the configuration, case files, argument and buffer names that match no
kernel parameter, nvcc flags off the allow-list (:mod:`gpuadvise.gate.flags`, unless
``trust_config``), and a baseline path that holds something other than a baseline.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gpuadvise.errors import ConfigError, GpuAdviseError, UsageError
from gpuadvise.gate.baseline import (
    Baseline,
    BaselineError,
    check_baseline_target,
    load_baseline,
    write_baseline,
)
from gpuadvise.gate.config import GateCase, GateConfig, load_gate_config, rebase_case
from gpuadvise.gate.evaluate import Gates, evaluate_gate, measure_baseline
from gpuadvise.gate.flags import refused_flag
from gpuadvise.gate.git import baseline_worktree, git_head, repo_top
from gpuadvise.gate.provider import MetricsProvider
from gpuadvise.gate.results import GateResult
from gpuadvise.source.signature import find_kernels, parse_signature, select_kernel
from gpuadvise.spec.fills import is_file_fill
from gpuadvise.spec.kernel_spec import KernelSpec, find_spec_for, load_spec, resolve

__all__ = [
    "GatePlan",
    "GateRun",
    "RecordedBaseline",
    "check_case",
    "default_provider",
    "execute_gate",
    "prepare_gate",
    "relative_path",
]

# Metrics the compiler alone gives: a case gating only these needs no bound launch.
_COMPILE_ONLY = frozenset({"registers", "spill_bytes", "occupancy"})
_TRUST_HINT = (
    "gate compiles the configuration under test with flags that only change the generated "
    "code: remove it, or pass --trust-config if this configuration is trusted (never on pull "
    "requests from forks)"
)


@dataclass(frozen=True)
class GatePlan:
    """A checked gate run, ready to execute: the configuration (cases selected, device
    overrides applied), the repository root, the baseline file, and the files the run reads
    (which no output may overwrite)."""

    config: GateConfig
    root: Path
    baseline_path: Path
    baseline_ref: str | None
    update_baseline: bool
    gates: Gates
    strict: bool
    trust_config: bool
    inputs: tuple[Path, ...]


@dataclass(frozen=True)
class RecordedBaseline:
    """``--update-baseline``: the baseline written, where (and as shown, repository-relative), and
    notes for the user."""

    path: Path
    shown_path: str
    baseline: Baseline
    notes: tuple[str, ...]


@dataclass(frozen=True)
class GateRun:
    """What ``gpuadvise gate`` did: compared (``result``) or recorded a baseline (``recorded``)."""

    result: GateResult | None = None
    recorded: RecordedBaseline | None = None


def default_provider(config: GateConfig) -> MetricsProvider:
    """The real metrics provider: ``gpuadvise.gate.metrics.make_provider(config)``."""
    try:
        module = importlib.import_module("gpuadvise.gate.metrics")
    except ModuleNotFoundError as exc:
        if exc.name != "gpuadvise.gate.metrics":
            raise
        raise GpuAdviseError(
            "this gpuadvise has no gate metrics provider (gpuadvise.gate.metrics)",
            "a packaging bug: reinstall gpuadvise",
        ) from None
    provider: MetricsProvider = module.make_provider(config)
    return provider


def relative_path(p: Path, root: Path) -> str:
    """``p`` relative to ``root`` when it lies inside, else as given."""
    try:
        return p.resolve().relative_to(root).as_posix()
    except ValueError:
        return p.as_posix()


def _case_error(config: GateConfig, case: GateCase, message: str, hint: str | None) -> ConfigError:
    return ConfigError(f"{config.path}: gate case {case.name!r}: {message}", hint)


def _check_flags(
    config: GateConfig,
    case: GateCase,
    flags: Sequence[str],
    where: Path,
    root: Path,
) -> None:
    refused = refused_flag(flags, repo=root, cwd=Path.cwd())
    if refused is not None:
        source = "" if where == config.path else f" (from {where})"
        raise _case_error(
            config,
            case,
            f"nvcc flag {refused.flag!r}{source} is refused: {refused.reason}",
            _TRUST_HINT,
        )


def _outside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return True
    return False


def _check_inside(
    config: GateConfig, case: GateCase, files: Sequence[tuple[str, Path]], root: Path
) -> None:
    """Every file a case reads lies in the repository under test (a spec's ``source =
    "/etc/passwd"`` made nvcc quote that file's first line into the reports)."""
    for what, path in files:
        if _outside(path, root):
            raise _case_error(
                config,
                case,
                f"its {what} {path} lies outside the repository ({root})",
                "gate reads only the files of the repository under test: move it into the "
                "repository, or pass --trust-config if this configuration is trusted (never on "
                "pull requests from forks)",
            )


def _spec_file_files(config: GateConfig, case: GateCase) -> list[tuple[str, Path]]:
    """The files a case's spec file names (its source, its data files), before the spec is
    built: building it reads them."""
    if case.spec is None:
        return []
    try:
        doc = load_spec(case.spec)
    except GpuAdviseError as exc:
        raise _case_error(config, case, exc.message, exc.hint) from None
    files = [("source", Path(doc["source"]))] if "source" in doc else []
    return files + [
        (f"buffer {b.name}'s data file", Path(b.fill))
        for b in doc["buffers"].values()
        if b.fill_given and is_file_fill(b.fill)
    ]


def _spec_files(spec: KernelSpec) -> list[tuple[str, Path]]:
    """The files a built spec reads: its source, its spec file, its buffers' data files."""
    files = [("source", Path(spec.source))]
    if spec.spec_path is not None:
        files.append(("spec", Path(spec.spec_path)))
    files += [
        (f"buffer {b.name}'s data file", Path(b.fill))
        for b in spec.buffers
        if b.fill_given and is_file_fill(b.fill)
    ]
    return files


def check_case(config: GateConfig, case: GateCase, root: Path, *, trust_config: bool) -> None:
    """Refuse (:class:`~gpuadvise.errors.ConfigError`) a case that cannot be gated as written:
    nvcc flags off the allow-list and files outside the repository ``root`` (both unless
    ``trust_config``), a launch that cannot be built, and argument or buffer names that match no
    kernel parameter (a typo there once left half of the static metrics "unavailable", and every
    later gate passed with them skipped)."""
    if not trust_config:
        _check_inside(config, case, _case_files(case), root)
        _check_inside(config, case, _spec_file_files(config, case), root)
        _check_flags(config, case, case.nvcc_flags, config.path, root)
    try:
        spec = case.kernel_spec()
    except GpuAdviseError as exc:
        raise _case_error(config, case, exc.message, exc.hint) from None
    if not trust_config:
        _check_inside(config, case, _spec_files(spec), root)
    if not trust_config and spec.spec_path is not None:
        from_spec = spec.nvcc_flags[: len(spec.nvcc_flags) - len(case.nvcc_flags)]
        _check_flags(config, case, from_spec, Path(spec.spec_path), root)
    try:
        params = parse_signature(Path(spec.source).read_text(errors="replace"), spec.kernel)
    except OSError as err:
        raise _case_error(
            config, case, f"cannot read {spec.source} ({err.strerror})", "check the path"
        ) from None
    except GpuAdviseError as exc:
        raise _case_error(config, case, exc.message, exc.hint) from None
    # unknown or misplaced argument and buffer names were refused by case.kernel_spec() above
    # (spec.kernel_spec.check_spec, the check every command runs)
    if set(case.metrics) - _COMPILE_ONLY:
        # The trace and timing metrics bind the launch to the kernel: refuse what cannot bind
        # now rather than report those metrics as unavailable. Sizes of user structs are the
        # compiler's; any size serves this check.
        try:
            resolve(spec, params, lambda name: (1, 1))
        except GpuAdviseError as exc:
            raise _case_error(config, case, exc.message, exc.hint) from None


def _case_files(case: GateCase) -> list[tuple[str, Path]]:
    return [(w, p) for w, p in (("source", case.source), ("spec", case.spec)) if p is not None]


def _check_case_files(config: GateConfig) -> None:
    for case in config.cases:
        for p in case.paths():
            if not p.is_file():
                raise ConfigError(
                    f"{config.path}: gate case {case.name!r}: {p} does not exist",
                    "paths are relative to the config file's folder",
                )


def prepare_gate(
    *,
    config: str | Path | None = None,
    baseline: str | Path | None = None,
    baseline_ref: str | None = None,
    update_baseline: bool = False,
    gates: str = "all",
    cases: Sequence[str] = (),
    gpu: str | None = None,
    arch: str | None = None,
    strict: bool = False,
    trust_config: bool = False,
    cwd: Path | None = None,
    shard: str | None = None,
) -> GatePlan:
    """Read and check everything a gate run needs; nothing is compiled or written yet.
    ``cwd``: where configuration discovery starts (default: the current directory);
    ``shard``: ``K/N``, the cases of that CI shard only (:mod:`gpuadvise.analyze.cases`)."""
    if gates not in ("all", "static", "timed"):
        raise UsageError(f"unknown --gates {gates!r}", "use all, static or timed")
    if update_baseline and baseline_ref:
        raise UsageError(
            "--update-baseline and --baseline-ref do not go together",
            "--update-baseline records the current tree; --baseline-ref compares with a revision",
        )
    if baseline and baseline_ref:
        raise UsageError(
            "--baseline and --baseline-ref do not go together",
            "--baseline-ref builds the baseline from git; --baseline names a stored one",
        )
    for option, value in (("--gpu", gpu), ("--arch", arch), ("--baseline", baseline)):
        if value is not None and not str(value).strip():
            raise UsageError(f"{option} is empty", f"give a value, or leave {option} out")
    cfg = load_gate_config(Path(config) if config else None, start=cwd)
    cfg = cfg.select(cases).with_device(gpu, arch)
    if shard is not None:
        from gpuadvise.analyze.cases import parse_shard, take_shard

        if update_baseline:
            raise UsageError(
                "--shard and --update-baseline do not go together",
                "record the baseline of every case in one job",
            )
        part = take_shard(cfg.cases, parse_shard(shard), key=lambda c: c.name)
        cfg = replace(cfg, cases=tuple(part))
    _check_case_files(cfg)
    root = repo_top(cfg.root) or cfg.root
    for case in cfg.cases:
        check_case(cfg, case, root, trust_config=trust_config)
    # no compiler output quotes a file outside the repository; untrusted, nothing is included
    cfg = replace(cfg, cases=tuple(replace(c, root=root, trusted=trust_config) for c in cfg.cases))
    # not resolved: a link at the baseline's path is refused, never followed (check_baseline_target)
    baseline_path = Path.cwd() / baseline if baseline else cfg.baseline
    if not baseline and baseline_ref is None:
        _check_baseline_inside(cfg, baseline_path, root)
    inputs: list[Path] = [cfg.path]
    for case in cfg.cases:
        inputs += case.paths()
    if update_baseline:
        if any(_same(baseline_path, p) for p in inputs):
            raise UsageError(
                f"--update-baseline would overwrite {baseline_path}, an input of the gate",
                "check the --baseline path (or `baseline` in the gate config)",
            )
        check_baseline_target(baseline_path)
    elif baseline_ref is None:
        inputs.append(baseline_path)
    return GatePlan(
        config=cfg,
        root=root,
        baseline_path=baseline_path,
        baseline_ref=baseline_ref,
        update_baseline=update_baseline,
        gates=gates,  # type: ignore[arg-type]
        strict=strict,
        trust_config=trust_config,
        inputs=tuple(dict.fromkeys(p.resolve() for p in inputs)),
    )


def _check_baseline_inside(config: GateConfig, path: Path, root: Path) -> None:
    """A baseline path from the configuration (which a pull request can change) must lead inside
    the repository, links followed; one named on the command line may be anywhere."""
    real, top = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    if real != top and top not in real.parents:
        raise ConfigError(
            f"{config.path}: the baseline {path} leads to {real}, outside the repository {top}",
            "keep the baseline inside the repository, or name it on the command line "
            "(--baseline FILE)",
        )


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def _locator(root: Path) -> Callable[[GateCase], tuple[str | None, int | None]]:
    """The kernel's file (relative to ``root``) and the line of its ``__global__``."""

    def locate(case: GateCase) -> tuple[str | None, int | None]:
        source = case.source
        try:
            if source is None and case.spec is not None:
                source = load_spec(case.spec).get("source")
            if source is None:
                return None, None
            text = Path(source).read_text(encoding="utf-8", errors="replace")
            if case.kernel:
                line: int | None = select_kernel(text, case.kernel)[0].line
            else:
                decls = [d for d in find_kernels(text) if d.is_definition]
                line = decls[0].line if len(decls) == 1 else None
        except (GpuAdviseError, OSError):
            line = None
        return (relative_path(Path(source), root) if source is not None else None), line

    return locate


def execute_gate(plan: GatePlan, provider: MetricsProvider | None = None) -> GateRun:
    """Record the baseline (``--update-baseline``) or compare with it (a stored file, or the
    ``--baseline-ref`` revision checked out in a temporary git worktree)."""
    cfg = plan.config
    prov = provider or default_provider(cfg)
    if plan.update_baseline:
        previous = None
        notes: list[str] = []
        if plan.baseline_path.exists():
            try:
                previous = load_baseline(plan.baseline_path)
            except BaselineError as exc:
                notes.append(f"the previous baseline is replaced: {exc.one_line()}")
        new, more = measure_baseline(
            cfg, prov, gates=plan.gates, previous=previous, source_rev=git_head(plan.root)
        )
        write_baseline(plan.baseline_path, new)
        return GateRun(
            recorded=RecordedBaseline(
                path=plan.baseline_path,
                shown_path=relative_path(plan.baseline_path, plan.root),
                baseline=new,
                notes=tuple(notes + more),
            )
        )
    locate = _locator(plan.root)
    if plan.baseline_ref:
        with baseline_worktree(plan.baseline_ref, cfg.root) as (tree, top):
            base_cases: dict[str, GateCase | None] = {}
            for case in cfg.cases:
                moved = rebase_case(case, top, tree)
                if not all(p.is_file() for p in moved.paths()):
                    base_cases[case.name] = None
                    continue
                if not plan.trust_config:
                    _check_base_flags(cfg, moved, tree)
                    _check_base_files(cfg, moved, tree)
                base_cases[case.name] = moved
            result = evaluate_gate(
                cfg,
                prov,
                baseline_cases=base_cases,
                baseline_ref=plan.baseline_ref,
                gates=plan.gates,
                strict=plan.strict,
                locate=locate,
            )
        return GateRun(result=result)
    stored = load_baseline(plan.baseline_path)
    result = evaluate_gate(
        cfg,
        prov,
        baseline=stored,
        baseline_path=relative_path(plan.baseline_path, plan.root),
        gates=plan.gates,
        strict=plan.strict,
        locate=locate,
    )
    return GateRun(result=result)


def _check_base_files(config: GateConfig, case: GateCase, tree: Path) -> None:
    """The baseline revision's case reads only files of its checkout too."""
    _check_inside(config, case, _case_files(case), tree)
    try:
        spec = case.kernel_spec()
    except GpuAdviseError:
        return  # a broken spec there is that case's error, reported as such
    _check_inside(config, case, _spec_files(spec), tree)


def _check_base_flags(config: GateConfig, case: GateCase, tree: Path) -> None:
    """The allow-list also holds for the baseline revision's spec files (its cases are built
    with them)."""
    spec_path = case.spec
    if spec_path is None and case.source is not None:
        try:
            spec_path = find_spec_for(case.source, case.kernel)
        except GpuAdviseError:
            spec_path = None  # a broken spec there is that case's error, reported as such
    if spec_path is None:
        return
    try:
        flags = load_spec(spec_path).get("nvcc_flags", ())
    except GpuAdviseError:
        return
    _check_flags(config, case, flags, spec_path, tree)

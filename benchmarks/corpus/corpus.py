"""The stranger corpus: its manifests, judgements and scoring (README.md says the format).

Pure functions over plain data: :func:`load` reads ``manifest/*.toml`` and ``judged.toml``,
:func:`score` turns the findings of each kernel into recall, precision and wrong warnings.
fetch.py and run.py use them; tests/benchmarks/test_corpus.py pins the scoring.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFESTS = HERE / "manifest"
JUDGED = HERE / "judged.toml"
SRC = HERE / "src"

# The problems each rule addresses (README's vocabulary). The first is the problem the rule's
# warning claims first: a warning is wrong when that one is in the kernel's `silent` list. This
# table, not the manifests, changes when rules change.
PROBLEMS_OF_RULE: dict[str, tuple[str, ...]] = {
    "GA101": ("low-occupancy",),
    "GA102": ("too-little-parallelism",),
    "GA103": ("block-not-warp-multiple",),
    "GA104": ("divergence", "divergent-reduction"),
    "GA105": ("duplicate-threads",),
    "GA106": ("too-little-parallelism",),
    "GA107": ("serial-work",),
    "GA108": ("launch-overhead",),  # a grid of idle CTAs: the launch's time is their scheduling
    "GA201": ("bank-conflicts", "divergent-reduction"),
    "GA202": ("divergent-reduction",),
    "GA203": ("shared-tree-shuffles",),
    "GA204": ("idle-threads-reduction",),
    "GA205": ("shared-tree-shuffles",),
    "GA206": ("one-element-per-thread",),
    "GA207": ("contended-atomics",),
    "GA208": ("contended-atomics",),
    "GA209": ("shared-tree-shuffles",),
    "GA301": ("uncoalesced-strided", "aos-fields", "data-dependent-gather"),
    "GA302": ("aos-fields",),
    "GA303": ("scalar-access",),
    "GA304": ("l2-locality",),
    "GA305": ("cross-thread-reuse", "data-dependent-gather"),  # a small table: staged whole
    "GA306": ("uncoalesced-strided",),
    "GA307": ("shared-staging-unneeded",),
    "GA308": ("global-accumulation-in-loop",),
    "GA309": ("redundant-global-loads",),
    "GA310": ("low-arithmetic-intensity",),
    "GA401": ("register-spills",),
    "GA402": ("unpacked-half",),
    # GA403 fires when registers limit the occupancy, or the kernel spills, and values held
    # across the register peak could be shortened: either problem is what it finds.
    "GA403": ("low-occupancy", "register-spills"),
    "GA404": ("fp64-promotion",),
    "GA405": ("compute-bound",),
    "GA501": ("launch-overhead",),
}

# The problems whose fix is mechanical (issue 28: "an automatic, verified fix for >= 70% of the
# findings whose fix is mechanical"): a local change of the kernel or of its launch shape that
# keeps its algorithm, its data layout and its host code, the kind of rewrite a compiler could
# make once told it is safe. Decided by problem class before counting (2026-11-29), not per
# finding. Not mechanical: remapping threads to data or changing a layout the host shares
# (uncoalesced-strided, aos-fields), staging or tiling designs (cross-thread-reuse,
# low-arithmetic-intensity, shared-staging-unneeded), anything data-dependent, serial or
# compute-bound, host-side launches (launch-overhead), and grid or register-budget changes whose
# effect depends on the kernel's indexing (too-little-parallelism, low-occupancy, spills).
MECHANICAL = frozenset({
    "fp64-promotion", "global-accumulation-in-loop", "redundant-global-loads", "scalar-access",
    "bank-conflicts", "divergent-reduction", "idle-threads-reduction", "shared-tree-shuffles",
    "one-element-per-thread", "block-not-warp-multiple", "contended-atomics", "l2-locality",
    "unpacked-half", "duplicate-threads",
})  # fmt: skip

VOCABULARY = frozenset({
    "uncoalesced-strided", "aos-fields", "data-dependent-gather", "scalar-access",
    "cross-thread-reuse", "redundant-global-loads", "global-accumulation-in-loop",
    "bank-conflicts", "divergent-reduction", "idle-threads-reduction", "shared-tree-shuffles",
    "one-element-per-thread", "too-little-parallelism", "low-occupancy",
    "block-not-warp-multiple", "divergence", "serial-work", "duplicate-threads",
    "fp64-promotion", "contended-atomics", "low-arithmetic-intensity", "l2-locality",
    "register-spills", "unpacked-half", "launch-overhead", "shared-staging-unneeded",
    "compute-bound",
})  # fmt: skip

LINE_SLACK = 2
VERDICTS = ("right", "minor", "wrong")


class ManifestError(ValueError):
    """A manifest or judgement file that breaks the format (README.md)."""


@dataclass(frozen=True)
class Repo:
    key: str
    repo: str  # owner/name
    commit: str
    licence: str
    licence_file: str
    files: tuple[str, ...]
    cublas: bool = False


@dataclass(frozen=True)
class Expectation:
    problem: str
    lines: tuple[int, ...]
    main: bool
    why: str


@dataclass(frozen=True)
class Kernel:
    name: str
    repo: str
    path: str
    entry: Mapping[str, Any]  # the manifest entry as written (launch spec keys)
    expect: tuple[Expectation, ...]
    silent: frozenset[str]
    clean: bool
    slice: str


@dataclass(frozen=True)
class Corpus:
    repos: dict[str, Repo]
    kernels: list[Kernel]
    judged: dict[tuple[str, str, int], tuple[str, str]]  # (kernel, rule, line) -> (verdict, reason)


def _repo(key: str, r: Mapping[str, Any], where: str) -> Repo:
    try:
        return Repo(key, r["repo"], r["commit"], r["licence"], r.get("licence_file", "LICENSE"),
                    tuple(r["files"]), bool(r.get("cublas", False)))  # fmt: skip
    except KeyError as e:
        raise ManifestError(f"{where}: [repos.{key}] lacks {e.args[0]}") from None


_EXPECT_KEYS = frozenset({"problem", "lines", "main", "why"})


def _expectation(d: Mapping[str, Any], where: str) -> Expectation:
    stray = set(d) - _EXPECT_KEYS
    if stray:
        raise ManifestError(
            f"{where}: {', '.join(sorted(stray))} inside a [[kernels.expect]] table; move the "
            "kernel's own keys above its first [[kernels.expect]] (TOML puts every key after "
            "that header into the expectation)"
        )
    problem = d.get("problem")
    if problem not in VOCABULARY:
        raise ManifestError(f"{where}: problem {problem!r} is not in the vocabulary (README.md)")
    lines = d.get("lines", [])
    if not isinstance(lines, list) or not all(isinstance(x, int) for x in lines):
        raise ManifestError(f"{where}: lines must be a list of line numbers")
    return Expectation(problem, tuple(lines), bool(d.get("main", False)), str(d.get("why", "")))


def load(manifests: Iterable[Path] | None = None, judged: Path | None = JUDGED) -> Corpus:
    """Every slice of the corpus, merged; raises ManifestError on a broken manifest."""
    files = sorted(manifests if manifests is not None else MANIFESTS.glob("*.toml"))
    repos: dict[str, Repo] = {}
    kernels: list[Kernel] = []
    names: set[str] = set()
    for path in files:
        doc = tomllib.loads(path.read_text())
        for key, r in doc.get("repos", {}).items():
            repo = _repo(key, r, path.name)
            old = repos.get(key)
            if old is not None:
                if (old.repo, old.commit) != (repo.repo, repo.commit):
                    raise ManifestError(
                        f"{path.name}: [repos.{key}] is {repo.repo}@{repo.commit[:12]} here and "
                        f"{old.repo}@{old.commit[:12]} in another slice; use one commit"
                    )
                merged = tuple(dict.fromkeys(old.files + repo.files))
                repo = Repo(key, old.repo, old.commit, old.licence, old.licence_file, merged,
                            old.cublas or repo.cublas)  # fmt: skip
            repos[key] = repo
        for e in doc.get("kernels", []):
            where = f"{path.name}: {e.get('name', '?')}"
            for k in ("name", "repo", "path", "kernel", "grid", "block"):
                if k not in e:
                    raise ManifestError(f"{where}: lacks {k}")
            if e["name"] in names:
                raise ManifestError(f"{where}: the name is used twice")
            names.add(e["name"])
            silent = frozenset(e.get("silent", []))
            unknown = silent - VOCABULARY - {"*"}
            if unknown:
                raise ManifestError(
                    f"{where}: silent names {sorted(unknown)}, not in the vocabulary"
                )
            expect = tuple(_expectation(x, where) for x in e.get("expect", []))
            clean = bool(e.get("clean", False))
            if not expect and not clean:
                raise ManifestError(f"{where}: no expectation; add one or say clean = true")
            kernels.append(Kernel(e["name"], e["repo"], e["path"], e, expect, silent, clean,
                                  path.stem))  # fmt: skip
    for k in kernels:
        if k.repo not in repos:
            raise ManifestError(f"{k.name}: repo {k.repo!r} is not in any [repos] table")
    verdicts: dict[tuple[str, str, int], tuple[str, str]] = {}
    if judged is not None and judged.is_file():
        for j in tomllib.loads(judged.read_text()).get("judged", []):
            if j.get("verdict") not in VERDICTS:
                raise ManifestError(f"judged.toml: {j.get('kernel')} {j.get('rule')}: verdict "
                                    f"must be one of {VERDICTS}")  # fmt: skip
            verdicts[(j["kernel"], j["rule"], int(j["line"]))] = (j["verdict"], j.get("reason", ""))
    return Corpus(repos, sorted(kernels, key=lambda k: k.name), verdicts)


# --- scoring -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    rule: str
    line: int | None
    file: str
    severity: str
    message: str = ""
    estimate: float | None = None
    estimate_kind: str | None = None
    measured: float | None = None  # the variant's speedup measured on the GPU (--measure)
    verified: bool | None = None  # its outputs matched the kernel's
    variant_safety: str | None = None  # automatic-and-verified | proxy | display-only
    fix_status: str | None = None  # its step in --diff: applied (verified) | rejected | ...

    @property
    def is_warning(self) -> bool:
        return self.severity in ("warning", "error", "rule-error")


def covers(f: Finding, x: Expectation, path: str) -> bool:
    """Does warning ``f`` meet expectation ``x`` (the rule addresses the problem, at its line)?"""
    if x.problem not in PROBLEMS_OF_RULE.get(f.rule, ()):
        return False
    if not x.lines:
        return True
    if f.line is None or Path(f.file).name != Path(path).name:
        return False
    return any(abs(f.line - line) <= LINE_SLACK for line in x.lines)


@dataclass
class KernelScore:
    name: str
    status: str
    main_total: int = 0
    main_found: int = 0
    missed: list[str] = field(default_factory=list)  # main problems not found
    right: list[str] = field(default_factory=list)  # "GA301:45" ...
    minor: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)
    rule_errors: list[str] = field(default_factory=list)
    # warnings meeting an expectation whose problem is MECHANICAL; of them, those with an
    # automatic variant, and those whose variant --diff applied (verified); None: not asked
    mechanical: list[str] = field(default_factory=list)
    automatic: list[str] = field(default_factory=list)
    fixed: list[str] | None = None


def score_kernel(k: Kernel, status: str, findings: list[Finding],
                 judged: Mapping[tuple[str, str, int], tuple[str, str]]) -> KernelScore:  # fmt: skip
    s = KernelScore(k.name, status)
    mains = [x for x in k.expect if x.main]
    s.main_total = len(mains)
    if status != "ok":
        s.missed = [f"{x.problem}@{','.join(map(str, x.lines)) or '*'}" for x in mains]
        return s
    warnings = [f for f in findings if f.is_warning]
    for x in mains:
        if any(covers(f, x, k.path) for f in warnings):
            s.main_found += 1
        else:
            s.missed.append(f"{x.problem}@{','.join(map(str, x.lines)) or '*'}")
    for f in warnings:
        tag = f"{f.rule}:{f.line}"
        if f.severity == "rule-error":
            s.rule_errors.append(tag)
            continue
        met = [x for x in k.expect if covers(f, x, k.path)]
        if met:
            s.right.append(tag)
            if any(x.problem in MECHANICAL for x in met):
                s.mechanical.append(tag)
                if f.variant_safety == "automatic-and-verified":
                    s.automatic.append(tag)
                if f.fix_status is not None:
                    s.fixed = s.fixed or []
                    if f.fix_status == "applied":
                        s.fixed.append(tag)
            continue
        problems = PROBLEMS_OF_RULE.get(f.rule, ())
        verdict = judged.get((k.name, f.rule, f.line or 0))
        if verdict is not None:
            getattr(s, verdict[0]).append(tag)
        elif "*" in k.silent or (problems and problems[0] in k.silent):
            s.wrong.append(tag)
        else:
            s.unjudged.append(tag)
    return s


@dataclass(frozen=True)
class Totals:
    kernels: int
    analysed: int
    main_total: int
    main_found: int
    right: int
    minor: int
    wrong: int
    unjudged: int
    wrong_by_rule: dict[str, int]
    unjudged_by_rule: dict[str, int]
    mechanical: int = 0
    automatic: int = 0
    fixed: int | None = None  # None: no run with --fixes

    @property
    def warnings(self) -> int:
        return self.right + self.minor + self.wrong + self.unjudged

    @property
    def recall(self) -> float:
        return self.main_found / self.main_total if self.main_total else 0.0

    @property
    def precision(self) -> float:
        judged = self.right + self.minor + self.wrong
        return self.right / judged if judged else 0.0

    @property
    def wrong_share(self) -> float:
        return self.wrong / self.warnings if self.warnings else 0.0


def totals(scores: list[KernelScore]) -> Totals:
    wrong = Counter(t.split(":")[0] for s in scores for t in s.wrong)
    unj = Counter(t.split(":")[0] for s in scores for t in s.unjudged)
    return Totals(
        kernels=len(scores),
        analysed=sum(s.status == "ok" for s in scores),
        main_total=sum(s.main_total for s in scores),
        main_found=sum(s.main_found for s in scores),
        right=sum(len(s.right) for s in scores),
        minor=sum(len(s.minor) for s in scores),
        wrong=sum(len(s.wrong) for s in scores),
        unjudged=sum(len(s.unjudged) for s in scores),
        wrong_by_rule=dict(sorted(wrong.items())),
        unjudged_by_rule=dict(sorted(unj.items())),
        mechanical=sum(len(s.mechanical) for s in scores),
        automatic=sum(len(s.automatic) for s in scores),
        fixed=None
        if all(s.fixed is None for s in scores)
        else sum(len(s.fixed or ()) for s in scores),
    )


def findings_of(doc: Mapping[str, Any]) -> list[Finding]:
    """The findings of one ``gpuadvise analyze --json`` document (with ``--diff``: each
    finding's step in the combined fix)."""
    fix = doc.get("fix")
    steps = {} if not isinstance(fix, Mapping) else {
        (st.get("rule"), st.get("line")): str(st.get("status")) for st in fix.get("steps") or []
    }  # fmt: skip
    out = []
    for f in doc.get("findings", []):
        est = f.get("estimated_speedup") or {}
        sev = "rule-error" if f.get("error") else str(f.get("severity", ""))
        meas = f.get("measured_speedup") or {}
        variant = f.get("variant") or {}
        status = steps.get((f.get("rule"), f.get("line")))
        if status is None and isinstance(fix, Mapping):
            status = "not offered" if not variant else "not applied"
        out.append(Finding(str(f.get("rule")), f.get("line"), str(f.get("file") or ""), sev,
                           str(f.get("message", ""))[:300], est.get("speedup"),
                           est.get("kind"), meas.get("speedup"), f.get("verified"),
                           variant.get("safety"), status))  # fmt: skip
    return out

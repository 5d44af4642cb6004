"""The registry: the rule files loaded and validated, the kernel cases that expect each rule,
and the selection and options of the configuration.

:func:`load_registry` loads the bundled rules (``rules/`` in a source checkout,
``gpuadvise/_rules`` in an installed wheel) and any ``--rules-dir``, and validates every rule at
load time: unique ids and names, complete documentation, options of plain types, known models, and
a case in ``kernels/`` (a ``.cu`` file carrying ``// expect: GAxxx``). A broken rule raises
:class:`RuleLoadError` naming the file and every problem; nothing is half-loaded.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpuadvise.errors import ConfigError, GpuAdviseError, UsageError
from gpuadvise.markers import EXPECT_RE
from gpuadvise.rules.context import Severity
from gpuadvise.rules.details import use_bundled_rules
from gpuadvise.rules.rule import MODELS, SEVERITIES, Rule, validate_rule

if TYPE_CHECKING:
    from gpuadvise.report_types import RuleDoc
    from gpuadvise.rules.config import Config

__all__ = [
    "Registry",
    "RuleLoadError",
    "builtin_kernels_dir",
    "builtin_rules_dir",
    "expectations",
    "load_registry",
]


class RuleLoadError(GpuAdviseError):
    """A rule file that cannot be loaded or is incomplete: fails loudly at load time."""


def _edits(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insertions, deletions, substitutions, transpositions."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def _swapped(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with two neighbouring characters swapped."""
    if len(a) != len(b):
        return False
    diff = [i for i in range(len(a)) if a[i] != b[i]]
    return (
        len(diff) == 2
        and diff[1] == diff[0] + 1
        and a[diff[0]] == b[diff[1]]
        and a[diff[1]] == b[diff[0]]
    )


def _package_dir() -> Path:
    """The ``gpuadvise`` package folder."""
    return Path(__file__).resolve().parents[1]


def builtin_rules_dir() -> Path | None:
    """``gpuadvise/_rules`` in an installed wheel, else ``rules/`` of the source checkout."""
    pkg = _package_dir()
    for cand in (pkg / "_rules", pkg.parent / "rules"):
        if cand.is_dir():
            return cand
    return None


def builtin_kernels_dir() -> Path | None:
    """``gpuadvise/_kernels`` in an installed wheel, else ``kernels/`` of the source checkout."""
    pkg = _package_dir()
    for cand in (pkg / "_kernels", pkg.parent / "kernels"):
        if cand.is_dir():
            return cand
    return None


def expectations(path: str | os.PathLike[str]) -> dict[int, tuple[str, ...]]:
    """``// expect: GA201[, GA202]`` annotations of a source file: line -> rule ids."""
    out: dict[int, tuple[str, ...]] = {}
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    for n, line in enumerate(text.splitlines(), 1):
        m = EXPECT_RE.search(line)
        if m:
            out[n] = tuple(x.strip() for x in m.group(1).split(","))
    return out


def _case_index(dirs: Iterable[Path]) -> dict[str, list[Path]]:
    """Rule id -> the kernel sources (``*.cu``, ``*.cuh``) that expect it."""
    index: dict[str, list[Path]] = {}
    for d in dirs:
        if not d.is_dir():
            continue
        for path in sorted(d.rglob("*")):
            if path.suffix not in (".cu", ".cuh") or not path.is_file():
                continue
            for ids in expectations(path).values():
                for rid in ids:
                    paths = index.setdefault(rid, [])
                    if path not in paths:
                        paths.append(path)
    return index


_LOADED: dict[str, tuple[bytes, ModuleType]] = {}
"""Module name -> the content digest of the rule file it was loaded from, and the module."""


def _import_rule_file(path: Path) -> ModuleType:
    """The rule file at ``path`` as the module ``gpuadvise_rules_<path digest>.<stem>``: loaded
    once per process while its content is unchanged. A second registry (other rules folders)
    takes the same module, so a rule's classes are one class per process: a forked rules child
    pickles a finding's details by module name (:mod:`gpuadvise.rules.split`), and a module
    loaded again under that name made the parent read them back as another class, unequal to
    its own (a test-order failure of tests/rules/test_rule_processes.py, session 22)."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    mod_name = f"gpuadvise_rules_{digest}.{path.stem}"
    content = hashlib.sha256(path.read_bytes()).digest()
    loaded = _LOADED.get(mod_name)
    if loaded is not None and loaded[0] == content and sys.modules.get(mod_name) is loaded[1]:
        return loaded[1]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(mod_name, None)
        _LOADED.pop(mod_name, None)
        raise
    _LOADED[mod_name] = content, module
    return module


@dataclass(frozen=True)
class Registry:
    """The loaded rules, in id order, and the kernel cases that expect each."""

    rules: tuple[Rule, ...]
    cases: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)
    dirs: tuple[Path, ...] = ()

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.rules)

    def find(self, key: str) -> Rule | None:
        """A rule by id (any case) or name."""
        k = key.strip()
        for r in self.rules:
            if r.id == k.upper() or r.name == k.lower():
                return r
        return None

    def rule_doc(self, rule: Rule) -> RuleDoc:
        """``rule`` as ``gpuadvise rules`` and ``explain`` print it (the report's RuleDoc)."""
        from gpuadvise.report_types import RuleDoc

        return RuleDoc(
            id=rule.id,
            name=rule.name,
            title=rule.title,
            severity=rule.severity,
            models=tuple((m, MODELS[m]) for m in rule.models),
            options=tuple(rule.options.items()),
            cases=tuple(str(p) for p in self.cases.get(rule.id, ())),
            origin=None if rule.origin is None else str(rule.origin),
            doc=rule.doc(),
        )

    def get(self, key: str) -> Rule:
        """A rule by id or name; an unknown one is a UsageError naming the close matches."""
        r = self.find(key)
        if r is not None:
            return r
        raise UsageError(f"no rule {key!r}", self.suggest(key))

    def suggest(self, key: str) -> str:
        words = [r.id for r in self.rules] + [r.name for r in self.rules]
        close = difflib.get_close_matches(key.strip(), words, n=10, cutoff=0.5)
        close += difflib.get_close_matches(key.strip().upper(), words, n=10, cutoff=0.5)
        close = list(dict.fromkeys(close))
        # a swapped pair of digits (GA210 for GA201) is one edit: those first, and before a
        # one-character slip of the same distance (GA210: GA201 before GA310), as ids are
        # typed with their digits swapped more often than with a digit replaced
        typed = key.strip().upper()
        close.sort(key=lambda w: (_edits(typed, w.upper()), not _swapped(typed, w.upper())))
        close = close[:3]
        if close:
            return "did you mean " + " or ".join(close) + "? (`gpuadvise rules` lists them)"
        return "`gpuadvise rules` lists them"

    # selection (ruff-like prefixes)

    def matching(self, selector: str) -> list[Rule]:
        """Rules a selector names: ``ALL``, an id prefix (``GA2`` -> GA2xx) or a rule name."""
        s = selector.strip()
        if s.upper() == "ALL":
            return list(self.rules)
        if s.upper().startswith("GA"):
            return [r for r in self.rules if r.id.startswith(s.upper())]
        return [r for r in self.rules if r.name == s.lower()]

    def _specificity(self, rule: Rule, selectors: Sequence[str]) -> int:
        """How specifically ``selectors`` name ``rule``: -1 not at all, 0 ALL, else prefix
        length (a name counts as a full id)."""
        best = -1
        for s in selectors:
            t = s.strip()
            if t.upper() == "ALL":
                best = max(best, 0)
            elif t.upper().startswith("GA") and rule.id.startswith(t.upper()):
                best = max(best, len(t))
            elif t.lower() == rule.name:
                best = max(best, len(rule.id))
        return best

    def check_selectors(self, selectors: Iterable[str], what: str) -> None:
        for s in selectors:
            if not self.matching(s):
                raise UsageError(f"{what} {s!r} matches no rule", self.suggest(s))

    def selected(self, config: Config | None) -> list[Rule]:
        """The enabled rules: the configuration's ``select``/``ignore`` (every rule when it has
        no ``select``), then the command line's. Within one layer the more specific selector wins
        (``select = ["GA2"]``, ``ignore = ["GA201"]``: GA2xx but GA201; at equal specificity
        ignore wins); a layer with a ``select`` starts afresh, as ruff does."""
        if config is None:
            return list(self.rules)
        enabled = {r.id: True for r in self.rules}
        layers = [(config.select, config.ignore, "select/ignore in " + str(config.path or ""))]
        layers.append((config.cli_select, config.cli_ignore, "--select/--ignore"))
        for select, ignore, what in layers:
            self.check_selectors(select or (), what)
            self.check_selectors(ignore, what)
            for r in self.rules:
                sel = self._specificity(r, select) if select is not None else -1
                ign = self._specificity(r, ignore)
                if select is not None and sel < 0 and ign < 0:
                    enabled[r.id] = False
                elif sel > ign:
                    enabled[r.id] = True
                elif ign >= 0 and ign >= sel:
                    enabled[r.id] = False
        return [r for r in self.rules if enabled[r.id]]

    def options_for(self, rule: Rule, config: Config | None) -> dict[str, Any]:
        """The rule's defaults overridden by the configuration (types checked)."""
        opts = dict(rule.options)
        if config is None:
            return opts
        for key, table in config.rule_options.items():
            if self.find(key) is not rule:
                continue
            for name, value in table.items():
                if name == "severity":
                    continue
                opt = name.replace("-", "_")
                if opt not in opts:
                    known = ", ".join(sorted(rule.options)) or "none"
                    raise ConfigError(
                        f"{rule.id} ({rule.name}) has no option {name!r} "
                        f"(in {config.path or 'the configuration'})",
                        f"its options: {known}",
                    )
                opts[opt] = _coerce_option(rule, opt, value, config.path)
        return opts

    def severity_for(self, rule: Rule, config: Config | None) -> Severity | None:
        if config is None:
            return None
        for key, table in config.rule_options.items():
            if self.find(key) is rule and "severity" in table:
                sev = table["severity"]
                if sev not in SEVERITIES:
                    raise ConfigError(
                        f"severity {sev!r} for {rule.id} is not one of {', '.join(SEVERITIES)}",
                        f'write severity = "{SEVERITIES[1]}" (or another of those)',
                    )
                return sev  # type: ignore[no-any-return]
        return None

    def check_config(self, config: Config) -> None:
        """Every rule named in the configuration's per-rule tables exists, with those options."""
        for key in config.rule_options:
            rule = self.find(key)
            if rule is None:
                raise ConfigError(
                    f"[rules.{key}] in {config.path or 'the configuration'} names no rule",
                    self.suggest(key),
                )
            self.options_for(rule, config)
            self.severity_for(rule, config)


def _coerce_option(rule: Rule, name: str, value: Any, where: Path | None) -> Any:
    default = rule.options[name]
    ok = (
        isinstance(value, type(default))
        if not isinstance(default, float)
        else isinstance(value, int | float) and not isinstance(value, bool)
    )
    if isinstance(default, int) and not isinstance(default, bool) and isinstance(value, bool):
        ok = False
    if not ok:
        raise ConfigError(
            f"option {name} of {rule.id} must be {type(default).__name__} "
            f"(got {value!r} in {where or 'the configuration'})",
            f"the default is {default!r}",
        )
    return float(value) if isinstance(default, float) else value


_REGISTRY_CACHE: dict[tuple[str, ...], Registry] = {}


def load_registry(
    extra_dirs: Iterable[str | os.PathLike[str]] = (),
    *,
    builtin: bool = True,
    kernels_dirs: Iterable[str | os.PathLike[str]] = (),
) -> Registry:
    """Load and validate the rules: the bundled ones (``builtin``) and those in ``extra_dirs``.

    Kernel cases are looked for in the bundled ``kernels/``, in ``kernels_dirs``, and in
    ``kernels/`` inside or beside each extra rules directory. Raises :class:`RuleLoadError`
    listing every problem of every broken rule file. Cached per set of directories.
    """
    dirs: list[Path] = []
    if builtin:
        b = builtin_rules_dir()
        if b is None:
            raise RuleLoadError(
                "the bundled rules are missing (no rules/ beside gpuadvise/ nor gpuadvise/_rules)",
                "reinstall gpuadvise",
            )
        dirs.append(b)
    for d in extra_dirs:
        p = Path(d).expanduser().resolve()
        if not p.is_dir():
            raise RuleLoadError(f"rules directory {d} does not exist", "check --rules-dir")
        if p not in dirs:
            dirs.append(p)
    kdirs: list[Path] = []
    bk = builtin_kernels_dir()
    if builtin and bk is not None:
        kdirs.append(bk)
    kdirs += [Path(k).expanduser().resolve() for k in kernels_dirs]
    for d in dirs[1:] if builtin else dirs:
        kdirs += [d / "kernels", d.parent / "kernels"]
    key = tuple(str(p) for p in (*dirs, Path("|"), *kdirs))
    cached = _REGISTRY_CACHE.get(key)
    if cached is not None:
        return cached

    problems: list[str] = []
    found: list[Rule] = []
    for d in dirs:
        for path in sorted(d.glob("*.py")):
            if path.name.startswith("_"):
                continue
            try:
                module = _import_rule_file(path)
            except Exception as exc:
                tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
                problems.append(f"{path}: cannot be imported: {tb}")
                continue
            classes = [
                v
                for v in vars(module).values()
                if isinstance(v, type)
                and issubclass(v, Rule)
                and v is not Rule
                and v.__module__ == module.__name__
            ]
            if len(classes) != 1:
                problems.append(
                    f"{path}: must define exactly one Rule subclass (found {len(classes)})"
                )
                continue
            cls = classes[0]
            errs = validate_rule(cls, path)
            if errs:
                problems.append(f"{path}: {cls.__name__}: " + "; ".join(errs))
                continue
            cls.origin = path
            cls._module = module
            try:
                found.append(cls())
            except Exception as exc:
                problems.append(f"{path}: {cls.__name__}() failed: {type(exc).__name__}: {exc}")
    by_id: dict[str, Rule] = {}
    by_name: dict[str, Rule] = {}
    for r in found:
        if r.id in by_id:
            problems.append(f"{r.origin}: id {r.id} is also used by {by_id[r.id].origin}")
        if r.name in by_name:
            problems.append(f"{r.origin}: name {r.name} is also used by {by_name[r.name].origin}")
        by_id.setdefault(r.id, r)
        by_name.setdefault(r.name, r)
    cases = _case_index(dict.fromkeys(kdirs))
    for r in found:
        if r.id not in cases:
            where = ", ".join(str(k) for k in dict.fromkeys(kdirs) if k.is_dir()) or "no kernels/"
            problems.append(
                f"{r.origin}: {r.id} has no kernel case: no .cu file in {where} carries "
                f"`// expect: {r.id}`"
            )
    if problems:
        raise RuleLoadError(
            f"{len(problems)} problem(s) loading rules:\n  " + "\n  ".join(problems),
            "fix the rule file(s) named above",
        )
    rules = tuple(sorted(found, key=lambda r: r.id))
    reg = Registry(rules, {k: tuple(v) for k, v in cases.items()}, tuple(dirs))
    _REGISTRY_CACHE[key] = reg
    return reg


# a finding read back from JSON without a registry finds its details class in the bundled rules
use_bundled_rules(load_registry)

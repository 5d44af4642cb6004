"""The nvcc flags a gate configuration may ask for without ``--trust-config``.

Spec and gate files are code: nvcc runs the host compiler ``-ccbin`` names, passes ``-Xcompiler``
options to it, runs the program it built with ``--run``, writes where ``-o``/``--keep-dir`` say,
and nvcc hands its command lines to a shell, so a flag with ``$(...)`` in it runs a program. A
gate job often runs on pull requests, forks included, so the flags that come from the
configuration under test (``nvcc_flags`` of gate cases and of the specs they use) are checked
against an allow-list of flags that only change the code generated: optimisation levels, defines,
include folders inside the repository, the language standard, fast math, line info, known-safe
ptxas options, a register cap, the target architecture. Anything else is a configuration error
unless the user passes ``--trust-config``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RefusedFlag", "refused_flag"]

# Characters a flag may hold at all: no whitespace, quotes, or shell metacharacters ($ ` ; & | <
# > \ and newlines), since nvcc runs its steps through a shell.
_SAFE_TEXT = re.compile(r"[A-Za-z0-9_.+\-*/%=,:()\[\]@^]*")

_ARCH = r"(?:sm|compute|lto)_\d+[af]?"
_ALLOWED = tuple(
    re.compile(p)
    for p in (
        r"-O[0-3]",
        r"(?:-D|--define-macro=)[A-Za-z_]\w*(?:\([\w,]*\))?(?:=[\w.+\-*/%=,:()^]*)?",
        r"--?std=(?:c\+\+|gnu\+\+)?\d\d",
        r"--?use[_-]fast[_-]math",
        r"-lineinfo|--generate-line-info",
        r"--?maxrregcount=\d{1,3}",
        r"--?(?:ftz|prec-div|prec-sqrt|fmad)=(?:true|false)",
        r"--?(?:extended-lambda|expt-extended-lambda|expt-relaxed-constexpr)",
        r"-G|--device-debug|-g|--debug",
        r"--?restrict",
        r"-w|--disable-warnings|-Werror=[a-z,-]+|-W(?:no-)?[a-z][a-z0-9-]*",
        r"--?(?:diag-suppress|diag-warn|diag-error)=\d+(?:,\d+)*",
        r"--?(?:resource-usage|res-usage|display-error-number|source-in-ptx|src-in-ptx)",
        r"--?default-stream=(?:legacy|null|per-thread)",
        r"(?:-arch|--gpu-architecture)=" + _ARCH,
        r"(?:-gencode|--generate-code)=arch=compute_\d+[af]?,code=\[?"
        + _ARCH
        + r"(?:,"
        + _ARCH
        + r")*\]?",
        r"(?:--threads|-t)=\d{1,3}",
    )
)
# Flags whose value is the next list element.
_PAIRED = {
    "-I": "include",
    "--include-path": "include",
    "-D": "define",
    "--define-macro": "define",
    "-Xptxas": "ptxas",
    "--ptxas-options": "ptxas",
    "-maxrregcount": "number",
    "--maxrregcount": "number",
    "-arch": "arch",
    "--gpu-architecture": "arch",
    "-gencode": "gencode",
    "--generate-code": "gencode",
    "--threads": "number",
    "-t": "number",
}
_PTXAS_ALLOWED = tuple(
    re.compile(p)
    for p in (
        r"-O[0-3]",
        r"-v|--verbose",
        r"--warn-on-spills|-warn-spills",
        r"--warn-on-local-memory-usage|-warn-lmem-usage",
        r"--warn-on-double-precision-use|-warn-double-usage",
        r"--?allow-expensive-optimizations(?:=(?:true|false))?",
        r"--?maxrregcount=\d{1,3}",
        r"(?:--def-load-cache|-dlcm)=(?:ca|cg|cs|lu|cv)",
        r"(?:--def-store-cache|-dscm)=(?:wb|cg|cs|wt)",
        r"--?fmad=(?:true|false)",
        r"--disable-optimizer-constants|-disable-optimizer-consts",
        r"--device-debug|-g|--generate-line-info|-lineinfo",
        r"--sp-bounds-check|-sp-bounds-check",
        r"--suppress-stack-size-warning|--suppress-double-demote-warning",
        r"--warning-as-error|-Werror",
    )
)
# Why the well-known dangerous flags are refused (the message names the reason).
_DANGER = {
    "-ccbin": "it runs another program as the host compiler",
    "--compiler-bindir": "it runs another program as the host compiler",
    "-Xcompiler": "it passes options to the host compiler",
    "--compiler-options": "it passes options to the host compiler",
    "-Xlinker": "it passes options to the linker",
    "--linker-options": "it passes options to the linker",
    "-Xnvlink": "it passes options to the device linker",
    "--nvlink-options": "it passes options to the device linker",
    "-Xarchive": "it passes options to the archiver",
    "--archive-options": "it passes options to the archiver",
    "--run": "it runs the program nvcc builds",
    "-run": "it runs the program nvcc builds",
    "--run-args": "it runs the program nvcc builds",
    "-o": "it writes a file where it says",
    "--output-file": "it writes a file where it says",
    "--keep": "it keeps intermediate files",
    "-keep": "it keeps intermediate files",
    "--keep-dir": "it writes intermediate files where it says",
    "-keep-dir": "it writes intermediate files where it says",
    "-odir": "it writes files where it says",
    "--output-directory": "it writes files where it says",
    "-MF": "it writes a file where it says",
    "--dependency-output": "it writes a file where it says",
    "--options-file": "it reads more flags from a file",
    "-optf": "it reads more flags from a file",
    "-include": "it includes a file the source does not name",
    "--pre-include": "it includes a file the source does not name",
    "-L": "it adds a library folder",
    "--library-path": "it adds a library folder",
    "-l": "it links a library",
    "--library": "it links a library",
    "-isystem": "it adds an include folder (use -I inside the repository)",
    "--system-include": "it adds an include folder (use -I inside the repository)",
}

# Short flags glued to their value (-L/usr/lib, -lcuda).
_DANGER_PREFIXES = (("-L", "it adds a library folder"), ("-l", "it links a library"))


@dataclass(frozen=True)
class RefusedFlag:
    """A flag the allow-list refuses: the flag as written and why."""

    flag: str
    reason: str


def _include_ok(path_text: str, repo: Path, cwd: Path) -> str | None:
    """Why an include folder is refused, or None (it must lie inside the repository)."""
    if not path_text or not _SAFE_TEXT.fullmatch(path_text):
        return "its path holds characters a shell would interpret"
    p = Path(path_text).expanduser()
    resolved = (p if p.is_absolute() else cwd / p).resolve()
    try:
        resolved.relative_to(repo.resolve())
    except ValueError:
        return f"the include folder {resolved} lies outside the repository ({repo})"
    return None


def _ptxas_ok(options: str) -> str | None:
    for opt in options.split(","):
        if not any(p.fullmatch(opt) for p in _PTXAS_ALLOWED):
            return f"the ptxas option {opt!r} is not on the allow-list"
    return None


def _paired_ok(kind: str, value: str, repo: Path, cwd: Path) -> str | None:
    if kind == "include":
        return _include_ok(value, repo, cwd)
    if kind == "ptxas":
        return _ptxas_ok(value)
    if kind == "define":
        return None if _ALLOWED[1].fullmatch("-D" + value) else f"{value!r} is not NAME[=VALUE]"
    if kind == "number":
        return None if re.fullmatch(r"\d{1,3}", value) else f"{value!r} is not a number"
    if kind == "arch":
        return None if re.fullmatch(_ARCH, value) else f"{value!r} is not an architecture"
    if kind == "gencode":
        ok = re.fullmatch(
            r"arch=compute_\d+[af]?,code=\[?" + _ARCH + r"(?:," + _ARCH + r")*\]?", value
        )
        return None if ok else f"{value!r} is not an arch=...,code=... pair"
    return "unknown"


def refused_flag(flags: Sequence[str], *, repo: Path, cwd: Path) -> RefusedFlag | None:
    """The first of ``flags`` (an nvcc argument list) that is not on the allow-list, or None.

    Include folders (``-I``) must lie inside ``repo``; relative ones are taken from ``cwd`` (where
    nvcc will resolve them).
    """
    i = 0
    while i < len(flags):
        flag = flags[i]
        if flag in _PAIRED:
            if i + 1 >= len(flags):
                return RefusedFlag(flag, "it needs a value, and none follows")
            value = flags[i + 1]
            why = _paired_ok(_PAIRED[flag], value, repo, cwd)
            if why is not None:
                return RefusedFlag(f"{flag} {value}", why)
            i += 2
            continue
        if not _SAFE_TEXT.fullmatch(flag):
            return RefusedFlag(flag, "it holds characters a shell would interpret")
        if flag.startswith(("-I", "--include-path=")):
            value = flag[2:] if flag.startswith("-I") else flag.split("=", 1)[1]
            why = _include_ok(value, repo, cwd)
            if why is not None:
                return RefusedFlag(flag, why)
        elif flag.startswith(("-Xptxas=", "--ptxas-options=")):
            why = _ptxas_ok(flag.split("=", 1)[1])
            if why is not None:
                return RefusedFlag(flag, why)
        elif not any(p.fullmatch(flag) for p in _ALLOWED):
            name = flag.split("=", 1)[0]
            reason = _DANGER.get(name) or next(
                (why for pre, why in _DANGER_PREFIXES if flag.startswith(pre)),
                "it is not on the allow-list of flags that only change the generated code",
            )
            return RefusedFlag(flag, reason)
        i += 1
    return None

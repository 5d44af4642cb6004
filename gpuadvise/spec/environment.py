"""The ``GPUADVISE_*`` environment variables, read and checked in one place.

- ``GPUADVISE_MEMORY_BUDGET``: caps the memory gpuadvise may use (:mod:`gpuadvise.spec.budget`):
  a positive size, bytes or with a unit (``2G``, ``512M``, ``1073741824``, ``0x40000000``;
  k = 1024).
- ``GPUADVISE_CACHE_DIR``: the folder of the caches (:mod:`gpuadvise.toolchain.cache_dir`).
- ``GPUADVISE_NVCC``: the nvcc to use, a binary or a toolkit folder
  (:mod:`gpuadvise.toolchain.find`).
- ``GPUADVISE_RULE_PROCESSES``: ``1`` runs the rules in the analysing process alone; ``2`` (the
  default) splits them over it and a forked child where two CPUs and ``fork`` allow
  (:mod:`gpuadvise.rules.split`).

A variable set to the empty string counts as unset (``GPUADVISE_NVCC= gpuadvise ...`` is how a
shell unsets one for a command). Any other value that is blank or malformed is a
:class:`~gpuadvise.errors.UsageError` naming the variable and the forms it takes, never a value
silently ignored. :func:`check_environment` checks them all (the CLI, before a command runs).
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuadvise.errors import UsageError
from gpuadvise.fileio import lookup_problem

__all__ = [
    "CACHE_DIR",
    "MEMORY_BUDGET",
    "NVCC",
    "RULE_PROCESSES",
    "cache_dir",
    "check_environment",
    "memory_budget_cap",
    "nvcc",
    "rule_processes",
]

MEMORY_BUDGET = "GPUADVISE_MEMORY_BUDGET"
CACHE_DIR = "GPUADVISE_CACHE_DIR"
NVCC = "GPUADVISE_NVCC"
RULE_PROCESSES = "GPUADVISE_RULE_PROCESSES"

_SIZE_FORMS = "a positive size such as 2G, 512M or 1073741824 (bytes; k = 1024)"


def _value(name: str, forms: str) -> str | None:
    """The variable's text; None when unset or empty; a UsageError when only blanks."""
    text = os.environ.get(name)
    if not text:
        return None
    if not text.strip():
        raise UsageError(f"{name} is set but blank", f"set it to {forms}, or unset it")
    return text


def memory_budget_cap() -> int | None:
    """``GPUADVISE_MEMORY_BUDGET`` in bytes (None: not set)."""
    from gpuadvise.spec.units import parse_size

    text = _value(MEMORY_BUDGET, _SIZE_FORMS)
    if text is None:
        return None
    hint = f"set it to {_SIZE_FORMS}, or unset it"
    try:
        size = parse_size(text, MEMORY_BUDGET)
    except UsageError:
        raise UsageError(f"{MEMORY_BUDGET}={text.strip()!r} is not a memory size", hint) from None
    if size <= 0:
        raise UsageError(f"{MEMORY_BUDGET}={text.strip()!r} leaves no memory to use", hint)
    return size


def _path(name: str, what: str) -> Path | None:
    text = _value(name, what)
    if text is None:
        return None
    path = Path(text).expanduser()
    problem = lookup_problem(path)
    if problem is not None:
        raise UsageError(f"{name}={text!r} {problem}", f"set it to {what}, or unset it")
    return path


def cache_dir() -> Path | None:
    """``GPUADVISE_CACHE_DIR`` (None: not set); a path that exists must be a folder."""
    path = _path(CACHE_DIR, "a folder gpuadvise may write")
    if path is not None and path.exists() and not path.is_dir():
        raise UsageError(
            f"{CACHE_DIR}={str(path)!r} is not a folder",
            "set it to a folder gpuadvise may write (it is created when missing), or unset it",
        )
    return path


def nvcc() -> str | None:
    """``GPUADVISE_NVCC`` (None: not set); whether it runs is :mod:`gpuadvise.toolchain.find`'s
    to say."""
    path = _path(NVCC, "an nvcc binary or a CUDA toolkit folder")
    return None if path is None else os.environ[NVCC]


def rule_processes() -> int | None:
    """``GPUADVISE_RULE_PROCESSES``: 1 or 2 (None: not set)."""
    forms = "1 (the rules in the analysing process alone) or 2 (the default)"
    text = _value(RULE_PROCESSES, forms)
    if text is None:
        return None
    if text.strip() not in ("1", "2"):
        raise UsageError(
            f"{RULE_PROCESSES}={text.strip()!r} is not 1 or 2", f"set it to {forms}, or unset it"
        )
    return int(text)


def check_environment() -> None:
    """Every variable above checked: a UsageError for the first one that is wrong."""
    memory_budget_cap()
    cache_dir()
    nvcc()
    rule_processes()

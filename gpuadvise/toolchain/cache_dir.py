"""Where gpuadvise keeps what it caches (compiled modules, analyses, the toolchain probe), and
whether that folder may be used: a module of its own, so that the toolchain's finder can use it
without importing the compile cache.

A cache root is used only when it is safe to write there and to read back what is there:

- an existing root must be a folder the current user owns, that no one else may write into
  (group- or world-writable only with the sticky bit), and that is gpuadvise's: empty, tagged
  with a ``CACHEDIR.TAG`` (https://bford.info/cachedir/, written when gpuadvise creates or first
  uses the folder), or holding only the folders gpuadvise makes (a cache of an older version).
  ``GPUADVISE_CACHE_DIR=/`` once created ``/entries``, ``/manifests`` ... beside ``/etc``;
- a missing root is created where its nearest existing parent is owned by the user or by root,
  and writable by others only with the sticky bit (``/tmp/gpuadvise-cache`` is fine).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpuadvise.errors import UsageError

__all__ = ["CACHE_TAG", "cache_root_problem", "checked_cache_root", "default_cache_root"]

CACHE_TAG = "CACHEDIR.TAG"
_TAG_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by gpuadvise.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
# What gpuadvise writes at the top of its cache root (toolchain/, compile.py, result_cache.py,
# services.py (candidates/: the rules' candidates, --fix's steps and the traced variants'
# sources), prepare.py; the layout proxies' sources: cache.content_folder; variants/: the traced
# variants' sources of an older gpuadvise): a root holding only these is an older gpuadvise cache.
_OWN_NAMES = frozenset(
    {CACHE_TAG, "entries", "manifests", "analysis", "toolchain", "tmp", "wrappers", "candidates"}
    | {"variants", "proxies"}
)
_OWN_PREFIXES = ("ceiling-",)
_FIX = "set GPUADVISE_CACHE_DIR to a folder of your own (a new or empty one), or use --no-cache"


def default_cache_root() -> Path:
    """``$GPUADVISE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuadvise``, else ``~/.cache/gpuadvise``.
    A blank or malformed ``GPUADVISE_CACHE_DIR`` is a UsageError (:mod:`gpuadvise.spec.environment`)."""
    from gpuadvise.spec.environment import cache_dir

    env = cache_dir()
    if env is not None:
        return env
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "gpuadvise"


def _open_to_others(mode: int) -> bool:
    return bool(mode & (stat.S_IWGRP | stat.S_IWOTH)) and not mode & stat.S_ISVTX


def _ours(name: str) -> bool:
    return name in _OWN_NAMES or name.startswith(_OWN_PREFIXES)


def cache_root_problem(root: Path) -> str | None:
    """Why ``root`` must not be used as a cache root (see the module docstring), or None."""
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    try:
        st = os.stat(root)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as err:
        return f"the cache folder {root} cannot be read ({getattr(err, 'strerror', None) or err})"
    if st is None:  # to be created: judge the folder it would be created in
        parent = root.parent
        while not parent.exists() and parent.parent != parent:
            parent = parent.parent
        try:
            pst = os.stat(parent)
        except OSError as err:
            return f"the folder {parent} cannot be read ({err.strerror or err})"
        if not stat.S_ISDIR(pst.st_mode):
            return f"{parent}, where the cache folder {root} would be made, is not a folder"
        if uid is not None and pst.st_uid not in (uid, 0):
            return f"{parent}, where the cache folder {root} would be made, belongs to another user"
        if _open_to_others(pst.st_mode):
            return (
                f"{parent}, where the cache folder {root} would be made, can be written by other "
                "users (and has no sticky bit)"
            )
        return None
    if not stat.S_ISDIR(st.st_mode):
        return f"the cache folder {root} is not a folder"
    if uid is not None and st.st_uid != uid:
        return f"the cache folder {root} belongs to another user (uid {st.st_uid})"
    if _open_to_others(st.st_mode):
        return f"the cache folder {root} can be written by other users (and has no sticky bit)"
    try:
        names = os.listdir(root)
    except OSError as err:
        return f"the cache folder {root} cannot be read ({err.strerror or err})"
    if names and CACHE_TAG not in names and not all(_ours(n) for n in names):
        return (
            f"{root} holds files that are not gpuadvise's (it has no {CACHE_TAG}), so it is not "
            "a gpuadvise cache folder"
        )
    return None


def checked_cache_root(root: Path) -> Path:
    """``root``, created and tagged when it may be used as a cache root; else a one-line
    :class:`~gpuadvise.errors.UsageError` saying why and what to set instead."""
    problem = cache_root_problem(root)
    if problem is not None:
        raise UsageError(problem, _FIX)
    tag = root / CACHE_TAG
    if not tag.is_file():
        try:
            root.mkdir(parents=True, exist_ok=True)
            if not (tag.exists() or tag.is_symlink()):
                with open(tag, "x", encoding="utf-8") as f:
                    f.write(_TAG_TEXT)
        except FileExistsError:
            pass  # a concurrent run tagged it
        except OSError:
            pass  # an unwritable cache: the write that needs it says so
    return root

"""git for ``gpuadvise gate --baseline-ref``: the repository top, HEAD, and a temporary worktree of
the baseline revision that is removed afterwards whatever happens."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from gpuadvise.errors import UsageError

__all__ = ["GitFailed", "baseline_worktree", "git", "git_head", "repo_top"]


class GitFailed(Exception):
    """A git command exited non-zero (its stderr is the message)."""


def git(args: Sequence[str], cwd: Path) -> str:
    """Run ``git args`` in ``cwd``; its stripped stdout. :class:`GitFailed` when it fails."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise UsageError("--baseline-ref needs git, and git was not found", "install git") from None
    if proc.returncode != 0:
        raise GitFailed(proc.stderr.strip() or proc.stdout.strip())
    return proc.stdout.strip()


def repo_top(folder: Path) -> Path | None:
    """The top of the git repository holding ``folder``, or None."""
    try:
        return Path(git(["rev-parse", "--show-toplevel"], folder)).resolve()
    except (GitFailed, UsageError, OSError):
        return None


def git_head(folder: Path) -> str | None:
    """The commit checked out in ``folder``'s repository, or None."""
    try:
        return git(["rev-parse", "HEAD"], folder) or None
    except (GitFailed, UsageError, OSError):
        return None


@contextlib.contextmanager
def baseline_worktree(rev: str, repo_dir: Path) -> Iterator[tuple[Path, Path]]:
    """Check out ``rev`` of the repository holding ``repo_dir`` into a temporary folder
    (``git worktree add --detach``); yields ``(checkout, repository top)``. The worktree and the
    folder are removed afterwards, whatever happens."""
    top = repo_top(repo_dir)
    if top is None:
        raise UsageError(
            f"{repo_dir} is not inside a git repository",
            "--baseline-ref checks out REV from the repository that holds the gate config",
        )
    try:
        sha = git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], top)
    except GitFailed:
        sha = ""
    if not sha:
        raise UsageError(
            f"git does not know the revision {rev!r} in {top}",
            "fetch it first (actions/checkout with fetch-depth: 0, or git fetch origin BRANCH)",
        )
    tmp = Path(tempfile.mkdtemp(prefix="gpuadvise-baseline-"))
    tree = tmp / "tree"
    try:
        try:
            git(["worktree", "add", "--detach", str(tree), sha], top)
        except GitFailed as err:
            raise UsageError(f"cannot check out {rev!r} ({err})", "check the repository") from None
        yield tree, top
    finally:
        with contextlib.suppress(GitFailed, UsageError):
            git(["worktree", "remove", "--force", str(tree)], top)
        shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(GitFailed, UsageError):
            git(["worktree", "prune"], top)

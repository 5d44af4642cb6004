"""Copy the public kernels named in manifest.toml into benchmarks/public/src/ (git-ignored).

Their source is never committed: it is copied at run time from local mirrors, one per repository,
laid out as ``<mirror>/<owner>+<name>/repo`` (a git directory; the search tool's ``fetch`` makes
them) or as a plain checkout ``<mirror>/<owner>+<name>/`` / ``<mirror>/<name>/``. The file of the
manifest's commit is taken when the mirror has it, else the mirror's HEAD (and a note says so).

    python benchmarks/public/fetch.py                      # mirrors under /work/.mirror
    python benchmarks/public/fetch.py --mirror DIR         # or GPUADVISE_PUBLIC_MIRROR=DIR
    python benchmarks/public/fetch.py --cublas-wheel nvidia_cublas-13*.whl

Repositories whose headers include cuBLAS (``cublas = true``) also need cublas_v2.h/cublasLt.h,
which the CUDA toolkit wheels do not ship: they are taken from --cublas-include DIR, else from an
installed nvidia-cublas package, else extracted (headers only) from --cublas-wheel FILE, into
src/_cublas/include. Without any of them those kernels are reported as not analyzable.
Exit 0 when every repository was copied, 2 with one ``error:`` line per missing one.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.toml"
SRC = HERE / "src"
CUBLAS_DIR = SRC / "_cublas" / "include"
CUBLAS_HEADERS = ("cublas_v2.h", "cublas_api.h", "cublasLt.h", "cublas.h")
DEFAULT_MIRROR = "/work/.mirror"


@dataclass(frozen=True)
class Repo:
    key: str
    repo: str  # owner/name
    commit: str
    licence: str
    licence_file: str
    files: tuple[str, ...]
    cublas: bool


def load_manifest(path: Path = MANIFEST) -> tuple[dict[str, Repo], list[dict]]:
    doc = tomllib.loads(path.read_text())
    repos = {
        key: Repo(key, r["repo"], r["commit"], r["licence"], r.get("licence_file", "LICENSE"),
                  tuple(r["files"]), bool(r.get("cublas", False)))
        for key, r in doc["repos"].items()
    }  # fmt: skip
    kernels = list(doc["kernels"])
    for k in kernels:
        if k["repo"] not in repos:
            raise SystemExit(f"error: kernel {k['name']} names repo {k['repo']!r}, not in [repos]")
    return repos, kernels


def repo_dir(key: str) -> Path:
    """Where fetch.py puts repository ``key``'s files."""
    return SRC / key


class Mirror:
    """Read files of one repository from a git mirror or a plain checkout."""

    def __init__(self, root: Path, commit: str) -> None:
        self.root = root
        self.git = (root / "HEAD").is_file() or (root / ".git").exists()
        self.rev = "HEAD"
        self.note = ""
        if self.git:
            ok = subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{commit}^{{commit}}"],
                                capture_output=True).returncode == 0  # fmt: skip
            if ok:
                self.rev = commit
            else:
                self.note = f"commit {commit[:12]} not in the mirror: copied its HEAD"

    def list(self) -> list[str]:
        if self.git:
            out = subprocess.run(["git", "-C", str(self.root), "ls-tree", "-r", "--name-only",
                                  self.rev], capture_output=True, text=True, check=True).stdout  # fmt: skip
            return out.splitlines()
        return [str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file()]

    def read(self, path: str) -> bytes:
        if self.git:
            return subprocess.run(["git", "-C", str(self.root), "show", f"{self.rev}:{path}"],
                                  capture_output=True, check=True).stdout  # fmt: skip
        return (self.root / path).read_bytes()


def find_mirror(base: Path, repo: str) -> Path | None:
    owner, name = repo.split("/")
    for cand in (base / f"{owner}+{name}" / "repo", base / f"{owner}+{name}", base / name):
        if cand.is_dir() and ((cand / "HEAD").is_file() or any(cand.iterdir())):
            return cand
    return None


def _match(pattern: str, path: str) -> bool:
    """Glob match where ``*`` stays inside one folder level."""
    a, b = pattern.split("/"), path.split("/")
    return len(a) == len(b) and all(fnmatch.fnmatchcase(y, x) for x, y in zip(a, b, strict=True))


def copy_repo(r: Repo, base: Path) -> str:
    """Copy one repository's files; returns a line for the log. Raises FileNotFoundError."""
    root = find_mirror(base, r.repo)
    if root is None:
        raise FileNotFoundError(f"no mirror of {r.repo} under {base}")
    m = Mirror(root, r.commit)
    names = m.list()
    dest = repo_dir(r.key)
    n = 0
    for pattern in (*r.files, r.licence_file):
        hits = [p for p in names if _match(pattern, p)]
        if not hits:
            raise FileNotFoundError(f"{r.repo}: {pattern} not in the mirror ({root})")
        for p in hits:
            out = dest / p
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(m.read(p))
            n += 1
    note = f" ({m.note})" if m.note else ""
    return f"{r.repo}: {n} files -> {dest.relative_to(HERE)}{note}"


def installed_cublas() -> Path | None:
    """The include folder of an installed nvidia-cublas package, if any."""
    for entry in sys.path:
        for sub in ("nvidia/cu13/include", "nvidia/cublas/include", "nvidia/cu12/include"):
            d = Path(entry) / sub
            if (d / "cublas_v2.h").is_file():
                return d
    return None


def get_cublas(include: str | None, wheel: str | None) -> str:
    CUBLAS_DIR.mkdir(parents=True, exist_ok=True)
    if include:
        src = Path(include)
        for h in CUBLAS_HEADERS:
            if (src / h).is_file():
                shutil.copyfile(src / h, CUBLAS_DIR / h)
        if not (CUBLAS_DIR / "cublas_v2.h").is_file():
            raise FileNotFoundError(f"no cublas_v2.h in {src}")
        return f"cuBLAS headers copied from {src}"
    found = installed_cublas()
    if found is not None:
        for h in CUBLAS_HEADERS:
            if (found / h).is_file():
                shutil.copyfile(found / h, CUBLAS_DIR / h)
        return f"cuBLAS headers copied from the installed package ({found})"
    if wheel:
        with zipfile.ZipFile(wheel) as z:
            for n in z.namelist():
                if Path(n).name in CUBLAS_HEADERS and "/include/" in n:
                    (CUBLAS_DIR / Path(n).name).write_bytes(z.read(n))
        if not (CUBLAS_DIR / "cublas_v2.h").is_file():
            raise FileNotFoundError(f"no cublas_v2.h in {wheel}")
        return f"cuBLAS headers extracted from {wheel}"
    if (CUBLAS_DIR / "cublas_v2.h").is_file():
        return "cuBLAS headers already in src/_cublas/include"
    raise FileNotFoundError(
        "cuBLAS headers not found; `pip download --no-deps nvidia-cublas` and pass "
        "--cublas-wheel FILE (or --cublas-include DIR)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default=os.environ.get("GPUADVISE_PUBLIC_MIRROR", DEFAULT_MIRROR),
                    help="folder of mirrors <owner>+<name>/repo (default %(default)s)")  # fmt: skip
    ap.add_argument("--cublas-include", help="a folder holding cublas_v2.h and cublasLt.h")
    ap.add_argument("--cublas-wheel", help="an nvidia-cublas wheel to take the headers from")
    args = ap.parse_args(argv)
    repos, _ = load_manifest()
    base = Path(args.mirror)
    errors = []
    for r in repos.values():
        try:
            print(copy_repo(r, base))
        except (FileNotFoundError, subprocess.CalledProcessError) as e:
            errors.append(f"error: {e}; fetch github:{r.repo} into {base} (or pass --mirror DIR)")
    if any(r.cublas for r in repos.values()):
        try:
            print(get_cublas(args.cublas_include, args.cublas_wheel))
        except (FileNotFoundError, zipfile.BadZipFile) as e:
            print(f"warning: {e}; the kernels of cuBLAS-including repositories will not compile")
    for e in errors:
        print(e, file=sys.stderr)
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

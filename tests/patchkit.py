"""The fixes of several kernels of one file applied to one copy of it, compiled once (issue 30).

A rule test that checks a kernel's fix applies the fix's diff to the kernel's file and compiles
the patched copy to run or analyse it: an nvcc run (about 0.4 CPU-s on the 2-core machine, mostly
cicc reading the CUDA headers, whatever the kernel) and, where it is analysed, an nvdisasm run
(about 0.3 CPU-s of start-up whatever the cubin) for each kernel of the file that a test fixes.
Each diff patches its own kernel, so the diffs of a file's kernels can be applied to one copy,
which compiles once and is disassembled once (the SASS of its whole cubin, kept in the run's
compile cache); each kernel's test then takes its kernel from that copy with
:meth:`Patched.check`, which asserts that the copy is what the kernel's diff alone makes with
the other kernels' diffs applied after it (the hunks of different kernels commute: the kernel
is the one its own diff makes). The rules read a kernel's own PTX, SASS, lines and launch (each
kernel of a module is compiled and register-allocated apart), so the other kernels' fixes
change nothing a kernel's test reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from gpuadvise.source.patch import apply_unified_diff

__all__ = ["Patched", "apply_all"]


def apply_all(text: str, diffs: Iterable[str]) -> str:
    """``text`` with each of ``diffs`` applied in turn."""
    for diff in diffs:
        text = apply_unified_diff(text, diff)
    return text


class Patched:
    """``source`` with every kernel's diff of ``diffs`` (kernel -> unified diff) applied, written
    as ``folder/<source's name>`` with the files of the source's folder that match a pattern of
    ``beside`` (its launch specs, by default) copied next to it."""

    def __init__(
        self,
        folder: Path,
        source: Path,
        diffs: Mapping[str, str],
        beside: Iterable[str] = ("*.toml",),
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for pattern in beside:
            for f in source.parent.glob(pattern):
                if f.is_file() and f.name != source.name:
                    (folder / f.name).write_bytes(f.read_bytes())
        self.original = source.read_text()
        self.diffs = dict(diffs)
        self.path = folder / source.name
        self.path.write_text(apply_all(self.original, self.diffs.values()))

    def check(self, kernel: str, diff: str) -> Path:
        """The copy, for ``kernel`` whose diff is ``diff``: asserted to be ``diff`` applied to
        the source with the other kernels' diffs applied after it."""
        assert self.diffs.get(kernel) == diff, kernel
        others = [d for k, d in self.diffs.items() if k != kernel]
        alone = apply_unified_diff(self.original, diff)
        assert apply_all(alone, others) == self.path.read_text(), kernel
        return self.path

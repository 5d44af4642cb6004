"""A damaged compile-cache entry is a cache miss: compiled again and overwritten (issue 18).

Each case damages one file of a stored entry the way a crash, a full disk or a hand edit would
(``meta.json`` = ``[1,2,3]``, ``resources.registers = "many"``, random bytes in the PTX, the
cubin or the disassembly sidecar) and checks that the next compile neither raises nor returns
the damage, and that the entry is whole again afterwards. The compile after the damage runs
every step of a miss (the lookup, the read of nvcc's output and of the files it wrote, the
store over the damage); nvcc's own run in it is the one the module recorded on the same
source with the same command (:class:`NvccReplay`): what these tests check is the cache, not
nvcc, which the module still runs once per set of options.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from toolchainkit import toolchain_or_none

import gpuadvise.toolchain.compile as compile_mod
from gpuadvise.toolchain import (
    CompiledModule,
    CompileOptions,
    compile_source,
    select_compiled_kernel,
)
from gpuadvise.toolchain.cache import lookup
from gpuadvise.toolchain.module import CompiledModule as ModuleClass
from gpuadvise.toolchain.resources import KernelInfo, KernelResources
from gpuadvise.toolchain.sass import disassemble, read_sidecar, write_sidecar

CUDA_DIR = Path(__file__).resolve().parents[1] / "cuda"


TC = toolchain_or_none()
needs_nvcc = pytest.mark.skipif(TC is None, reason="no CUDA toolchain (nvcc) found")
RANDOM = bytes(range(256)) * 4 + b"\xff\xfe\x80\x00garbage"


def _meta(module: CompiledModule) -> Path:
    return module.cubin_path.parent / "meta.json"


def _edit_meta(edit: Callable[[dict], object]) -> Callable[[CompiledModule], None]:
    def damage(module: CompiledModule) -> None:
        doc = json.loads(_meta(module).read_text())
        new = edit(doc)
        _meta(module).write_text(json.dumps(doc if new is None else new))

    return damage


def _registers_many(doc: dict) -> None:
    doc["module"]["kernels"][0]["resources"]["registers"] = "many"


def _kernels_not_a_list(doc: dict) -> None:
    doc["module"]["kernels"] = {"a": 1}


def _flags_hold_numbers(doc: dict) -> None:
    doc["module"]["flags"] = [1, 2]


DAMAGE: dict[str, Callable[[CompiledModule], None]] = {
    "meta is a list": lambda m: _meta(m).write_text("[1,2,3]"),
    "meta is random bytes": lambda m: _meta(m).write_bytes(RANDOM),
    "meta is empty": lambda m: _meta(m).write_text(""),
    "meta deeply nested": lambda m: _meta(m).write_text("[" * 100_000),
    "registers = many": _edit_meta(_registers_many),
    "kernels not a list": _edit_meta(_kernels_not_a_list),
    "flags hold numbers": _edit_meta(_flags_hold_numbers),
    "module missing": _edit_meta(lambda d: {"format": d["format"]}),
    "ptx random bytes": lambda m: (m.cubin_path.parent / "module.ptx").write_bytes(RANDOM),
    "ptx edited": lambda m: (m.cubin_path.parent / "module.ptx").write_text(m.ptx + "// x\n"),
    "cubin random bytes": lambda m: m.cubin_path.write_bytes(RANDOM),
    "cubin truncated": lambda m: m.cubin_path.write_bytes(m.cubin_path.read_bytes()[:100]),
    "cubin missing": lambda m: m.cubin_path.unlink(),
    # not files at all: a folder is a miss, not an error; a FIFO is never opened to wait on
    "meta is a folder": lambda m: _replace_with(_meta(m), "folder"),
    "meta is a fifo": lambda m: _replace_with(_meta(m), "fifo"),
    "ptx is a fifo": lambda m: _replace_with(m.cubin_path.parent / "module.ptx", "fifo"),
    "cubin is a folder": lambda m: _replace_with(m.cubin_path, "folder"),
    "meta is a huge sparse file": lambda m: _replace_with(_meta(m), "huge"),
}


def _replace_with(path: Path, what: str) -> None:
    path.unlink()
    if what == "folder":
        (path / "inside").mkdir(parents=True)
    elif what == "fifo":
        os.mkfifo(path)
    else:
        with path.open("wb") as f:
            f.truncate(1 << 40)  # 1 TiB, sparse: read whole, it would never end


def _manifests(cache: Path) -> list[Path]:
    return sorted(cache.glob("manifests/*/*.json"))


def _damage_manifest(text: bytes) -> Callable[[CompiledModule], None]:
    def damage(module: CompiledModule) -> None:
        root = module.cubin_path.parents[3]
        for manifest in _manifests(root):
            manifest.write_bytes(text)

    return damage


DAMAGE.update(
    {
        "manifest is a list": _damage_manifest(b"[1,2,3]"),
        "manifest random bytes": _damage_manifest(RANDOM),
        "manifest entry escapes": _damage_manifest(b'{"deps": [], "entry": "../../../../etc"}'),
        "manifest deps not pairs": _damage_manifest(
            b'{"deps": [1], "entry": "' + b"a" * 64 + b'"}'
        ),
        "manifest is a folder": lambda m: [
            _replace_with(p, "folder") for p in _manifests(m.cubin_path.parents[3])
        ],
        "manifest is a fifo": lambda m: [
            _replace_with(p, "fifo") for p in _manifests(m.cubin_path.parents[3])
        ],
        "manifest names a fifo as a header": _damage_manifest(
            b'{"deps": [["/FIFO", "x"]], "entry": "' + b"a" * 64 + b'"}'
        ),
    }
)


DAMAGED_OPTIONS: dict[str, Any] = {"maxrregcount": 24}


class NvccReplay:
    """nvcc's runs in the module, recorded (:meth:`record`: the output, the exit status and the
    files the run wrote, the cubin and its ``-keep`` folder) and given back (:meth:`run`, in
    place of :func:`~gpuadvise.toolchain.find.run_tool`) for the same command: the same tool,
    flags and input file, the build folders aside (each compile makes its own). A command not
    recorded runs nvcc."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, ...], tuple[subprocess.CompletedProcess[str], dict[str, bytes]]]
        self.runs = {}
        self.replayed = 0

    @staticmethod
    def _folders(cmd: Sequence[str]) -> tuple[tuple[str, ...], Path, Path]:
        """(``cmd`` without its build folders, the ``-keep-dir`` folder, the ``-o`` file)."""
        keep, out = cmd.index("-keep-dir") + 1, cmd.index("-o") + 1
        key = tuple("" if i in (keep, out) else a for i, a in enumerate(cmd))
        return key, Path(cmd[keep]), Path(cmd[out])

    def record(self, cmd: Sequence[str], what: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        proc = REAL_RUN_TOOL(cmd, what, **kw)
        key, keep, out = self._folders(cmd)
        files = {str(p.relative_to(keep)): p.read_bytes() for p in keep.rglob("*") if p.is_file()}
        files[""] = out.read_bytes()
        self.runs[key] = (proc, files)
        return proc

    def run(self, cmd: Sequence[str], what: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        key, keep, out = self._folders(cmd)
        if key not in self.runs:
            return REAL_RUN_TOOL(cmd, what, **kw)
        proc, files = self.runs[key]
        for name, data in files.items():
            target = keep / name if name else out
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        self.replayed += 1
        return subprocess.CompletedProcess(list(cmd), proc.returncode, proc.stdout, proc.stderr)


REAL_RUN_TOOL = compile_mod.run_tool


@pytest.fixture(scope="module")
def nvcc_replay() -> NvccReplay:
    return NvccReplay()


@pytest.fixture(scope="module")
def pristine(
    tmp_path_factory: pytest.TempPathFactory, nvcc_replay: NvccReplay
) -> Callable[[Path, dict[str, Any]], Path]:
    """spill.cu in a folder of the module's, and for each set of options a cache holding its
    compile, made once (nvcc's run recorded: :class:`NvccReplay`): each test damages a copy of
    it (``copy(tmp_path, options)``: the copied cache, at ``tmp_path / "cache"``). A copy, not
    a compile per test: the first compile's miss is not what these tests check, the one after
    the damage is; the source keeps its path, which is part of the entry's key."""
    folder = tmp_path_factory.mktemp("damage")
    src = folder / "spill.cu"
    shutil.copy(CUDA_DIR / "spill.cu", src)
    made: dict[str, Path] = {}

    def copy(tmp_path: Path, options: dict[str, Any]) -> Path:
        key = json.dumps(options, sort_keys=True)
        if key not in made:
            cache = folder / f"cache{len(made)}"
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(compile_mod, "run_tool", nvcc_replay.record)
                module = compile_source(src, CompileOptions(**options, cache_dir=cache), TC)
            assert not module.from_cache
            made[key] = cache
        shutil.copytree(made[key], tmp_path / "cache", symlinks=True)
        return src

    return copy


@needs_nvcc
@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_entry_is_a_miss_and_is_rewritten(
    case: str,
    tmp_path: Path,
    pristine: Callable[[Path, dict[str, Any]], Path],
    nvcc_replay: NvccReplay,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = pristine(tmp_path, DAMAGED_OPTIONS)
    monkeypatch.setattr(compile_mod, "run_tool", nvcc_replay.run)
    replayed = nvcc_replay.replayed
    opts = CompileOptions(**DAMAGED_OPTIONS, cache_dir=tmp_path / "cache")
    first = compile_source(src, opts, TC)
    assert first.from_cache  # the copy of the compiled entry, whole
    DAMAGE[case](first)
    if case == "manifest names a fifo as a header":
        os.mkfifo(tmp_path / "fifo")
        for manifest in _manifests(tmp_path / "cache"):
            manifest.write_bytes(
                manifest.read_bytes().replace(b"/FIFO", str(tmp_path / "fifo").encode())
            )

    again = compile_source(src, opts, TC)  # no AttributeError/TypeError/UnicodeDecodeError
    assert again.kernels == first.kernels
    assert all(isinstance(k.resources.registers, int) for k in again.kernels)
    assert again.ptx == first.ptx
    assert not again.from_cache
    assert nvcc_replay.replayed == replayed + 1  # compiled: nvcc's recorded run
    assert again.dependencies == first.dependencies
    third = compile_source(src, opts, TC)
    assert third.from_cache, "the damaged entry was not overwritten"
    assert third.kernels == first.kernels and third.ptx == first.ptx
    assert third.cubin_path.read_bytes()[:4] == b"\x7fELF"


def test_lookup_of_garbage_files_is_none(tmp_path: Path) -> None:
    manifest = tmp_path / "m.json"
    for data in (b"", b"[1,2,3]", b"null", b'{"deps": "x"}', RANDOM, b'{"deps": [], "entry": 5}'):
        manifest.write_bytes(data)
        assert lookup(tmp_path, manifest) is None


@pytest.mark.parametrize(
    "data",
    [
        [1, 2, 3],
        "text",
        {"name": "k", "mangled": "k", "signature": "k()"},
        {"name": "k", "mangled": "k", "signature": "k()", "resources": {"registers": "many"}},
    ],
)
def test_from_dict_rejects_wrong_shapes_with_value_error(data: object) -> None:
    with pytest.raises(ValueError):
        KernelInfo.from_dict(data)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ModuleClass.from_dict(data)  # type: ignore[arg-type]


def test_resources_reject_bools_and_negatives() -> None:
    good = {f: 1 for f in KernelResources.__dataclass_fields__}
    assert KernelResources.from_dict(good).registers == 1
    for bad in (True, -1, 1.5, None):
        with pytest.raises(ValueError):
            KernelResources.from_dict({**good, "registers": bad})


def test_sidecar_round_trip_and_damage(tmp_path: Path) -> None:
    path = tmp_path / "k.cubin.nvdisasm.txt"
    write_sidecar(path, "SASS text\nwith lines\n")
    assert read_sidecar(path) == "SASS text\nwith lines\n"
    for damaged in (RANDOM, b"SASS text\n", path.read_bytes()[:-3]):
        path.write_bytes(damaged)
        assert read_sidecar(path) is None
    assert read_sidecar(tmp_path / "missing.txt") is None


@needs_nvcc
@pytest.mark.skipif(TC is not None and TC.nvdisasm is None, reason="no nvdisasm")
@pytest.mark.parametrize("damage", [RANDOM, b"", b"valid utf-8 but not a disassembly\n"])
def test_damaged_disassembly_sidecar_is_rewritten(
    damage: bytes, tmp_path: Path, pristine: Callable[[Path, dict[str, Any]], Path]
) -> None:
    src = pristine(tmp_path, {})
    module = compile_source(src, CompileOptions(cache_dir=tmp_path / "cache"), TC)
    kernel = select_compiled_kernel(module, "spill")
    first = disassemble(module.cubin_path, kernel.mangled, TC)
    sidecars = list(module.cubin_path.parent.glob("module.cubin.*.txt"))
    assert len(sidecars) == 1
    sidecars[0].write_bytes(damage)
    _clear_memo()
    assert disassemble(module.cubin_path, kernel.mangled, TC) == first
    assert read_sidecar(sidecars[0]) is not None  # written again, whole


def _clear_memo() -> None:
    from gpuadvise.toolchain import sass

    sass._disassemble_cached.cache_clear()

"""Kernel names as users write them (issue #36), with nvcc: ``compile_source(kernels=[...])``
on tests/cuda/kernel_names/instances.cu resolves each instance named in several spellings
(typedefs of CUDA's headers and of the user's, enumerators scoped and unscoped, constexpr,
macros, nested templates, default template arguments, ``unsigned`` vs ``unsigned int``,
pointers) with the compiles each costs (none, a probe, a wrapper), the error when nothing
matches lists the user's spellings, and ``analyze`` (a spec file's ``kernel =`` too) and
``gate`` show and take the kernel as written."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from clikit import cli_run

from gpuadvise.errors import KernelNotFoundError
from gpuadvise.toolchain.names import norm

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tests" / "cuda" / "kernel_names"
SOURCE = FOLDER / "instances.cu"
pytestmark = pytest.mark.toolkit

# the compiler's name of each instance of instances.cu -> spellings that name it
SPELLINGS = {
    "get_rows<__half, float>": ["get_rows<half, float>", "get_rows<nv_half, float>"],
    "get_rows<__nv_bfloat16, float>": ["get_rows<nv_bfloat16, float>"],
    "get_rows<long, unsigned int>": [
        "get_rows<int64_t, unsigned>",
        "get_rows<long, uint>",
        "get_rows<long int, u32>",
    ],
    "get_rows<unsigned long, float>": [
        "get_rows<std::size_t, real_t>",
        "get_rows<unsigned long, VALUE_T>",
    ],
    "quantize<(layout)1>": ["quantize<LAYOUT_DS4>", "quantize<layout::LAYOUT_DS4>"],
    "tiled<(ga::Mode)3, 64, true>": [
        "tiled<ga::Mode::exact>",
        "tiled<Mode::exact, TILE>",
        "tiled<ga::Mode::exact, kWarps * 16, true>",
    ],
    "reduce<128u, float>": ["reduce<128>", "reduce<(128), VALUE_T>"],
    "vec_copy<ga::Vec<__half, 4> >": ["vec_copy<ga::Vec<half>>", "vec_copy<ga::Vec<half, 2*2>>"],
    "vec_copy<ga::Pair>": ["vec_copy<Pair>"],
    "via_pointer<float const*>": ["via_pointer<const float *>"],
}


@pytest.fixture(scope="module")
def opts(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from gpuadvise.toolchain import CompileOptions

    return CompileOptions(arch="sm_90", cache_dir=tmp_path_factory.mktemp("names-cache"))


@pytest.fixture(scope="module")
def base(opts):  # type: ignore[no-untyped-def]
    from gpuadvise.toolchain import compile_source

    return compile_source(SOURCE, opts)


def _generated(opts) -> list[str]:  # type: ignore[no-untyped-def]
    """The texts of the wrappers and probes gpuadvise generated in ``opts``'s cache."""
    from gpuadvise.toolchain import cache_root

    folder = cache_root(opts) / "wrappers"
    return sorted(p.read_text() for p in folder.glob("*.cu")) if folder.is_dir() else []


@pytest.mark.parametrize(
    ("compiled", "written"), [(c, w) for c, ws in SPELLINGS.items() for w in ws]
)
def test_a_spelling_of_the_source_costs_no_compile(base, opts, compiled: str, written: str):  # type: ignore[no-untyped-def]
    from gpuadvise.toolchain import as_written, compile_source, select_compiled_kernel

    assert {k.name for k in base.kernels} >= set(SPELLINGS)
    module = compile_source(SOURCE, opts, kernels=[written])
    kernel = select_compiled_kernel(module, written)
    assert kernel.name == compiled
    assert module.cubin_path == base.cubin_path and module.wrapper_path is None
    assert _generated(opts) == []  # no probe, no wrapper: the parsed source said it
    shown = as_written(module, written, kernel)
    # the report shows the user's spelling; one that differs only as norm() forgives (spaces,
    # suffixes, casts, where const stands) keeps the compiler's, as before
    assert shown.name == (compiled if norm(written) == norm(compiled) else written)
    assert shown.mangled == kernel.mangled


def test_the_compiler_is_asked_what_the_source_cannot_say(tmp_path: Path) -> None:
    from gpuadvise.toolchain import CompileOptions, compile_source, select_compiled_kernel

    opts = CompileOptions(arch="sm_90", cache_dir=tmp_path / "cache")
    base = compile_source(SOURCE, opts)
    # an existing instance: one probe compile, and the file's own module
    module = compile_source(SOURCE, opts, kernels=["sized<sizeof(float4)>"])
    assert select_compiled_kernel(module, "sized<sizeof(float4)>").name == "sized<16>"
    assert module.cubin_path == base.cubin_path and module.wrapper_path is None
    made = _generated(opts)
    assert len(made) == 1 and "__device__ void* __gpuadvise_probe_0" in made[0]
    again = compile_source(SOURCE, opts, kernels=["sized<sizeof(float4)>"])  # cached
    assert again.aliases == module.aliases and len(_generated(opts)) == 1
    # a new instance: the probe says it is not there, the wrapper instantiates it
    module = compile_source(SOURCE, opts, kernels=["sized<sizeof(double)>"])
    assert select_compiled_kernel(module, "sized<sizeof(double)>").name == "sized<8>"
    assert module.wrapper_path is not None and len(_generated(opts)) == 3
    # a new instance the source spells: the wrapper alone, no probe
    module = compile_source(SOURCE, opts, kernels=["get_rows<half, half>"])
    assert select_compiled_kernel(module, "get_rows<half, half>").name == (
        "get_rows<__half, __half>"
    )
    made = _generated(opts)
    assert len(made) == 4 and sum("__gpuadvise_probe" in t for t in made) == 2


def test_a_reading_the_compiler_corrects(tmp_path: Path) -> None:
    """A typedef in a header outside the user's folders is unknown to the source: its name is
    taken for a type of its own, no instance has it, the wrapper makes nothing new, and the
    probe finds the instance it means."""
    from gpuadvise.toolchain import CompileOptions, compile_source, select_compiled_kernel

    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "index.cuh").write_text("typedef unsigned long index_type;\n")
    (tmp_path / "src").mkdir()
    src = tmp_path / "src" / "k.cu"
    src.write_text(
        f'#include "{tmp_path / "lib" / "index.cuh"}"\n'
        "template <typename T> __global__ void fill(T* p) { p[threadIdx.x] = (T)1; }\n"
        "template __global__ void fill<unsigned long>(unsigned long*);\n"
    )
    opts = CompileOptions(arch="sm_90", cache_dir=tmp_path / "cache")
    module = compile_source(src, opts, kernels=["fill<index_type>"])
    kernel = select_compiled_kernel(module, "fill<index_type>")
    assert kernel.name == "fill<unsigned long>" and kernel.mangled == "_Z4fillImEvPT_"
    assert len(_generated(opts)) == 2  # the wrapper, then the probe


def test_a_wrong_name_lists_the_users_spellings(base, opts) -> None:  # type: ignore[no-untyped-def]
    from gpuadvise.toolchain import compile_source, select_compiled_kernel

    with pytest.raises(KernelNotFoundError) as exc:
        select_compiled_kernel(base, "get_rowz<half, float>")
    hint = exc.value.hint or ""
    assert hint.startswith("did you mean 'get_rows<half, float>'? available: get_rows<half, float>")
    for shown in ("quantize<LAYOUT_DS4>", "tiled<ga::Mode::exact>", "get_rows<int64_t, uint>"):
        assert shown in hint
    assert "__half" not in hint and "(layout)1" not in hint
    with pytest.raises(KernelNotFoundError) as exc:
        compile_source(SOURCE, opts, kernels=["get_rows<doubel, float>"])
    line = exc.value.one_line()
    assert "cannot instantiate kernel get_rows<doubel, float>" in line and "doubel" in line
    assert "did you mean 'get_rows<" in line and "quantize<LAYOUT_DS4>" in line
    assert "\n" not in line


# --- the command line: the report shows the kernel as written; spec files --------------------


def _analyze(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``gpuadvise analyze ARGS`` in this process, in ``cwd``."""
    with contextlib.chdir(cwd):
        return cli_run("analyze", *args, "--no-trace", "--no-measure")


@pytest.mark.usefixtures("compile_cache")
def test_analyze_reports_the_kernel_as_written(tmp_path: Path) -> None:
    launch = ("--grid", "1", "--block", "64", "--arg", "n=64", "--gpu", "H100")
    r = _analyze(str(SOURCE), "--kernel", "quantize<LAYOUT_DS4>", *launch, "--json")
    assert r.returncode == 0, r.stderr
    kernel = json.loads(r.stdout)["kernel"]
    assert kernel["name"] == "quantize<LAYOUT_DS4>"
    assert kernel["mangled"] == "_Z8quantizeIL6layout1EEvPKfPfi"
    r = _analyze(str(SOURCE), "-k", "get_rows<half, float>", *launch)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("get_rows<half, float>  ")
    # a spec file's kernel = goes the same way
    spec = tmp_path / "case.toml"
    spec.write_text(
        f'source = "{SOURCE}"\nkernel = "tiled<Mode::exact, TILE>"\ngrid = "1"\nblock = "64"\n'
        "[args]\nn = 64\n"
    )
    r = _analyze("--spec", str(spec), "--gpu", "H100", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kernel"]["name"] == "tiled<Mode::exact, TILE>"
    # nothing matches: one line, exit 2, the user's spellings
    r = _analyze(str(SOURCE), "-k", "quantise<LAYOUT_DS4>", *launch)
    assert r.returncode == 2
    err = r.stderr.strip()
    assert err.count("\n") == 0 and err.startswith("error: ")
    assert "did you mean 'quantize<LAYOUT_DS4>'?" in err


def test_gate_takes_the_kernel_as_written(tmp_path: Path) -> None:
    """A gate case's ``kernel =`` resolves as ``--kernel`` does (static gates, no GPU)."""
    shutil.copytree(FOLDER, tmp_path / "k")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "gpuadvise.toml").write_text(
        '[gate]\ngpu = "H100"\n[[gate.cases]]\nname = "q"\nsource = "k/instances.cu"\n'
        'kernel = "quantize<LAYOUT_DS4>"\ngrid = 4\nblock = 64\nargs = { n = 256 }\n'
        'metrics = ["registers", "occupancy"]\n'
    )

    def gate(*args: str) -> subprocess.CompletedProcess[str]:
        with contextlib.chdir(tmp_path):  # the run's compile cache
            return cli_run("gate", *args)

    r = gate("--update-baseline")
    assert r.returncode == 0, r.stderr
    r = gate("--gates", "static", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {c["metric"]: c["verdict"] for c in doc["comparisons"]}["registers"] == "same"

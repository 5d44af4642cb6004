"""Tests of gpuadvise.toolchain (finding, compiling, names, cache) with the real nvcc (the CUDA
wheels on CI; no GPU needed)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest
from toolchainkit import toolchain_or_none

from gpuadvise.errors import CompileError, KernelNotFoundError, ToolchainError, UsageError
from gpuadvise.toolchain import (
    CompiledModule,
    CompileOptions,
    KernelInfo,
    Toolchain,
    cache_root,
    compile_source,
    demangle,
    find_toolchain,
    parse_ptxas_report,
    select_compiled_kernel,
)
from gpuadvise.toolchain import find as findmod
from gpuadvise.toolchain.compile import parse_depfile
from gpuadvise.toolchain.names import _fallback_demangle, display_name, split_qualified
from gpuadvise.toolchain.templates import namespace_paths

CUDA_DIR = Path(__file__).resolve().parents[1] / "cuda"
INCLUDE_DIR = CUDA_DIR / "include"
MULTI = CUDA_DIR / "multi.cu"


TC = toolchain_or_none()
needs_nvcc = pytest.mark.skipif(TC is None, reason="no CUDA toolchain (nvcc) found")
pytestmark = pytest.mark.toolkit


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpuadvise-cache")


@pytest.fixture(scope="module")
def opts(cache_dir: Path) -> CompileOptions:
    return CompileOptions(arch="sm_90", include_dirs=[str(INCLUDE_DIR)], cache_dir=cache_dir)


@pytest.fixture(scope="module")
def multi(opts: CompileOptions) -> CompiledModule:
    return compile_source(MULTI, opts)


@pytest.fixture(scope="module")
def instantiated(opts: CompileOptions) -> CompiledModule:
    return compile_source(MULTI, opts, kernels=["reduce<128,true>", "fill<float>"])


@pytest.fixture(scope="module")
def spill_module(cache_dir: Path) -> CompiledModule:
    return compile_source(
        CUDA_DIR / "spill.cu", CompileOptions(maxrregcount=24, cache_dir=cache_dir)
    )


def _ptxas_report(ptx: str, tmp: Path, *args: str) -> dict[str, dict[str, int]]:
    """Run ptxas -v on the PTX directly and parse its report here, independently."""
    assert TC is not None
    ptx_file = tmp / "k.ptx"
    ptx_file.write_text(ptx)
    proc = subprocess.run(
        [str(TC.ptxas), "-arch=sm_90", "-v", *args, str(ptx_file), "-o", str(tmp / "k.cubin")],
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, dict[str, int]] = {}
    name = ""
    for line in (proc.stdout + proc.stderr).splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            name = m.group(1)
            out[name] = {}
        elif name and (
            m := re.search(
                r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                r"(\d+) bytes spill loads",
                line,
            )
        ):
            out[name].update(stack=int(m[1]), st=int(m[2]), ld=int(m[3]))
        elif name and "Used" in line:
            out[name]["regs"] = int(re.search(r"Used (\d+) registers", line)[1])  # type: ignore[index]
            smem = re.search(r"(\d+) bytes smem", line)
            out[name]["smem"] = int(smem[1]) if smem else 0
            bars = re.search(r"used (\d+) barriers", line)
            out[name]["bars"] = int(bars[1]) if bars else -1
    return out


# --------------------------------------------------------------------------------------------
# Finding the toolchain


@needs_nvcc
def test_find_toolchain_fields() -> None:
    assert TC is not None
    assert TC.nvcc.exists() and TC.ptxas.exists()
    assert TC.nvdisasm is not None or TC.cuobjdump is not None
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", TC.version)
    assert TC.include_dir is not None and (TC.include_dir / "cuda_runtime.h").exists()
    assert TC.host_compiler is not None
    assert Toolchain.from_dict(json.loads(json.dumps(TC.to_dict()))) == TC


def _wheel_bin() -> Path | None:
    tool = findmod._wheel_tool("nvcc")
    return tool.parent if tool is not None and "site-packages" in str(tool) else None


def _strip_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No CUDA_HOME/CUDA_PATH/GPUADVISE_NVCC, and no nvcc on PATH (keep gcc and c++filt)."""
    for var in ("CUDA_HOME", "CUDA_PATH", "GPUADVISE_NVCC", "NVCC_CCBIN"):
        monkeypatch.delenv(var, raising=False)
    keep = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "nvcc").exists()
    ]
    monkeypatch.setenv("PATH", os.pathsep.join(keep))


@pytest.mark.skipif(_wheel_bin() is None, reason="the CUDA pip wheels are not installed")
def test_wheels_alone_compile_and_find_everything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _strip_env(monkeypatch)
    tc = find_toolchain()
    assert tc.origin == "wheel"
    assert tc.bin_dir == _wheel_bin()
    assert tc.ptxas.parent == tc.bin_dir and tc.nvdisasm is not None
    assert tc.nvdisasm.parent == tc.bin_dir
    assert (tc.bin_dir.parent / "nvvm" / "bin" / "cicc").exists()  # nvidia-nvvm
    module = compile_source(
        MULTI, CompileOptions(include_dirs=[INCLUDE_DIR], use_cache=False), toolchain=tc
    )
    shutil.rmtree(module.cubin_path.parent)  # use_cache=False: the caller owns the directory
    assert module.toolchain_version == tc.version
    assert {k.name for k in module.kernels} >= {"vec_add", "ga::scale"}


@pytest.mark.skipif(
    not (findmod.DEFAULT_CUDA_ROOT / "bin" / "nvcc").exists(), reason="no /usr/local/cuda"
)
def test_cuda_home_is_preferred_and_tools_fall_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _strip_env(monkeypatch)
    root = findmod.DEFAULT_CUDA_ROOT.resolve()
    monkeypatch.setenv("CUDA_HOME", str(root))
    tc = find_toolchain()
    assert tc.origin == "$CUDA_HOME"
    assert tc.nvcc == root / "bin" / "nvcc"
    if not (root / "bin" / "nvdisasm").exists():  # found elsewhere: PATH, the wheels
        assert tc.nvdisasm is None or tc.nvdisasm.parent != root / "bin"


@needs_nvcc
def test_explicit_nvcc_and_env_var(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert TC is not None
    assert find_toolchain(str(TC.nvcc)).nvcc == TC.nvcc
    assert find_toolchain(TC.nvcc.parent).origin == "--nvcc"  # a directory works too
    monkeypatch.setenv("GPUADVISE_NVCC", str(TC.nvcc))
    assert find_toolchain().origin == "$GPUADVISE_NVCC"
    with pytest.raises(ToolchainError, match="does not exist"):
        find_toolchain(str(tmp_path / "no" / "nvcc"))
    monkeypatch.setenv("GPUADVISE_NVCC", str(tmp_path / "missing-nvcc"))
    with pytest.raises(ToolchainError, match="GPUADVISE_NVCC"):
        find_toolchain()


def test_nothing_found_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _strip_env(monkeypatch)
    monkeypatch.setattr(findmod, "_wheel_tool", lambda name: None)
    monkeypatch.setattr(findmod, "DEFAULT_CUDA_ROOT", tmp_path / "none")
    with pytest.raises(ToolchainError) as exc:
        find_toolchain()
    text = exc.value.one_line()
    assert 'pip install "gpuadvise[toolkit]"' in text
    assert "CUDA_HOME" in text and "--nvcc" in text


def _fake_nvcc(tmp_path: Path, cicc_dir: Path) -> Path:
    bin_dir = tmp_path / "site-packages" / "nvidia" / "cu13" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "nvcc"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        '  *--version*) echo "Cuda compilation tools, release 13.2, V13.2.86";;\n'
        f'  *--dryrun*) echo "#\\$ _HERE_={bin_dir}"; echo "#\\$ CICC_PATH={cicc_dir}";;\n'
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (bin_dir / "ptxas").write_text("#!/bin/sh\n")
    (bin_dir / "ptxas").chmod(0o755)
    return script


def test_wheel_nvcc_without_nvvm_is_reported(tmp_path: Path) -> None:
    nvcc = _fake_nvcc(tmp_path, tmp_path / "site-packages" / "nvidia" / "cu13" / "nvvm" / "bin")
    with pytest.raises(ToolchainError) as exc:
        find_toolchain(nvcc)
    assert "cicc" in exc.value.message
    assert exc.value.hint == "pip install nvidia-nvvm==13.2.86"


@needs_nvcc
def test_no_host_compiler_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert TC is not None
    monkeypatch.delenv("NVCC_CCBIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    tc = dataclasses.replace(TC, host_compiler=None)
    with pytest.raises(ToolchainError) as exc:
        compile_source(MULTI, CompileOptions(use_cache=False), toolchain=tc)
    assert "host C++ compiler" in exc.value.message and "-ccbin" in (exc.value.hint or "")


# --------------------------------------------------------------------------------------------
# Options


def test_compile_options_normalize_and_validate() -> None:
    o = CompileOptions(arch="9.0", include_dirs=["rel/inc"], defines=["N=4"], std="17")
    assert o.arch == "sm_90" and o.std == "c++17"
    assert Path(o.include_dirs[0]).is_absolute()
    assert CompileOptions(arch="sm_90a").arch == "sm_90a"
    assert CompileOptions(arch="80").arch == "sm_80"
    flags = CompileOptions(maxrregcount=32, xptxas=["-O3"], use_fast_math=True).nvcc_flags()
    assert "-lineinfo" in flags and "-maxrregcount=32" in flags and "-use_fast_math" in flags
    assert flags[flags.index("-O3") - 1] == "-Xptxas"
    with pytest.raises(UsageError):
        CompileOptions(arch="hopper")
    with pytest.raises(UsageError):
        CompileOptions(extra_flags=["-arch=sm_80"])
    with pytest.raises(UsageError):
        CompileOptions(defines=["1BAD"])
    with pytest.raises(UsageError):
        CompileOptions(maxrregcount=300)


# --------------------------------------------------------------------------------------------
# Compiling and resources


@needs_nvcc
def test_several_kernels_header_in_other_folder(multi: CompiledModule) -> None:
    names = [k.name for k in multi.kernels]
    # source order, from the PTX line info
    assert names == [
        "vec_add",
        "smem_widths",
        "count_positive",
        "ga::scale",
        "ga::reduce<64, false>",
    ]
    assert multi.arch == "sm_90" and multi.cubin_path.is_file()
    assert ".entry _Z7vec_addPK6float4S1_PS_i" in multi.ptx
    assert INCLUDE_DIR / "ga_helpers.cuh" in multi.dependencies
    assert "-lineinfo" in multi.flags
    k = select_compiled_kernel(multi, "ga::scale")
    assert k.mangled == "_ZN2ga5scaleEPKfPfi"
    assert k.signature == "ga::scale(float const*, float*, int)"
    assert k.short_name == "scale"
    assert select_compiled_kernel(multi, "count_positive").mangled == "count_positive"  # extern "C"


@needs_nvcc
def test_missing_include_dir_is_a_compile_error(cache_dir: Path) -> None:
    with pytest.raises(CompileError) as exc:
        compile_source(MULTI, CompileOptions(cache_dir=cache_dir))
    assert "ga_helpers.cuh" in exc.value.message
    assert re.search(r"multi\.cu:\d+", exc.value.message)


@needs_nvcc
def test_resources_match_ptxas_own_report(
    multi: CompiledModule, spill_module: CompiledModule, tmp_path: Path
) -> None:
    for module, extra in ((multi, ()), (spill_module, ("-maxrregcount=24",))):
        report = _ptxas_report(module.ptx, tmp_path, *extra)
        assert set(report) == {k.mangled for k in module.kernels}
        for k in module.kernels:
            r, p = k.resources, report[k.mangled]
            assert r.registers == p["regs"], k.name
            assert r.local_bytes == p["stack"], k.name
            assert (r.spill_store_bytes, r.spill_load_bytes) == (p["st"], p["ld"]), k.name
            assert r.static_smem_bytes == p["smem"], k.name
            assert r.barriers == p["bars"], k.name
    smem = select_compiled_kernel(multi, "smem_widths").resources
    assert smem.static_smem_bytes == 128 * (4 + 8 + 16) and smem.barriers == 1
    assert select_compiled_kernel(multi, "vec_add").resources.barriers == 0
    assert (
        select_compiled_kernel(spill_module, "named_barrier").resources.barriers == 4
    )  # bar.sync 3


@needs_nvcc
def test_const_bytes_match_cuobjdump(multi: CompiledModule) -> None:
    assert TC is not None
    if TC.cuobjdump is None:
        pytest.skip("no cuobjdump")
    out = subprocess.run(
        [str(TC.cuobjdump), "-res-usage", str(multi.cubin_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    usage = dict(re.findall(r"Function (\S+):\s*\n\s*REG:\d+ .*?CONSTANT\[0\]:(\d+)", out))
    for k in multi.kernels:
        assert k.resources.const_bytes == int(usage[k.mangled]) > 0x210, k.name


@needs_nvcc
def test_spills(spill_module: CompiledModule) -> None:
    r = select_compiled_kernel(spill_module, "spill").resources
    assert r.registers <= 24
    assert r.spill_store_bytes > 0 and r.spill_load_bytes > 0
    assert r.local_bytes > 0
    assert "spill" in spill_module.log


@needs_nvcc
def test_compile_error_has_file_and_line(cache_dir: Path) -> None:
    with pytest.raises(CompileError) as exc:
        compile_source(CUDA_DIR / "broken.cu", CompileOptions(cache_dir=cache_dir))
    message = exc.value.message  # one line: how many errors and the first, at its file:line
    assert "1 error; the first: broken.cu:4: " in message and "\n" not in message
    assert "not_declared_anywhere" in message
    assert exc.value.hint and "\n" not in exc.value.hint
    # nvcc's own output, verbatim, for the lines below the error line
    assert f"{CUDA_DIR / 'broken.cu'}(4): error" in (exc.value.details or "")
    assert all("broken.cu" not in p.read_text() for p in cache_dir.glob("entries/*/*/meta.json"))


def test_missing_source_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not found"):
        compile_source(tmp_path / "nope.cu", CompileOptions(use_cache=False))


@needs_nvcc
def test_module_round_trips_through_json(multi: CompiledModule) -> None:
    again = CompiledModule.from_dict(json.loads(json.dumps(multi.to_dict())))
    assert again == multi
    k = multi.kernels[0]
    assert KernelInfo.from_dict(json.loads(json.dumps(k.to_dict()))) == k


# --------------------------------------------------------------------------------------------
# Kernel selection


@needs_nvcc
def test_select_by_every_kind_of_name(multi: CompiledModule) -> None:
    vec = select_compiled_kernel(multi, "vec_add")
    assert select_compiled_kernel(multi, vec.mangled) == vec
    assert select_compiled_kernel(multi, "::vec_add") == vec
    assert (
        select_compiled_kernel(multi, "vec_add(float4 const*, float4 const*, float4*, int)") == vec
    )
    scale = select_compiled_kernel(multi, "scale")
    assert select_compiled_kernel(multi, "ga::scale") == scale
    reduce = select_compiled_kernel(multi, "ga::reduce<64, false>")
    assert select_compiled_kernel(multi, "reduce<64,false>") == reduce
    assert select_compiled_kernel(multi, " reduce < 64 , false > ") == reduce
    assert select_compiled_kernel(multi, "reduce") == reduce  # the one instance
    assert multi.kernel("ga::reduce<64,false>") == reduce


@needs_nvcc
def test_no_name_with_several_kernels_lists_them(multi: CompiledModule) -> None:
    with pytest.raises(KernelNotFoundError) as exc:
        select_compiled_kernel(multi, None)
    assert "vec_add" in exc.value.message and "ga::scale" in exc.value.message
    assert "--kernel" in (exc.value.hint or "")


@needs_nvcc
def test_one_kernel_needs_no_name(cache_dir: Path) -> None:
    module = compile_source(
        CUDA_DIR / "spill.cu", CompileOptions(cache_dir=cache_dir, defines=["UNUSED=1"])
    )
    assert len(module.kernels) == 2
    single = dataclasses.replace(module, kernels=module.kernels[:1])
    assert select_compiled_kernel(single) == module.kernels[0]


@needs_nvcc
def test_wrong_name_lists_closest_first(multi: CompiledModule) -> None:
    with pytest.raises(KernelNotFoundError) as exc:
        select_compiled_kernel(multi, "vec_ad")
    hint = exc.value.hint or ""
    assert hint.startswith("did you mean 'vec_add'? available: vec_add,")
    assert "ga::scale" in hint
    with pytest.raises(KernelNotFoundError) as exc:
        select_compiled_kernel(multi, "scael")
    assert (exc.value.hint or "").startswith("did you mean 'ga::scale'? available: ga::scale")
    with pytest.raises(KernelNotFoundError) as exc:
        select_compiled_kernel(multi, "zzzzzz")  # nothing close: no question, the list
    assert (exc.value.hint or "").startswith("available: ")
    assert exc.value.one_line().count("\n") == 0


@needs_nvcc
def test_template_instantiated_by_gpuadvise(instantiated: CompiledModule) -> None:
    r = select_compiled_kernel(instantiated, "reduce<128, true>")
    assert r.name == "ga::reduce<128, true>"
    assert r.resources.static_smem_bytes == 128 * 4 and r.resources.barriers == 1
    assert select_compiled_kernel(instantiated, "reduce<128,true>") == r
    assert select_compiled_kernel(instantiated, "ga::reduce<128, true>") == r
    fill = select_compiled_kernel(instantiated, "fill<float>")  # found through `using namespace`
    assert fill.name == "ga::inner::fill<float>"
    # the file's own kernels are all still there, and line info points at the user's file
    assert {k.name for k in instantiated.kernels} >= {"vec_add", "ga::reduce<64, false>"}
    assert instantiated.source == MULTI.resolve()
    assert instantiated.wrapper_path is not None and instantiated.wrapper_path != MULTI
    assert f'.file\t1 "{MULTI.resolve()}"' in instantiated.ptx or str(MULTI.resolve()) in (
        instantiated.ptx
    )
    with pytest.raises(KernelNotFoundError, match="ambiguous"):
        select_compiled_kernel(instantiated, "reduce")


@needs_nvcc
def test_existing_instance_needs_no_wrapper(opts: CompileOptions, multi: CompiledModule) -> None:
    module = compile_source(MULTI, opts, kernels=["reduce<64, false>", "vec_add"])
    assert module.wrapper_path is None and module.cubin_path == multi.cubin_path


@needs_nvcc
def test_bad_template_instance_is_kernel_not_found(opts: CompileOptions) -> None:
    with pytest.raises(KernelNotFoundError) as exc:
        compile_source(MULTI, opts, kernels=["nosuch<4>"])
    assert "nosuch<4>" in exc.value.message
    assert "reduce" in (exc.value.hint or "")
    with pytest.raises(KernelNotFoundError, match="reduce<3, true>"):
        select_compiled_kernel(compile_source(MULTI, opts), "reduce<3, true>")


def test_names_without_a_demangler() -> None:
    d = _fallback_demangle
    assert d("_Z7vec_addPK6float4S1_PS_i") == "vec_add(...)"
    assert d("_ZN2ga5scaleEPKfPfi") == "ga::scale(...)"
    assert d("_ZN2ga6reduceILi64ELb0EEEvPKfPf") == "_ZN2ga6reduceILi64ELb0EEEvPKfPf"
    names = demangle(["_Z1kv", "plain"], toolchain=None)
    assert display_name(names["_Z1kv"]) == "k"
    assert names["plain"] == "plain"
    disp = display_name
    assert disp("void ns::reduce<256, true>(float const*, float*)") == "ns::reduce<256, true>"
    assert disp("(anonymous namespace)::k(int)") == "(anonymous namespace)::k"
    assert disp("k<(int)3>(float*)") == "k<3>"  # cu++filt writes template args as casts
    assert split_qualified("a::b<c::d, 2>::k") == ["a", "b<c::d, 2>", "k"]


def test_namespace_scanner() -> None:
    text = """
    // namespace commented { }
    namespace a { namespace b { struct S { int x; }; } }
    namespace c::d { }
    namespace { void f() {} }
    inline namespace v1 { }
    const char* s = "namespace fake {";
    """
    assert namespace_paths(text) == ["a", "a::b", "c", "c::d", "v1"]


# --------------------------------------------------------------------------------------------
# Cache


def _copy_fixture(dst: Path) -> Path:
    (dst / "include").mkdir(parents=True)
    shutil.copy(MULTI, dst / "multi.cu")
    shutil.copy(INCLUDE_DIR / "ga_helpers.cuh", dst / "include" / "ga_helpers.cuh")
    return dst / "multi.cu"


@needs_nvcc
def test_cache_hit_and_header_change(tmp_path: Path) -> None:
    src = _copy_fixture(tmp_path / "src")
    opts = CompileOptions(include_dirs=[tmp_path / "src" / "include"], cache_dir=tmp_path / "c")
    t0 = time.perf_counter()
    first = compile_source(src, opts)
    t1 = time.perf_counter()
    second = compile_source(src, opts)
    t2 = time.perf_counter()
    assert not first.from_cache and second.from_cache
    assert (t2 - t1) < (t1 - t0) / 5
    assert second.kernels == first.kernels and second.ptx == first.ptx
    assert second.cubin_path.read_bytes() == first.cubin_path.read_bytes()
    assert tmp_path / "c" in second.cubin_path.parents

    header = tmp_path / "src" / "include" / "ga_helpers.cuh"
    header.write_text(header.read_text().replace("2.0f", "3.0f"))
    third = compile_source(src, opts)
    assert not third.from_cache and third.ptx != first.ptx
    assert compile_source(src, opts).from_cache

    other = compile_source(src, dataclasses.replace(opts, defines=("X=1",)))
    assert not other.from_cache  # flags are part of the key


@needs_nvcc
def test_no_cache_bypasses(tmp_path: Path) -> None:
    src = _copy_fixture(tmp_path / "src")
    cache = tmp_path / "c"
    opts = CompileOptions(include_dirs=[tmp_path / "src" / "include"], cache_dir=cache)
    compile_source(src, opts)
    before = sorted(p for p in cache.rglob("*") if p.is_file())
    fresh = compile_source(src, dataclasses.replace(opts, use_cache=False))
    assert not fresh.from_cache
    assert cache not in fresh.cubin_path.parents and fresh.cubin_path.is_file()
    assert sorted(p for p in cache.rglob("*") if p.is_file()) == before
    shutil.rmtree(fresh.cubin_path.parent)


def test_cache_root_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUADVISE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "gpuadvise"
    monkeypatch.setenv("GPUADVISE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    assert cache_root(CompileOptions(cache_dir=tmp_path / "o")) == tmp_path / "o"


def test_a_cache_of_variant_and_proxy_sources_is_gpuadvises(tmp_path: Path) -> None:
    """The folders cache.content_folder writes (a variant's patched source, a layout proxy) are
    gpuadvise's own: an untagged root holding only them is an older cache, not a stranger's."""
    from gpuadvise.toolchain.cache_dir import cache_root_problem

    root = tmp_path / "old"
    (root / "variants").mkdir(parents=True)
    (root / "proxies").mkdir()
    assert cache_root_problem(root) is None
    (root / "photos").mkdir()
    assert cache_root_problem(root) is not None


def test_parsers() -> None:
    dep = "out.cubin : /a/b.cu \\\n  /x/with\\ space.h \\\n  /usr/include/c.h\n"
    assert parse_depfile(dep) == ["/a/b.cu", "/x/with space.h", "/usr/include/c.h"]
    log = """ptxas info    : Function properties for _Z6helperv
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function '_Z1kPf' for 'sm_80'
ptxas info    : Function properties for _Z1kPf
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, 1024 bytes smem, 360 bytes cmem[0]
"""
    report = parse_ptxas_report(log)
    assert report == {
        "_Z1kPf": {"stack": 16, "spill_stores": 0, "spill_loads": 0, "registers": 30, "smem": 1024}
    }

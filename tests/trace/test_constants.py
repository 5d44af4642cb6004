"""Issue 27 (3): ``__constant__`` memory filled from the spec, as the host code fills it.

A convolution whose filter is a ``__constant__`` array without initializer computed zeros on the
emulator, and every output check passed blindly. ``[constants]`` (the corpus's spelling) and
``--constant NAME=TYPE[N]:FILL`` fill it: in the emulator's constant bank and in the GPU worker's
module global, the same bytes; the name, type and size are checked against the PTX's ``.const``
declaration; a constant the kernel reads that nobody filled is a note, once.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from clikit import cli, one_error

from gpuadvise.analyze.models import resolve_launch
from gpuadvise.analyze.options import KernelOptions, build
from gpuadvise.errors import ConfigError, UsageError
from gpuadvise.spec.kernel_spec import load_spec, parse_constant

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "tests" / "cuda" / "constants"
CONV = CASE / "conv.cu"
SPEC = CASE / "case.toml"


def test_the_corpus_spelling_is_read() -> None:
    got = load_spec(SPEC)["constants"]
    assert list(got) == ["d_Kernel", "mask<float>", "scale"]
    k = got["d_Kernel"]
    assert (k.elem_type.name, k.count_expr, k.fill, k.fill_given) == (
        "float",
        "17",
        "random(0,1)",
        True,
    )
    assert got["mask<float>"].fill == "ones" and not got["mask<float>"].is_output
    # a templated name with spaces, a namespace, no fill
    c = parse_constant("mask<float, 4> = float4[n/4]")
    assert (c.name, c.count_expr, c.fill_given) == ("mask<float, 4>", "n/4", False)
    assert parse_constant("tabs::lut=int[4]:zeros").name == "tabs::lut"


@pytest.mark.parametrize(
    "text, needle",
    [
        ("d_Kernel", "is not NAME=TYPE[COUNT]"),
        ("d_Kernel=float[]", "no element count"),
        ("d_Kernel=[17]", "no element type"),
        ("1x=float[3]", "not a C++ name"),
        ("d_Kernel=float[17]:sometimes", "unknown fill"),
    ],
)
def test_bad_constants_are_one_line_errors(text: str, needle: str) -> None:
    with pytest.raises(UsageError, match=re.escape(needle)):
        parse_constant(text)


def test_a_table_is_not_the_spelling(tmp_path: Path) -> None:
    spec = tmp_path / "k.toml"
    spec.write_text('[constants]\nd_Kernel = { type = "float", count = 17 }\n')
    with pytest.raises(ConfigError, match=r"\[constants\] d_Kernel must be text"):
        load_spec(spec)


def _launch(kernel: str, *constants: str, spec: bool = True) -> tuple[Any, ...]:
    from gpuadvise.toolchain import compile_source, find_toolchain, select_compiled_kernel

    opts = KernelOptions(
        source=str(CONV),
        kernel=kernel,
        spec=str(SPEC) if spec else None,
        grid="16",
        block="256",
        args=("n=4096",),
        buffers=("in=float[n]", "out=float[n]"),
        constants=constants,
        gpu="H100",
    )
    s, choice, options = build(opts)
    if not spec:
        s = dataclasses.replace(s, constants=s.constants)
    tc = find_toolchain()
    module = compile_source(CONV, options, tc, kernels=[s.kernel])
    k = select_compiled_kernel(module, s.kernel)
    return module, k, resolve_launch(s, k, options, tc), choice.device


def _conv(x: np.ndarray, w: np.ndarray, scale: float) -> np.ndarray:
    n = len(x)
    idx = np.clip(np.arange(n)[:, None] + np.arange(-8, 9)[None, :], 0, n - 1)
    return (x[idx].astype(np.float64) @ w.astype(np.float64) * scale).astype(np.float32)


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_the_emulator_runs_with_the_filter_the_spec_gives() -> None:
    from gpuadvise.trace.emulate import constant_bytes, emulate

    module, k, launch, device = _launch("conv_rows")
    emu = emulate(module, k, launch, device, sample_ctas="all", trace=False)
    raw = dict(constant_bytes(module.ptx, launch))
    w = np.frombuffer(raw["d_Kernel"], np.float32)
    assert w.shape == (17,) and 0 <= w.min() and w.max() < 1 and len(set(w.tolist())) == 17
    assert np.frombuffer(raw["scale"], np.float32).tolist() == [1.0]
    want = _conv(emu.inputs["in"], w, 1.0)
    np.testing.assert_allclose(emu.outputs["out"], want, rtol=1e-5, atol=1e-6)
    assert not [n for n in emu.notes if "__constant__" in n]
    # the same filter, given on the command line, wins over the file's
    module, k, launch, device = _launch("conv_rows", "scale=float[1]:zeros")
    emu = emulate(module, k, launch, device, sample_ctas="all", trace=False)
    assert not emu.outputs["out"].any()


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_a_constant_nobody_filled_is_said_once() -> None:
    from gpuadvise.trace.emulate import emulate

    module, k, launch, device = _launch("conv_rows", spec=False)
    launch = dataclasses.replace(launch, constants=())
    emu = emulate(module, k, launch, device, sample_ctas=4)
    notes = [n for n in emu.notes if "__constant__" in n]
    # d_Kernel and scale are read and filled by nobody: one note each, with the fill to give
    assert len(notes) == 2, notes
    assert "--constant 'd_Kernel=float[17]:random'" in notes[0]
    assert "--constant 'scale=float[1]:random'" in notes[1]
    assert "output check on them is weak" in notes[0]
    assert not emu.outputs["out"][: 4 * 256].any()  # zeros times anything


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_a_templated_constant_and_an_initializer() -> None:
    from gpuadvise.trace.emulate import emulate

    module, k, launch, device = _launch("masked")
    emu = emulate(module, k, launch, device, sample_ctas="all", trace=False)
    x = emu.inputs["in"]
    lut = np.array([1, 2, 3, 4], np.float32)[np.arange(4096) % 4]
    np.testing.assert_allclose(emu.outputs["out"], x * 1.0 + lut, rtol=1e-6)
    # the namespaced table keeps its initializer; nothing unfilled is read
    assert not [n for n in emu.notes if "__constant__" in n]


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
@pytest.mark.parametrize(
    "given, needle",
    [
        ("d_Kernel=float[16]:random", "float[16] is 64 bytes, but the kernel declares 68"),
        ("d_Kernl=float[17]:random", "did you mean d_Kernel"),
        ("scale=int[1]:ones", "declares it of PTX type .f32"),
        ("tabs::lut=int[5]:zeros", "give its size: tabs::lut=int[4]"),
    ],
)
def test_the_declaration_is_checked(capsys, given: str, needle: str) -> None:
    code, _, err = cli(
        capsys, "analyze", str(CONV), "-k", "conv_rows", "--spec", str(SPEC), "--no-trace",
        "--constant", given, "--gpu", "H100", "--no-measure",
    )  # fmt: skip
    assert code == 2 and needle in one_error(err)


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_the_gpu_worker_fills_the_same_bytes() -> None:
    """The worker writes each constant into the module's global after loading it (the backend's
    set_constant: cuModuleGetGlobal + a copy in PyCUDA), with the bytes the emulator uses."""
    from gpuadvise.analyze.prepare import prepare
    from gpuadvise.runner.worker import run_job
    from gpuadvise.trace.emulate import constant_bytes

    opts = KernelOptions(source=str(CONV), kernel="conv_rows", spec=str(SPEC), gpu="H100")
    p = prepare(opts, "A")
    assert [c.symbol for c in p.launch.constants] == ["d_Kernel", "_Z4maskIfE", "scale"]
    module, _k, launch, _d = _launch("conv_rows")
    want = dict(constant_bytes(module.ptx, launch))

    class Recording:
        def __init__(self) -> None:
            self.constants: dict[str, bytes] = {}

        def device_info(self) -> dict[str, Any]:
            return {}

        def load(self, cubin: bytes, symbol: str, fmt: str, smem: int) -> Any:
            return symbol

        def set_constant(self, kernel: Any, symbol: str, host: np.ndarray) -> None:
            self.constants[symbol] = host.tobytes()

        def alloc(self, nbytes: int) -> Any:
            return bytearray(nbytes)

        def bind(self, *call: Any) -> Any:
            return lambda: None

        def upload(self, dev: Any, host: np.ndarray) -> None: ...

        def download(self, dev: Any, host: np.ndarray) -> None: ...

        def synchronize(self) -> None: ...

    from gpuadvise.runner.job import Job

    backend = Recording()
    res = run_job(Job((p.launch,), p.buffers, seed=p.spec.seed, verify=False), backend)
    assert res.ok, res.error
    assert backend.constants == want


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_the_gpu_tracer_fills_both_kernels() -> None:
    """The GPU tracer's job fills the constants in the original and the instrumented module
    (here on the emulated device: both run in the CPU emulator), so both compute the filtered
    outputs the emulator computes."""
    from gpuadvise.trace.emulate import emulate
    from gpuadvise.trace.gpu import trace_on_gpu

    module, k, launch, device = _launch("conv_rows")
    got = trace_on_gpu(
        module, k, launch, device, sample_ctas=2, emulate_device=True, timing_samples=0
    )
    full = emulate(module, k, launch, device, sample_ctas="all", trace=False)
    assert got.outputs_match and full.outputs["out"].any()
    np.testing.assert_array_equal(got.outputs["out"], full.outputs["out"])

"""A cubin of many functions (a library's module, as ``gpuadvise record`` keeps CuPy's CUB
kernels): one kernel's SASS and life ranges are read alone (nvdisasm ``-fun``), the same as from
the whole cubin, and the barriers of every kernel come from one disassembly read as text."""

from __future__ import annotations

from pathlib import Path

import pytest
from suitekit import whole_cubin_sass

from gpuadvise.toolchain import sass
from gpuadvise.toolchain.cubin import function_symbols, read_cubin

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

KERNELS = sass.NARROW_ABOVE + 4


def _source() -> str:
    out = ['extern "C" __global__ void k0(float* a) { a[threadIdx.x] += 1.0f; }']
    for i in range(1, KERNELS):  # every third kernel has barriers, one of them a named one
        body = f"a[threadIdx.x] *= {i}.0f;"
        if i % 3 == 0:
            body = (
                "__shared__ float s[64]; s[threadIdx.x] = a[threadIdx.x]; __syncthreads(); "
                f"a[threadIdx.x] = s[63 - threadIdx.x] * {i};"
            )
        if i == 9:
            body += ' asm volatile("bar.sync 3, 64;");'
        out.append(f'extern "C" __global__ void k{i}(float* a) {{ {body} }}')
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    import subprocess

    from gpuadvise.toolchain import find_toolchain

    tc = find_toolchain()
    if tc.nvdisasm is None:
        pytest.skip("no nvdisasm")
    d = tmp_path_factory.mktemp("many")
    (d / "many.cu").write_text(_source())
    subprocess.run([str(tc.nvcc), "-cubin", "-arch=sm_90", "-o", str(d / "many.cubin"),
                    str(d / "many.cu")], check=True, capture_output=True)  # fmt: skip
    return d / "many.cubin", tc


def test_function_symbols_are_the_kernels_with_their_symtab_index(big) -> None:
    cubin, _ = big
    symbols = function_symbols(cubin.read_bytes())
    assert (
        set(symbols)
        == set(read_cubin(cubin.read_bytes()).kernels)
        == {f"k{i}" for i in range(KERNELS)}
    )
    assert len(set(symbols.values())) == KERNELS
    assert function_symbols(b"not an elf") == {}


def test_one_kernel_read_alone_is_the_same_as_from_the_whole_cubin(big) -> None:
    from gpuadvise.toolchain.liveness import life_ranges, parse_life_ranges
    from gpuadvise.toolchain.sass import _run

    cubin, tc = big
    assert sass.function_index(cubin, "k9") == function_symbols(cubin.read_bytes())["k9"]
    whole = sass.disassemble_all(cubin, tc)  # every function
    assert len(whole) == KERNELS
    alone = sass.disassemble(cubin, "k9", tc)
    # the same instructions; labels are numbered over the cubin, so only their names differ
    assert len(alone) > 5 and [_unlabel(i) for i in alone] == [_unlabel(i) for i in whole["k9"]]
    assert sass.disassemble_all(cubin, tc, sass.function_index(cubin, "k9")).keys() == {"k9"}
    text = _run([str(tc.nvdisasm), "--print-life-ranges", "-c", str(cubin)]).stdout
    a, b = life_ranges(cubin, "k9", tc), parse_life_ranges(text)["k9"]
    assert [(r.offset, r.counts, r.marks) for r in a.rows] == [
        (r.offset, r.counts, r.marks) for r in b.rows
    ]
    assert sorted(a.labels.values()) == sorted(b.labels.values())


def _unlabel(i: sass.SassInstruction) -> sass.SassInstruction:
    import dataclasses
    import re

    return dataclasses.replace(i, operands=re.sub(r"\.L_x_\d+", ".L_x_", i.operands))


def test_barriers_of_every_kernel_from_one_disassembly(big) -> None:
    """The text read of one ``nvdisasm -c`` run against :func:`_barriers`' parsed SASS of each
    kernel. The reference reads the cubin's SASS whole (``suitekit.whole_cubin_sass``: one
    ``nvdisasm -c -gi -ndf`` run for every kernel, not an ``-fun`` run per kernel, ~0.35 CPU-s
    each): that a kernel read alone is the same SASS as from the whole cubin is
    :func:`test_one_kernel_read_alone_is_the_same_as_from_the_whole_cubin`'s check."""
    from gpuadvise.toolchain.binary import _barrier_counts, _barriers

    cubin, tc = big
    counts = _barrier_counts(cubin, tc)
    with whole_cubin_sass():
        assert sass._whole_cubin(cubin)  # every kernel's SASS from one disassembly
        assert counts == {f"k{i}": _barriers(cubin, f"k{i}", tc) for i in range(KERNELS)}
    assert counts["k0"] == 0 and counts["k3"] == 1 and counts["k9"] == 4  # bar.sync 3: ids 0..3

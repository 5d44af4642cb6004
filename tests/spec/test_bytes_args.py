"""A parameter passed by value that gpuadvise has no scalar for (a struct, a vector) is given by
its bytes: ``p = { bytes = "..." }`` in a spec (what ``gpuadvise record`` writes) or
``--arg p=bytes:...``; it is checked against the type's size and passed as those bytes by the
runner, at the struct's alignment."""

from __future__ import annotations

import struct

import pytest

from gpuadvise.errors import ConfigError, UsageError
from gpuadvise.runner.job import Param, param_format
from gpuadvise.runner.params import scalar_param
from gpuadvise.source.signature import parse_signature
from gpuadvise.spec.kernel_spec import (
    ArgSpec,
    RawBytes,
    ResolvedArg,
    build_kernel_spec,
    load_spec,
    parse_arg,
    resolve,
)

SOURCE = """
struct Params { float scale; int shift; };
__global__ void scaled(const float* x, float* y, Params p, int n, float2 v) {
    int i = threadIdx.x; if (i < n) y[i] = p.scale * x[i] + p.shift + v.x;
}
"""
P = struct.pack("<fi", 1.5, 3)
V = struct.pack("<ff", 0.5, 0.25)


def spec_for(tmp_path, *args):
    (tmp_path / "k.cu").write_text(SOURCE)
    return build_kernel_spec(tmp_path / "k.cu", "scaled", grid="1", block="32", args=args)


def test_bytes_from_a_spec_file_and_the_command_line(tmp_path):
    (tmp_path / "k.cu").write_text(SOURCE)
    (tmp_path / "c.toml").write_text(
        f'source = "k.cu"\nkernel = "scaled"\ngrid = 1\nblock = 32\n'
        f'[args]\np = {{ bytes = "{P.hex()}" }}\nn = 8\n'
    )
    assert load_spec(tmp_path / "c.toml")["args"]["p"] == ArgSpec("p", RawBytes(P.hex()))
    assert parse_arg(f"p=bytes:0x{P.hex().upper()}") == ArgSpec("p", RawBytes(P.hex()))
    a = ArgSpec("p", RawBytes(P.hex()))
    assert ArgSpec.from_dict(a.to_dict()) == a
    for bad in ("bytes:", "bytes:abc", "bytes:zz"):
        with pytest.raises(UsageError, match="not bytes in hex"):
            parse_arg("p=" + bad)
    (tmp_path / "bad.toml").write_text('kernel = "scaled"\n[args]\np = { bytes = "0g" }\n')
    with pytest.raises(ConfigError, match="not bytes in hex"):
        load_spec(tmp_path / "bad.toml")


def test_resolved_as_bytes_of_the_struct_size(tmp_path):
    spec = spec_for(tmp_path, f"p=bytes:{P.hex()}", f"v=bytes:{V.hex()}", "n=8")
    params = parse_signature(SOURCE, "scaled")
    r = resolve(spec, params, resolve_struct=lambda name: (8, 4))
    p, v = (a for a in r.params if isinstance(a, ResolvedArg) and a.name in ("p", "v"))
    assert (p.value, p.ctype.kind, p.ctype.size_bytes, p.ctype.align_bytes) == (P, "bytes", 8, 4)
    assert (v.value, v.ctype.align_bytes) == (V, 8)  # float2: its catalogue size and alignment
    assert ResolvedArg.from_dict(p.to_dict()) == p
    with pytest.raises(UsageError, match="gives 8 bytes, but its type Params has 12"):
        resolve(spec, params, resolve_struct=lambda name: (12, 4))
    # a vector's size is known before anything is compiled: the spec is refused when it is built
    with pytest.raises(UsageError, match="gives 2 bytes, but its type float2 has 8"):
        spec_for(tmp_path, f"p=bytes:{P.hex()}", "v=bytes:0000", "n=8")


def test_a_struct_given_a_number_says_how_to_give_its_bytes(tmp_path):
    spec = spec_for(tmp_path, "p=3", "n=8", f"v=bytes:{V.hex()}")
    with pytest.raises(UsageError, match="cannot fill from a number") as err:
        resolve(spec, parse_signature(SOURCE, "scaled"), lambda n: (8, 4))
    assert 'give its bytes: p = { bytes = "..." } under [args]' in err.value.one_line()


def test_runner_passes_the_bytes_at_the_struct_alignment():
    from gpuadvise.spec.cuda_types import raw_type

    p = scalar_param(ResolvedArg("p", 1, raw_type("Big", 16, 8), bytes(range(16))))
    assert (p.fmt, p.value, p.align) == ("16s", bytes(range(16)), 8)
    params = [Param("buffer", "P"), Param("scalar", "i", 7), p, Param("scalar", "f", 1.0)]
    fmt = param_format(params)
    assert (
        fmt == "Pi4x16sf"
    )  # 8 + 4, then 4 bytes of padding: Big lies at offset 16, as nvcc has it
    packed = struct.pack(fmt, 0xAB, 7, bytes(range(16)), 1.0)
    assert packed[16:32] == bytes(range(16)) and len(packed) == 36
    assert param_format([Param("scalar", "i", 1), Param("scalar", "8s", P, align=4)]) == "i8s"


def test_a_bool_passes_by_value_as_one_byte():
    # HeCBench zeropoint's `bool preserve_sparsity`: the measurement refused to build every variant
    from gpuadvise.spec.cuda_types import lookup

    ct = lookup("bool")
    assert ct is not None
    for given, want in ((1, True), (0, False), (True, True)):
        p = scalar_param(ResolvedArg("preserve_sparsity", 1, ct, given))
        assert (p.fmt, bool(p.value)) == ("?", want)
    fmt = param_format([Param("buffer", "P"), p, Param("scalar", "i", 3)])
    assert struct.calcsize(fmt) == 16  # the bool at offset 8, the int aligned to 12, as nvcc has it

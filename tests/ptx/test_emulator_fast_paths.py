"""The emulator's fast paths (global accesses by every lane, lockstep steps) give what the general
path gives: the same trace records, outputs and counts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuadvise.ptx import emulator
from gpuadvise.ptx.access import RECORD
from gpuadvise.trace.emulate import emulate_ptx

# Each thread walks its own column of `in` (stride: all threads) for n iterations, plus one more
# on odd threads (the loop's last branch splits every warp), storing a running sum; then the
# first 40 threads of each CTA store again under a predicate (a partial mask).
PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p_in, .param .u64 p_out, .param .u32 p_n)
{
  .reg .pred %p<4>;
  .reg .b32 %r<12>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [p_in];
  ld.param.u64 %rd2, [p_out];
  ld.param.u32 %r1, [p_n];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r9, %nctaid.x;
  mad.lo.s32 %r5, %r3, %r4, %r2;
  mul.lo.s32 %r10, %r9, %r4;
  mul.wide.s32 %rd3, %r5, 4;
  mul.wide.s32 %rd6, %r10, 4;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  and.b32 %r7, %r2, 1;
  add.s32 %r8, %r1, %r7;
  mov.f32 %f1, 0f00000000;
  mov.u32 %r6, 0;
$L_loop:
  ld.global.f32 %f2, [%rd4];
  fma.rn.f32 %f1, %f2, 0f3F000000, %f1;
  st.global.f32 [%rd5], %f1;
  add.s64 %rd4, %rd4, %rd6;
  add.s32 %r6, %r6, 1;
  setp.lt.u32 %p1, %r6, %r8;
  @%p1 bra $L_loop;
  setp.lt.u32 %p2, %r2, 40;
  @%p2 st.global.f32 [%rd5], %f2;
  ret;
}
"""


def _counting(name: str, fast: bool) -> tuple[Any, list[int]]:
    """``emulator.Batch.<name>`` (a fast-path maker) wrapped: off unless ``fast``, and the
    times it took the fast path counted in the list's one item."""
    make, used = getattr(emulator.Batch, name), [0]

    def counted(self: Any, *args: Any) -> Any:
        fn = make(self, *args)
        if fn is None or not fast:
            return None

        def wrapped() -> Any:
            got = fn()
            used[0] += got is not None
            return got

        return wrapped

    return counted, used


def _run(monkeypatch: pytest.MonkeyPatch, fast: bool) -> tuple[Any, int]:
    counted, used = _counting("_fast_global", fast)
    with monkeypatch.context() as mp:
        mp.setattr(emulator.Batch, "_fast_global", counted)
        mp.setattr(emulator.Batch, "lockstep", fast)
        grid, block, n = 3, 64, 6
        inp = np.arange(grid * block * (n + 1), dtype=np.float32) * np.float32(0.25)
        out = np.zeros(grid * block, np.float32)
        e = emulate_ptx(PTX, "k", grid, block, [inp, out, np.uint32(n)])
    return e, used[0]


def test_fast_paths_match_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, used = _run(monkeypatch, True)
    slow, unused = _run(monkeypatch, False)
    assert used > 0 and unused == 0  # the fast path ran in one, not in the other
    assert fast.trace.records.tobytes() == slow.trace.records.tobytes()
    assert fast.outputs["arg1"].tobytes() == slow.outputs["arg1"].tobytes()
    assert (fast.lane_instructions, fast.warp_steps) == (slow.lane_instructions, slow.warp_steps)
    assert fast.simt == slow.simt
    assert fast.trace.work == slow.trace.work  # the critical paths (gpuadvise.ptx.chains)
    # the partial-mask store and the odd threads' last iteration are in the trace
    masks = fast.trace.records["mask"]
    assert (masks != 0xFFFFFFFF).any() and (masks == 0xFFFFFFFF).any()


def test_misaligned_access_raises_the_same_error_on_the_fast_path() -> None:
    inp = np.zeros(64 * 8, np.float32)
    out = np.zeros(64, np.float32)
    bad = PTX.replace(
        "add.s64 %rd4, %rd1, %rd3;", "add.s64 %rd4, %rd1, %rd3;\n  add.s64 %rd4, %rd4, 2;"
    )
    with pytest.raises(emulator.MemoryAccessError, match="misaligned load") as got:
        emulate_ptx(bad, "k", 1, 64, [inp, out, np.uint32(2)])
    assert "block (0, 0, 0), thread (0, 0, 0)" in str(got.value)


# Each thread stores its element of `in` to a shared tile, then after the barrier loads its right
# neighbour's (every lane), and the first 40 threads their own again (a partial mask).
SHARED_PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry s(.param .u64 p_in, .param .u64 p_out)
{
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  .shared .align 4 .b8 tile[1024];
  ld.param.u64 %rd1, [p_in];
  ld.param.u64 %rd2, [p_out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mad.lo.s32 %r5, %r3, %r4, %r2;
  mul.wide.s32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  mov.u32 %r6, tile;
  shl.b32 %r7, %r2, 2;
  add.s32 %r8, %r6, %r7;
  st.shared.f32 [%r8], %f1;
  bar.sync 0;
  add.s32 %r9, %r2, 1;
  rem.u32 %r9, %r9, %r4;
  shl.b32 %r10, %r9, 2;
  add.s32 %r11, %r6, %r10;
  ld.shared.f32 %f2, [%r11+0];
  setp.lt.u32 %p1, %r2, 40;
  @%p1 ld.shared.f32 %f2, [%r8];
  st.global.f32 [%rd5], %f2;
  ret;
}
"""


# Each thread keeps its element in its local frame (at a fixed offset, and at one that depends on
# the thread), loads it back (every lane, then the first 40 threads again) and stores twice it.
LOCAL_PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry s(.param .u64 p_in, .param .u64 p_out)
{
  .local .align 8 .b8 __local_depot0[32];
  .reg .b64 %SP;
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  mov.u64 %SP, __local_depot0;
  ld.param.u64 %rd1, [p_in];
  ld.param.u64 %rd2, [p_out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mad.lo.s32 %r5, %r3, %r4, %r2;
  mul.wide.s32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  st.local.f32 [%SP+8], %f1;
  and.b32 %r6, %r2, 1;
  shl.b32 %r7, %r6, 2;
  cvt.u64.u32 %rd6, %r7;
  add.s64 %rd7, %SP, %rd6;
  st.local.f32 [%rd7+16], %f1;
  ld.local.f32 %f2, [%SP+8];
  setp.lt.u32 %p1, %r2, 40;
  @%p1 ld.local.f32 %f2, [%rd7+16];
  add.f32 %f3, %f2, %f1;
  st.global.f32 [%rd5], %f3;
  ret;
}
"""


def _run_shared(monkeypatch: pytest.MonkeyPatch, fast: bool, ptx: str = SHARED_PTX) -> Any:
    counted, used = _counting("_fast_shared", fast)
    with monkeypatch.context() as mp:
        mp.setattr(emulator.Batch, "_fast_shared", counted)
        grid, block = 3, 64
        inp = np.arange(grid * block, dtype=np.float32) * np.float32(0.5)
        out = np.zeros(grid * block, np.float32)
        e = emulate_ptx(ptx, "s", grid, block, [inp, out])
    return e, used[0]


def test_shared_fast_path_matches_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    (fast, used), (slow, unused) = _run_shared(monkeypatch, True), _run_shared(monkeypatch, False)
    assert used > 0 and unused == 0
    assert fast.trace.records.tobytes() == slow.trace.records.tobytes()
    assert fast.outputs["arg1"].tobytes() == slow.outputs["arg1"].tobytes()
    assert (fast.lane_instructions, fast.warp_steps) == (slow.lane_instructions, slow.warp_steps)
    assert fast.trace.work == slow.trace.work
    inp = np.arange(3 * 64, dtype=np.float32) * np.float32(0.5)
    want = inp.reshape(3, 64)
    want = np.where(np.arange(64) < 40, want, np.roll(want, -1, axis=1)).reshape(-1)
    assert np.array_equal(fast.outputs["arg1"].view(np.float32), want)
    shared = fast.trace.records[fast.trace.records["space"] == 1]
    assert (shared["mask"] != 0xFFFFFFFF).any() and (shared["mask"] == 0xFFFFFFFF).any()


@pytest.mark.parametrize(
    ("change", "match"),
    [("[%r11+0]", "misaligned load"), ("[%r11+1024]", "out-of-bounds load in shared memory")],
)
def test_bad_shared_access_raises_the_same_error_on_the_fast_path(
    monkeypatch: pytest.MonkeyPatch, change: str, match: str
) -> None:
    bad = SHARED_PTX.replace("[%r11+0]", change if "1024" in change else "[%r11+2]")
    errors = []
    for fast in (True, False):
        with pytest.raises(emulator.MemoryAccessError, match=match) as got:
            _run_shared(monkeypatch, fast, bad)
        errors.append(str(got.value))
    assert errors[0] == errors[1]


def test_local_fast_path_matches_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, used = _run_shared(monkeypatch, True, LOCAL_PTX)
    slow, unused = _run_shared(monkeypatch, False, LOCAL_PTX)
    assert used > 0 and unused == 0
    assert fast.trace.records.tobytes() == slow.trace.records.tobytes()
    assert fast.outputs["arg1"].tobytes() == slow.outputs["arg1"].tobytes()
    assert (fast.lane_instructions, fast.warp_steps) == (slow.lane_instructions, slow.warp_steps)
    inp = np.arange(3 * 64, dtype=np.float32) * np.float32(0.5)
    assert np.array_equal(fast.outputs["arg1"].view(np.float32), inp + inp)
    local = fast.trace.records[fast.trace.records["space"] == 2]
    assert len(local) and (local["mask"] != 0xFFFFFFFF).any()


def test_bad_local_access_raises_the_same_error_on_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad = LOCAL_PTX.replace("ld.local.f32 %f2, [%SP+8];", "ld.local.f32 %f2, [%SP+32];")
    errors = []
    for fast in (True, False):
        with pytest.raises(emulator.MemoryAccessError, match="out-of-bounds load") as got:
            _run_shared(monkeypatch, fast, bad)
        errors.append(str(got.value))
    assert errors[0] == errors[1]


def test_few_lanes_bounds_are_numpys_reductions() -> None:
    """emulator._bounds: the least, greatest and bitwise or numpy's reductions give, for a few
    int64 addresses (negatives too); None for none, for many, for other dtypes."""
    rng = np.random.default_rng(5)
    for n in (1, 2, 5, 31, emulator._FEW_LANES):
        a = rng.integers(-(1 << 50), 1 << 50, n, dtype=np.int64)
        want = (int(a.min()), int(a.max()), int(np.bitwise_or.reduce(a)))
        assert emulator._bounds(a) == want
    assert emulator._bounds(np.zeros(0, np.int64)) is None
    assert emulator._bounds(np.zeros(emulator._FEW_LANES + 1, np.int64)) is None
    assert emulator._bounds(np.zeros(4, np.uint64)) is None


@pytest.mark.parametrize(
    "ptx",
    [
        SHARED_PTX,
        SHARED_PTX.replace("[%r11+0]", "[%r11+2]"),
        SHARED_PTX.replace("[%r11+0]", "[%r11+1024]"),
        LOCAL_PTX,
        LOCAL_PTX.replace("ld.local.f32 %f2, [%SP+8];", "ld.local.f32 %f2, [%SP+32];"),
    ],
)
def test_few_lanes_in_python_as_in_numpy(monkeypatch: pytest.MonkeyPatch, ptx: str) -> None:
    """The partial-mask accesses checked and located with their bounds in Python integers give
    the trace, outputs and errors the numpy reductions give (_FEW_LANES 0: every access by
    numpy; 256: every access of these 3 CTAs by Python), on the general path."""
    got = []
    real = emulator._bounds
    calls = [0]

    def counted(a: np.ndarray) -> Any:
        out = real(a)
        calls[0] += out is not None
        return out

    for few in (256, 0):
        with monkeypatch.context() as mp:
            mp.setattr(emulator, "_FEW_LANES", few)
            mp.setattr(emulator, "_bounds", counted)
            try:
                e, _ = _run_shared(mp, False, ptx)
                got.append((e.trace.records.tobytes(), e.outputs["arg1"].tobytes()))
            except emulator.MemoryAccessError as exc:
                got.append(("error", str(exc)))
        if few:
            assert calls[0] > 0  # the Python path ran
            calls[0] = 0
    assert calls[0] == 0
    assert got[0] == got[1]


def test_record_addresses_as_uint64_are_the_bits_a_cast_gives() -> None:
    """The records' address column takes int64 addresses viewed as uint64 (no casting copy):
    the same bits as the cast, negative values included; other dtypes are left as they are."""
    a = np.array([0x7000_0000_0000, -8, 1 << 62, 0], dtype=np.int64)
    got = emulator._as_u64(a)
    assert got.dtype == np.uint64 and np.shares_memory(got, a)
    assert got.tobytes() == a.astype(np.uint64).tobytes()
    rows = np.zeros((2, 4), np.uint64)
    rows[1][[0, 2]] = emulator._as_u64(a[:2])
    assert rows[1].tolist() == [0x7000_0000_0000, 0, (1 << 64) - 8, 0]
    u = np.arange(3, dtype=np.uint32)
    assert emulator._as_u64(u) is u


def _counting_part(name: str, fast: bool) -> tuple[Any, list[int]]:
    """``emulator.Batch.<name>`` (a partial-mask path's maker) wrapped as :func:`_counting`
    wraps a fast path: off unless ``fast``, the accesses it took counted."""
    make, used = getattr(emulator.Batch, name), [0]

    def counted(self: Any, *args: Any) -> Any:
        fn = make(self, *args)
        if fn is None or not fast:
            return None

        def wrapped(idx: np.ndarray) -> Any:
            got = fn(idx)
            used[0] += got is not None
            return got

        return wrapped

    return counted, used


# the partial-mask accesses of the kernels above in other forms: generic (into global memory,
# and into the shared window: left to the general path), 64 lanes of a CTA, misaligned, outside
# the buffer or the tile
GENERIC_SHARED = SHARED_PTX.replace(
    "@%p1 ld.shared.f32 %f2, [%r8];",
    "cvt.u64.u32 %rd6, %r8;\n  cvta.shared.u64 %rd7, %rd6;\n  @%p1 ld.f32 %f2, [%rd7];",
)
PARTIAL_CASES = [
    (PTX, "_part_global"),
    (PTX.replace("@%p2 st.global.f32", "@%p2 st.f32"), "_part_global"),
    (PTX.replace("setp.lt.u32 %p2, %r2, 40;", "setp.lt.u32 %p2, %r4, 40;"), "_part_global"),
    (PTX.replace("@%p2 st.global.f32 [%rd5]", "@%p2 st.global.f32 [%rd5+2]"), "_part_global"),
    (PTX.replace("@%p2 st.global.f32 [%rd5]", "@%p2 st.global.f32 [%rd5+4096]"), "_part_global"),
    (SHARED_PTX, "_part_shared"),
    (GENERIC_SHARED, "_part_shared"),
    (
        SHARED_PTX.replace("@%p1 ld.shared.f32 %f2, [%r8];", "@%p1 ld.shared.f32 %f2, [%r8+2];"),
        "_part_shared",
    ),
    (
        SHARED_PTX.replace("@%p1 ld.shared.f32 %f2, [%r8];", "@%p1 ld.shared.f32 %f2, [%r8+768];"),
        "_part_shared",
    ),
    (
        SHARED_PTX.replace("st.shared.f32 [%r8], %f1;", "@%p1 st.shared.f32 [%r8], %f1;").replace(
            "bar.sync 0;", "bar.sync 0;\n  setp.lt.u32 %p1, %r2, 40;"
        ),
        "_part_shared",
    ),
    (LOCAL_PTX, "_part_shared"),
    (
        LOCAL_PTX.replace("@%p1 ld.local.f32 %f2, [%rd7+16];", "@%p1 ld.local.f32 %f2, [%rd7+28];"),
        "_part_shared",
    ),
]


def _run_partial(monkeypatch: pytest.MonkeyPatch, ptx: str, maker: str, fast: bool) -> Any:
    counted, used = _counting_part(maker, fast)
    with monkeypatch.context() as mp:
        mp.setattr(emulator.Batch, maker, counted)
        grid, block = 3, 64
        try:
            if ptx.count(".entry k("):
                inp = np.arange(grid * block * 3, dtype=np.float32) * np.float32(0.25)
                out = np.zeros(grid * block, np.float32)
                e = emulate_ptx(ptx, "k", grid, block, [inp, out, np.uint32(2)])
            else:
                inp = np.arange(grid * block, dtype=np.float32) * np.float32(0.5)
                out = np.zeros(grid * block, np.float32)
                e = emulate_ptx(ptx, "s", grid, block, [inp, out])
        except emulator.MemoryAccessError as exc:
            return ("error", str(exc)), used[0]
    got = (
        e.trace.records.tobytes(),
        e.outputs["arg1"].tobytes(),
        e.lane_instructions,
        e.warp_steps,
        e.simt,
        e.trace.work,
    )
    return got, used[0]


@pytest.mark.parametrize(("ptx", "maker"), PARTIAL_CASES)
def test_partial_mask_paths_match_the_general_path(
    monkeypatch: pytest.MonkeyPatch, ptx: str, maker: str
) -> None:
    """_part_global and _part_shared (an access by some lanes: ``Mask.idx``) give the trace,
    outputs, counts and errors the general path (_locate, _record) gives."""
    (fast, used), (slow, unused) = (
        _run_partial(monkeypatch, ptx, maker, True),
        _run_partial(monkeypatch, ptx, maker, False),
    )
    assert fast == slow
    assert unused == 0
    if ptx in (PTX, SHARED_PTX, LOCAL_PTX):
        assert used > 0 and fast[0] != "error"
    if ptx is GENERIC_SHARED:  # the shared window's generic addresses: the general path's
        assert fast[0] != "error"
        masks = np.frombuffer(fast[0], RECORD)["mask"]
        assert (masks != 0xFFFFFFFF).any()

"""The recorder's decoding of CUPTI callbacks and its launch handling, on a fake process whose
memory holds the structures as the CUDA 13 headers lay them out (fakecuda.py)."""

from __future__ import annotations

import json
import struct

import pytest
from fakecuda import FakeCuda, f32, i32, ptr

from gpuadvise.record import layout
from gpuadvise.record.agent import DOMAIN_DRIVER, DOMAIN_RESOURCE, DOMAIN_RUNTIME, Recorder
from gpuadvise.record.raw import RawWriter, read_process
from gpuadvise.record.sampling import SnapshotPolicy

ENTER, EXIT = 0, 1
FUNC, KERNEL, STREAM = 0xF00D, 0xBEEF, 0x5700
SLOTS = [(0, 8), (8, 8), (16, 4), (20, 4)]  # (const float* x, float* y, int n, float a)


def setup(tmp_path, per_shape=2, budget=1 << 20, kernel=None):
    cuda = FakeCuda()
    cuda.functions[FUNC] = list(SLOTS)
    cuda.names[FUNC] = "_Z5saxpyPKfPfif"
    writer = RawWriter(tmp_path / "raw" / "1", ["prog"])
    rec = Recorder(cuda, writer, SnapshotPolicy(per_shape, budget), kernel)
    return cuda, rec


def saxpy_values(cuda: FakeCuda, n: int = 64) -> tuple[list[bytes], int, int]:
    x = cuda.alloc(f32(*range(n)))
    y = cuda.alloc(f32(*([0.5] * (n + 16))))
    return [ptr(x), ptr(y + 16), i32(n), f32(2.0)], x, y


def test_callback_data_decodes_each_field():
    cuda = FakeCuda()
    cb = cuda.callback(ENTER, 0x1234, "_Z1kv", 77)
    f = layout.decode_callback(cuda.read, cb)
    assert (f.site, f.params_ptr, f.symbol_name, f.correlation_id) == (0, 0x1234, "_Z1kv", 77)
    assert f.function_name == "launch" and f.context == 0xC0


@pytest.mark.parametrize(
    "builder, kind, handle_kind",
    [
        ("cu_launch_kernel", "driver", "function"),
        ("cu_launch_kernel_ex", "driver_ex", "function"),
        ("cuda_launch_kernel", "runtime", "host"),
        ("cuda_launch_kernel", "runtime_kernel", "kernel"),
        ("cuda_launch_kernel_exc", "runtime_ex", "host"),
    ],
)
def test_each_launch_layout_gives_grid_block_smem_stream_and_params(builder, kind, handle_kind):
    cuda = FakeCuda()
    values = [ptr(0xAA), i32(-3)]
    p = getattr(cuda, builder)(0x77, (40, 2, 1), (128, 2, 1), 4096, STREAM, values)
    call = layout.decode_launch(cuda.read, kind, "api", p)
    assert call.handle == 0x77 and call.handle_kind == handle_kind
    assert (call.grid, call.block) == ((40, 2, 1), (128, 2, 1))
    assert (call.dynamic_smem_bytes, call.stream) == (4096, STREAM)
    buf = layout.param_buffer(cuda.read, call, [(0, 8), (8, 4)])
    assert buf == ptr(0xAA) + i32(-3)


def test_param_buffer_from_extra_packed_buffer():
    cuda = FakeCuda()
    packed = ptr(0xAB) + i32(9) + f32(1.5)
    p = cuda.cu_launch_kernel_extra(0x77, (1, 1, 1), (32, 1, 1), 0, 0, packed)
    call = layout.decode_launch(cuda.read, "driver", "cuLaunchKernel", p)
    assert call.kernel_params == 0 and call.extra
    assert layout.param_buffer(cuda.read, call, [(0, 8), (8, 4), (12, 4)]) == packed


def launch(rec, cuda, values, grid=(4, 1, 1), corr=1, stream=STREAM, cbid=307, func=FUNC):
    p = cuda.cu_launch_kernel(func, grid, (16, 1, 1), 0, stream, values)
    rec.on_callback(DOMAIN_DRIVER, cbid, cuda.callback(ENTER, p, "_Z5saxpyPKfPfif", corr))
    rec.on_callback(DOMAIN_DRIVER, cbid, cuda.callback(EXIT, p, "_Z5saxpyPKfPfif", corr))


def test_driver_launch_recorded_with_parameters_pointers_and_snapshots(tmp_path):
    cuda, rec = setup(tmp_path)
    values, x, y = saxpy_values(cuda)
    launch(rec, cuda, values, corr=5)
    rec.finish()
    proc = read_process(tmp_path / "raw" / "1")
    assert proc.finished and not rec.errors
    (r,) = proc.launches
    assert (r.api, r.symbol, r.grid, r.block, r.stream) == (
        "cuLaunchKernel",
        "_Z5saxpyPKfPfif",
        (4, 1, 1),
        (16, 1, 1),
        STREAM,
    )
    assert r.correlation_id == 5 and r.slot_source == "cuFuncGetParamInfo"
    assert r.param_bytes(2) == i32(64) and r.param_bytes(3) == f32(2.0)
    px, py = r.pointers
    assert (px.ordinal, px.base, px.offset) == (0, x, 0)
    assert (py.ordinal, py.base, py.offset) == (1, y, 16)
    assert (proc.folder / "snapshots" / px.snapshot).read_bytes() == f32(*range(64))
    # copied on the launch's own stream (which the fake's copy_to_host stands for: copy + sync)
    assert [c[2] for c in cuda.copies] == [STREAM, STREAM]
    assert proc.shapes == {r.key: 1}


def test_runtime_launch_of_a_cuda13_kernel_handle_uses_its_function(tmp_path):
    cuda, rec = setup(tmp_path)
    cuda.kernels[KERNEL] = FUNC
    values, _, _ = saxpy_values(cuda)
    p = cuda.cuda_launch_kernel(KERNEL, (8, 1, 1), (16, 1, 1), 0, STREAM, values)
    rec.on_callback(DOMAIN_RUNTIME, 505, cuda.callback(ENTER, p, "_Z5saxpyPKfPfif", 9))
    # the driver launch the runtime makes underneath is the same launch: not recorded again
    launch(rec, cuda, values, grid=(8, 1, 1), corr=10)
    rec.on_callback(DOMAIN_RUNTIME, 505, cuda.callback(EXIT, p, "_Z5saxpyPKfPfif", 9))
    rec.finish()
    (r,) = read_process(tmp_path / "raw" / "1").launches
    assert (r.api, r.correlation_id, r.slot_source) == (
        "__cudaLaunchKernel",
        9,
        "cuFuncGetParamInfo",
    )
    # and a driver launch after the runtime call returned is recorded again
    assert rec.launches == 1


def test_host_stub_launch_takes_its_layout_from_the_loaded_cubin(tmp_path, saxpy_cubin):
    cuda, rec = setup(tmp_path)
    rec.on_callback(DOMAIN_RESOURCE, 6, cuda.module_loaded(3, saxpy_cubin.read_bytes()))
    values, _, _ = saxpy_values(cuda)
    p = cuda.cuda_launch_kernel(0x401000, (8, 1, 1), (16, 1, 1), 0, 0, values)
    rec.on_callback(DOMAIN_RUNTIME, 211, cuda.callback(ENTER, p, "_Z5saxpyPKfPfif", 4))
    rec.on_callback(DOMAIN_RUNTIME, 211, cuda.callback(EXIT, p, "_Z5saxpyPKfPfif", 4))
    rec.finish()
    proc = read_process(tmp_path / "raw" / "1")
    (r,) = proc.launches
    assert r.slot_source == "cubin" and list(r.slots) == SLOTS
    assert [seq for seq, _ in proc.modules] == [1] and r.seq == 2


def test_sampling_after_the_first_launches_of_a_shape(tmp_path):
    cuda, rec = setup(tmp_path, per_shape=2)
    values, _, _ = saxpy_values(cuda)
    for i in range(10):
        launch(rec, cuda, values, corr=i)
    launch(rec, cuda, values, grid=(5, 1, 1), corr=99)  # another shape: its own first launch
    rec.finish()
    proc = read_process(tmp_path / "raw" / "1")
    assert [r.launch_number for r in proc.launches] == [1, 2, 4, 8, 1]
    assert sorted(proc.shapes.values()) == [1, 10]
    assert rec.launches == 11


def test_budget_capture_and_filter_leave_data_out_but_count_the_launch(tmp_path):
    cuda, rec = setup(tmp_path, budget=300)  # x (256 B) fits, y (320 B) does not
    values, _, _ = saxpy_values(cuda)
    launch(rec, cuda, values)
    cuda.capturing.add(0x9)
    launch(rec, cuda, values, grid=(2, 1, 1), stream=0x9)
    rec.finish()
    r1, r2 = read_process(tmp_path / "raw" / "1").launches
    assert [p.snapshot is not None for p in r1.pointers] == [True, False]
    assert any("over --max-snapshot-bytes" in n for n in r1.notes)
    assert all(p.snapshot is None for p in r2.pointers)
    assert any("captured into a graph" in n for n in r2.notes)
    assert all(c[2] != 0x9 for c in cuda.copies)  # a capturing stream is never synchronised

    cuda, rec = setup(tmp_path / "f", kernel="^reduce")
    launch(rec, cuda, saxpy_values(cuda)[0])
    rec.finish()
    proc = read_process(tmp_path / "f" / "raw" / "1")
    assert proc.launches == [] and sum(proc.shapes.values()) == 1


def test_a_fault_in_the_recorder_never_reaches_the_program(tmp_path):
    cuda, rec = setup(tmp_path)
    rec.on_callback(DOMAIN_DRIVER, 307, 0xDEAD)  # unmapped: the decode fails
    rec.finish()
    assert rec.errors and "not mapped" in rec.errors[0]
    doc = json.loads((tmp_path / "raw" / "1" / "process.json").read_text())
    assert doc["status"] == "finished" and doc["overhead"]["errors"] == rec.errors


def test_crash_leaves_the_launches_recorded_so_far(tmp_path):
    cuda, rec = setup(tmp_path)
    launch(rec, cuda, saxpy_values(cuda)[0])
    # no finish(): the program died; the launch line and its snapshots are on disk
    with open(tmp_path / "raw" / "1" / "launches.jsonl", "a") as f:
        f.write('{"seq": 3, "cut sh')
    proc = read_process(tmp_path / "raw" / "1")
    assert not proc.finished and len(proc.launches) == 1 and proc.damaged == ["launches.jsonl:2"]


def test_cubin_slots_struct_layouts():
    # the header layouts the fake writes are the sizes the C structs have
    assert struct.calcsize("<IIQQQQQIIQI4x") == 72
    assert struct.calcsize("<Q3I3II4xQQQ") == 64


def test_a_runtime_layout_that_does_not_hold_leaves_the_launch_to_the_driver(tmp_path):
    """A runtime launch whose structure does not decode to a launch CUDA could take (a CUDA
    whose layout differs) is not read further; the driver launch under it is recorded."""
    cuda, rec = setup(tmp_path)
    values, _, _ = saxpy_values(cuda)
    bogus = cuda.put(struct.pack("<Q3I3IQQQ", 0x1, 0, 7, 7, 99999, 1, 1, 0xBAD, 0, 0))
    rec.on_callback(DOMAIN_RUNTIME, 505, cuda.callback(ENTER, bogus, "_Z5saxpyPKfPfif", 9))
    launch(rec, cuda, values, grid=(8, 1, 1), corr=10)  # the driver launch underneath
    rec.on_callback(DOMAIN_RUNTIME, 505, cuda.callback(EXIT, bogus, "_Z5saxpyPKfPfif", 9))
    launch(rec, cuda, values, grid=(8, 1, 1), corr=11)  # and one after it
    rec.finish()
    records = read_process(tmp_path / "raw" / "1").launches
    assert [(r.api, r.correlation_id) for r in records] == [
        ("cuLaunchKernel", 10),
        ("cuLaunchKernel", 11),
    ]
    assert rec.errors and "is not a CUDA grid" in rec.errors[0]


def test_cases_of_a_crashed_process_count_its_recorded_launches(tmp_path):
    from gpuadvise.record.cases import write_cases

    cuda, rec = setup(tmp_path)
    values, _, _ = saxpy_values(cuda)
    launch(rec, cuda, values)
    launch(rec, cuda, values, grid=(2, 1, 1))
    # no finish(): shapes.json was never written
    kernels, cases, (proc,) = write_cases(tmp_path)
    assert not proc.finished and proc.shapes == {}
    assert [(k.symbol, k.launches) for k in kernels] == [("_Z5saxpyPKfPfif", 2)]
    assert [c.launches for c in cases] == [1, 1]


def test_activity_after_the_recording_finished_is_dropped(tmp_path):
    from gpuadvise.record.raw import KernelTiming

    cuda, rec = setup(tmp_path)
    rec.finish()
    rec.on_activity([KernelTiming("_Z5saxpyPKfPfif", 1, 0, 10)])  # CUPTI's last buffer, late
    launch(rec, cuda, saxpy_values(cuda)[0])
    assert read_process(tmp_path / "raw" / "1").timings == [] and not rec.errors

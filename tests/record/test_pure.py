"""The recorder's pure parts: the sampling policy, typing a launch's parameters, the cubin's
parameter slots (against nvcc's own build), how a command is started, and the CLI's errors."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import cli, one_error

from gpuadvise.record.cubin import read_cubin
from gpuadvise.record.launcher import build_injection, environment, find_libpython, plan_launch
from gpuadvise.record.params import ParamType, decode_params, demangled_types, split_params
from gpuadvise.record.sampling import SnapshotPolicy


def test_sampling_first_n_then_doubling_and_byte_budget():
    p = SnapshotPolicy(max_per_shape=3, max_total_bytes=100)
    taken = [n for n in range(1, 50) if p.wants(n)]
    assert taken == [1, 2, 3, 6, 12, 24, 48]
    assert [n for n in range(1, 10) if SnapshotPolicy(0, 1).wants(n)] == []
    assert p.admit(60) and not p.admit(41) and p.admit(40) and p.used_bytes == 100
    assert p.count("k") == 1 and p.count("k") == 2 and p.count("j") == 1
    with pytest.raises(ValueError):
        SnapshotPolicy(-1, 0)


def test_parameter_types_from_a_demangled_signature():
    assert split_params("void k<S<int, 2>, 3>(float*, S<int, 2>, unsigned long)") == [
        "float*",
        "S<int, 2>",
        "unsigned long",
    ]
    assert split_params("void k()") == [] and split_params("k") is None
    x, y, p = demangled_types("void f(float const*, double**, Params)")
    assert (x.is_pointer, x.pointee, x.is_const) == (True, "float", True)
    assert (y.pointee, y.is_const) == ("double*", False)
    assert not p.is_pointer


def test_decode_scalars_pointers_and_bytes():
    slots = [(0, 8), (8, 4), (12, 4), (16, 8), (24, 1), (32, 8)]
    params = (
        struct.pack("<Q", 0x7F0000001000)
        + struct.pack("<i", -5)
        + struct.pack("<f", 0.25)
        + struct.pack("<ff", 1.5, 2.0)
        + b"\x01"
        + bytes(7)
        + struct.pack("<d", -3.5)
    )
    types = [
        ParamType.parse("const float*", "x"),
        ParamType.parse("int", "n"),
        ParamType.parse("float", "a"),
        ParamType.parse("float2", "v"),
        ParamType.parse("bool", "flag"),
        ParamType.parse("double", "d"),
    ]
    out = decode_params(slots, params, types, {0})
    assert [(t.name, t.kind, t.value) for t in out] == [
        ("x", "pointer", 0x7F0000001000),
        ("n", "scalar", -5),
        ("a", "scalar", 0.25),
        ("v", "bytes", struct.pack("<ff", 1.5, 2.0).hex()),
        ("flag", "scalar", True),
        ("d", "scalar", -3.5),
    ]
    # no types (an extern "C" kernel without source): pointers from the allocations, the rest bytes
    bare = decode_params(slots, params, None, {0})
    assert [t.kind for t in bare] == ["pointer", "bytes", "bytes", "bytes", "bytes", "bytes"]
    assert bare[1].name == "arg1"
    # a signature that does not match the launch is not used
    assert decode_params(slots[:2], params, types, set())[0].kind == "bytes"


@pytest.mark.toolkit
def test_cubin_param_slots_are_nvcc_s(saxpy_cubin):
    info = read_cubin(saxpy_cubin.read_bytes())
    assert info.has_line_info
    k = info.kernels
    slots = lambda name: [(s.offset, s.size_bytes) for s in k[name]]  # noqa: E731
    assert slots("_Z5saxpyPKfPfif") == [(0, 8), (8, 8), (16, 4), (20, 4)]
    assert slots("_Z6scaledPKfPf6Paramsi") == [(0, 8), (8, 8), (16, 8), (24, 4)]
    assert slots("add_one") == [(0, 8), (8, 4)]
    assert "_Z6gatherILi32EEvPKfPfi" in k
    with pytest.raises(ValueError, match="not a 64-bit"):
        read_cubin(b"// PTX text\n.version 8.0")
    with pytest.raises(ValueError, match="fat binary"):
        read_cubin(b"\x50\xed\x55\xba" + bytes(60))


def test_how_a_command_is_started():
    py = plan_launch(["python3", "-u", "app.py", "--n", "3"])
    assert py.python and py.argv[:3] == ["python3", "-u", "-c"]
    assert py.argv[-3:] == ["app.py", "--n", "3"] and "gpuadvise.record.boot" in py.argv[3]
    # the interpreter's options are kept before the boot, an option's value with it (on the
    # H200 `-X faulthandler` had been taken for the script, 2026-11-29)
    fh = plan_launch(["python3", "-X", "faulthandler", "-O", "app.py", "3"])
    assert fh.argv[:5] == ["python3", "-X", "faulthandler", "-O", "-c"]
    assert fh.argv[-2:] == ["app.py", "3"]
    assert plan_launch(["python", "-m", "pkg.mod"]).argv[-2:] == ["-m", "pkg.mod"]
    assert plan_launch(["./tool.py"]).argv[0] == sys.executable
    native = plan_launch(["./app", "x"])
    assert not native.python and native.argv == ["./app", "x"]
    with pytest.raises(Exception, match="python -c cannot be recorded"):
        plan_launch(["python3", "-c", "print(1)"])
    env = environment({"PATH": "/bin"}, Path("/o"), "k", 2, 10, None, None)
    assert env["GPUADVISE_RECORD_OUT"] == "/o" and env["CUDA_MODULE_LOADING"] == "EAGER"
    assert (
        env["CUPY_CACHE_DIR"] == "/o/raw/cupy-cache" and env["CUPY_CACHE_SAVE_CUDA_SOURCE"] == "1"
    )
    assert "CUDA_INJECTION64_PATH" not in env
    kept = environment({"CUDA_MODULE_LOADING": "LAZY"}, Path("/o"), None, 2,
                       10, None, None)  # fmt: skip
    assert kept["CUDA_MODULE_LOADING"] == "LAZY"


@pytest.mark.skipif(shutil.which("cc") is None or find_libpython() is None,
                    reason="needs a C compiler and a shared libpython")  # fmt: skip
def test_injection_library_embeds_python_in_a_native_program(tmp_path):
    """The driver's side of CUDA_INJECTION64_PATH, played by a small C program: it loads the
    library and calls InitializeInjection(), which must start this Python's recorder in the
    program (here it stops at the missing CUPTI bindings, and says so) and keep the program
    running."""
    lib = build_injection(tmp_path)
    app = tmp_path / "app.c"
    app.write_text(
        "#include <dlfcn.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
        'int main(void) { void *h = dlopen(getenv("CUDA_INJECTION64_PATH"), RTLD_NOW);\n'
        '  if (!h) return 3; int (*f)(void) = (int (*)(void))dlsym(h, "InitializeInjection");\n'
        '  printf("init %d\\n", f()); const char *home = getenv("PYTHONHOME");\n'
        '  printf("home %s\\n", home ? home : "-"); return 0; }\n'
    )
    subprocess.run(["cc", "-o", str(tmp_path / "app"), str(app), "-ldl"], check=True)
    # the embedded Python imports gpuadvise from the checkout: without the variable it wrote
    # the package's bytecode there (gpuadvise/record/__pycache__, ...), whatever the run's own
    record = Path(sys.modules["gpuadvise.record"].__file__ or "").parent / "__pycache__"
    had_bytecode = record.exists()
    base = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    env = environment(base, tmp_path / "out", None, 2, 10, lib, find_libpython())
    r = subprocess.run([str(tmp_path / "app")], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "init 1\nhome -\n", r.stderr
    # a program with a PYTHONHOME of its own: this Python starts all the same, and it is put back
    bogus = {**env, "PYTHONHOME": "/no/such/python"}
    r2 = subprocess.run(
        [str(tmp_path / "app")], env=bogus, capture_output=True, text=True, timeout=60
    )
    assert r2.returncode == 0 and r2.stdout == "init 1\nhome /no/such/python\n", r2.stderr
    assert record.exists() == had_bytecode  # nothing written into the checkout
    import importlib.util

    if importlib.util.find_spec("cupti") is None:
        assert (
            "the recorder did not start: ModuleNotFoundError: No module named 'cupti'" in r.stderr
        )


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_injection_library_in_a_python_program_exits_cleanly(tmp_path):
    """In a Python program (a CuPy script) the driver loads the library into a running
    interpreter: the program's own atexit finishes the recording, and the library must not take
    the GIL of an interpreter already finalised when the C library's exit handlers run (it did:
    signal 11 at the exit of every recorded CuPy script, on an H200, 2026-11-29)."""
    lib = build_injection(tmp_path)
    env = environment(dict(os.environ), tmp_path / "out", None, 2, 10, lib, None)
    env.pop("GPUADVISE_RECORD_OUT")  # the recorder itself stays off: this is about the library
    code = (
        "import ctypes, os\n"
        "print('init', ctypes.CDLL(os.environ['CUDA_INJECTION64_PATH']).InitializeInjection())\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout == "init 1\n", (r.returncode, r.stderr)


def test_cli_errors_are_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "record")
    assert code == 2 and "Missing argument" in one_error(err)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    code, _, err = cli(capsys, "record", "--out", "full", "--", "./app")
    assert code == 2 and "not an empty folder" in one_error(err)
    code, _, err = cli(capsys, "record", "--max-snapshot-bytes", "lots", "--", "./app")
    assert code == 2 and one_error(err)
    monkeypatch.setattr(
        "gpuadvise.record.run.recorder_missing", lambda: "cupti-python is not installed"
    )
    code, _, err = cli(capsys, "record", "--", "./app")
    assert code == 2 and "pip install 'gpuadvise[record]'" in one_error(err)
    monkeypatch.setattr("gpuadvise.record.run.recorder_missing", lambda: None)
    code, _, err = cli(capsys, "record", "--kernel", "(", "--", "./app")
    assert code == 2 and "not a regular expression" in one_error(err)
    code, _, err = cli(capsys, "record", "--", "./no-such-app")
    assert code == 2 and "command not found" in one_error(err)
    assert not (tmp_path / "gpuadvise-record").exists() or not any(
        (tmp_path / "gpuadvise-record").iterdir()
    )


@pytest.mark.toolkit
def test_cubins_found_inside_a_fat_binary(saxpy_cubin, tmp_path):
    from gpuadvise.record.cubin import elf_images
    from gpuadvise.toolchain import find_toolchain

    tc = find_toolchain()
    fatbin = tmp_path / "k.fatbin"
    source = Path(__file__).with_name("data") / "saxpy.cu"
    cmd = [str(tc.nvcc), "-fatbin", "-arch=sm_90", "--no-compress", "-o", str(fatbin), str(source)]
    subprocess.run(cmd, check=True, capture_output=True)
    data = fatbin.read_bytes()
    assert data[:4] == b"\x50\xed\x55\xba"
    (elf,) = elf_images(data)
    assert "_Z5saxpyPKfPfif" in read_cubin(elf).kernels
    assert elf_images(saxpy_cubin.read_bytes()) == [saxpy_cubin.read_bytes()]
    assert elf_images(b"nothing here") == []

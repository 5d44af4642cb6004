"""The allow-list of nvcc flags a gate configuration may give without --trust-config."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuadvise.gate.flags import refused_flag

REPO = Path("/work/repo")


@pytest.mark.parametrize(
    "flags",
    [
        ["-O3"],
        ["-DTILE=16", "-DUSE_X", "-DF(x)=x*x", "-D", "N=4"],
        ["-Iinclude", "-I", "third_party/cub", f"-I{REPO}/inc", "--include-path=inc"],
        ["-std=c++17", "--std=c++20"],
        ["--use_fast_math", "-use_fast_math", "-lineinfo", "--generate-line-info"],
        ["-Xptxas", "-O3,-v", "-Xptxas=--warn-on-spills", "--ptxas-options=-dlcm=cg"],
        ["-maxrregcount=64", "-maxrregcount", "32", "--ftz=true", "--prec-div=false"],
        [
            "-arch=sm_90",
            "-gencode=arch=compute_90,code=sm_90",
            "-gencode",
            "arch=compute_80,code=[sm_80,compute_80]",
        ],
        [
            "--extended-lambda",
            "--expt-relaxed-constexpr",
            "-G",
            "-w",
            "-Wno-deprecated-gpu-targets",
        ],
    ],
)
def test_allowed(flags: list[str]) -> None:
    assert refused_flag(flags, repo=REPO, cwd=REPO) is None


@pytest.mark.parametrize(
    "flags,flag,why",
    [
        (["-ccbin=/tmp/evil.sh"], "-ccbin=/tmp/evil.sh", "runs another program"),
        (["-O3", "-ccbin", "/tmp/evil.sh"], "-ccbin", "runs another program"),
        (["--compiler-bindir=/tmp"], "--compiler-bindir=/tmp", "runs another program"),
        (["-Xcompiler", "-fopenmp"], "-Xcompiler", "host compiler"),
        (["--compiler-options=-O2"], "--compiler-options=-O2", "host compiler"),
        (["--run"], "--run", "runs the program"),
        (["-o", "/etc/x"], "-o", "writes a file"),
        (["--keep-dir=/tmp/k"], "--keep-dir=/tmp/k", "intermediate files"),
        (["-Xlinker", "-rpath"], "-Xlinker", "linker"),
        (["--linker-options=x"], "--linker-options=x", "linker"),
        (["--options-file", "f.txt"], "--options-file", "reads more flags"),
        (["-include", "x.h"], "-include", "includes a file"),
        (["-lcuda"], "-lcuda", "links a library"),
        (["-L/usr/lib"], "-L/usr/lib", "library folder"),
        (["-I/etc"], "-I/etc", "outside the repository"),
        (["-I", "../../elsewhere"], "-I ../../elsewhere", "outside the repository"),
        (["-DX=$(touch pwned)"], "-DX=$(touch pwned)", "shell would interpret"),
        (["-DX=1 -ccbin=x"], "-DX=1 -ccbin=x", "shell would interpret"),
        (["-DX=`id`"], "-DX=`id`", "shell would interpret"),
        # quotes, as the README says: in a flag, as the value of -D, in --define-macro
        (["-DX='a'"], "-DX='a'", "shell would interpret"),
        (['-DX="a"'], '-DX="a"', "shell would interpret"),
        (["-D", "X='a'"], "-D X='a'", "is not NAME[=VALUE]"),
        (["--define-macro=X='a'"], "--define-macro=X='a'", "shell would interpret"),
        (["--define-macro", "X=\u2019a\u2019"], "--define-macro X=\u2019a\u2019", "is not NAME"),
        (["-Xptxas", "--foo"], "-Xptxas --foo", "ptxas option '--foo'"),
        (["-Xptxas=-O3,--bad"], "-Xptxas=-O3,--bad", "ptxas option '--bad'"),
        (["-Xptxas"], "-Xptxas", "needs a value"),
        (["--dryrun"], "--dryrun", "not on the allow-list"),
        (["-arch", "sm_90;id"], "-arch sm_90;id", "not an architecture"),
    ],
)
def test_refused(flags: list[str], flag: str, why: str) -> None:
    refused = refused_flag(flags, repo=REPO, cwd=REPO)
    assert refused is not None and refused.flag == flag and why in refused.reason, refused

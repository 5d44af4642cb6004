"""The hardening issue's robustness items, replayed; each failed before its fix:

- paths the system cannot look up (symbolic-link loops, names too long, unreadable folders, a
  link to ``/``) given as the source, to ``bench`` or as batch folders: one line
  ``error: <problem>; <fix>`` and exit 2, never a traceback; folder walks that end;
- folder analysis' exit codes (a case that could not be analyzed, every case failing, no case);
- a value given as ``''`` to any parameter of any command; the GPUADVISE_* variables;
- no command; a closed stdin;
- Ctrl-C and SIGTERM on a folder analysis and on one analysis (time, workers, temporary files);
- a large grid within the memory budget.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from clikit import PEAK_WRAPPER, cli, one_error

ROOT = Path(__file__).resolve().parents[2]
KERNEL = """\
__global__ void scale(float* out, const float* in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
"""
LAUNCH = ("--grid", "4", "--block", "256", "--arg", "n=1000", "--gpu", "H100", "--no-trace")
LONG_NAME = "k" * 300 + ".cu"  # one component over NAME_MAX (255)
LONG_PATH = "d/" * 2500 + "k.cu"  # 5,004 characters, over PATH_MAX (4096)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scale.cu").write_text(KERNEL)
    os.symlink("loop_b.cu", tmp_path / "loop_a.cu")
    os.symlink("loop_a.cu", tmp_path / "loop_b.cu")
    return tmp_path


# --- paths the system cannot look up -----------------------------------------------------------


@pytest.mark.parametrize("command", ["analyze", "bench"])
@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("loop_a.cu", "symbolic links"),
        (LONG_NAME, "name too long"),
        (LONG_PATH, "path too long"),
    ],
)
def test_source_the_system_cannot_look_up(
    capsys: pytest.CaptureFixture[str], work: Path, command: str, path: str, says: str
) -> None:
    code, out, err = cli(capsys, command, path, *LAUNCH[:-1])
    line = one_error(err)
    assert code == 2 and says in line and out == "", line
    assert len(line) < 400  # the long name is echoed capped


@pytest.mark.parametrize(
    ("path", "says"),
    [("loop_a.cu", "symbolic links"), (LONG_NAME[:-3], "name too long"), (LONG_PATH, "too long")],
)
def test_batch_path_the_system_cannot_look_up(
    capsys: pytest.CaptureFixture[str], work: Path, path: str, says: str
) -> None:
    code, _, err = cli(capsys, "analyze", path, "--jobs", "2", "--no-trace")
    assert code == 2 and says in one_error(err)


def test_long_kernel_name_finds_no_spec_and_no_traceback(
    capsys: pytest.CaptureFixture[str], work: Path
) -> None:
    # the spec looked for beside the source is <kernel>.toml: a name too long for a file
    code, _, err = cli(capsys, "analyze", "scale.cu", "--kernel", "k" * 300, *LAUNCH)
    assert code == 2 and "k" * 80 in one_error(err)


# --- batch folders: links and unreadable folders ----------------------------------------------


def _case(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "scale.cu").write_text(KERNEL)
    (folder / "case.toml").write_text("grid = 4\nblock = 256\n[args]\nn = 1000\n")


def _discover(*paths: str) -> list[str]:
    from gpuadvise.analyze.cases import discover_cases
    from gpuadvise.analyze.options import KernelOptions

    return [c.id for c in discover_cases(list(paths), KernelOptions(source=None))]


@pytest.mark.timeout(60)
def test_folder_with_symlink_loops_ends(work: Path) -> None:
    """Two links back up the tree used to walk 2^40 paths: each real folder is walked once."""
    _case(work / "tree" / "sub")
    os.symlink("..", work / "tree" / "sub" / "up")
    os.symlink(".", work / "tree" / "sub" / "here")
    os.symlink("sub", work / "tree" / "again")  # a second way into a folder: walked once
    assert _discover("tree") == ["tree/sub/case.toml"]


@pytest.mark.timeout(60)
def test_folder_with_a_link_to_the_root_of_the_file_system(work: Path) -> None:
    _case(work / "tree" / "sub")
    os.symlink("/", work / "tree" / "root")
    assert _discover("tree") == ["tree/sub/case.toml"]


def test_folder_links_outside_the_tree_are_followed_once(work: Path) -> None:
    _case(work / "vendor" / "k")
    (work / "tree").mkdir()
    os.symlink(work / "vendor", work / "tree" / "vendor")
    os.symlink(work / "vendor", work / "tree" / "vendor2")
    assert _discover("tree") == ["vendor/k/case.toml"]


def test_unreadable_subfolder_is_one_error(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _case(work / "tree" / "ok")
    locked = work / "tree" / "locked"
    locked.mkdir()
    if os.geteuid() == 0:  # permissions do not stop root: the folder refuses as chmod 000 would
        real = Path.iterdir

        def iterdir(self: Path):  # type: ignore[no-untyped-def]
            if self == locked:
                raise PermissionError(13, "Permission denied", str(self))
            return real(self)

        monkeypatch.setattr(Path, "iterdir", iterdir)
    else:
        locked.chmod(0)
    try:
        code, _, err = cli(capsys, "analyze", "tree", "--no-trace")
    finally:
        locked.chmod(0o755)
    line = one_error(err)
    assert code == 2 and "locked" in line and "Permission denied" in line, line


@pytest.mark.timeout(120)
def test_batch_folder_with_a_link_to_root_in_a_subprocess(work: Path) -> None:
    """The replay as the issue had it: a folder whose only content is a link to ``/``."""
    (work / "tree").mkdir()
    os.symlink("/", work / "tree" / "root")
    p = subprocess.run(
        [sys.executable, "-m", "gpuadvise", "analyze", "tree", "--no-trace"],
        cwd=work, capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert p.returncode == 2 and "no kernel case" in one_error(p.stderr), p.stderr[-2000:]


# --- folder analysis: exit codes ---------------------------------------------------------------


def test_empty_folder_is_an_error(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    (work / "empty").mkdir()
    code, out, err = cli(capsys, "analyze", "empty", "--no-trace")
    assert code == 2 and "no kernel case found under empty" in one_error(err) and out == ""
    # a CI shard past the end of a list of cases is fine: the other shards cover them
    _case(work / "one")
    code, _, err = cli(capsys, "analyze", "one", "--shard", "2/2", "--no-trace")
    assert code == 0 and "no kernel case" in err and "error" not in err


def test_every_case_failing_says_so_on_stderr(
    capsys: pytest.CaptureFixture[str], work: Path
) -> None:
    (work / "t").mkdir()
    for name in ("a", "b"):
        (work / "t" / f"{name}.toml").write_text(f'source = "absent_{name}.cu"\nkernel = "k"\n')
    code, out, err = cli(capsys, "analyze", "t", "--no-trace", "--jobs", "1")
    line = one_error(err)
    assert code == 2 and "2 of 2 cases could not be analyzed" in line and "absent_a.cu" in line
    assert "t/a.toml" in out and "t/b.toml" in out  # the rows are still printed


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
@pytest.mark.parametrize("fail_on", [None, "error"])
def test_a_case_without_a_source_fails_the_run(
    capsys: pytest.CaptureFixture[str], work: Path, fail_on: str | None
) -> None:
    _case(work / "t" / "good")
    (work / "t" / "bad.toml").write_text('source = "absent.cu"\nkernel = "k"\n')
    extra = ("--fail-on", fail_on) if fail_on else ()
    code, out, err = cli(
        capsys, "analyze", "t", "--no-trace", "--jobs", "1", "--format", "json", *extra
    )
    line = one_error(err)
    assert code == 2 and "1 of 2 cases could not be analyzed" in line and "t/bad.toml" in line
    import json

    doc = json.loads(out)
    assert [c["error"] is None for c in doc["cases"]] == [False, True]


# --- an option given as '' is an error, never "not given" --------------------------------------


def _value_params() -> list[tuple[str, click.Parameter]]:
    """Every parameter of every command that takes a value (not flags or counts)."""
    from gpuadvise.cli.main import cli as group

    out = []
    for name, command in sorted(group.commands.items()):
        for p in command.params:
            if isinstance(p, click.Option) and (p.is_flag or p.count or p.hidden):
                continue
            out.append((name, p))
    return out


VALID_ARGUMENTS = {"source": "scale.cu", "rule": "GA201"}


@pytest.mark.parametrize(
    ("command", "param"),
    _value_params(),
    ids=[f"{c}-{p.opts[0] if isinstance(p, click.Option) else p.name}" for c, p in _value_params()],
)
def test_every_value_given_as_empty_is_an_error(
    capsys: pytest.CaptureFixture[str], work: Path, command: str, param: click.Parameter
) -> None:
    from gpuadvise.cli.main import cli as group

    argv = [command]
    if isinstance(param, click.Argument):
        for a in group.commands[command].params:
            if isinstance(a, click.Argument):
                argv.append("" if a is param else VALID_ARGUMENTS[a.name or ""])
                if a is param:
                    break
    elif command == "explain":
        argv.append("GA201")
    if command == "occupancy" and param.name != "threads":
        argv += ["-t", "256"]
    if isinstance(param, click.Option):
        argv += [param.opts[0], ""]
    code, out, err = cli(capsys, *argv)
    line = one_error(err)
    assert code == 2 and out == "", (argv, line)
    name = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
    assert name in line and ("is empty" in line or "''" in line), (argv, line)


@pytest.mark.parametrize("value", ["", " ", "\t"])
def test_blank_among_repeated_values(
    capsys: pytest.CaptureFixture[str], work: Path, value: str
) -> None:
    code, _, err = cli(capsys, "analyze", "scale.cu", *LAUNCH, "--select", "GA1", "--select", value)
    assert code == 2 and "--select is empty" in one_error(err)


# --- GPUADVISE_* environment variables ---------------------------------------------------------


@pytest.mark.parametrize("value", ["garbage", "-1", "nan", "0", "0k", " ", "12q", "1e9"])
def test_memory_budget_garbage_is_an_error(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
) -> None:
    monkeypatch.setenv("GPUADVISE_MEMORY_BUDGET", value)
    code, out, err = cli(capsys, "analyze", "scale.cu", *LAUNCH)
    line = one_error(err)
    assert code == 2 and out == "" and "GPUADVISE_MEMORY_BUDGET" in line and "2G" in line, line


@pytest.mark.parametrize("value", ["4G", "512M", "1073741824", "0x40000000", " 2GiB "])
def test_memory_budget_forms(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from gpuadvise.spec.budget import memory_budget

    monkeypatch.setenv("GPUADVISE_MEMORY_BUDGET", value)
    budget = memory_budget()
    assert budget.bytes <= 4 << 30 and "GPUADVISE_MEMORY_BUDGET" in budget.source


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("GPUADVISE_NVCC", " ", "GPUADVISE_NVCC is set but blank"),
        ("GPUADVISE_NVCC", "/x/" + "n" * 300, "GPUADVISE_NVCC"),
        ("GPUADVISE_CACHE_DIR", " ", "GPUADVISE_CACHE_DIR is set but blank"),
        ("GPUADVISE_CACHE_DIR", "/x/" + "c" * 300, "GPUADVISE_CACHE_DIR"),
        ("GPUADVISE_CACHE_DIR", "SCALE", "not a folder"),
        ("GPUADVISE_RULE_PROCESSES", " ", "GPUADVISE_RULE_PROCESSES is set but blank"),
        ("GPUADVISE_RULE_PROCESSES", "3", "is not 1 or 2"),
    ],
)
def test_other_environment_variables(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    var: str,
    value: str,
    says: str,
) -> None:
    monkeypatch.setenv(var, str(work / "scale.cu") if value == "SCALE" else value)
    code, _, err = cli(capsys, "analyze", "scale.cu", *LAUNCH, "--no-cache")
    line = one_error(err)
    assert code == 2 and says in line and var in line, line


def test_empty_environment_values_are_unset(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``VAR= gpuadvise ...`` is the shell's way to unset a variable for one command."""
    for var in (
        "GPUADVISE_MEMORY_BUDGET",
        "GPUADVISE_NVCC",
        "GPUADVISE_CACHE_DIR",
        "GPUADVISE_RULE_PROCESSES",
    ):
        monkeypatch.setenv(var, "")
    code, out, err = cli(capsys, "occupancy", "-t", "256", "--gpu", "H100")
    assert code == 0 and "Occupancy" in out, err


# --- no command; a closed stdin ----------------------------------------------------------------


def test_no_command_prints_help_on_stderr_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """As click does for a group run without a command (git prints its usage and exits 1): a
    usage error, so stdout stays empty for whatever reads it. In this process (``cli``: an
    exception other than SystemExit fails the test); the entry point as a process is
    tests/cli/test_cli.py's smoke test."""
    code, out, err = cli(capsys)
    assert code == 2 and out == "" and "Usage: gpuadvise" in err
    assert "analyze" in err and "Traceback" not in err
    code, out, err = cli(capsys, "--help")
    assert code == 0 and out.startswith("Usage: gpuadvise") and err == ""


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_closed_stdin_compiles(work: Path) -> None:
    """``gpuadvise analyze k.cu <&-`` said "does not compile": nvcc's output pipe took the free
    fd 0 and nvcc ran with it as its stdin; the host compiler failed writing its output."""
    p = subprocess.run(
        [sys.executable, "-m", "gpuadvise", "analyze", "scale.cu", *LAUNCH, "--no-cache"],
        cwd=work, capture_output=True, text=True, timeout=300,
        preexec_fn=lambda: os.close(0),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]


# --- signals: Ctrl-C and SIGTERM end the run within a second, leaving nothing behind ---------


def _descendants(pid: int) -> set[int]:
    """The processes below ``pid`` (its workers, their compilers), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_for(predicate, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    import time

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _as_a_terminal_starts_it() -> None:
    """In the child before exec: SIGINT at its default and not blocked, as in a terminal's
    foreground job. A test run started in the background of a non-interactive shell
    (``pytest ... &``, as CI scripts do) has SIGINT ignored, and its children inherit that;
    Python (and gpuadvise: ``_interrupt_on_signals``) rightly leave an ignored SIGINT ignored,
    so Ctrl-C never reached the command under test (it ran to the end and exited 0)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _start(work: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(work / "tmp"), "GPUADVISE_CACHE_DIR": str(work / "cache")}
    (work / "tmp").mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "gpuadvise", *args], cwd=work, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=_as_a_terminal_starts_it,
    )  # fmt: skip


def _end(p: subprocess.Popen[str]) -> tuple[int, str, float]:
    """(exit code, stderr, seconds from now to its exit); killed after 60 s."""
    import time

    t0 = time.monotonic()
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        _, err = p.communicate()
        return -9, err, 60.0
    return p.returncode, err, time.monotonic() - t0


@pytest.mark.toolkit
@pytest.mark.timeout(200)
@pytest.mark.parametrize(("how", "code"), [("ctrl-c", 130), ("sigterm", 143)])
def test_folder_analysis_stops_at_once(work: Path, how: str, code: int) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) waited minutes in the pool's
    shutdown; SIGTERM to gpuadvise alone left its spawn workers running."""
    import signal

    for i in range(6):
        _case(work / "t" / f"c{i}")
    p = _start(work, "analyze", "t", "--jobs", "2", "--no-trace", "--no-cache")
    # signal once both workers are analyzing (a compiler runs below them)
    busy = _wait_for(lambda: sum(1 for d in _descendants(p.pid) if _is_compiler(d)) >= 1, 90)
    workers = _descendants(p.pid)
    assert busy and p.poll() is None, p.communicate()
    if how == "ctrl-c":
        os.killpg(p.pid, signal.SIGINT)
    else:
        p.send_signal(signal.SIGTERM)
    rc, err, took_s = _end(p)
    assert rc == code and took_s < 3.0, (rc, took_s, err[-3000:])
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("interrupted")
    assert "/6 cases done" in err
    assert _wait_for(lambda: not any(_alive(w) for w in workers), 3.0), [
        w for w in workers if _alive(w)
    ]
    assert not list((work / "tmp").iterdir())  # the workers' temporary folders are gone


def _is_compiler(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() in {"nvcc", "cicc", "ptxas", "cc1plus"}
    except OSError:
        return False


@pytest.mark.toolkit
@pytest.mark.timeout(200)
def test_sigterm_on_one_analysis_cleans_its_temporary_folders(work: Path) -> None:
    import signal

    p = _start(work, "analyze", "scale.cu", *LAUNCH, "--no-cache")
    assert _wait_for(lambda: any(_is_compiler(d) for d in _descendants(p.pid)), 90)
    p.send_signal(signal.SIGTERM)
    rc, err, took_s = _end(p)
    assert rc == 143 and took_s < 3.0 and "Traceback" not in err, (rc, err[-2000:])
    assert err.strip().splitlines()[-1].startswith("interrupted")
    assert not list((work / "tmp").iterdir())


WORKER_STOPPED_IN_A_CALLBACK = """\
import signal, sys, time, weakref
from gpuadvise.analyze import batch
from gpuadvise.errors import Interrupted
batch._init_worker(None, sys.argv[1])
seen = []
hook = sys.unraisablehook
sys.unraisablehook = lambda u: (seen.append(type(u.exc_value).__name__), hook(u))
batch._IN_CASE = True
class Held:
    pass
def callback(ref):  # as importlib's module-lock callback: the handler runs inside it
    signal.raise_signal(signal.SIGTERM)
try:
    held = Held()
    ref = weakref.ref(held, callback)
    del held
    end = time.monotonic() + 10
    while time.monotonic() < end:
        pass
    print("the case ran on", seen)
except Interrupted as stop:
    print("unwound", stop.signum, seen)
"""


def test_a_worker_stopped_inside_a_callback_still_unwinds_its_case(tmp_path: Path) -> None:
    """The SIGTERM that ends a folder analysis' worker came while the case imported, in
    importlib's module-lock callback: Python printed the worker's ``Interrupted`` as an ignored
    exception (a traceback in the run's stderr: test_folder_analysis_stops_at_once[ctrl-c]
    failed 1 in 5) and the case went on. It is delivered again and unwinds the case."""
    p = subprocess.run(
        [sys.executable, "-c", WORKER_STOPPED_IN_A_CALLBACK, str(tmp_path)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "unwound 15 ['Interrupted']", p.stdout
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr


# --- memory: the L2 model within its share of the memory budget --------------------------------

REDUCE = ROOT / "kernels" / "reduction" / "reduce.cu"


@pytest.mark.toolkit
@pytest.mark.timeout(300)
def test_a_large_grid_stays_within_the_memory_budget(work: Path) -> None:
    """``--arg n=4000000000`` peaked at 4.8 GB, in the L2 model's footprints of every CTA of
    the grid (15.6 million), and GPUADVISE_MEMORY_BUDGET could not lower it. Here a tenth of
    that grid: the L2 model stays within its share of the budget (it replays the traced CTAs
    only, and says why, naming the budget)."""
    from gpuadvise.spec.budget import memory_budget

    if memory_budget().bytes < 3 << 30:  # a shared machine short of memory right now
        pytest.skip(f"needs 3 GiB free for its 1.8 GiB budget: {memory_budget()}")
    env = {**os.environ, "GPUADVISE_CACHE_DIR": str(work / "cache")}
    args = [sys.executable, "-m", "gpuadvise", "analyze", str(REDUCE), "-k", "reduce2"]
    args += ["--arg", "n=400000000", "--no-measure", "--format", "json"]
    warm = subprocess.run([*args, "--no-trace"], env=env, capture_output=True, timeout=250)
    assert warm.returncode == 0, warm.stderr[-2000:]
    env["GPUADVISE_MEMORY_BUDGET"] = "1800M"
    p = subprocess.run(
        [sys.executable, "-c", PEAK_WRAPPER, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=250,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    peak_mb = int(p.stderr.strip().splitlines()[-1]) / 1024
    # the whole process within the budget (4.8 GB before, the budget ignored). Until the eleventh
    # session this was < 450 MB, the L2 model's quarter share, as the L2 model was the largest
    # step; the variants of kernels/ cases are traced since (their launch spec is found, s11-hist:
    # about 940 MB here), so the L2 model's share is checked by its messages below
    assert peak_mb < 1800, peak_mb
    assert "replayed (buffer in: synthesizing every CTA would take about" in p.stdout
    assert (
        "a quarter of the 1.8 GiB gpuadvise may use here (set by GPUADVISE_MEMORY_BUDGET"
        in (p.stdout)
        or "GPUADVISE_MEMORY_BUDGET lowers it" in p.stdout
    )  # less memory free than 1.8 GiB

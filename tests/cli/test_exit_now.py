"""The process's end (``console_main``, issue 31: the wall after the report): the exit handlers
run, stdout and stderr are flushed and the exit status is main's, but the interpreter's teardown
(every module's and object's freeing) is skipped; a run another thread still works in ends the
ordinary way, waiting for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = (
    "import atexit, sys, threading, time\n"
    "from gpuadvise.cli.main import console_main, exit_now\n"
    "class Teardown:\n"
    "    def __del__(self):\n"
    "        sys.stderr.write('teardown\\n')\n"
    "kept = Teardown()\n"  # freed by the interpreter's teardown only
    "atexit.register(lambda: sys.stderr.write('exit handler\\n'))\n"
)


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_the_exit_handlers_run_and_the_teardown_is_skipped() -> None:
    r = _run("sys.argv[0] = 'gpuadvise'\nconsole_main()\n", "devices", "--json")
    assert r.returncode == 0, r.stderr
    assert '"H100"' in r.stdout  # flushed before the process ended
    assert r.stderr == "exit handler\n"


def test_the_exit_status_is_main_s() -> None:
    r = _run("console_main()\n", "analyze", "no-such-file.cu", "--gpu", "H100")
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and r.stderr.endswith("exit handler\n")
    assert "teardown" not in r.stderr


def test_a_thread_still_working_is_waited_for_as_before() -> None:
    code = (
        "done = []\n"
        "threading.Thread(target=lambda: (time.sleep(0.5), done.append(1))).start()\n"
        "atexit.register(lambda: sys.stderr.write(f'done {done}\\n'))\n"
        "exit_now(3)\n"
        "raise SystemExit(3)\n"
    )
    r = _run(code)
    assert r.returncode == 3
    assert r.stderr.splitlines() == ["done [1]", "exit handler", "teardown"]


def test_python_m_gpuadvise_ends_through_it() -> None:
    text = (ROOT / "gpuadvise" / "__main__.py").read_text()
    assert "console_main()" in text
    project = (ROOT / "pyproject.toml").read_text()
    assert 'gpuadvise = "gpuadvise.cli:console_main"' in project


def test_a_profiled_run_ends_the_ordinary_way_and_its_profile_is_written(tmp_path: Path) -> None:
    prof = tmp_path / "run.prof"
    r = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "gpuadvise", "devices", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert '"H100"' in r.stdout
    assert prof.is_file() and prof.stat().st_size > 0  # cProfile wrote it after main returned

"""The progress display of long steps on stderr (rich): a spinner, the step's label, a bar when
its size is known, and the time spent. A step shows only once it has run for a second
(:data:`SHOW_AFTER_S`), and the display clears itself when the step ends; it implements
:class:`gpuadvise.spec.progress.ProgressCallback`, which the domain code calls."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["SHOW_AFTER_S", "RichProgress", "progress_for", "step_text"]

SHOW_AFTER_S = 1.0


@dataclass
class _Step:
    label: str
    total: int | None
    started: float
    done: int = 0


class RichProgress:
    """Shows the innermost running step that is over :data:`SHOW_AFTER_S` old."""

    def __init__(self, file: Any = None) -> None:
        from gpuadvise.report.console import SafeConsole

        self._console = SafeConsole(file=file or sys.stderr, stderr=file is None)
        self._steps: list[_Step] = []
        self._lock = threading.Lock()
        self._progress: Any = None
        self._task: Any = None
        self._shown: _Step | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- ProgressCallback ------------------------------------------------------------------------

    def begin(self, label: str, total: int | None = None) -> None:
        with self._lock:
            self._steps.append(_Step(label, total, time.monotonic()))
            if self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(target=self._watch, daemon=True)
                self._thread.start()

    def advance(self, done: int) -> None:
        with self._lock:
            if self._steps:
                self._steps[-1].done = done

    def end(self) -> None:
        with self._lock:
            if self._steps:
                self._steps.pop()
            last = not self._steps
        if last:
            self.close()

    # -- display ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the display (the watcher thread ends; what was shown is cleared)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._task = self._shown = None

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            with self._lock:
                step = self._steps[-1] if self._steps else None
                if step is None:
                    continue
                if time.monotonic() - step.started < SHOW_AFTER_S:
                    continue
                self._show(step)

    def _show(self, step: _Step) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn

        extra = step_text(step.done, step.total, time.monotonic() - step.started)
        if self._progress is None:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False),  # labels quote user paths
                _known_bar(),
                TextColumn("{task.fields[extra]}", markup=False),
                console=self._console,
                transient=True,
            )
            self._progress.start()
        if self._shown is not step:
            # a new task for each step: rich's update() cannot set a total back to None, and
            # an outer step of unknown size would keep the inner step's bar
            if self._task is not None:
                self._progress.remove_task(self._task)
            self._task = self._progress.add_task(step.label, total=step.total, extra=extra)
            self._shown = step
        self._progress.update(self._task, completed=step.done, extra=extra)


def step_text(done: int, total: int | None, elapsed_s: float) -> str:
    """What follows a step's bar: ``312/1056 CTAs, 4 s, about 9 s left`` when its size is known
    (the time left from the rate so far, once a unit is done), else the time spent."""
    if not total:
        return f"{elapsed_s:.0f} s"
    text = f"{done}/{total}, {elapsed_s:.0f} s"
    if 0 < done < total:
        left = elapsed_s * (total - done) / done
        text += f", about {left:.0f} s left" if left >= 1 else ", under a second left"
    return text


def _known_bar() -> Any:
    from rich.progress import BarColumn
    from rich.text import Text

    class KnownBar(BarColumn):
        """A bar only for a step of known size: rich draws an unknown one as a full, pulsing
        bar, which reads as "done" for the whole step."""

        def render(self, task: Any) -> Any:
            return super().render(task) if task.total else Text("")

    return KnownBar()


def progress_for(enabled: bool) -> RichProgress | None:
    """A display on stderr when ``enabled`` and stderr is a terminal, else None (no display)."""
    if not enabled or not sys.stderr.isatty():
        return None
    return RichProgress()

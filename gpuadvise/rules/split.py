"""The rules over two processes: a share of them run in a forked child while this process runs
the rest (:class:`ForkedShare`), on a machine with a second CPU (issue 31: the analysing process
is one Python thread, and during the rules nothing else runs).

The child is made by ``os.fork`` once the models (the trace, its view) are built: it inherits
them copy-on-write, nothing is imported or traced again. It runs its rules in its order and
sends each outcome through a pipe (a pickled frame) as soon as it is done; a reader thread here
hands each one on (:meth:`ForkedShare.outcomes`). A child that dies (killed, out of memory, an
outcome that does not pickle) leaves rules without an outcome: :meth:`ForkedShare.missing`
names them and the caller runs them itself, so the run is complete either way. The child never
writes to the terminal, never runs ``atexit`` hooks and removes only its own temporary folders
(:func:`gpuadvise.toolchain.scratch.release_all`); it dies with this process (SIGKILL when this
one ends, ``PR_SET_PDEATHSIG``; Ctrl-C and SIGTERM end it as they end this one).

Which rules go where is decided as they run: both processes take the next rule from one queue
(:class:`Claims`, a pipe filled before the fork: each read takes one position, whichever
process reads first), so a process that finished a rule early takes more; the queue's order
(the heaviest first by a static weight per rule, :data:`RULE_CPU_S`) is the caller's. A fixed
list of positions is the other way to hand the child its work. Whether to fork at all is
:func:`rule_processes` (the environment, the CPUs this process may use, fork available) and
whether the rules are still running after :data:`FORK_AFTER_CPU_S` of this process's CPU.
Nothing here changes what a rule finds: the caller merges the outcomes in the registry's order.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import os
import pickle
import signal
import struct
import sys
import threading
import types
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

__all__ = [
    "CHILD_WAIT_FACTOR",
    "CHILD_WAIT_MIN_S",
    "Claims",
    "FORK_AFTER_CPU_S",
    "RULE_CPU_S",
    "UNKNOWN_RULE_CPU_S",
    "ForkedShare",
    "dumps",
    "limit_rule_processes",
    "loads",
    "rule_processes",
]

log = logging.getLogger(__name__)

RULE_CPU_S: Mapping[str, float] = {
    # the mean of `cpu_<ID>_s` (the analysing thread's CPU seconds in each rule) over the 158
    # corpus kernels of the nineteenth session's end (/work/gpu_logs/s19ab/call1_after/
    # results_after.json, main 72a8989): the lazily built pieces of the trace's view are in the
    # rule that asked for them first, in the registry's order
    "GA309": 0.334,
    "GA301": 0.303,
    "GA305": 0.289,
    "GA102": 0.239,
    "GA303": 0.219,
    "GA106": 0.151,
    "GA405": 0.100,
    "GA306": 0.068,
    "GA107": 0.055,
    "GA103": 0.053,
    "GA206": 0.050,
    "GA304": 0.050,
    "GA101": 0.040,
    "GA201": 0.039,
    "GA307": 0.034,
    "GA202": 0.032,
    "GA308": 0.023,
    "GA209": 0.022,
    "GA104": 0.020,
    "GA105": 0.019,
    "GA208": 0.008,
    "GA302": 0.007,
    "GA108": 0.003,
    "GA310": 0.002,
}
FORK_AFTER_CPU_S = 0.2
"""The rules run in this process alone until they took this much of its CPU; only what is left
then is split (:func:`gpuadvise.rules.evaluate.evaluate_rules`). Half the corpus's kernels' rules
take less (median 0.67 s at the nineteenth session's end, a quarter under 0.15 s): those never
fork. A fork of a process of 1.5 GB RSS took 9 ms of its CPU and 33 ms of wall on this 2-core
machine, and each page either process writes afterwards is copied (docs/data/s20-fork.md)."""
UNKNOWN_RULE_CPU_S = 0.001  # a rule not in the table (the rest of the bundled ones, a user's)
# how long a caller waits for the child's share once its own is done (ForkedShare.wait_s): this
# many times its own share's wall, at least CHILD_WAIT_MIN_S; past that the child is killed and
# its share runs in the caller
CHILD_WAIT_FACTOR = 4.0
CHILD_WAIT_MIN_S = 60.0

_limit: int | None = None  # limit_rule_processes


def limit_rule_processes(n: int | None) -> None:
    """At most ``n`` processes for the rules of this process's analyses (None: no limit): a
    batch's worker sets 1 when the workers already fill the CPUs."""
    global _limit
    _limit = n


def rule_processes() -> int:
    """How many processes the rules may use here: 1 when ``GPUADVISE_RULE_PROCESSES=1``, when a
    batch's workers fill the CPUs (:func:`limit_rule_processes`), without ``os.fork``, or when
    this process may run on one CPU only; else 2."""
    from gpuadvise.spec.environment import rule_processes as asked

    if asked() == 1 or _limit == 1:
        return 1
    if not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"):
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except OSError:
        return 1
    return 2 if cpus >= 2 else 1


_FRAME = struct.Struct("<Q")  # each frame: its length, then the pickle of (position, outcome)
_POSITION = struct.Struct("<I")  # a position in a Claims pipe


class Claims:
    """``positions`` handed out one at a time, in their order, to whichever process asks next:
    this one or a child forked after this was made (:class:`ForkedShare`). They wait in a pipe
    (written whole here, before the fork, its writing end then closed): each :meth:`take` reads
    one position, and a pipe's read is whole and atomic between the processes (Linux: its lock
    is held while it copies), so no position is taken twice, none is lost; an empty pipe reads
    as the end. At most 16,384 positions (a pipe's 64 KiB): more raise OSError (the caller then
    runs them in one process). Iterating takes positions until none is left."""

    def __init__(self, positions: Iterable[int]) -> None:
        self.positions = list(positions)
        data = b"".join(_POSITION.pack(i) for i in self.positions)
        r, w = os.pipe()
        try:
            os.set_blocking(w, False)
            if data and os.write(w, data) != len(data):  # a pipe fuller than its buffer
                raise OSError(errno.EAGAIN, "too many positions for a pipe")
        except OSError:
            os.close(r)
            raise
        finally:
            os.close(w)
        self._fd: int | None = r

    def take(self) -> int | None:
        """The next position no process took yet, or None when all are taken."""
        if self._fd is None:
            return None
        got = os.read(self._fd, _POSITION.size)
        if len(got) < _POSITION.size:
            return None
        return int(_POSITION.unpack(got)[0])

    def __iter__(self) -> Iterator[int]:
        while (i := self.take()) is not None:
            yield i

    def close(self) -> None:
        """This process takes no more (its end of the pipe closed)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _Pickler(pickle.Pickler):
    """A pickler that names the classes and functions of the rule files by their loaded
    module: the registry loads each file as ``gpuadvise_rules_<digest>.<stem>``
    (:mod:`gpuadvise.rules.registry`), a name ``import`` cannot find again, and a finding's
    details are often such a class. The child and this process hold the same modules (fork)."""

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, type | types.FunctionType):
            mod = getattr(obj, "__module__", None) or ""
            if "." in mod and mod in sys.modules and mod.partition(".")[0] not in sys.modules:
                return ("loaded", mod, obj.__qualname__)
        return None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        _, mod, qualname = pid
        obj = sys.modules[mod]
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj


def dumps(obj: Any) -> bytes:
    """``obj`` pickled so that :func:`loads` in a process forked from the same one reads it
    (the rule files' classes named by their loaded module, :class:`_Pickler`)."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def loads(data: bytes) -> Any:
    """What :func:`dumps` pickled."""
    return _Unpickler(io.BytesIO(data)).load()


class ForkedShare:
    """A forked child running ``run(i)`` for each position ``i`` of ``share`` in turn (a fixed
    list, or a :class:`Claims` that this process takes from too: the child runs what it
    takes), each outcome sent back as soon as it is made; ``handed(i, outcome)`` is told of each one here, in
    a reader thread (it must not raise; the caller serialises what it shares with its own
    thread). ``fatal``: exceptions that end the child (the rule left to this process) rather
    than become the rule's outcome; any other exception must be turned into an outcome by
    ``run``.

    Use as a context manager: leaving it waits for the child and reaps it (on an exception,
    the child is killed first; after :attr:`wait_s` seconds, when set, too: a child stuck on a
    lock that another thread held at the fork costs time, never a result). :meth:`missing`
    then names the positions without an outcome (of a :class:`Claims`, those this process did
    not run either). ``forward_logs``: the child's log records are
    kept (their messages formatted) and sent at its end, in :attr:`records` for the caller to
    handle; else the child logs nothing."""

    def __init__(
        self,
        share: Sequence[int] | Claims,
        run: Callable[[int], Any],
        handed: Callable[[int, Any], None],
        *,
        forward_logs: bool = False,
    ) -> None:
        self.share: list[int] | Claims = share if isinstance(share, Claims) else list(share)
        self._run = run
        self._handed = handed
        self._forward_logs = forward_logs
        self.done: dict[int, Any] = {}
        self.records: list[logging.LogRecord] = []  # the child's, with forward_logs
        self.wait_s: float | None = None  # how long leaving waits for the child (None: for good)
        self.pid: int | None = None
        # the child's CPU seconds (user and system) and peak RSS (MB) once it is reaped
        self.usage: dict[str, float] = {}
        self._reader: threading.Thread | None = None
        self._fd: int | None = None

    def __enter__(self) -> ForkedShare:
        r, w = os.pipe()
        parent = os.getpid()
        # Python 3.12 warns on fork in a process with threads (DeprecationWarning): the
        # SASS thread is joined by now, and a variant's compile thread, which may run, is
        # never touched by the child (it runs rules only; the locks it may take are
        # held by that thread only for a dict's update)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                pid = os.fork()
            except OSError:  # (no fork: the caller runs the share itself)
                os.close(r)
                os.close(w)
                raise
        if pid == 0:  # pragma: no cover - the child (its coverage is not collected)
            os.close(r)
            _child(w, parent, self.share, self._run, self._forward_logs)
        os.close(w)
        self.pid, self._fd = pid, r
        self._reader = threading.Thread(
            target=self._read, name="gpuadvise-rules-child", daemon=True
        )
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._fd is not None
        with os.fdopen(self._fd, "rb", closefd=True) as pipe:
            while True:
                head = pipe.read(_FRAME.size)
                if len(head) < _FRAME.size:
                    return
                body = pipe.read(_FRAME.unpack(head)[0])
                try:
                    i, outcome = loads(body)
                except Exception:  # a frame cut short (the child killed mid-write)
                    log.debug("a rules child's frame did not read", exc_info=True)
                    return
                if i == _LOGS:
                    self.records = outcome
                    continue
                self.done[i] = outcome
                self._handed(i, outcome)

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if self.pid is None:
            return
        joined = False
        try:
            if exc is None and self._reader is not None:
                self._reader.join(self.wait_s)
                joined = not self._reader.is_alive()
        finally:
            if not joined:  # this process is stopping (an error, Ctrl-C, SIGTERM), or the
                # child outlived wait_s: it ends
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL)
                if exc is None and self._reader is not None:
                    self._reader.join()  # (the pipe's end closed by the kill)
            with contextlib.suppress(ChildProcessError):
                _, status, ru = os.wait4(self.pid, 0)
                self.usage = {
                    "cpu_s": ru.ru_utime + ru.ru_stime,
                    "peak_rss_mb": ru.ru_maxrss / 1024,
                }
                if status:
                    log.debug("the rules child ended with status %s", status)
            self.pid = None

    def missing(self, here: Collection[int] = ()) -> list[int]:
        """The positions of the share that have no outcome (the child died first), in order,
        less those in ``here`` (run in this process: of a :class:`Claims`, every position it
        took)."""
        share = self.share.positions if isinstance(self.share, Claims) else self.share
        return [i for i in share if i not in self.done and i not in here]


_LOGS = -1  # the position of the child's last frame: its log records (forward_logs)


class _Capture(logging.Handler):
    """The child's log records, kept to be sent to the parent (the message formatted, no
    arguments or traceback objects: they need not pickle)."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            record.msg, record.args = record.getMessage(), None
            if record.exc_info:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
            self.records.append(record)


def _child(
    w: int, parent: int, share: Iterable[int], run: Callable[[int], Any], forward_logs: bool
) -> None:
    """The child's life (it never returns): no terminal output, SIGINT and SIGTERM end it,
    SIGKILL when the parent ends, its share run and sent (then its log records, or none),
    ``os._exit``."""
    code = 1
    try:
        _die_with(parent)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        capture = _Capture()
        if forward_logs:
            root = logging.getLogger()
            for h in list(root.handlers):
                root.removeHandler(h)
            root.addHandler(capture)
        else:
            logging.disable(logging.CRITICAL)
        with open(w, "wb", closefd=True) as pipe:
            for i in share:
                body = dumps((i, run(i)))
                pipe.write(_FRAME.pack(len(body)) + body)
                pipe.flush()
            if forward_logs:
                body = dumps((_LOGS, capture.records))
                pipe.write(_FRAME.pack(len(body)) + body)
        code = 0
    except BaseException:  # noqa: BLE001 - the parent runs what is left
        pass
    finally:
        with contextlib.suppress(BaseException):
            from gpuadvise.toolchain.scratch import release_all

            release_all()
        os._exit(code)


def _die_with(parent: int) -> None:
    """SIGINT and SIGTERM end this child at once (the parent's handlers raise into code that
    is the parent's to unwind); SIGKILL when the parent's thread that forked ends (Linux)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent ended before the line above
        os._exit(1)

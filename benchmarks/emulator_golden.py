"""The CPU emulator's results and CPU time, call by call (issues 30 and 31: the emulator's per-step cost).

Speed work on the emulator (gpuadvise/ptx/) must leave every emulation identical. This records
the emulations that ``analyze`` makes and replays them alone, so that two checkouts can be
compared on exactly the same calls, and timed on the emulation only (no compile, no rules):

    # 1. record the calls (once, with any checkout): every call of
    #    gpuadvise.trace.emulate._emulate made by the analyze commands, its arguments pickled
    python benchmarks/emulator_golden.py capture DIR [--kernels] [--full SUBSTR ...]
        [--corpus NAME ...] [--only SUBSTR ...]
    # 2. replay them with the checkout on PYTHONPATH: each call's CPU time (process time) and a
    #    digest of its whole result
    PYTHONPATH=/path/to/checkout python benchmarks/emulator_golden.py replay DIR --out A.json
    # 3. compare two replays (exit 1 on any difference), with the CPU time per call
    python benchmarks/emulator_golden.py compare A.json B.json

``--kernels``: every launch of kernels/ (as ``analyze_golden.py``: 64 CTAs sampled), its first
emulation only (the kernel's own trace: the capture stops there) unless the key contains a
``--full`` substring (then the whole analysis: every rule, their launch checks and variant
traces); ``--corpus``: stranger-corpus kernels at their own launch, every rule (speed_golden.py's
command). The digest covers the trace (its records byte for byte, instructions, CTAs, work),
the outputs (every output buffer made and hashed) and the changed elements, the inputs' names,
the CTAs run, the counts (lane instructions, warp steps, warp accesses), the SIMT profile, the
notes and the sampled loops: everything in :class:`~gpuadvise.trace.emulate.Emulation` but its
times. ``GPUADVISE_MEMORY_BUDGET`` is pinned (8 GiB) in both steps: the trace's share and the
sample's cut read it.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUDGET = str(8 << 30)
FIRST_ONLY = "GPUADVISE_EMULATOR_GOLDEN_FIRST_ONLY"


# -- capture ---------------------------------------------------------------------------------------


def _child(out: Path, argv: list[str]) -> int:
    """Run ``gpuadvise <argv>`` in this process, pickling each ``_emulate`` call into ``out``."""
    import gpuadvise.analyze.result_cache as rc
    import gpuadvise.trace.emulate as em
    from gpuadvise.cli import main as cli_main

    rc.load = lambda key: None  # type: ignore[assignment]  # every call made, none stored
    rc.store = lambda key, report: None  # type: ignore[assignment]

    real = em._emulate
    lock = threading.Lock()
    count = [0]

    def recording(**kw: Any) -> Any:
        wave = kw["wave"]
        try:
            got: Any = ("value", wave())
        except Exception as exc:  # the occupancy model's errors: replayed as raised
            got = ("raise", repr(exc))
        later = kw.get("sass_later")
        if later is not None:  # the SASS being read beside the trace (a closure): waited for
            kw = dict(kw, sass=later(True) or ((), {}), sass_later=None)
        saved = dict(kw, wave=got, _sample_bytes=em._SAMPLE_BYTES.get())
        with lock:
            n = count[0]
            count[0] += 1
        (out / f"call{n:03d}.pkl").write_bytes(pickle.dumps(saved, protocol=5))
        if os.environ.get(FIRST_ONLY):  # the kernel's own trace only: nothing after it runs
            os._exit(0)
        return real(**kw)

    em._emulate = recording  # type: ignore[assignment]
    try:
        cli_main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _kernel_commands(full: list[str]) -> list[tuple[str, list[str]]]:
    sys.path.insert(0, str(HERE))
    import analyze_golden as golden

    out = []
    for spec, kernel in golden._runs():
        key = str(spec.relative_to(ROOT)) + (f" --kernel {kernel}" if kernel else "")
        cmd = ["analyze", "--spec", str(spec), "--gpu", "H100", "--json", "--no-measure",
               "--tracer", "emu", "--sample-ctas", "64"]  # fmt: skip
        if kernel:
            cmd += ["--kernel", kernel]
        out.append((key, cmd))
    return out


def _corpus_command(name: str) -> list[str]:
    sys.path.insert(0, str(HERE))
    import speed_golden

    cmd = speed_golden.corpus_command(name)
    return cmd[cmd.index("analyze") :]


def capture(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    runs: list[tuple[str, list[str]]] = []
    if args.kernels:
        runs += _kernel_commands(args.full)
    for name in args.corpus or []:
        runs.append(("corpus:" + name, _corpus_command(name)))
    runs = [(k, c) for k, c in runs if not args.only or any(s in k for s in args.only)]
    for i, (key, cmd) in enumerate(runs):
        env = dict(os.environ, GPUADVISE_MEMORY_BUDGET=BUDGET)
        if key.startswith("kernels/") and not any(s in key for s in args.full):
            env[FIRST_ONLY] = "1"
        d = root / f"{i:03d}"
        d.mkdir(exist_ok=True)
        (d / "key.txt").write_text(key + "\n")
        t0 = time.monotonic()
        p = subprocess.run(
            [sys.executable, __file__, "_child", str(d), "--", *cmd],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
        )
        calls = len(list(d.glob("call*.pkl")))
        print(
            f"  {key}: exit {p.returncode}, {calls} calls, {time.monotonic() - t0:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        if p.returncode:
            print(p.stderr[-1500:], file=sys.stderr, flush=True)
    return 0


# -- replay ----------------------------------------------------------------------------------------


def _digest(value: Any, seen: int = 0) -> Any:
    """A JSON-able canonical form of ``value``: arrays as dtype, shape and the hash of their
    bytes in C order (a view and a copy alike), dataclasses and mappings by field."""
    import numpy as np

    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return {
            "array": value.dtype.str if value.dtype.names is None else repr(value.dtype.descr),
            "shape": list(value.shape),
            "sha": hashlib.sha256(
                data.view(np.uint8).reshape(-1) if data.size else b""
            ).hexdigest(),
        }
    if isinstance(value, np.generic):
        return _digest(value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "type": type(value).__name__,
            **{f.name: _digest(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if isinstance(value, dict):
        return {str(k): _digest(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (set, frozenset)):
        return sorted((_digest(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_digest(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str, bool)) or value is None:
        return value
    if hasattr(value, "__dict__"):
        return {"type": type(value).__name__, **_digest(dict(vars(value)))}
    return repr(value)


def _emulation_digest(emu: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(emu):
        if f.name in ("time_s", "run_s", "outputs", "inputs", "changes"):
            continue
        out[f.name] = _digest(getattr(emu, f.name))
    out["outputs"] = {name: _digest(emu.outputs[name]) for name in emu.outputs}
    out["inputs"] = sorted(emu.inputs)
    ch = emu.changes
    if ch is not None:
        out["changes"] = {name: _digest(ch.changes(name)) for name in emu.outputs}
    return out


def replay(args: argparse.Namespace) -> int:
    os.environ["GPUADVISE_MEMORY_BUDGET"] = BUDGET
    import gc

    import gpuadvise.trace.emulate as em

    root = Path(args.dir)
    result: dict[str, Any] = {"root": os.environ.get("PYTHONPATH", ""), "calls": {}}
    total = 0.0
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        key = (d / "key.txt").read_text().strip()
        if args.only and not any(s in key for s in args.only):
            continue
        for f in sorted(d.glob("call*.pkl")):
            kw = pickle.loads(f.read_bytes())
            sample_bytes = kw.pop("_sample_bytes")
            how, wave = kw["wave"]

            def wave_fn(how: str = how, wave: Any = wave) -> Any:
                if how == "raise":
                    raise RuntimeError(wave)
                return wave

            kw["wave"] = wave_fn
            token = em._SAMPLE_BYTES.set(sample_bytes)
            best = None
            dig: Any = None
            try:
                for _ in range(args.repeat):
                    gc.collect()
                    t0 = time.process_time()
                    try:
                        emu = em._emulate(**kw)
                        cpu = time.process_time() - t0
                        now = _emulation_digest(emu)
                    except Exception as exc:
                        cpu = time.process_time() - t0
                        now = {"error": type(exc).__name__, "message": str(exc)}
                    emu = None
                    best = cpu if best is None else min(best, cpu)
                    dig = now
            finally:
                em._SAMPLE_BYTES.reset(token)
            name = f"{key} #{f.stem[4:]}"
            result["calls"][name] = {"cpu_s": round(best or 0.0, 3), "digest": dig}
            total += best or 0.0
            print(f"  {name}: {best:.2f} CPU-s", file=sys.stderr, flush=True)
    result["total_cpu_s"] = round(total, 2)
    Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"{len(result['calls'])} calls, {total:.1f} CPU-s in the emulations")
    return 0


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if type(a) is not type(b):
        out.append(f"{path}: {a!r:.80} -> {b!r:.80}")
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: {'added' if k not in a else 'removed'}")
            else:
                _diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append(f"{path}: length {len(a)} -> {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r:.80} -> {b!r:.80}")


def compare(args: argparse.Namespace) -> int:
    a = json.loads(Path(args.a).read_text())["calls"]
    b = json.loads(Path(args.b).read_text())["calls"]
    diffs: list[str] = []
    ta = tb = 0.0
    print(f"{'call':70} {'before':>8} {'after':>8}")
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            diffs.append(f"{name}: only in {'the first' if name in a else 'the second'}")
            continue
        _diff(a[name]["digest"], b[name]["digest"], name, diffs)
        ta += a[name]["cpu_s"]
        tb += b[name]["cpu_s"]
        if a[name]["cpu_s"] >= args.show_above or b[name]["cpu_s"] >= args.show_above:
            print(f"{name[-70:]:70} {a[name]['cpu_s']:8.2f} {b[name]['cpu_s']:8.2f}")
    print(f"{'total':70} {ta:8.2f} {tb:8.2f}")
    for d in diffs[:200]:
        print(d)
    n = len(set(a) & set(b))
    records = sum(
        (a[k]["digest"].get("trace") or {}).get("records", {}).get("shape", [0])[0]
        for k in set(a) & set(b)
        if isinstance(a[k]["digest"], dict) and "trace" in a[k]["digest"]
    )
    print(f"{n} calls compared ({records} trace records), {len(diffs)} differences")
    return 1 if diffs else 0


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "_child":
        sep = sys.argv.index("--")
        return _child(Path(sys.argv[2]), sys.argv[sep + 1 :])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("dir")
    c.add_argument("--kernels", action="store_true", help="every launch of kernels/")
    c.add_argument("--full", action="append", default=[], help="kernels/ keys run with every rule")
    c.add_argument("--corpus", action="append", help="corpus kernels (speed_golden's command)")
    c.add_argument("--only", action="append", default=[], help="keys containing this")
    r = sub.add_parser("replay")
    r.add_argument("dir")
    r.add_argument("--out", required=True)
    r.add_argument("--only", action="append", default=[])
    r.add_argument("--repeat", type=int, default=1, help="runs per call (the least CPU kept)")
    m = sub.add_parser("compare")
    m.add_argument("a")
    m.add_argument("b")
    m.add_argument("--show-above", type=float, default=0.5, help="list calls over this CPU-s")
    args = ap.parse_args()
    return {"capture": capture, "replay": replay, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())

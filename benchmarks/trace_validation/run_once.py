"""Launch one case once on the GPU (verify run only) and save its outputs: the program that
benchmarks/trace_validation/run.py runs under Nsight Compute. Usage: run_once.py CASE_JSON OUT.npz"""

from __future__ import annotations

import json
import sys

import numpy as np

from gpuadvise.analyze.options import KernelOptions
from gpuadvise.analyze.prepare import live_options, prepare
from gpuadvise.runner.client import run_in_worker
from gpuadvise.runner.job import Job


def main() -> int:
    case = json.loads(sys.argv[1])
    p = prepare(live_options(KernelOptions(**case)), "A")
    run = run_in_worker(Job((p.launch,), p.buffers, seed=p.spec.seed, verify=True), 120)
    if not run.result.ok:
        print(run.result.error, file=sys.stderr)
        return 1
    np.savez(sys.argv[2], **run.result.outcomes[0].outputs)
    return 0


if __name__ == "__main__":
    sys.exit(main())

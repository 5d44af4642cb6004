"""`gpuadvise gate`: configuration, metrics, baselines, comparisons and verdicts. Prints nothing.

- :mod:`~gpuadvise.gate.thresholds`: the gated metrics, their directions, units and thresholds;
- :mod:`~gpuadvise.gate.config`: the ``[gate]`` table and its cases;
- :mod:`~gpuadvise.gate.flags`: the nvcc flags a configuration may ask for (``--trust-config``);
- :mod:`~gpuadvise.gate.provider`: what a metrics provider answers (:mod:`~gpuadvise.gate.metrics`
  is the real one: compile, models, the GPU runner);
- :mod:`~gpuadvise.gate.compare`: one metric of one case against its baseline, a verdict;
- :mod:`~gpuadvise.gate.baseline`: baseline files, read, merged and written (only over a baseline);
- :mod:`~gpuadvise.gate.evaluate`: every case of a configuration compared or measured;
- :mod:`~gpuadvise.gate.results`: the result, its table, summary and report items;
- :mod:`~gpuadvise.gate.git` and :mod:`~gpuadvise.gate.run`: the command without the printing
  (checks first, then the ``--baseline-ref`` worktree or the stored baseline).
"""

"""`gpuadvise gate`: configuration, metrics, baselines, comparisons and verdicts. Prints nothing."""

"""Everything gpuadvise shows: the terminal (console.py, the only module that imports rich) and the
machine-readable formats. Models and stages never print."""

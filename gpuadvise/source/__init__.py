"""The CUDA source: kernel signatures, and rewriting source text (diffs, block-index remaps)."""

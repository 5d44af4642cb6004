"""gpuadvise record: a program's kernel launches recorded under CUPTI, written as cases."""

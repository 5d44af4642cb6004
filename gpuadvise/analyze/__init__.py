"""Orchestration of `analyze` and `bench`: the pipeline (models computed once), preparing a
kernel for a run on the GPU, and measuring findings' variants. Prints nothing."""

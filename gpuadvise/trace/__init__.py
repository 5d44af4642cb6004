"""The AccessTrace and the two tracers that fill it: the CPU emulator driver and the GPU tracer."""

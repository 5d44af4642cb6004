"""Running kernels on the GPU: backend protocol, isolated worker, timing, verification."""

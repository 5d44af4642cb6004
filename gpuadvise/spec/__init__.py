"""What the user asks for: the kernel spec, launch specs, safe size expressions, units and the
CUDA type catalogue."""

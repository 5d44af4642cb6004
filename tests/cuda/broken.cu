// Test fixture: does not compile (line 4 uses an undefined name).
__global__ void broken(float* x) {
  int i = threadIdx.x;
  x[i] = not_declared_anywhere * 2.0f;
}

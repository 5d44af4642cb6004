// Lookup tables indexed by data (GA305's table path), three spellings, and a big table whose
// lookups are a gather (not staged: GA301's). Sizes from the tests' launch: n = 8192.

__global__ void sbox_index(const unsigned char* in, const unsigned char* sbox, unsigned char* out,
                           int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned char s = in[i];
        for (int r = 0; r < 8; r++)
            s = sbox[s];
        out[i] = s;
    }
}

__global__ void byte_tables(const unsigned int* in, const float* table, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int v = in[i];
    float acc = 0.0f;
    for (int k = 0; k < 4; k++) acc += *(table + ((v >> (8 * k)) & 31u) + 32 * k);
    out[i] = acc;
}

__global__ void ldg_lookup(const int* __restrict__ keys, const int* __restrict__ lut,
                           int* __restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __ldg(&lut[keys[i] & 31]) + __ldg(&lut[(keys[i] >> 8) & 31]);
}

__global__ void big_gather(const int* idx, const float* big, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = big[idx[i]] + big[idx[i] + 1];
}

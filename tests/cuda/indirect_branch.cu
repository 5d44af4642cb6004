// A switch ptxas compiles to a jump table: indirect branches (BRX) in the SASS
// (tests/toolchain/test_toolchain_cost.py).
__global__ void pick(const unsigned *k, const unsigned *len, unsigned *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned k0 = k[3 * i], k1 = k[3 * i + 1], k2 = k[3 * i + 2];
    unsigned a = 1, b = 2, c = 3;
    switch (len[i]) {
        case 12: c += k2; b += k1; a += k0; break;
        case 11: c += k2 & 0xffffff; b += k1; a += k0; break;
        case 10: c += k2 & 0xffff; b += k1; a += k0; break;
        case 9: c += k2 & 0xff; b += k1; a += k0; break;
        case 8: b += k1; a += k0; break;
        case 7: b += k1 & 0xffffff; a += k0; break;
        case 6: b += k1 & 0xffff; a += k0; break;
        case 5: b += k1 & 0xff; a += k0; break;
        case 4: a += k0; break;
        case 3: a += k0 & 0xffffff; break;
        case 2: a += k0 & 0xffff; break;
        case 1: a += k0 & 0xff; break;
        case 0: out[i] = c; return;
    }
    out[i] = a ^ (b << 3) ^ (c << 7);
}

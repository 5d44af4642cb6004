// A thread loading a global value it already has (GA309, redundant-global-loads), and the fixes.

// Rodinia's k-means membership: the point's features are loaded again for every cluster (the
// feature count is a run-time value: nothing is kept in registers across the cluster loop).
__device__ __forceinline__ float sq(float d) { return d * d; }

__global__ void membership(const float* __restrict__ feature, const float* __restrict__ clusters,
                           int* __restrict__ member, int nclusters, int nfeatures, int npoints) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= npoints) return;
    int best = 0;
    float best_dist = 3.4e38f;
    for (int c = 0; c < nclusters; c++) {
        float dist = 0.0f;
        for (int l = 0; l < nfeatures; l++)
            dist += sq(feature[l * npoints + p] - clusters[c * nfeatures + l]);  // expect: GA309, GA303
        if (dist < best_dist) {
            best_dist = dist;
            best = c;
        }
    }
    member[p] = best;
}

// llm.c's AdamW kernel 1, the moment updates in macros: m[i] and v[i] are read back after their
// stores (and grads[i] after the store to m), as the pointers may alias.
#define MOMENT(buf, beta, g) buf[i] = (beta) * buf[i] + (1.0f - (beta)) * (g)

__global__ void adam_step(float* params, const float* grads, float* m, float* v, int n, float lr,
                          float beta1, float beta2, float c1, float c2, float eps, float wd) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    MOMENT(m, beta1, grads[i]);
    MOMENT(v, beta2, grads[i] * grads[i]);  // expect: GA309
    float m_hat = m[i] / c1;
    float v_hat = v[i] / c2;
    params[i] -= lr * (m_hat / (sqrtf(v_hat) + eps) + wd * params[i]);
}

// A template: each thread scales a column of a table whose height is read through a pointer;
// the store to `out` may alias `*rows` (both int), so the bound is loaded in every iteration.
template <int STEP>
__global__ void scale_columns(const int* in, int* out, const int* rows, int factor, int pitch) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    for (int r = 0; r < *rows; r += STEP)  // expect: GA309
        out[(size_t)r * pitch + col] = in[(size_t)r * pitch + col] * factor;
}
template __global__ void scale_columns<1>(const int*, int*, const int*, int, int);

// The fixes and look-alikes, silent.

// k-means with the point's features loaded once into registers (a compile-time count).
template <int NF>
__global__ void membership_registers(const float* __restrict__ feature,
                                     const float* __restrict__ clusters, int* __restrict__ member,
                                     int nclusters, int npoints) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= npoints) return;
    float f[NF];
#pragma unroll
    for (int l = 0; l < NF; l++) f[l] = feature[l * npoints + p];
    int best = 0;
    float best_dist = 3.4e38f;
    for (int c = 0; c < nclusters; c++) {
        float dist = 0.0f;
#pragma unroll
        for (int l = 0; l < NF; l++) dist += sq(f[l] - clusters[c * NF + l]);  // expect: GA303
        if (dist < best_dist) {
            best_dist = dist;
            best = c;
        }
    }
    member[p] = best;
}
template __global__ void membership_registers<16>(const float*, const float*, int*, int, int);

// Each value loaded once (AdamW kernel 2 of llm.c: into registers first).
__global__ void read_once(float* params, const float* grads, float* m, float* v, int n, float lr,
                          float beta1, float beta2, float c1, float c2, float eps, float wd) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = grads[i], mi = m[i], vi = v[i], p = params[i];
    mi = beta1 * mi + (1.0f - beta1) * g;
    vi = beta2 * vi + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] = p - lr * (mi / c1 / (sqrtf(vi / c2) + eps) + wd * p);
}

// Many loads per thread, of distinct addresses (a grid-stride sum).
__global__ void distinct_reads(const float* in, float* out, int n) {
    float s = 0.0f;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x)
        s += in[j];  // expect: GA303
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// A value read again after a neighbour stored it (a barrier between): not a redundant load.
// Each step, thread i reads a[i] and hands it to a partner in its warp (another each step),
// whose value it gets back in a[i] for the next step.
__global__ void exchange(float* a, float* out, int steps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (int s = 0; s < steps; s++) {
        float x = a[i];
        acc += x;
        __syncthreads();
        a[i ^ (1 << (s % 5))] = x;
        __syncthreads();
    }
    out[i] = acc;
}

// A 4-byte BGRA pixel of four uint8_t fields (1-byte alignment): reading .r, .g, .b is three
// byte loads and writing the four fields four byte stores, where one 32-bit access of the
// pixel would do (HeCBench's gamma-correction). Three spellings, then two silent kernels.
#include <cstdint>

struct Pixel {
    std::uint8_t b, g, r, a;
};

__device__ __forceinline__ std::uint8_t grey(float r, float g, float b) {
    const float v = (0.3f * r + 0.59f * g + 0.11f * b) / 255.f;
    return static_cast<std::uint8_t>(255.f * v * v);
}

__global__ void grey_fields(Pixel* px) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    std::uint8_t v = grey(px[i].r, px[i].g, px[i].b);  // expect: GA302
    px[i].b = v; px[i].g = v; px[i].r = v; px[i].a = v;  // expect: GA302
}

#define FIELD(p, i, f) ((p)[(i)].f)
__global__ void grey_macro(Pixel* __restrict__ px) {
    const int i = threadIdx.x + blockDim.x * blockIdx.x;
    const std::uint8_t v = grey(FIELD(px, i, r), FIELD(px, i, g), FIELD(px, i, b));  // expect: GA302
    FIELD(px, i, b) = v; FIELD(px, i, g) = v; FIELD(px, i, r) = v; FIELD(px, i, a) = 255;  // expect: GA302
}

__global__ void grey_pointer(Pixel* px) {
    Pixel* q = px + blockIdx.x * blockDim.x + threadIdx.x;
    auto v = grey(q->r, q->g, q->b);  // expect: GA302
    q->b = v, q->g = v, q->r = v, q->a = 0;  // expect: GA302
}

// silent: the pixel read and written whole (a 4-byte aligned copy of the struct)
struct __align__(4) Pixel4 {
    std::uint8_t b, g, r, a;
};
__global__ void grey_whole(Pixel4* px) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    Pixel4 p = px[i];
    std::uint8_t v = grey(p.r, p.g, p.b);
    px[i] = Pixel4{v, v, v, v};
}

// silent for GA302: the channels in planes of their own (consecutive threads, consecutive
// bytes); at this size the launch is mostly overhead
__global__ void grey_planes(const std::uint8_t* __restrict__ r, const std::uint8_t* __restrict__ g,  // expect: GA501 (a small launch)
                            const std::uint8_t* __restrict__ b, std::uint8_t* __restrict__ out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = grey(r[i], g[i], b[i]);
}

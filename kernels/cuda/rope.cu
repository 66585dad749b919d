/* CUDA RotaryEmbedding (kernels/kernel_list.h: rope_fwd, rope_bwd): one thread per pair of a
 * group, a grid-stride loop over the n x T x D / 2 pairs, the reference's float expressions
 * (kernels/rope_rules.h) with the device's powf, cosf and sinf. */
#include "kernels/cuda/runtime.cuh"

#define MW_ROPE_HD __device__ static inline
#include "kernels/rope_rules.h"

/* Pair p of (n, T, D): its first element's offset and its angle. */
__device__ static inline size_t rope_at(size_t p, int T, int D, int width, int start, int denom,
                                        float max_wavelength, float scale, float *a)
{
    const int h = width / 2;
    const size_t r = p / (size_t)(D / 2); /* the row (i, t) */
    const int q = (int)(p % (size_t)(D / 2)), g = q / h, j = q % h;
    *a = rope_angle((int)(r % (size_t)T), j, start, denom, max_wavelength, scale);
    return r * (size_t)D + (size_t)g * width + (size_t)j;
}

static __global__ void rope_fwd_kernel(float *y, const float *x, size_t pairs, int T, int D,
                                       int width, int start, int denom, float max_wavelength,
                                       float scale)
{
    MW_GRID_STRIDE(p, pairs)
    {
        float a;
        const size_t e = rope_at(p, T, D, width, start, denom, max_wavelength, scale, &a);
        const size_t h = (size_t)(width / 2);
        rope_pair_fwd(&y[e], &y[e + h], x[e], x[e + h], cosf(a), sinf(a));
    }
}

static __global__ void rope_bwd_kernel(float *dx, const float *dy, size_t pairs, int T, int D,
                                       int width, int start, int denom, float max_wavelength,
                                       float scale)
{
    MW_GRID_STRIDE(p, pairs)
    {
        float a;
        const size_t e = rope_at(p, T, D, width, start, denom, max_wavelength, scale, &a);
        const size_t h = (size_t)(width / 2);
        rope_pair_bwd(&dx[e], &dx[e + h], dy[e], dy[e + h], cosf(a), sinf(a));
    }
}

extern "C" void mw_rope_fwd_cuda(const mw_kctx *k, float *y, const float *x, int n, int T, int D,
                                 int width, int start, int denom, float max_wavelength, float scale)
{
    const size_t pairs = (size_t)(n > 0 ? n : 0) * T * (D / 2);
    MW_EW_LAUNCH("mw_rope_fwd_cuda", rope_fwd_kernel, pairs, y, x, pairs, T, D, width, start, denom,
                 max_wavelength, scale);
}

extern "C" void mw_rope_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, int n, int T, int D,
                                 int width, int start, int denom, float max_wavelength, float scale)
{
    const size_t pairs = (size_t)(n > 0 ? n : 0) * T * (D / 2);
    MW_EW_LAUNCH("mw_rope_bwd_cuda", rope_bwd_kernel, pairs, dx, dy, pairs, T, D, width, start,
                 denom, max_wavelength, scale);
}

/* CUDA RotaryEmbedding (kernels/kernel_list.h: rope_fwd, rope_bwd): one thread per pair of a
 * group, a grid-stride loop over the n x T x D / 2 pairs, the reference's float expressions
 * (kernels/rope_rules.h) with the device's powf, cosf and sinf. */
#include "kernels/cuda/cast.cuh"
#include "kernels/cuda/runtime.cuh"

#define MW_ROPE_HD __device__ static inline
#define MW_ROPE_ROUND16(half, x) ((half) == 1 ? mw_cuda_bf16_round(x) : mw_cuda_f16_round(x))
#include "kernels/rope_rules.h"

/* out from in, pair p of (n, T, D) at a time: the rotation (bwd 0) or its transpose added. */
static __global__ void rope_kernel(float *out, const float *in, size_t pairs, int T, int D,
                                   int width, int start, int denom, float max_wavelength,
                                   float scale, int bwd, int half)
{
    const int h = width / 2;
    MW_GRID_STRIDE(p, pairs)
    {
        const size_t r = p / (size_t)(D / 2); /* the row (i, t) */
        const int q = (int)(p % (size_t)(D / 2)), g = q / h, j = q % h;
        const float a = rope_angle((int)(r % (size_t)T), j, start, denom, max_wavelength, scale);
        rope_pair(out, in, r * (size_t)D + (size_t)g * width + (size_t)j, (size_t)h, cosf(a),
                  sinf(a), bwd, half);
    }
}

extern "C" void mw_rope_fwd_cuda(const mw_kctx *k, float *y, const float *x, int n, int T, int D,
                                 int width, int start, int denom, float max_wavelength, float scale,
                                 int half)
{
    const size_t pairs = (size_t)(n > 0 ? n : 0) * T * (D / 2);
    MW_EW_LAUNCH("mw_rope_fwd_cuda", rope_kernel, pairs, y, x, pairs, T, D, width, start, denom,
                 max_wavelength, scale, 0, half);
}

extern "C" void mw_rope_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, int n, int T, int D,
                                 int width, int start, int denom, float max_wavelength, float scale,
                                 int half)
{
    const size_t pairs = (size_t)(n > 0 ? n : 0) * T * (D / 2);
    MW_EW_LAUNCH("mw_rope_bwd_cuda", rope_kernel, pairs, dx, dy, pairs, T, D, width, start, denom,
                 max_wavelength, scale, 1, half);
}

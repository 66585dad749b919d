/* CUDA Rescaling and adapted Normalization as layers: element-wise grid-stride loops of the
 * reference's float expressions (the spec is kernels/ref/rescale.c). */
#include <math.h>

#include "kernels/cuda/runtime.cuh"

static __global__ void rescale_fwd_kernel(float *y, const float *x, size_t count, mw_rescale r)
{
    MW_GRID_STRIDE(i, count)
    {
        const int c = (int)(i % (size_t)r.C);
        y[i] = x[i] * r.scale[c] + r.offset[c];
    }
}

static __global__ void rescale_bwd_kernel(float *dx, const float *dy, size_t count, mw_rescale r)
{
    MW_GRID_STRIDE(i, count)
    {
        dx[i] += dy[i] * r.scale[i % (size_t)r.C];
    }
}

static __global__ void normalize_fwd_kernel(float *y, const float *x, const float *mean,
                                            const float *var, size_t count, int C, float eps)
{
    MW_GRID_STRIDE(i, count)
    {
        const int c = (int)(i % (size_t)C);
        y[i] = (x[i] - mean[c]) / fmaxf(sqrtf(var[c]), eps);
    }
}

static __global__ void normalize_bwd_kernel(float *dx, const float *dy, const float *var,
                                            size_t count, int C, float eps)
{
    MW_GRID_STRIDE(i, count)
    {
        dx[i] += dy[i] / fmaxf(sqrtf(var[(int)(i % (size_t)C)]), eps);
    }
}

extern "C" void mw_rescale_fwd_cuda(const mw_kctx *k, float *y, const float *x, size_t count,
                                    const mw_rescale *r)
{
    MW_EW_LAUNCH("mw_rescale_fwd_cuda", rescale_fwd_kernel, count, y, x, count, *r);
}

extern "C" void mw_rescale_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, size_t count,
                                    const mw_rescale *r)
{
    MW_EW_LAUNCH("mw_rescale_bwd_cuda", rescale_bwd_kernel, count, dx, dy, count, *r);
}

extern "C" void mw_normalize_fwd_cuda(const mw_kctx *k, float *y, const float *x, const float *mean,
                                      const float *var, size_t rows, int C, float eps)
{
    const size_t count = rows * (size_t)C;
    MW_EW_LAUNCH("mw_normalize_fwd_cuda", normalize_fwd_kernel, count, y, x, mean, var, count, C,
                 eps);
}

extern "C" void mw_normalize_bwd_cuda(const mw_kctx *k, float *dx, const float *dy,
                                      const float *var, size_t rows, int C, float eps)
{
    const size_t count = rows * (size_t)C;
    MW_EW_LAUNCH("mw_normalize_bwd_cuda", normalize_bwd_kernel, count, dx, dy, var, count, C, eps);
}

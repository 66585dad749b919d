/* CUDA twin of Softmax as a layer (the spec is kernels/ref/softmax.c): each row gets one warp
 * (as the cross-entropy in activation.cu), with the sum in double reduced by shuffles in a
 * fixed order. */
#include <math.h>

#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}

#define SOFTMAX_WARPS 8 /* rows per block */

static __global__ void softmax_fwd_kernel(float *y, const float *x, size_t rows, int C)
{
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const size_t r = (size_t)blockIdx.x * SOFTMAX_WARPS + (threadIdx.x >> 5);
    if (r >= rows) /* the whole warp leaves together */
        return;
    const float *xr = x + r * C;
    float *yr = y + r * C;
    float mx = -INFINITY;
    for (int j = lane; j < C; j += 32)
        mx = fmaxf(mx, xr[j]);
    for (int s = 16; s > 0; s >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(full, mx, s));
    double sum = 0.0;
    for (int j = lane; j < C; j += 32) {
        const float e = expf(xr[j] - mx);
        yr[j] = e;
        sum += e;
    }
    for (int s = 16; s > 0; s >>= 1)
        sum += __shfl_xor_sync(full, sum, s);
    for (int j = lane; j < C; j += 32)
        yr[j] = (float)(yr[j] / sum);
}

/* dx += y (dy - sum dy y), the sum in double. */
static __global__ void softmax_bwd_kernel(float *dx, const float *dy, const float *y, size_t rows,
                                          int C)
{
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const size_t r = (size_t)blockIdx.x * SOFTMAX_WARPS + (threadIdx.x >> 5);
    if (r >= rows)
        return;
    const float *d = dy + r * C, *yr = y + r * C;
    double s = 0.0;
    for (int j = lane; j < C; j += 32)
        s += (double)d[j] * yr[j];
    for (int h = 16; h > 0; h >>= 1)
        s += __shfl_xor_sync(full, s, h);
    for (int j = lane; j < C; j += 32)
        dx[r * C + j] += (float)(yr[j] * (d[j] - s));
}

extern "C" void mw_softmax_fwd_cuda(const mw_kctx *k, float *y, const float *x, size_t rows, int C)
{
    const char *op = "mw_softmax_fwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || rows == 0 || C <= 0)
        return;
    const unsigned grid = (unsigned)((rows + SOFTMAX_WARPS - 1) / SOFTMAX_WARPS);
    softmax_fwd_kernel<<<grid, SOFTMAX_WARPS * 32, 0, d->stream>>>(y, x, rows, C);
    MW_LAUNCHED_K(d, "softmax_fwd_kernel");
    mw_cuda_end(d, op);
}

extern "C" void mw_softmax_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, const float *y,
                                    size_t rows, int C)
{
    const char *op = "mw_softmax_bwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || rows == 0 || C <= 0)
        return;
    const unsigned grid = (unsigned)((rows + SOFTMAX_WARPS - 1) / SOFTMAX_WARPS);
    softmax_bwd_kernel<<<grid, SOFTMAX_WARPS * 32, 0, d->stream>>>(dx, dy, y, rows, C);
    MW_LAUNCHED_K(d, "softmax_bwd_kernel");
    mw_cuda_end(d, op);
}

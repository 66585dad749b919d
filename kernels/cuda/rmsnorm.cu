/* RMS normalization's CUDA twins (kernels/kernel_list.h: rmsnorm_fwd, rmsnorm_bwd): one thread
 * per row for the forward and the input's gradient, the reference's rows
 * (kernels/rmsnorm_rules.h); gamma's gradient one thread per feature, summing the rows in order
 * (no atomics: the same sums as the reference). */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}
#define MW_RMS_HD __device__ static inline
#include "kernels/rmsnorm_rules.h"

static __global__ void rmsnorm_fwd_kernel(float *y, float *stat, const float *x, const float *gamma,
                                          int rows, int D, float eps, int centered, float offset)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x)
        rms_row_fwd(y + (size_t)r * D, stat + r, stat + rows + r, x + (size_t)r * D, gamma, D, eps,
                    centered, offset);
}

static __global__ void rmsnorm_dx_kernel(float *dx, const float *dy, const float *x,
                                         const float *stat, const float *gamma, int rows, int D,
                                         float offset)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x)
        rms_row_dx(dx + (size_t)r * D, dy + (size_t)r * D, x + (size_t)r * D, gamma, stat[r],
                   stat[rows + r], D, offset);
}

static __global__ void rmsnorm_gamma_kernel(float *dgamma, const float *dy, const float *x,
                                            const float *stat, int rows, int D)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < D; j += gridDim.x * blockDim.x) {
        float gg = dgamma[j];
        for (int r = 0; r < rows; r++)
            gg += dy[(size_t)r * D + j] * (x[(size_t)r * D + j] * stat[rows + r]);
        dgamma[j] = gg;
    }
}

extern "C" void mw_rmsnorm_fwd_cuda(const mw_kctx *k, float *y, float *stat, const float *x,
                                    const float *gamma, int rows, int D, float eps, int centered,
                                    float offset)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_rmsnorm_fwd_cuda");
    if (!d || rows <= 0)
        return;
    rmsnorm_fwd_kernel<<<mw_cuda_grid((size_t)rows), MW_CUDA_BLOCK, 0, d->stream>>>(
        y, stat, x, gamma, rows, D, eps, centered, offset);
    MW_LAUNCHED_K(d, "rmsnorm_fwd_kernel");
    mw_cuda_end(d, "mw_rmsnorm_fwd_cuda");
}

extern "C" void mw_rmsnorm_bwd_cuda(const mw_kctx *k, float *dx, float *dgamma, const float *dy,
                                    const float *x, const float *stat, const float *gamma, int rows,
                                    int D, float offset)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_rmsnorm_bwd_cuda");
    if (!d || rows <= 0)
        return;
    if (dgamma) {
        rmsnorm_gamma_kernel<<<mw_cuda_grid((size_t)D), MW_CUDA_BLOCK, 0, d->stream>>>(
            dgamma, dy, x, stat, rows, D);
        MW_LAUNCHED_K(d, "rmsnorm_gamma_kernel");
    }
    if (dx) {
        rmsnorm_dx_kernel<<<mw_cuda_grid((size_t)rows), MW_CUDA_BLOCK, 0, d->stream>>>(
            dx, dy, x, stat, gamma, rows, D, offset);
        MW_LAUNCHED_K(d, "rmsnorm_dx_kernel");
    }
    mw_cuda_end(d, "mw_rmsnorm_bwd_cuda");
}

/* GroupNormalization's CUDA twins: one thread per (example, group) for the forward and the
 * input's gradient, the reference's groups (kernels/groupnorm_rules.h); the parameters'
 * gradients one thread per channel, summing the examples and positions in order (no atomics:
 * the reference's sums). */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}
#define MW_GN_HD __device__ static inline
#include "kernels/groupnorm_rules.h"

static __global__ void groupnorm_fwd_kernel(float *y, float *stat, const float *x,
                                            const float *gamma, const float *beta, int n, int S,
                                            int C, int G, float eps)
{
    const int cg = C / G, groups = n * G;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < groups; t += gridDim.x * blockDim.x) {
        const size_t e = (size_t)(t / G) * S * C;
        gn_group_fwd(y + e, stat + t, stat + groups + t, x + e, gamma, beta, S, C, (t % G) * cg, cg,
                     eps);
    }
}

static __global__ void groupnorm_dx_kernel(float *dx, const float *dy, const float *x,
                                           const float *stat, const float *gamma, int n, int S,
                                           int C, int G)
{
    const int cg = C / G, groups = n * G;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < groups; t += gridDim.x * blockDim.x) {
        const size_t e = (size_t)(t / G) * S * C;
        gn_group_dx(dx + e, dy + e, x + e, gamma, stat[t], stat[groups + t], S, C, (t % G) * cg,
                    cg);
    }
}

static __global__ void groupnorm_params_kernel(float *dgamma, float *dbeta, const float *dy,
                                               const float *x, const float *stat, int n, int S,
                                               int C, int G)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
        gn_channel_params(dgamma, dbeta, dy, x, stat, n, S, C, G, c);
}

extern "C" void mw_groupnorm_fwd_cuda(const mw_kctx *k, float *y, float *stat, const float *x,
                                      const float *gamma, const float *beta, int n, int S, int C,
                                      int G, float eps)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_groupnorm_fwd_cuda");
    if (!d || n <= 0)
        return;
    groupnorm_fwd_kernel<<<mw_cuda_grid((size_t)n * G), MW_CUDA_BLOCK, 0, d->stream>>>(
        y, stat, x, gamma, beta, n, S, C, G, eps);
    MW_LAUNCHED_K(d, "groupnorm_fwd_kernel");
    mw_cuda_end(d, "mw_groupnorm_fwd_cuda");
}

extern "C" void mw_groupnorm_bwd_cuda(const mw_kctx *k, float *dx, float *dgamma, float *dbeta,
                                      const float *dy, const float *x, const float *stat,
                                      const float *gamma, int n, int S, int C, int G)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_groupnorm_bwd_cuda");
    if (!d || n <= 0)
        return;
    if (dgamma || dbeta) {
        groupnorm_params_kernel<<<mw_cuda_grid((size_t)C), MW_CUDA_BLOCK, 0, d->stream>>>(
            dgamma, dbeta, dy, x, stat, n, S, C, G);
        MW_LAUNCHED_K(d, "groupnorm_params_kernel");
    }
    if (dx) {
        groupnorm_dx_kernel<<<mw_cuda_grid((size_t)n * G), MW_CUDA_BLOCK, 0, d->stream>>>(
            dx, dy, x, stat, gamma, n, S, C, G);
        MW_LAUNCHED_K(d, "groupnorm_dx_kernel");
    }
    mw_cuda_end(d, "mw_groupnorm_bwd_cuda");
}

/* LayerNormalization's CUDA twins (kernels/kernel_list.h: layernorm_fwd, layernorm_bwd): one thread
 * per row for the forward and the input's gradient, the reference's rows
 * (kernels/layernorm_rules.h); the parameters' gradients one thread per feature, summing the rows
 * in order (no atomics: the same sums as the reference). The residual Add fused with either norm
 * (add_layernorm_*, add_rmsnorm_*): the reference's fused rows, one thread per row. */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}
#define MW_LN_HD __device__ static inline
#include "kernels/layernorm_rules.h"
#define MW_RMS_HD __device__ static inline
#include "kernels/rmsnorm_rules.h"

static __global__ void layernorm_fwd_kernel(float *y, float *stat, const float *x,
                                            const float *gamma, const float *beta, int rows, int D,
                                            float eps)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x)
        ln_row_fwd(y + (size_t)r * D, stat + r, stat + rows + r, x + (size_t)r * D, gamma, beta, D,
                   eps);
}

static __global__ void layernorm_dx_kernel(float *dx, const float *dy, const float *x,
                                           const float *stat, const float *gamma, int rows, int D)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x)
        ln_row_dx(dx + (size_t)r * D, dy + (size_t)r * D, x + (size_t)r * D, gamma, stat[r],
                  stat[rows + r], D);
}

static __global__ void layernorm_params_kernel(float *dgamma, float *dbeta, const float *dy,
                                               const float *x, const float *stat, int rows, int D)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < D; j += gridDim.x * blockDim.x) {
        float gg = dgamma ? dgamma[j] : 0.0f, gb = dbeta ? dbeta[j] : 0.0f;
        for (int r = 0; r < rows; r++) {
            const float d = dy[(size_t)r * D + j];
            gg += d * ((x[(size_t)r * D + j] - stat[r]) * stat[rows + r]);
            gb += d;
        }
        if (dgamma)
            dgamma[j] = gg;
        if (dbeta)
            dbeta[j] = gb;
    }
}

extern "C" void mw_layernorm_fwd_cuda(const mw_kctx *k, float *y, float *stat, const float *x,
                                      const float *gamma, const float *beta, int rows, int D,
                                      float eps)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_layernorm_fwd_cuda");
    if (!d || rows <= 0)
        return;
    layernorm_fwd_kernel<<<mw_cuda_grid((size_t)rows), MW_CUDA_BLOCK, 0, d->stream>>>(
        y, stat, x, gamma, beta, rows, D, eps);
    MW_LAUNCHED_K(d, "layernorm_fwd_kernel");
    mw_cuda_end(d, "mw_layernorm_fwd_cuda");
}

extern "C" void mw_layernorm_bwd_cuda(const mw_kctx *k, float *dx, float *dgamma, float *dbeta,
                                      const float *dy, const float *x, const float *stat,
                                      const float *gamma, int rows, int D)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_layernorm_bwd_cuda");
    if (!d || rows <= 0)
        return;
    if (dgamma || dbeta) {
        layernorm_params_kernel<<<mw_cuda_grid((size_t)D), MW_CUDA_BLOCK, 0, d->stream>>>(
            dgamma, dbeta, dy, x, stat, rows, D);
        MW_LAUNCHED_K(d, "layernorm_params_kernel");
    }
    if (dx) {
        layernorm_dx_kernel<<<mw_cuda_grid((size_t)rows), MW_CUDA_BLOCK, 0, d->stream>>>(
            dx, dy, x, stat, gamma, rows, D);
        MW_LAUNCHED_K(d, "layernorm_dx_kernel");
    }
    mw_cuda_end(d, "mw_layernorm_bwd_cuda");
}

static __global__ void add_norm_fwd_kernel(float *s, float *y, float *stat, const float *a,
                                           const float *b, const float *gamma, const float *beta,
                                           int rows, int D, float eps, int rms, int centered,
                                           float offset)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
        const size_t o = (size_t)r * D;
        ln_row_sum(s + o, a + o, b + o, D);
        if (rms)
            rms_row_fwd(y + o, stat + r, stat + rows + r, s + o, gamma, D, eps, centered, offset);
        else
            ln_row_fwd(y + o, stat + r, stat + rows + r, s + o, gamma, beta, D, eps);
    }
}

static __global__ void add_norm_dx_kernel(float *da, float *db, const float *ds, const float *dy,
                                          const float *s, const float *stat, const float *gamma,
                                          int rows, int D, int rms, float offset)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
        const size_t o = (size_t)r * D;
        float *ar = da ? da + o : NULL, *br = db ? db + o : NULL;
        if (rms)
            rms_row_dx_add(ar, br, ds + o, dy + o, s + o, gamma, stat[r], stat[rows + r], D,
                           offset);
        else
            ln_row_dx_add(ar, br, ds + o, dy + o, s + o, gamma, stat[r], stat[rows + r], D);
    }
}

/* The fused forward of either norm (rms 0: LayerNormalization). */
static void add_norm_fwd(const mw_kctx *k, const char *who, float *s, float *y, float *stat,
                         const float *a, const float *b, const float *gamma, const float *beta,
                         int rows, int D, float eps, int rms, int centered, float offset)
{
    mw_cuda_dev *d = mw_cuda_begin(k, who);
    if (!d || rows <= 0)
        return;
    add_norm_fwd_kernel<<<mw_cuda_grid((size_t)rows), MW_CUDA_BLOCK, 0, d->stream>>>(
        s, y, stat, a, b, gamma, beta, rows, D, eps, rms, centered, offset);
    MW_LAUNCHED_K(d, "add_norm_fwd_kernel");
    mw_cuda_end(d, who);
}

/* The fused backward's input gradients (the parameters' by the plain twins, dx NULL). */
static void add_norm_dx(const mw_kctx *k, const char *who, float *da, float *db, const float *ds,
                        const float *dy, const float *s, const float *stat, const float *gamma,
                        int rows, int D, int rms, float offset)
{
    mw_cuda_dev *d = mw_cuda_begin(k, who);
    if (!d || rows <= 0)
        return;
    add_norm_dx_kernel<<<mw_cuda_grid((size_t)rows), MW_CUDA_BLOCK, 0, d->stream>>>(
        da, db, ds, dy, s, stat, gamma, rows, D, rms, offset);
    MW_LAUNCHED_K(d, "add_norm_dx_kernel");
    mw_cuda_end(d, who);
}

extern "C" void mw_add_layernorm_fwd_cuda(const mw_kctx *k, float *s, float *y, float *stat,
                                          const float *a, const float *b, const float *gamma,
                                          const float *beta, int rows, int D, float eps)
{
    add_norm_fwd(k, "mw_add_layernorm_fwd_cuda", s, y, stat, a, b, gamma, beta, rows, D, eps, 0, 0,
                 0.0f);
}

extern "C" void mw_add_layernorm_bwd_cuda(const mw_kctx *k, float *da, float *db, float *dgamma,
                                          float *dbeta, const float *ds, const float *dy,
                                          const float *s, const float *stat, const float *gamma,
                                          int rows, int D)
{
    mw_layernorm_bwd_cuda(k, NULL, dgamma, dbeta, dy, s, stat, gamma, rows, D);
    add_norm_dx(k, "mw_add_layernorm_bwd_cuda", da, db, ds, dy, s, stat, gamma, rows, D, 0, 0.0f);
}

extern "C" void mw_add_rmsnorm_fwd_cuda(const mw_kctx *k, float *s, float *y, float *stat,
                                        const float *a, const float *b, const float *gamma,
                                        int rows, int D, float eps, int centered, float offset)
{
    add_norm_fwd(k, "mw_add_rmsnorm_fwd_cuda", s, y, stat, a, b, gamma, NULL, rows, D, eps, 1,
                 centered, offset);
}

extern "C" void mw_add_rmsnorm_bwd_cuda(const mw_kctx *k, float *da, float *db, float *dgamma,
                                        const float *ds, const float *dy, const float *s,
                                        const float *stat, const float *gamma, int rows, int D,
                                        float offset)
{
    mw_rmsnorm_bwd_cuda(k, NULL, dgamma, dy, s, stat, gamma, rows, D, offset);
    add_norm_dx(k, "mw_add_rmsnorm_bwd_cuda", da, db, ds, dy, s, stat, gamma, rows, D, 1, offset);
}

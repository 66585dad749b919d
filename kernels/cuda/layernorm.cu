/* LayerNormalization's CUDA twins (kernels/kernel_list.h: layernorm_fwd, layernorm_bwd). The
 * forward and the input's gradient one warp per row: the reference's arithmetic
 * (kernels/layernorm_rules.h) with each row's double sums split over the 32 lanes and joined by
 * an xor butterfly (the same bits in every lane and on every run; against the reference's
 * sequential double sums they differ by far below float32's rounding, so the float32 mean and
 * statistics match it but for a rare last bit). The parameters' gradients as deterministic
 * two-stage column sums over row chunks (colsum.cuh). The residual Add fused with the norm
 * (add_layernorm_*): the same warp rows over the sum, each lane summing its own features first,
 * and the input gradient plus ds into both Add inputs' gradients; so the unfused twins' bits. */
#include "kernels/cuda/colsum.cuh"

extern "C" {
#include "kernels/twins.h"
}

/* Lane `lane` of a warp's share of one row: ln_row_fwd's sums, in D / 32 strided parts. */
__device__ static void ln_warp_fwd(float *y, float *mean, float *rstd, const float *x,
                                   const float *gamma, const float *beta, int D, float eps,
                                   int lane)
{
    double s = 0, v = 0;
    for (int j = lane; j < D; j += 32)
        s += x[j];
    const float m = (float)(mw_warp_sum(s) / D);
    for (int j = lane; j < D; j += 32)
        v += ((double)x[j] - m) * ((double)x[j] - m);
    const float r = 1.0f / sqrtf((float)(mw_warp_sum(v) / D) + eps);
    if (lane == 0)
        *mean = m, *rstd = r;
    for (int j = lane; j < D; j += 32) {
        const float inv = gamma ? r * gamma[j] : r;
        y[j] = x[j] * inv + ((beta ? beta[j] : 0.0f) - m * inv);
    }
}

/* The same for ln_row_dx; or (dx NULL), fused with the residual Add before the norm, as
 * ln_row_dx_add: t = ds + the same expression into da and db (NULL: none). */
__device__ static void ln_warp_dx(float *dx, float *da, float *db, const float *ds, const float *dy,
                                  const float *x, const float *gamma, float mean, float rstd, int D,
                                  int lane)
{
    double sg = 0, sgx = 0;
    for (int j = lane; j < D; j += 32) {
        const float xh = (x[j] - mean) * rstd, g = gamma ? dy[j] * gamma[j] : dy[j];
        sg += g, sgx += (double)g * xh;
    }
    const float mg = (float)(mw_warp_sum(sg) / D), mgx = (float)(mw_warp_sum(sgx) / D);
    for (int j = lane; j < D; j += 32) {
        const float xh = (x[j] - mean) * rstd, g = gamma ? dy[j] * gamma[j] : dy[j];
        const float v = rstd * (g - mg - xh * mgx);
        mw_norm_dx(dx, ds, da, db, j, v);
    }
}

static __global__ void layernorm_fwd_kernel(float *y, float *stat, const float *x,
                                            const float *gamma, const float *beta, int rows, int D,
                                            float eps)
{
    const int lane = threadIdx.x % 32, warps = gridDim.x * CS_ROW_WARPS;
    for (int r = blockIdx.x * CS_ROW_WARPS + threadIdx.x / 32; r < rows; r += warps)
        ln_warp_fwd(y + (size_t)r * D, stat + r, stat + rows + r, x + (size_t)r * D, gamma, beta, D,
                    eps, lane);
}

static __global__ void layernorm_dx_kernel(float *dx, const float *dy, const float *x,
                                           const float *stat, const float *gamma, int rows, int D)
{
    const int lane = threadIdx.x % 32, warps = gridDim.x * CS_ROW_WARPS;
    for (int r = blockIdx.x * CS_ROW_WARPS + threadIdx.x / 32; r < rows; r += warps)
        ln_warp_dx(dx + (size_t)r * D, NULL, NULL, NULL, dy + (size_t)r * D, x + (size_t)r * D,
                   gamma, stat[r], stat[rows + r], D, lane);
}

/* gamma's term dy xhat and beta's dy, as the reference's column loop. */
struct ln_terms {
    const float *dy, *x, *stat;
    int rows, D;
    __device__ void operator()(int r, int c, float &a, float &b) const
    {
        const float d = dy[(size_t)r * D + c];
        a += d * ((x[(size_t)r * D + c] - stat[r]) * stat[rows + r]);
        b += d;
    }
};

extern "C" void mw_layernorm_fwd_cuda(const mw_kctx *k, float *y, float *stat, const float *x,
                                      const float *gamma, const float *beta, int rows, int D,
                                      float eps)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_layernorm_fwd_cuda");
    if (!d || rows <= 0)
        return;
    layernorm_fwd_kernel<<<cs_row_grid(rows), 32 * CS_ROW_WARPS, 0, d->stream>>>(
        y, stat, x, gamma, beta, rows, D, eps);
    MW_LAUNCHED_K(d, "layernorm_fwd_kernel");
    mw_cuda_end(d, "mw_layernorm_fwd_cuda");
}

extern "C" void mw_layernorm_bwd_cuda(const mw_kctx *k, float *dx, float *dgamma, float *dbeta,
                                      const float *dy, const float *x, const float *stat,
                                      const float *gamma, int rows, int D)
{
    const char *op = "mw_layernorm_bwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || rows <= 0 || D <= 0)
        return;
    const ln_terms f = {dy, x, stat, rows, D};
    if ((dgamma || dbeta) && !cs_sums<2>(d, k, op, f, rows, D, dgamma, dbeta))
        return;
    if (dx) {
        layernorm_dx_kernel<<<cs_row_grid(rows), 32 * CS_ROW_WARPS, 0, d->stream>>>(dx, dy, x, stat,
                                                                                    gamma, rows, D);
        MW_LAUNCHED_K(d, "layernorm_dx_kernel");
    }
    mw_cuda_end(d, op);
}

static __global__ void add_layernorm_fwd_kernel(float *s, float *y, float *stat, const float *a,
                                                const float *b, const float *gamma,
                                                const float *beta, int rows, int D, float eps)
{
    const int lane = threadIdx.x % 32, warps = gridDim.x * CS_ROW_WARPS;
    for (int r = blockIdx.x * CS_ROW_WARPS + threadIdx.x / 32; r < rows; r += warps) {
        const size_t o = (size_t)r * D;
        for (int j = lane; j < D; j += 32) /* each lane reads back only its own features */
            s[o + j] = (0.0f + a[o + j]) + b[o + j];
        ln_warp_fwd(y + o, stat + r, stat + rows + r, s + o, gamma, beta, D, eps, lane);
    }
}

static __global__ void add_layernorm_dx_kernel(float *da, float *db, const float *ds,
                                               const float *dy, const float *x, const float *stat,
                                               const float *gamma, int rows, int D)
{
    const int lane = threadIdx.x % 32, warps = gridDim.x * CS_ROW_WARPS;
    for (int r = blockIdx.x * CS_ROW_WARPS + threadIdx.x / 32; r < rows; r += warps) {
        const size_t o = (size_t)r * D;
        ln_warp_dx(NULL, da ? da + o : NULL, db ? db + o : NULL, ds + o, dy + o, x + o, gamma,
                   stat[r], stat[rows + r], D, lane);
    }
}

extern "C" void mw_add_layernorm_fwd_cuda(const mw_kctx *k, float *s, float *y, float *stat,
                                          const float *a, const float *b, const float *gamma,
                                          const float *beta, int rows, int D, float eps)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_add_layernorm_fwd_cuda");
    if (!d || rows <= 0)
        return;
    add_layernorm_fwd_kernel<<<cs_row_grid(rows), 32 * CS_ROW_WARPS, 0, d->stream>>>(
        s, y, stat, a, b, gamma, beta, rows, D, eps);
    MW_LAUNCHED_K(d, "add_layernorm_fwd_kernel");
    mw_cuda_end(d, "mw_add_layernorm_fwd_cuda");
}

extern "C" void mw_add_layernorm_bwd_cuda(const mw_kctx *k, float *da, float *db, float *dgamma,
                                          float *dbeta, const float *ds, const float *dy,
                                          const float *s, const float *stat, const float *gamma,
                                          int rows, int D)
{
    const char *op = "mw_add_layernorm_bwd_cuda";
    mw_layernorm_bwd_cuda(k, NULL, dgamma, dbeta, dy, s, stat, gamma, rows, D);
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || rows <= 0 || D <= 0)
        return;
    add_layernorm_dx_kernel<<<cs_row_grid(rows), 32 * CS_ROW_WARPS, 0, d->stream>>>(
        da, db, ds, dy, s, stat, gamma, rows, D);
    MW_LAUNCHED_K(d, "add_layernorm_dx_kernel");
    mw_cuda_end(d, op);
}

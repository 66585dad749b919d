/* RMS normalization's CUDA twins (kernels/kernel_list.h: rmsnorm_fwd, rmsnorm_bwd). The forward
 * and the input's gradient one warp per row: the reference's arithmetic
 * (kernels/rmsnorm_rules.h) with each row's double sums split over the 32 lanes and joined by an
 * xor butterfly (the same bits on every run; within far below float32's rounding of the
 * reference's sequential double sums). gamma's gradient as deterministic two-stage column sums
 * over row chunks (colsum.cuh). The residual Add fused with the norm (add_rmsnorm_*): the same
 * warp rows over the sum, each lane summing its own features first, and the input gradient plus
 * ds into both Add inputs' gradients; so the unfused twins' bits. */
#include "kernels/cuda/colsum.cuh"

extern "C" {
#include "kernels/twins.h"
}

/* Lane `lane` of a warp's share of one row: rms_row_fwd's sums, in D / 32 strided parts. */
__device__ static void rms_warp_fwd(float *y, float *mean, float *r, const float *x,
                                    const float *gamma, int D, float eps, int centered,
                                    float offset, int lane)
{
    double s = 0, v = 0;
    for (int j = lane; centered && j < D; j += 32)
        s += x[j];
    const float m = centered ? (float)(mw_warp_sum(s) / D) : 0.0f;
    for (int j = lane; j < D; j += 32)
        v += ((double)x[j] - m) * ((double)x[j] - m);
    const float rr = 1.0f / sqrtf((float)(mw_warp_sum(v) / D) + eps);
    if (lane == 0)
        *mean = m, *r = rr;
    for (int j = lane; j < D; j += 32)
        y[j] = (x[j] * rr) * (gamma[j] + offset);
}

/* The same for rms_row_dx; or (dx NULL), fused with the residual Add before the norm, as
 * rms_row_dx_add: t = ds + the same expression into da and db (NULL: none). */
__device__ static void rms_warp_dx(float *dx, float *da, float *db, const float *ds,
                                   const float *dy, const float *x, const float *gamma, float mean,
                                   float r, int D, float offset, int lane)
{
    double sgx = 0;
    for (int j = lane; j < D; j += 32)
        sgx += (double)(dy[j] * (gamma[j] + offset)) * x[j];
    const float k = r * r * (float)(mw_warp_sum(sgx) / D);
    for (int j = lane; j < D; j += 32) {
        const float v = r * (dy[j] * (gamma[j] + offset) - (x[j] - mean) * k);
        mw_norm_dx(dx, ds, da, db, j, v);
    }
}

static __global__ void rmsnorm_fwd_kernel(float *y, float *stat, const float *x, const float *gamma,
                                          int rows, int D, float eps, int centered, float offset)
{
    const int lane = threadIdx.x % 32, warps = gridDim.x * CS_ROW_WARPS;
    for (int r = blockIdx.x * CS_ROW_WARPS + threadIdx.x / 32; r < rows; r += warps)
        rms_warp_fwd(y + (size_t)r * D, stat + r, stat + rows + r, x + (size_t)r * D, gamma, D, eps,
                     centered, offset, lane);
}

static __global__ void rmsnorm_dx_kernel(float *dx, const float *dy, const float *x,
                                         const float *stat, const float *gamma, int rows, int D,
                                         float offset)
{
    const int lane = threadIdx.x % 32, warps = gridDim.x * CS_ROW_WARPS;
    for (int r = blockIdx.x * CS_ROW_WARPS + threadIdx.x / 32; r < rows; r += warps)
        rms_warp_dx(dx + (size_t)r * D, NULL, NULL, NULL, dy + (size_t)r * D, x + (size_t)r * D,
                    gamma, stat[r], stat[rows + r], D, offset, lane);
}

/* gamma's term dy (x r), as the reference's column loop. */
struct rms_terms {
    const float *dy, *x, *stat;
    int rows, D;
    __device__ void operator()(int r, int c, float &a, float &b) const
    {
        (void)b;
        a += dy[(size_t)r * D + c] * (x[(size_t)r * D + c] * stat[rows + r]);
    }
};

extern "C" void mw_rmsnorm_fwd_cuda(const mw_kctx *k, float *y, float *stat, const float *x,
                                    const float *gamma, int rows, int D, float eps, int centered,
                                    float offset)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_rmsnorm_fwd_cuda");
    if (!d || rows <= 0)
        return;
    rmsnorm_fwd_kernel<<<cs_row_grid(rows), 32 * CS_ROW_WARPS, 0, d->stream>>>(
        y, stat, x, gamma, rows, D, eps, centered, offset);
    MW_LAUNCHED_K(d, "rmsnorm_fwd_kernel");
    mw_cuda_end(d, "mw_rmsnorm_fwd_cuda");
}

extern "C" void mw_rmsnorm_bwd_cuda(const mw_kctx *k, float *dx, float *dgamma, const float *dy,
                                    const float *x, const float *stat, const float *gamma, int rows,
                                    int D, float offset)
{
    const char *op = "mw_rmsnorm_bwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || rows <= 0 || D <= 0)
        return;
    const rms_terms f = {dy, x, stat, rows, D};
    if (dgamma && !cs_sums<1>(d, k, op, f, rows, D, dgamma, NULL))
        return;
    if (dx) {
        rmsnorm_dx_kernel<<<cs_row_grid(rows), 32 * CS_ROW_WARPS, 0, d->stream>>>(
            dx, dy, x, stat, gamma, rows, D, offset);
        MW_LAUNCHED_K(d, "rmsnorm_dx_kernel");
    }
    mw_cuda_end(d, op);
}

static __global__ void add_rmsnorm_fwd_kernel(float *s, float *y, float *stat, const float *a,
                                              const float *b, const float *gamma, int rows, int D,
                                              float eps, int centered, float offset)
{
    const int lane = threadIdx.x % 32, warps = gridDim.x * CS_ROW_WARPS;
    for (int r = blockIdx.x * CS_ROW_WARPS + threadIdx.x / 32; r < rows; r += warps) {
        const size_t o = (size_t)r * D;
        for (int j = lane; j < D; j += 32) /* each lane reads back only its own features */
            s[o + j] = (0.0f + a[o + j]) + b[o + j];
        rms_warp_fwd(y + o, stat + r, stat + rows + r, s + o, gamma, D, eps, centered, offset,
                     lane);
    }
}

static __global__ void add_rmsnorm_dx_kernel(float *da, float *db, const float *ds, const float *dy,
                                             const float *x, const float *stat, const float *gamma,
                                             int rows, int D, float offset)
{
    const int lane = threadIdx.x % 32, warps = gridDim.x * CS_ROW_WARPS;
    for (int r = blockIdx.x * CS_ROW_WARPS + threadIdx.x / 32; r < rows; r += warps) {
        const size_t o = (size_t)r * D;
        rms_warp_dx(NULL, da ? da + o : NULL, db ? db + o : NULL, ds + o, dy + o, x + o, gamma,
                    stat[r], stat[rows + r], D, offset, lane);
    }
}

extern "C" void mw_add_rmsnorm_fwd_cuda(const mw_kctx *k, float *s, float *y, float *stat,
                                        const float *a, const float *b, const float *gamma,
                                        int rows, int D, float eps, int centered, float offset)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_add_rmsnorm_fwd_cuda");
    if (!d || rows <= 0)
        return;
    add_rmsnorm_fwd_kernel<<<cs_row_grid(rows), 32 * CS_ROW_WARPS, 0, d->stream>>>(
        s, y, stat, a, b, gamma, rows, D, eps, centered, offset);
    MW_LAUNCHED_K(d, "add_rmsnorm_fwd_kernel");
    mw_cuda_end(d, "mw_add_rmsnorm_fwd_cuda");
}

extern "C" void mw_add_rmsnorm_bwd_cuda(const mw_kctx *k, float *da, float *db, float *dgamma,
                                        const float *ds, const float *dy, const float *s,
                                        const float *stat, const float *gamma, int rows, int D,
                                        float offset)
{
    const char *op = "mw_add_rmsnorm_bwd_cuda";
    mw_rmsnorm_bwd_cuda(k, NULL, dgamma, dy, s, stat, gamma, rows, D, offset);
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || rows <= 0 || D <= 0)
        return;
    add_rmsnorm_dx_kernel<<<cs_row_grid(rows), 32 * CS_ROW_WARPS, 0, d->stream>>>(
        da, db, ds, dy, s, stat, gamma, rows, D, offset);
    MW_LAUNCHED_K(d, "add_rmsnorm_dx_kernel");
    mw_cuda_end(d, op);
}

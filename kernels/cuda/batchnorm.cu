/* CUDA twins of BatchNormalization (kernels/batchnorm.h; the spec is kernels/ref/batchnorm.c).
 *
 * The per-channel sums (channels-last: N*H*W rows of C floats) run in two stages. A block per
 * channel striding down the rows would have each warp read floats C apart (a small part of
 * each memory transaction) and run only C blocks (16 to 64 in a typical CNN, against 100+
 * SMs). Instead stage 1 gives each block 32 channels and one chunk of rows, so a warp reads
 * 32 consecutive floats of a row and the grid is ceil(C / 32) x chunks; each block writes its
 * chunk's partial sums to the context's scratch. Stage 2, one thread per channel, adds the
 * partials in ascending chunk order and computes the statistics or the gradients. The sums
 * are in double (as the reference) and in a fixed order, and the number of chunks depends
 * only on the shape, so the results are the same bits on every run and device. The outputs
 * (y, dx) are then element-wise. Products that the reference rounds twice use __fmul_rn /
 * __fadd_rn, so nvcc's contraction into one fma cannot make them differ from the host. */
#include <math.h>

#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/batchnorm.h"
#include "kernels/twins.h"
}

/* The per-channel sums run in two fixed-order stages (the file's head says why).
 *
 * Stage 1, bn_part_kernel: block (BN_TX, BN_TY) of grid (ceil(C / BN_TX), chunks). Thread (tx, ty)
 * of block (bx, by) owns channel c = bx BN_TX + tx and sums rows r0 + ty, r0 + ty + BN_TY, ...
 * of chunk by (rows [r0, r0 + chunk_rows)), so a warp reads BN_TX consecutive floats of a row;
 * then thread ty = 0 adds the BN_TY sums in ascending ty and writes the chunk's partial.
 * Stage 2, one thread per channel: the partials in ascending chunk order, then what the sums
 * are for (statistics, gradients). Every sum is in double, as in the reference.
 *
 * The scratch of one call, k->ws as doubles: part[q][chunk][c] (q < 2: one or two sums per
 * element), then tot[q][c] (the totals the per-element kernels read; the forward's mean). */
#define BN_TX 32          /* channels per stage-1 block: a warp reads 32 consecutive floats */
#define BN_TY 8           /* rows a stage-1 block reads at once */
#define BN_CHUNK_ROWS 128 /* rows per chunk, unless that gives too many chunks */
#define BN_MAX_CHUNKS 256 /* grid.y of stage 1; stage 2 adds at most this many partials */

/* What stage 1 sums per element, in the reference's double expressions. */
enum bn_terms {
    BN_X,      /* sum x: the training forward's first pass */
    BN_DEV2,   /* sum (x - mu)^2 with the channel's mean mu in double: its second pass */
    BN_X_X2,   /* sum x and sum x^2: bn_sums' forward */
    BN_DY_DYXH /* sum dy and sum dy xhat, xhat = (x - mean) invstd: the backward, bn_sums' too */
};

/* Stage 1's input: x (and dy) of rows x C in chunks of chunk_rows rows (the last chunks may be
 * short or empty). */
struct bn_src {
    const float *x, *dy, *mean, *invstd; /* dy, mean, invstd: BN_DY_DYXH only */
    const double *mu;                    /* BN_DEV2 only */
    size_t rows, chunk_rows;
    int C, chunks;
    /* BN_DY_DYXH with a ReLU fused after the forward (relu): dy masked by 0 < v < M, v the
     * forward's output from gamma and beta (NULL: 1, 0) */
    const float *gamma, *beta;
    float M;
    int relu;
};

/* The forward's output before any clip, (x - mean) invstd gamma + beta rounded as the reference
 * rounds it (bn_out): no fma. */
__device__ static inline float bn_out(float x, const float *mean, const float *invstd,
                                      const float *gamma, const float *beta, size_t c)
{
    const float g = gamma ? gamma[c] : 1.0f, b = beta ? beta[c] : 0.0f;
    return __fadd_rn(__fmul_rn(__fmul_rn(x - mean[c], invstd[c]), g), b);
}

/* The gradient the backward reads at element i of channel c: dy, or with a ReLU fused after
 * the forward, dy where 0 < v < M, else 0 (the reference's bn_dy). */
__device__ static inline float bn_dy(const float *dy, const float *x, const float *mean,
                                     const float *invstd, const float *gamma, const float *beta,
                                     float M, int relu, size_t i, size_t c)
{
    if (!relu)
        return dy[i];
    const float v = bn_out(x[i], mean, invstd, gamma, beta, c);
    return v > 0.0f && v < M ? dy[i] : 0.0f;
}

template <int T>
__device__ static inline void bn_add(double &a, double &b, const bn_src &s, size_t i, size_t c,
                                     double m, double inv)
{
    if (T == BN_X) {
        a += s.x[i];
    } else if (T == BN_DEV2) {
        const double dv = s.x[i] - m;
        a += dv * dv;
    } else if (T == BN_X_X2) {
        const double v = s.x[i];
        a += v, b += v * v;
    } else {
        const double xh = ((double)s.x[i] - m) * inv;
        const float d = bn_dy(s.dy, s.x, s.mean, s.invstd, s.gamma, s.beta, s.M, s.relu, i, c);
        a += d, b += d * xh;
    }
}

/* Stage 1: part[q][blockIdx.y][c] = chunk blockIdx.y's sum q of channel c. */
template <int T> static __global__ void bn_part_kernel(double *part, const bn_src s)
{
    __shared__ double sh[2][BN_TY][BN_TX];
    const unsigned tx = threadIdx.x, ty = threadIdx.y;
    const size_t c = (size_t)blockIdx.x * BN_TX + tx;
    const bool mine = c < (size_t)s.C; /* the last tile's spare lanes still meet the barrier */
    double a = 0.0, b = 0.0;
    if (mine) {
        const double m = T == BN_DEV2 ? s.mu[c] : T == BN_DY_DYXH ? (double)s.mean[c] : 0.0;
        const double inv = T == BN_DY_DYXH ? (double)s.invstd[c] : 0.0;
        const size_t r0 = blockIdx.y * s.chunk_rows, end = r0 + s.chunk_rows;
        const size_t r1 = end < s.rows ? end : s.rows;
        for (size_t r = r0 + ty; r < r1; r += BN_TY)
            bn_add<T>(a, b, s, r * s.C + c, c, m, inv);
    }
    sh[0][ty][tx] = a, sh[1][ty][tx] = b;
    __syncthreads();
    if (ty != 0 || !mine)
        return;
    a = b = 0.0;
    for (int j = 0; j < BN_TY; j++) /* ascending ty: a fixed order */
        a += sh[0][j][tx], b += sh[1][j][tx];
    part[blockIdx.y * (size_t)s.C + c] = a;
    if (T == BN_X_X2 || T == BN_DY_DYXH)
        part[((size_t)s.chunks + blockIdx.y) * s.C + c] = b;
}

/* Channel c's total of one quantity's partials p[chunk][c], in ascending chunk order. */
__device__ static double bn_chunk_sum(const double *p, int chunks, int C, size_t c)
{
    double a = 0.0;
#pragma unroll 8 /* the loads are independent: let several be in flight */
    for (int ch = 0; ch < chunks; ch++)
        a += p[(size_t)ch * C + c];
    return a;
}

/* Stage 2 of the forward's first pass: mu = sum x / rows (0 for no rows). */
static __global__ void bn_mean_kernel(double *mu, const double *part, size_t rows, int C,
                                      int chunks)
{
    MW_GRID_STRIDE(c, (size_t)C)
    {
        const double a = bn_chunk_sum(part, chunks, C, c);
        mu[c] = rows ? a / (double)rows : 0.0;
    }
}

/* Stage 2 of its second pass: the statistics, as the reference rounds them. */
static __global__ void bn_var_kernel(float *mean, float *var, float *invstd, const double *mu,
                                     const double *part, size_t rows, int C, int chunks, float eps)
{
    MW_GRID_STRIDE(c, (size_t)C)
    {
        const double q = bn_chunk_sum(part, chunks, C, c);
        const float v = (float)(rows ? q / (double)rows : 0.0);
        mean[c] = (float)mu[c];
        var[c] = v;
        invstd[c] = (float)(1.0 / sqrt((double)v + (double)eps));
    }
}

/* Stage 2 of two sums: tot[c], tot[C + c] = the totals; dbeta[c] += the first, dgamma[c] += the
 * second (either NULL: skipped). */
static __global__ void bn_tot_kernel(double *tot, float *dgamma, float *dbeta, const double *part,
                                     int C, int chunks)
{
    MW_GRID_STRIDE(c, (size_t)C)
    {
        const double a = bn_chunk_sum(part, chunks, C, c);
        const double b = bn_chunk_sum(part + (size_t)chunks * C, chunks, C, c);
        tot[c] = a, tot[C + c] = b;
        if (dgamma)
            dgamma[c] += (float)b;
        if (dbeta)
            dbeta[c] += (float)a;
    }
}

/* y = (x - mean) invstd gamma + beta, one thread per element (the training forward's output);
 * with a ReLU fused after it (relu), min(max(y, 0), M). */
static __global__ void bn_norm_kernel(float *y, const float *x, const float *gamma,
                                      const float *beta, const float *mean, const float *invstd,
                                      size_t count, int C, int relu, float M)
{
    MW_GRID_STRIDE(i, count)
    {
        const size_t c = i % (size_t)C;
        float v = bn_out(x[i], mean, invstd, gamma, beta, c);
        if (relu) {
            v = v > 0.0f ? v : 0.0f;
            v = v < M ? v : M;
        }
        y[i] = v;
    }
}

static __global__ void bn_fwd_infer_kernel(float *y, const float *x, const float *gamma,
                                           const float *beta, const float *mean, const float *var,
                                           size_t count, int C, float eps)
{
    MW_GRID_STRIDE(i, count)
    {
        const int c = (int)(i % (size_t)C);
        const float g = gamma ? gamma[c] : 1.0f, b = beta ? beta[c] : 0.0f;
        const float inv = (float)(1.0 / sqrt((double)var[c] + (double)eps));
        y[i] = (x[i] - mean[c]) * inv * g + b;
    }
}

/* dx += gamma invstd / M (M dy - s[c] - xhat s[C + c]), xhat = (x - mean) invstd, one thread per
 * element: the backward's (s = its own sums, M = rows) and the synchronized backward's; dy masked
 * by a ReLU of max_value R fused after the forward when relu (beta: the forward's). */
static __global__ void bn_sync_bwd_kernel(float *dx, const float *dy, const float *x,
                                          const float *mean, const float *invstd,
                                          const float *gamma, const double *s, double M,
                                          size_t count, int C, int set_dx, const float *beta,
                                          float R, int relu)
{
    MW_GRID_STRIDE(i, count)
    {
        const size_t c = i % (size_t)C;
        const double f = (gamma ? gamma[c] : 1.0) * invstd[c] / M;
        const double xh = ((double)x[i] - mean[c]) * invstd[c];
        const float g = bn_dy(dy, x, mean, invstd, gamma, beta, R, relu, i, c);
        const float d = (float)(f * (M * g - s[c] - xh * s[C + c]));
        dx[i] = set_dx ? d : dx[i] + d;
    }
}

/* Chunks for rows x C (C > 0). Only rows and C decide it, never k->ws_count, so the order of
 * the sums, and with it every bit of the results, is the same on every device and run: one per
 * BN_CHUNK_ROWS rows, at most BN_MAX_CHUNKS, at most as many as leave room for the totals in
 * MW_CUDA_WS_DEFAULT floats of scratch; at least 1. */
static int bn_chunks(size_t rows, int C)
{
    const size_t slots = MW_CUDA_WS_DEFAULT * sizeof(float) / (2 * sizeof(double) * (size_t)C);
    size_t n = (rows + BN_CHUNK_ROWS - 1) / BN_CHUNK_ROWS, cap = slots > 1 ? slots - 1 : 1;
    cap = cap < BN_MAX_CHUNKS ? cap : BN_MAX_CHUNKS;
    n = n < cap ? n : cap;
    return n > 0 ? (int)n : 1;
}

/* Fill s's shape for rows x C (C > 0) and return the call's scratch (part; tot follows at
 * part + 2 chunks C), or NULL with the failure recorded on d when k's scratch is too small. */
static double *bn_setup(mw_cuda_dev *d, const mw_kctx *k, const char *op, bn_src *s, size_t rows,
                        int C)
{
    s->rows = rows, s->C = C, s->chunks = bn_chunks(rows, C);
    s->chunk_rows = (rows + (size_t)s->chunks - 1) / (size_t)s->chunks;
    const size_t need = 2 * ((size_t)s->chunks + 1) * (size_t)C * (sizeof(double) / sizeof(float));
    const size_t have = k->ws ? k->ws_count : 0;
    if (have < need) {
        mw_cuda_note(d, mw_err(MW_EINVAL,
                               "%s: device workspace %zu floats, %d channels need %zu "
                               "(mw_cuda_ws_reserve)",
                               op, have, C, need));
        return NULL;
    }
    return (double *)k->ws; /* cudaMalloc'ed: aligned for double */
}

/* Where the totals follow the partials in the scratch. */
static double *bn_tot(double *part, const bn_src &s)
{
    return part + 2 * (size_t)s.chunks * (size_t)s.C;
}

/* Enqueue stage 1 of sums T over s into part; false (the failure recorded) if the launch failed. */
template <int T> static bool bn_part(mw_cuda_dev *d, double *part, const bn_src &s)
{
    const dim3 grid((unsigned)(((size_t)s.C + BN_TX - 1) / BN_TX), (unsigned)s.chunks);
    bn_part_kernel<T><<<grid, dim3(BN_TX, BN_TY), 0, d->stream>>>(part, s);
    return mw_cuda_note(d, mw_cuda_launched_("bn_part_kernel", __FILE__, __LINE__));
}

/* The training forward, with a ReLU of max_value M fused after it when relu. */
static void fwd_train(const mw_kctx *k, const char *op, float *y, float *mean, float *var,
                      float *invstd, const float *x, const float *gamma, const float *beta,
                      size_t rows, int C, float eps, int relu, float M)
{
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || C <= 0)
        return;
    bn_src s = {x, NULL, NULL, NULL, NULL, 0, 0, 0, 0};
    double *part = bn_setup(d, k, op, &s, rows, C);
    if (!part || !bn_part<BN_X>(d, part, s))
        return;
    double *mu = bn_tot(part, s);
    bn_mean_kernel<<<mw_cuda_grid((size_t)C), MW_CUDA_BLOCK, 0, d->stream>>>(mu, part, rows, C,
                                                                             s.chunks);
    MW_LAUNCHED_K(d, "bn_mean_kernel");
    s.mu = mu; /* two passes, as the reference: the squares of x - mean, not sum x^2 */
    if (!bn_part<BN_DEV2>(d, part, s))
        return;
    bn_var_kernel<<<mw_cuda_grid((size_t)C), MW_CUDA_BLOCK, 0, d->stream>>>(
        mean, var, invstd, mu, part, rows, C, s.chunks, eps);
    MW_LAUNCHED_K(d, "bn_var_kernel");
    const size_t count = rows * (size_t)C;
    if (count)
        bn_norm_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(
            y, x, gamma, beta, mean, invstd, count, C, relu, M);
    MW_LAUNCHED_K(d, "bn_norm_kernel");
    mw_cuda_end(d, op);
}

extern "C" void mw_bn_fwd_train_cuda(const mw_kctx *k, float *y, float *mean, float *var,
                                     float *invstd, const float *x, const float *gamma,
                                     const float *beta, size_t rows, int C, float eps)
{
    fwd_train(k, "mw_bn_fwd_train_cuda", y, mean, var, invstd, x, gamma, beta, rows, C, eps, 0,
              0.0f);
}

extern "C" void mw_bn_relu_fwd_train_cuda(const mw_kctx *k, float *y, float *mean, float *var,
                                          float *invstd, const float *x, const float *gamma,
                                          const float *beta, size_t rows, int C, float eps,
                                          float max_value)
{
    fwd_train(k, "mw_bn_relu_fwd_train_cuda", y, mean, var, invstd, x, gamma, beta, rows, C, eps, 1,
              max_value);
}

extern "C" void mw_bn_fwd_infer_cuda(const mw_kctx *k, float *y, const float *x, const float *gamma,
                                     const float *beta, const float *mean, const float *var,
                                     size_t rows, int C, float eps)
{
    const size_t count = rows * (size_t)(C > 0 ? C : 0);
    MW_EW_LAUNCH("mw_bn_fwd_infer_cuda", bn_fwd_infer_kernel, count, y, x, gamma, beta, mean, var,
                 count, C, eps);
}

/* The backward, with dy masked by a ReLU of max_value M fused after the forward when relu. */
static void bwd(const mw_kctx *k, const char *op, float *dx, float *dgamma, float *dbeta,
                const float *dy, const float *x, const float *mean, const float *invstd,
                const float *gamma, const float *beta, size_t rows, int C, int set_dx, int relu,
                float M)
{
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || C <= 0)
        return;
    bn_src s = {x, dy, mean, invstd, NULL, 0, 0, 0, 0, gamma, beta, M, relu};
    double *part = bn_setup(d, k, op, &s, rows, C);
    if (!part || !bn_part<BN_DY_DYXH>(d, part, s))
        return;
    double *tot = bn_tot(part, s);
    bn_tot_kernel<<<mw_cuda_grid((size_t)C), MW_CUDA_BLOCK, 0, d->stream>>>(tot, dgamma, dbeta,
                                                                            part, C, s.chunks);
    MW_LAUNCHED_K(d, "bn_tot_kernel");
    const size_t count = dx ? rows * (size_t)C : 0;
    if (count)
        bn_sync_bwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(
            dx, dy, x, mean, invstd, gamma, tot, (double)rows, count, C, set_dx, beta, M, relu);
    MW_LAUNCHED_K(d, "bn_sync_bwd_kernel");
    mw_cuda_end(d, op);
}

extern "C" void mw_bn_bwd_cuda(const mw_kctx *k, float *dx, float *dgamma, float *dbeta,
                               const float *dy, const float *x, const float *mean,
                               const float *invstd, const float *gamma, size_t rows, int C,
                               int set_dx)
{
    bwd(k, "mw_bn_bwd_cuda", dx, dgamma, dbeta, dy, x, mean, invstd, gamma, NULL, rows, C, set_dx,
        0, 0.0f);
}

extern "C" void mw_bn_relu_bwd_cuda(const mw_kctx *k, float *dx, float *dgamma, float *dbeta,
                                    const float *dy, const float *x, const float *mean,
                                    const float *invstd, const float *gamma, const float *beta,
                                    size_t rows, int C, float max_value, int set_dx)
{
    bwd(k, "mw_bn_relu_bwd_cuda", dx, dgamma, dbeta, dy, x, mean, invstd, gamma, beta, rows, C,
        set_dx, 1, max_value);
}

/* Synchronized BatchNormalization (kernels.h): a slice's sums in the two stages above (the
 * forward's x and x^2 in one pass, as the reference); the statistics from the summed sums, one
 * thread per channel; the forward's normalization is bn_fwd_infer_kernel's; the backward's dx
 * is bn_sync_bwd_kernel's. */
static __global__ void bn_sync_stats_kernel(float *mean, float *var, float *invstd, const double *s,
                                            double M, int C, float eps)
{
    MW_GRID_STRIDE(c, (size_t)C)
    {
        const double mu = M > 0 ? s[c] / M : 0.0, v = M > 0 ? s[C + c] / M - mu * mu : 0.0;
        mean[c] = (float)mu;
        var[c] = (float)(v > 0.0 ? v : 0.0);
        invstd[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps));
    }
}

extern "C" void mw_bn_sums_cuda(const mw_kctx *k, double *s, const float *x, const float *dy,
                                const float *mean, const float *invstd, float *dgamma, float *dbeta,
                                size_t rows, int C)
{
    const char *op = "mw_bn_sums_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || C <= 0)
        return;
    bn_src src = {x, dy, mean, invstd, NULL, 0, 0, 0, 0};
    double *part = bn_setup(d, k, op, &src, rows, C);
    if (!part || !(dy ? bn_part<BN_DY_DYXH>(d, part, src) : bn_part<BN_X_X2>(d, part, src)))
        return;
    bn_tot_kernel<<<mw_cuda_grid((size_t)C), MW_CUDA_BLOCK, 0, d->stream>>>(
        s, dy ? dgamma : NULL, dy ? dbeta : NULL, part, C, src.chunks);
    MW_LAUNCHED_K(d, "bn_tot_kernel");
    mw_cuda_end(d, op);
}

extern "C" void mw_bn_sync_fwd_cuda(const mw_kctx *k, float *y, float *mean, float *var,
                                    float *invstd, const float *x, const float *gamma,
                                    const float *beta, const double *s, double M, size_t rows,
                                    int C, float eps)
{
    const char *op = "mw_bn_sync_fwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || C <= 0)
        return;
    bn_sync_stats_kernel<<<mw_cuda_grid((size_t)C), MW_CUDA_BLOCK, 0, d->stream>>>(
        mean, var, invstd, s, M, C, eps);
    MW_LAUNCHED_K(d, "bn_sync_stats_kernel");
    const size_t count = rows * (size_t)C;
    if (count)
        bn_fwd_infer_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(
            y, x, gamma, beta, mean, var, count, C, eps);
    MW_LAUNCHED_K(d, "bn_fwd_infer_kernel");
    mw_cuda_end(d, op);
}

extern "C" void mw_bn_sync_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, const float *x,
                                    const float *mean, const float *invstd, const float *gamma,
                                    const double *s, double M, size_t rows, int C)
{
    const size_t count = dx && M > 0 ? rows * (size_t)(C > 0 ? C : 0) : 0;
    MW_EW_LAUNCH("mw_bn_sync_bwd_cuda", bn_sync_bwd_kernel, count, dx, dy, x, mean, invstd, gamma,
                 s, M, count, C, 0, (const float *)NULL, 0.0f, 0);
}

/* The moving statistics (worker/model/model.h): the reference's float expressions, rounded as the
 * host rounds them. */
static __global__ void bn_stats_acc_kernel(float *g, const float *st, size_t count, float w)
{
    MW_GRID_STRIDE(i, count)
    g[i] = __fadd_rn(g[i], __fmul_rn(w, st[i]));
}

static __global__ void bn_stats_update_kernel(float *p, float *g, size_t count, float mom)
{
    MW_GRID_STRIDE(i, count)
    {
        p[i] = __fadd_rn(__fmul_rn(p[i], mom), __fmul_rn(g[i], __fsub_rn(1.0f, mom)));
        g[i] = 0.0f;
    }
}

extern "C" void mw_bn_stats_acc_cuda(const mw_kctx *k, float *g, const float *st, size_t count,
                                     float w)
{
    MW_EW_LAUNCH("mw_bn_stats_acc_cuda", bn_stats_acc_kernel, count, g, st, count, w);
}

extern "C" void mw_bn_stats_update_cuda(const mw_kctx *k, float *p, float *g, size_t count,
                                        float momentum)
{
    MW_EW_LAUNCH("mw_bn_stats_update_cuda", bn_stats_update_kernel, count, p, g, count, momentum);
}

/* CUDA twins of the graph ops (kernels/graphops.h; the contract is in kernels.h, the spec in
 * kernels/ref/graphops.c).
 *
 * Element-wise ops are grid-stride loops, one thread per output element. Where the reference
 * scatters (average pooling's backward adds dy / cells into every cell of each window), the
 * twin gathers instead: one thread per INPUT element adds the outputs whose windows cover it,
 * in the reference's ascending (oh, ow) order, so no atomics are needed and dx is bitwise the
 * reference's. Products that the reference rounds twice (y += a * b) use __fmul_rn /
 * __fadd_rn, so nvcc's contraction into one fma cannot make them differ from the host.
 *
 * BatchNormalization gives each channel one block: its threads stride down the rows, the
 * per-channel sums are kept in double (as the reference) and reduced by a shared-memory tree
 * in a fixed order, so the statistics and gradients are the same on every run; the same block
 * then writes the channel's outputs. Softmax gives each row one warp (as the cross-entropy in
 * activation.cu), with the sum in double reduced by shuffles in a fixed order. */
#include <math.h>

#include "kernels/cuda/dev.cuh"

extern "C" {
#include "kernels/graphops.h"
}

#define MW_ACT_HD static __device__ inline
#include "kernels/act_rules.h"

#define GRID_STRIDE(i, count)                                                                      \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (count);                    \
         i += (size_t)gridDim.x * blockDim.x)

/* Inside a void wrapper with k in scope: enqueue an element-wise kernel over count items. */
#define EW_LAUNCH(op, kernel, count, ...)                                                          \
    do {                                                                                           \
        mw_cuda_dev *d = mw_cuda_begin(k, op);                                                     \
        if (!d || (count) == 0)                                                                    \
            return;                                                                                \
        kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(__VA_ARGS__);                 \
        MW_LAUNCHED_K(d, #kernel);                                                                 \
        mw_cuda_end(d, op);                                                                        \
    } while (0)

/* ---- BatchNormalization -------------------------------------------------------------------- */

#define BN_BLOCK 512 /* threads per channel */

/* The sum of every thread's v in a fixed tree order; every thread of the block must call it,
 * and every thread gets the sum. */
__device__ static double block_sum(double v, double *s)
{
    s[threadIdx.x] = v;
    __syncthreads();
    for (unsigned h = BN_BLOCK / 2; h > 0; h /= 2) {
        if (threadIdx.x < h)
            s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    double r = s[0];
    __syncthreads(); /* s may be reused at once */
    return r;
}

static __global__ void bn_fwd_train_kernel(float *y, float *mean, float *var, float *invstd,
                                           const float *x, const float *gamma, const float *beta,
                                           size_t rows, int C, float eps)
{
    __shared__ double s[BN_BLOCK];
    const int c = blockIdx.x;
    double a = 0.0;
    for (size_t r = threadIdx.x; r < rows; r += BN_BLOCK)
        a += x[r * C + c];
    a = block_sum(a, s);
    const double mu = rows ? a / (double)rows : 0.0;
    double q = 0.0;
    for (size_t r = threadIdx.x; r < rows; r += BN_BLOCK) {
        double dv = x[r * C + c] - mu;
        q += dv * dv;
    }
    q = block_sum(q, s);
    const float m = (float)mu, v = (float)(rows ? q / (double)rows : 0.0);
    const float inv = (float)(1.0 / sqrt((double)v + (double)eps));
    if (threadIdx.x == 0)
        mean[c] = m, var[c] = v, invstd[c] = inv;
    const float g = gamma ? gamma[c] : 1.0f, b = beta ? beta[c] : 0.0f;
    for (size_t r = threadIdx.x; r < rows; r += BN_BLOCK)
        y[r * C + c] = (x[r * C + c] - m) * inv * g + b;
}

static __global__ void bn_fwd_infer_kernel(float *y, const float *x, const float *gamma,
                                           const float *beta, const float *mean, const float *var,
                                           size_t count, int C, float eps)
{
    GRID_STRIDE(i, count)
    {
        const int c = (int)(i % (size_t)C);
        const float g = gamma ? gamma[c] : 1.0f, b = beta ? beta[c] : 0.0f;
        const float inv = (float)(1.0 / sqrt((double)var[c] + (double)eps));
        y[i] = (x[i] - mean[c]) * inv * g + b;
    }
}

/* dx += gamma invstd / M (M dy - sum dy - xhat sum dy xhat), xhat = (x - mean) invstd. */
static __global__ void bn_bwd_kernel(float *dx, float *dgamma, float *dbeta, const float *dy,
                                     const float *x, const float *mean, const float *invstd,
                                     const float *gamma, size_t rows, int C)
{
    __shared__ double s[BN_BLOCK];
    const int c = blockIdx.x;
    const double m = mean[c], inv = invstd[c];
    double sdy = 0.0, sdyx = 0.0;
    for (size_t r = threadIdx.x; r < rows; r += BN_BLOCK) {
        const double xh = ((double)x[r * C + c] - m) * inv;
        sdy += dy[r * C + c];
        sdyx += dy[r * C + c] * xh;
    }
    sdy = block_sum(sdy, s);
    sdyx = block_sum(sdyx, s);
    if (threadIdx.x == 0) {
        if (dgamma)
            dgamma[c] += (float)sdyx;
        if (dbeta)
            dbeta[c] += (float)sdy;
    }
    if (!dx || rows == 0)
        return;
    const double M = (double)rows, f = (gamma ? gamma[c] : 1.0) * inv / M;
    for (size_t r = threadIdx.x; r < rows; r += BN_BLOCK) {
        const double xh = ((double)x[r * C + c] - m) * inv;
        dx[r * C + c] += (float)(f * (M * dy[r * C + c] - sdy - xh * sdyx));
    }
}

extern "C" void mw_bn_fwd_train_cuda(const mw_kctx *k, float *y, float *mean, float *var,
                                     float *invstd, const float *x, const float *gamma,
                                     const float *beta, size_t rows, int C, float eps)
{
    const char *op = "mw_bn_fwd_train_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || C <= 0)
        return;
    bn_fwd_train_kernel<<<(unsigned)C, BN_BLOCK, 0, d->stream>>>(y, mean, var, invstd, x, gamma,
                                                                 beta, rows, C, eps);
    MW_LAUNCHED_K(d, "bn_fwd_train_kernel");
    mw_cuda_end(d, op);
}

extern "C" void mw_bn_fwd_infer_cuda(const mw_kctx *k, float *y, const float *x, const float *gamma,
                                     const float *beta, const float *mean, const float *var,
                                     size_t rows, int C, float eps)
{
    const size_t count = rows * (size_t)(C > 0 ? C : 0);
    EW_LAUNCH("mw_bn_fwd_infer_cuda", bn_fwd_infer_kernel, count, y, x, gamma, beta, mean, var,
              count, C, eps);
}

extern "C" void mw_bn_bwd_cuda(const mw_kctx *k, float *dx, float *dgamma, float *dbeta,
                               const float *dy, const float *x, const float *mean,
                               const float *invstd, const float *gamma, size_t rows, int C)
{
    const char *op = "mw_bn_bwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || C <= 0)
        return;
    bn_bwd_kernel<<<(unsigned)C, BN_BLOCK, 0, d->stream>>>(dx, dgamma, dbeta, dy, x, mean, invstd,
                                                           gamma, rows, C);
    MW_LAUNCHED_K(d, "bn_bwd_kernel");
    mw_cuda_end(d, op);
}

/* Synchronized BatchNormalization (kernels.h): a slice's sums, one block per channel as above;
 * the statistics from the summed sums, one thread per channel; the forward's normalization is
 * bn_fwd_infer_kernel's; the backward's dx, one thread per element, in the reference's double
 * expression. */
static __global__ void bn_sums_kernel(double *s, const float *x, const float *dy, const float *mean,
                                      const float *invstd, float *dgamma, float *dbeta, size_t rows,
                                      int C)
{
    __shared__ double sh[BN_BLOCK];
    const int c = blockIdx.x;
    double a = 0.0, b = 0.0;
    for (size_t r = threadIdx.x; r < rows; r += BN_BLOCK) {
        const double v = x[r * C + c];
        if (dy) {
            const double xh = (v - mean[c]) * invstd[c];
            a += dy[r * C + c];
            b += dy[r * C + c] * xh;
        } else {
            a += v;
            b += v * v;
        }
    }
    a = block_sum(a, sh);
    b = block_sum(b, sh);
    if (threadIdx.x == 0) {
        s[c] = a, s[C + c] = b;
        if (dy && dgamma)
            dgamma[c] += (float)b;
        if (dy && dbeta)
            dbeta[c] += (float)a;
    }
}

static __global__ void bn_sync_stats_kernel(float *mean, float *var, float *invstd, const double *s,
                                            double M, int C, float eps)
{
    GRID_STRIDE(c, (size_t)C)
    {
        const double mu = M > 0 ? s[c] / M : 0.0, v = M > 0 ? s[C + c] / M - mu * mu : 0.0;
        mean[c] = (float)mu;
        var[c] = (float)(v > 0.0 ? v : 0.0);
        invstd[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps));
    }
}

static __global__ void bn_sync_bwd_kernel(float *dx, const float *dy, const float *x,
                                          const float *mean, const float *invstd,
                                          const float *gamma, const double *s, double M,
                                          size_t count, int C)
{
    GRID_STRIDE(i, count)
    {
        const int c = (int)(i % (size_t)C);
        const double f = (gamma ? gamma[c] : 1.0) * invstd[c] / M;
        const double xh = ((double)x[i] - mean[c]) * invstd[c];
        dx[i] += (float)(f * (M * dy[i] - s[c] - xh * s[C + c]));
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
    bn_sums_kernel<<<(unsigned)C, BN_BLOCK, 0, d->stream>>>(s, x, dy, mean, invstd, dgamma, dbeta,
                                                            rows, C);
    MW_LAUNCHED_K(d, "bn_sums_kernel");
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
    EW_LAUNCH("mw_bn_sync_bwd_cuda", bn_sync_bwd_kernel, count, dx, dy, x, mean, invstd, gamma, s,
              M, count, C);
}

/* The moving statistics (worker/model.h): the reference's float expressions, rounded as the
 * host rounds them. */
static __global__ void bn_stats_acc_kernel(float *g, const float *st, size_t count, float w)
{
    GRID_STRIDE(i, count)
    g[i] = __fadd_rn(g[i], __fmul_rn(w, st[i]));
}

static __global__ void bn_stats_update_kernel(float *p, float *g, size_t count, float mom)
{
    GRID_STRIDE(i, count)
    {
        p[i] = __fadd_rn(__fmul_rn(p[i], mom), __fmul_rn(g[i], __fsub_rn(1.0f, mom)));
        g[i] = 0.0f;
    }
}

extern "C" void mw_bn_stats_acc_cuda(const mw_kctx *k, float *g, const float *st, size_t count,
                                     float w)
{
    EW_LAUNCH("mw_bn_stats_acc_cuda", bn_stats_acc_kernel, count, g, st, count, w);
}

extern "C" void mw_bn_stats_update_cuda(const mw_kctx *k, float *p, float *g, size_t count,
                                        float momentum)
{
    EW_LAUNCH("mw_bn_stats_update_cuda", bn_stats_update_kernel, count, p, g, count, momentum);
}

/* ---- AveragePooling2D ---------------------------------------------------------------------- */

/* Cells of window (oh, ow) inside the image (the reference's window()). */
__device__ static inline int pool_window(const mw_pool_geom &g, int oh, int ow, int *h0, int *h1,
                                         int *w0, int *w1)
{
    *h0 = oh * g.SH - g.PT, *w0 = ow * g.SW - g.PL;
    *h1 = *h0 + g.PH, *w1 = *w0 + g.PW;
    *h0 = *h0 < 0 ? 0 : *h0, *w0 = *w0 < 0 ? 0 : *w0;
    *h1 = *h1 > g.H ? g.H : *h1, *w1 = *w1 > g.W ? g.W : *w1;
    return (*h1 - *h0) * (*w1 - *w0);
}

/* Output o = ((n*OH + oh)*OW + ow)*C + c: the window's mean, summed in double. */
static __global__ void avgpool_fwd_kernel(float *y, const float *x, mw_pool_geom g, size_t count)
{
    GRID_STRIDE(o, count)
    {
        const int c = (int)(o % g.C);
        size_t r = o / g.C;
        const int ow = (int)(r % g.OW);
        r /= g.OW;
        const int oh = (int)(r % g.OH);
        const size_t n = r / g.OH;
        const float *xi = x + n * ((size_t)g.H * g.W * g.C);
        int h0, h1, w0, w1, cells = pool_window(g, oh, ow, &h0, &h1, &w0, &w1);
        double s = 0.0;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++)
                s += xi[((size_t)h * g.W + w) * g.C + c];
        y[o] = (float)(s / cells);
    }
}

/* Input i = ((n*H + ih)*W + iw)*C + c: dx[i] += dy / cells of every output whose window holds
 * (ih, iw), in ascending (oh, ow). */
static __global__ void avgpool_bwd_kernel(float *dx, const float *dy, mw_pool_geom g, size_t count)
{
    GRID_STRIDE(i, count)
    {
        const int c = (int)(i % g.C);
        size_t r = i / g.C;
        const int iw = (int)(r % g.W);
        r /= g.W;
        const int ih = (int)(r % g.H);
        const size_t n = r / g.H;
        /* oh covers ih when oh*SH - PT <= ih <= oh*SH - PT + PH - 1 */
        int lo = ih + g.PT - g.PH + 1, hi = ih + g.PT;
        const int oh0 = lo <= 0 ? 0 : (lo + g.SH - 1) / g.SH;
        int oh1 = hi / g.SH;
        lo = iw + g.PL - g.PW + 1, hi = iw + g.PL;
        const int ow0 = lo <= 0 ? 0 : (lo + g.SW - 1) / g.SW;
        int ow1 = hi / g.SW;
        oh1 = oh1 > g.OH - 1 ? g.OH - 1 : oh1;
        ow1 = ow1 > g.OW - 1 ? g.OW - 1 : ow1;
        const float *d = dy + n * ((size_t)g.OH * g.OW * g.C);
        float acc = dx[i];
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) {
                int h0, h1, w0, w1, cells = pool_window(g, oh, ow, &h0, &h1, &w0, &w1);
                acc += d[((size_t)oh * g.OW + ow) * g.C + c] / (float)cells;
            }
        dx[i] = acc;
    }
}

extern "C" void mw_avgpool_fwd_cuda(const mw_kctx *k, float *y, const float *x,
                                    const mw_pool_geom *g, int N)
{
    const size_t count = N > 0 ? (size_t)N * g->OH * g->OW * g->C : 0;
    EW_LAUNCH("mw_avgpool_fwd_cuda", avgpool_fwd_kernel, count, y, x, *g, count);
}

extern "C" void mw_avgpool_bwd_cuda(const mw_kctx *k, float *dx, const float *dy,
                                    const mw_pool_geom *g, int N)
{
    const size_t count = N > 0 ? (size_t)N * g->H * g->W * g->C : 0;
    EW_LAUNCH("mw_avgpool_bwd_cuda", avgpool_bwd_kernel, count, dx, dy, *g, count);
}

/* ---- ZeroPadding2D ------------------------------------------------------------------------- */

struct pad_geom {
    int H, W, C, PT, PL, OH, OW;
};

static __global__ void pad2d_fwd_kernel(float *y, const float *x, pad_geom p, size_t count)
{
    GRID_STRIDE(o, count)
    {
        const int c = (int)(o % p.C);
        size_t r = o / p.C;
        const int w = (int)(r % p.OW) - p.PL;
        r /= p.OW;
        const int h = (int)(r % p.OH) - p.PT;
        const size_t n = r / p.OH;
        const bool in = h >= 0 && h < p.H && w >= 0 && w < p.W;
        y[o] = in ? x[((n * p.H + h) * p.W + w) * p.C + c] : 0.0f;
    }
}

static __global__ void pad2d_bwd_kernel(float *dx, const float *dy, pad_geom p, size_t count)
{
    GRID_STRIDE(i, count)
    {
        const int c = (int)(i % p.C);
        size_t r = i / p.C;
        const int w = (int)(r % p.W);
        r /= p.W;
        const int h = (int)(r % p.H);
        const size_t n = r / p.H;
        dx[i] += dy[((n * p.OH + h + p.PT) * p.OW + w + p.PL) * p.C + c];
    }
}

extern "C" void mw_pad2d_fwd_cuda(const mw_kctx *k, float *y, const float *x, int H, int W, int C,
                                  int PT, int PB, int PL, int PR, int N)
{
    const pad_geom p = {H, W, C, PT, PL, PT + H + PB, PL + W + PR};
    const size_t count = N > 0 ? (size_t)N * p.OH * p.OW * C : 0;
    EW_LAUNCH("mw_pad2d_fwd_cuda", pad2d_fwd_kernel, count, y, x, p, count);
}

extern "C" void mw_pad2d_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, int H, int W, int C,
                                  int PT, int PB, int PL, int PR, int N)
{
    const pad_geom p = {H, W, C, PT, PL, PT + H + PB, PL + W + PR};
    const size_t count = N > 0 ? (size_t)N * H * W * C : 0;
    EW_LAUNCH("mw_pad2d_bwd_cuda", pad2d_bwd_kernel, count, dx, dy, p, count);
}

/* ---- Add, Multiply, Concatenate ------------------------------------------------------------ */

static __global__ void acc_kernel(float *y, const float *x, size_t count)
{
    GRID_STRIDE(i, count)
    y[i] += x[i];
}

static __global__ void mul_fwd_kernel(float *y, const float *a, const float *b, size_t count)
{
    GRID_STRIDE(i, count)
    y[i] = a[i] * b[i];
}

static __global__ void mul_bwd_kernel(float *da, float *db, const float *dy, const float *a,
                                      const float *b, size_t count)
{
    GRID_STRIDE(i, count)
    {
        const float d = dy[i];
        if (da)
            da[i] = __fadd_rn(da[i], __fmul_rn(d, b[i]));
        if (db)
            db[i] = __fadd_rn(db[i], __fmul_rn(d, a[i]));
    }
}

static __global__ void concat_fwd_kernel(float *y, const float *x, size_t count, int CX, int CY,
                                         int off)
{
    GRID_STRIDE(i, count)
    y[(i / CX) * CY + off + i % CX] = x[i];
}

static __global__ void concat_bwd_kernel(float *dx, const float *dy, size_t count, int CX, int CY,
                                         int off)
{
    GRID_STRIDE(i, count)
    dx[i] += dy[(i / CX) * CY + off + i % CX];
}

extern "C" void mw_acc_cuda(const mw_kctx *k, float *y, const float *x, size_t count)
{
    EW_LAUNCH("mw_acc_cuda", acc_kernel, count, y, x, count);
}

extern "C" void mw_mul_fwd_cuda(const mw_kctx *k, float *y, const float *a, const float *b,
                                size_t count)
{
    EW_LAUNCH("mw_mul_fwd_cuda", mul_fwd_kernel, count, y, a, b, count);
}

extern "C" void mw_mul_bwd_cuda(const mw_kctx *k, float *da, float *db, const float *dy,
                                const float *a, const float *b, size_t count)
{
    EW_LAUNCH("mw_mul_bwd_cuda", mul_bwd_kernel, count, da, db, dy, a, b, count);
}

extern "C" void mw_concat_fwd_cuda(const mw_kctx *k, float *y, const float *x, size_t rows, int CX,
                                   int CY, int off)
{
    const size_t count = CX > 0 ? rows * (size_t)CX : 0;
    EW_LAUNCH("mw_concat_fwd_cuda", concat_fwd_kernel, count, y, x, count, CX, CY, off);
}

extern "C" void mw_concat_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, size_t rows,
                                   int CX, int CY, int off)
{
    const size_t count = CX > 0 ? rows * (size_t)CX : 0;
    EW_LAUNCH("mw_concat_bwd_cuda", concat_bwd_kernel, count, dx, dy, count, CX, CY, off);
}

/* ---- activations --------------------------------------------------------------------------- */

static __global__ void act_fwd_kernel(float *y, const float *x, size_t count, mw_act_kind kind,
                                      float alpha)
{
    GRID_STRIDE(i, count)
    {
        y[i] = act_value(x[i], kind, alpha);
    }
}

static __global__ void act_bwd_kernel(float *dx, const float *dy, const float *x, const float *y,
                                      size_t count, mw_act_kind kind, float alpha)
{
    GRID_STRIDE(i, count)
    {
        dx[i] += dy[i] * act_slope(x[i], y[i], kind, alpha);
    }
}

extern "C" void mw_act_fwd_cuda(const mw_kctx *k, float *y, const float *x, size_t count,
                                mw_act_kind kind, float alpha)
{
    EW_LAUNCH("mw_act_fwd_cuda", act_fwd_kernel, count, y, x, count, kind, alpha);
}

extern "C" void mw_act_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, const float *x,
                                const float *y, size_t count, mw_act_kind kind, float alpha)
{
    EW_LAUNCH("mw_act_bwd_cuda", act_bwd_kernel, count, dx, dy, x, y, count, kind, alpha);
}

/* ---- softmax as a layer -------------------------------------------------------------------- */

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

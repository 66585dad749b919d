/* The fast CPU path of the graph ops (kernels/graphops.h): parallel over k's threads, the
 * channel loop (channels-last: contiguous) innermost so the compiler vectorizes it, and the
 * per-element choices of the reference (the activation kind, NULL gradients) hoisted out of
 * the loops.
 *
 * Results, against the reference:
 * - elementwise ops (add, multiply, concatenate, zero padding, the activations) and the
 *   reductions whose order per output is kept (average pooling, softmax) are bitwise equal,
 *   for any thread count: each output sees the same float / double operations in the same
 *   order, only the outputs are spread over threads and vector lanes;
 * - BatchNormalization walks row by row instead of down each channel and forms xhat in
 *   float, so it agrees with the reference to rounding. Its sums are split over threads by
 *   CHANNEL blocks, each channel still summed over all rows in order, so its results do not
 *   depend on the thread count: they are those of the single-threaded version (bitwise). */
#include "kernels/graphops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

#define MW_ACT_HD static inline
#include "kernels/act_rules.h"

/* ---- average pooling ---- */

/* Channels summed at once (double accumulators on the stack). */
#define POOL_CB 128

/* Cells of window (oh, ow) inside the image (the reference's rule). */
static int window(const mw_pool_geom *g, int oh, int ow, int *h0, int *h1, int *w0, int *w1)
{
    *h0 = oh * g->SH - g->PT, *w0 = ow * g->SW - g->PL;
    *h1 = *h0 + g->PH, *w1 = *w0 + g->PW;
    *h0 = *h0 < 0 ? 0 : *h0, *w0 = *w0 < 0 ? 0 : *w0;
    *h1 = *h1 > g->H ? g->H : *h1, *w1 = *w1 > g->W ? g->W : *w1;
    return (*h1 - *h0) * (*w1 - *w0);
}

/* One output cell yo (C) of image xi: per channel the double sum over the window in the
 * reference's order (h, then w), the channels of a block side by side. */
static void avg_window(float *restrict yo, const float *restrict xi, const mw_pool_geom *g, int oh,
                       int ow)
{
    int h0, h1, w0, w1, cells = window(g, oh, ow, &h0, &h1, &w0, &w1);
    const int C = g->C;
    for (int c0 = 0; c0 < C; c0 += POOL_CB) {
        const int cw = C - c0 < POOL_CB ? C - c0 : POOL_CB;
        double s[POOL_CB];
        for (int c = 0; c < cw; c++)
            s[c] = 0.0;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++) {
                const float *xr = xi + ((size_t)h * g->W + w) * C + c0;
                for (int c = 0; c < cw; c++)
                    s[c] += xr[c];
            }
        for (int c = 0; c < cw; c++)
            yo[c0 + c] = (float)(s[c] / cells);
    }
}

void mw_avgpool_fwd_cpu(const mw_kctx *k, float *y, const float *x, const mw_pool_geom *g, int N)
{
    const size_t in_img = (size_t)g->H * g->W * g->C;
#pragma omp parallel for collapse(2) num_threads(MW_NT(k)) schedule(static)
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++)
                avg_window(y + (((size_t)n * g->OH + oh) * g->OW + ow) * g->C, x + n * in_img, g,
                           oh, ow);
}

/* One image: every window's dy / cells (one float division per channel, as the reference's
 * d[c] / (float)cells) added into its cells, windows in the reference's order. */
static void avg_bwd_image(float *restrict dxi, const float *restrict dyi, const mw_pool_geom *g)
{
    const int C = g->C;
    for (int oh = 0; oh < g->OH; oh++)
        for (int ow = 0; ow < g->OW; ow++) {
            int h0, h1, w0, w1, cells = window(g, oh, ow, &h0, &h1, &w0, &w1);
            const float *d = dyi + ((size_t)oh * g->OW + ow) * C;
            for (int c0 = 0; c0 < C; c0 += POOL_CB) {
                const int cw = C - c0 < POOL_CB ? C - c0 : POOL_CB;
                float q[POOL_CB];
                for (int c = 0; c < cw; c++)
                    q[c] = d[c0 + c] / (float)cells;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++) {
                        float *o = dxi + ((size_t)h * g->W + w) * C + c0;
                        for (int c = 0; c < cw; c++)
                            o[c] += q[c];
                    }
            }
        }
}

void mw_avgpool_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const mw_pool_geom *g, int N)
{
    const size_t in_img = (size_t)g->H * g->W * g->C, out_img = (size_t)g->OH * g->OW * g->C;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int n = 0; n < N; n++)
        avg_bwd_image(dx + n * in_img, dy + n * out_img, g);
}

/* ---- zero padding, concatenation ---- */

void mw_pad2d_fwd_cpu(const mw_kctx *k, float *y, const float *x, int H, int W, int C, int PT,
                      int PB, int PL, int PR, int N)
{
    const int OH = PT + H + PB, OW = PL + W + PR;
    const size_t orow = (size_t)OW * C;
    /* every output row once: all zeros, or zeros, the input row, zeros */
#pragma omp parallel for collapse(2) num_threads(MW_NT(k)) schedule(static)
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < OH; oh++) {
            float *yr = y + ((size_t)n * OH + oh) * orow;
            const int h = oh - PT;
            if (h < 0 || h >= H) {
                memset(yr, 0, orow * sizeof *yr);
                continue;
            }
            memset(yr, 0, (size_t)PL * C * sizeof *yr);
            memcpy(yr + (size_t)PL * C, x + ((size_t)n * H + h) * W * C, (size_t)W * C * sizeof *x);
            memset(yr + (size_t)(PL + W) * C, 0, (size_t)PR * C * sizeof *yr);
        }
}

void mw_pad2d_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, int H, int W, int C, int PT,
                      int PB, int PL, int PR, int N)
{
    const int OH = PT + H + PB, OW = PL + W + PR;
    const size_t wc = (size_t)W * C;
#pragma omp parallel for collapse(2) num_threads(MW_NT(k)) schedule(static)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            const float *restrict d = dy + (((size_t)n * OH + h + PT) * OW + PL) * C;
            float *restrict o = dx + ((size_t)n * H + h) * wc;
            for (size_t i = 0; i < wc; i++)
                o[i] += d[i];
        }
}

void mw_concat_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t rows, int CX, int CY,
                       int off)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t r = 0; r < rows; r++)
        memcpy(y + r * CY + off, x + r * CX, (size_t)CX * sizeof *x);
}

void mw_concat_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, size_t rows, int CX, int CY,
                       int off)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        float *restrict o = dx + r * CX;
        const float *restrict d = dy + r * CY + off;
        for (int c = 0; c < CX; c++)
            o[c] += d[c];
    }
}

/* ---- elementwise: add, multiply ---- */

void mw_acc_cpu(const mw_kctx *k, float *y, const float *x, size_t count)
{
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        y[i] += x[i];
}

void mw_mul_fwd_cpu(const mw_kctx *k, float *y, const float *a, const float *b, size_t count)
{
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        y[i] = a[i] * b[i];
}

/* da and db may be the same buffer (x * x): then each element gets d b, then d a, added in
 * the reference's order; no simd pragma, so the compiler checks the overlap itself. */
void mw_mul_bwd_cpu(const mw_kctx *k, float *da, float *db, const float *dy, const float *a,
                    const float *b, size_t count)
{
    if (da && db) {
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
        for (size_t i = 0; i < count; i++) {
            float d = dy[i];
            da[i] += d * b[i];
            db[i] += d * a[i];
        }
    } else if (da || db) {
        float *o = da ? da : db;
        const float *other = da ? b : a;
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
        for (size_t i = 0; i < count; i++)
            o[i] += dy[i] * other[i];
    }
}

/* ---- activations, softmax ---- */

/* Elements per block of the activations: the kind is switched on once per block, and each
 * case inlines act_value / act_slope with a constant kind, so the loop is the formula alone
 * (the reference's expressions; the math library's calls are the same ones). */
#define ACT_BLOCK 4096

#define ACT_DISPATCH(span, kind, ...)                                                              \
    switch (kind) {                                                                                \
    case MW_ACTK_SIGMOID:                                                                          \
        span(MW_ACTK_SIGMOID, __VA_ARGS__);                                                        \
        break;                                                                                     \
    case MW_ACTK_TANH:                                                                             \
        span(MW_ACTK_TANH, __VA_ARGS__);                                                           \
        break;                                                                                     \
    case MW_ACTK_GELU:                                                                             \
        span(MW_ACTK_GELU, __VA_ARGS__);                                                           \
        break;                                                                                     \
    case MW_ACTK_GELU_TANH:                                                                        \
        span(MW_ACTK_GELU_TANH, __VA_ARGS__);                                                      \
        break;                                                                                     \
    case MW_ACTK_SILU:                                                                             \
        span(MW_ACTK_SILU, __VA_ARGS__);                                                           \
        break;                                                                                     \
    case MW_ACTK_ELU:                                                                              \
        span(MW_ACTK_ELU, __VA_ARGS__);                                                            \
        break;                                                                                     \
    case MW_ACTK_LEAKY_RELU:                                                                       \
        span(MW_ACTK_LEAKY_RELU, __VA_ARGS__);                                                     \
        break;                                                                                     \
    }

static inline void fwd_span(mw_act_kind kind, float *restrict y, const float *restrict x, size_t n,
                            float alpha)
{
    for (size_t i = 0; i < n; i++)
        y[i] = act_value(x[i], kind, alpha);
}

static inline void bwd_span(mw_act_kind kind, float *dx, const float *dy, const float *x,
                            const float *y, size_t n, float alpha)
{
    for (size_t i = 0; i < n; i++)
        dx[i] += dy[i] * act_slope(x[i], y[i], kind, alpha);
}

void mw_act_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t count, mw_act_kind kind,
                    float alpha)
{
    const size_t nblk = (count + ACT_BLOCK - 1) / ACT_BLOCK;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t b = 0; b < nblk; b++) {
        const size_t i = b * ACT_BLOCK, n = count - i < ACT_BLOCK ? count - i : ACT_BLOCK;
        ACT_DISPATCH(fwd_span, kind, y + i, x + i, n, alpha)
    }
}

void mw_act_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const float *x, const float *y,
                    size_t count, mw_act_kind kind, float alpha)
{
    const size_t nblk = (count + ACT_BLOCK - 1) / ACT_BLOCK;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t b = 0; b < nblk; b++) {
        const size_t i = b * ACT_BLOCK, n = count - i < ACT_BLOCK ? count - i : ACT_BLOCK;
        ACT_DISPATCH(bwd_span, kind, dx + i, dy + i, x + i, y + i, n, alpha)
    }
}

/* Softmax: blocks of rows spread over the threads (one block, as the logits of a batch: no
 * parallel region at all), each row the reference's loops (its double sum in the same
 * order): bitwise equal. */
#define SOFTMAX_ROWS 128

static void softmax_rows(float *y, const float *x, size_t r0, size_t r1, int C)
{
    for (size_t r = r0; r < r1; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C, mx = xr[0];
        for (int c = 1; c < C; c++)
            mx = xr[c] > mx ? xr[c] : mx;
        double s = 0.0;
        for (int c = 0; c < C; c++)
            s += (yr[c] = expf(xr[c] - mx));
        for (int c = 0; c < C; c++)
            yr[c] = (float)(yr[c] / s);
    }
}

static void softmax_bwd_rows(float *dx, const float *dy, const float *y, size_t r0, size_t r1,
                             int C)
{
    for (size_t r = r0; r < r1; r++) {
        const float *d = dy + r * C, *yr = y + r * C;
        float *o = dx + r * C;
        double s = 0.0;
        for (int c = 0; c < C; c++)
            s += (double)d[c] * yr[c];
        for (int c = 0; c < C; c++)
            o[c] += (float)(yr[c] * (d[c] - s));
    }
}

void mw_softmax_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t rows, int C)
{
    const size_t nb = (rows + SOFTMAX_ROWS - 1) / SOFTMAX_ROWS;
    if (nb <= 1) {
        softmax_rows(y, x, 0, rows, C);
        return;
    }
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t b = 0; b < nb; b++)
        softmax_rows(y, x, b * SOFTMAX_ROWS, b + 1 < nb ? (b + 1) * SOFTMAX_ROWS : rows, C);
}

void mw_softmax_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const float *y, size_t rows,
                        int C)
{
    const size_t nb = (rows + SOFTMAX_ROWS - 1) / SOFTMAX_ROWS;
    if (nb <= 1) {
        softmax_bwd_rows(dx, dy, y, 0, rows, C);
        return;
    }
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t b = 0; b < nb; b++)
        softmax_bwd_rows(dx, dy, y, b * SOFTMAX_ROWS, b + 1 < nb ? (b + 1) * SOFTMAX_ROWS : rows,
                         C);
}

/* ---- BatchNormalization ---- */

/* Per-channel sums in double: 2 C doubles, on the stack for the channel counts models use. */
#define MAXC 1024
/* Channels per thread at least (one cache line of floats): fewer threads for small C. */
#define BN_MINC 16

/* Split C channels into at most MW_NT(k) blocks of at least BN_MINC channels; block b is
 * [*c0, *c1). Any split gives the same results (each channel is summed on its own). */
static int bn_blocks(const mw_kctx *k, int C)
{
    int nb = (C + BN_MINC - 1) / BN_MINC, nt = MW_NT(k);
    return nb < nt ? (nb > 0 ? nb : 1) : nt;
}

static void bn_block(int C, int nb, int b, int *c0, int *c1)
{
    *c0 = (int)((long)C * b / nb);
    *c1 = (int)((long)C * (b + 1) / nb);
}

/* The column sums run over tiles of rows (about 16 KB of the block's channels) and, within a
 * tile, CW channels at a time whose sums stay in registers (8 doubles: 4 SSE registers) while
 * the tile's rows go by; channels left over are summed one at a time. A tile is read from
 * memory once and from L1 by the other groups. Each channel is still summed in row order. */
#define CW 8
#define TILE 4096

static size_t tile_rows(int c0, int c1)
{
    return c1 - c0 < TILE ? (size_t)(TILE / (c1 - c0)) : 1;
}

/* s[c] = the sum of x[r][c] over all rows, for c in [c0, c1). */
static void col_sums(double *restrict s, const float *restrict x, size_t rows, int C, int c0,
                     int c1)
{
    const size_t R = tile_rows(c0, c1);
    for (int c = c0; c < c1; c++)
        s[c] = 0.0;
    for (size_t r0 = 0; r0 < rows; r0 += R) {
        const size_t r1 = rows - r0 < R ? rows : r0 + R;
        int c = c0;
        for (; c + CW <= c1; c += CW) {
            double a[CW];
            memcpy(a, s + c, sizeof a);
            for (size_t r = r0; r < r1; r++) {
                const float *xr = x + r * C + c;
                for (int j = 0; j < CW; j++)
                    a[j] += xr[j];
            }
            memcpy(s + c, a, sizeof a);
        }
        for (; c < c1; c++)
            for (size_t r = r0; r < r1; r++)
                s[c] += x[r * C + c];
    }
}

/* q[c] = the sum of (x[r][c] - s[c] / rows)^2 over all rows, for c in [c0, c1). */
static void col_sqdev(double *restrict q, const double *restrict s, const float *restrict x,
                      size_t rows, int C, int c0, int c1)
{
    const size_t R = tile_rows(c0, c1);
    double mu[MAXC];
    for (int c = c0; c < c1; c++) {
        q[c] = 0.0;
        mu[c] = rows ? s[c] / (double)rows : 0.0;
    }
    for (size_t r0 = 0; r0 < rows; r0 += R) {
        const size_t r1 = rows - r0 < R ? rows : r0 + R;
        int c = c0;
        for (; c + CW <= c1; c += CW) {
            double a[CW], m[CW];
            memcpy(a, q + c, sizeof a);
            memcpy(m, mu + c, sizeof m);
            for (size_t r = r0; r < r1; r++) {
                const float *xr = x + r * C + c;
                for (int j = 0; j < CW; j++) {
                    double d = (double)xr[j] - m[j];
                    a[j] += d * d;
                }
            }
            memcpy(q + c, a, sizeof a);
        }
        for (; c < c1; c++)
            for (size_t r = r0; r < r1; r++) {
                double d = (double)x[r * C + c] - mu[c];
                q[c] += d * d;
            }
    }
}

/* y[r][c] = (x[r][c] - mu[c]) * a[c] + b[c], rows spread over the threads. */
static void affine_rows(const mw_kctx *k, float *y, const float *x, const float *mu, const float *a,
                        const float *b, size_t rows, int C)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        float *restrict yr = y + r * C;
        const float *restrict xr = x + r * C;
        for (int c = 0; c < C; c++)
            yr[c] = (xr[c] - mu[c]) * a[c] + b[c];
    }
}

void mw_bn_fwd_train_cpu(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                         const float *x, const float *gamma, const float *beta, size_t rows, int C,
                         float eps)
{
    if (C > MAXC) {
        mw_bn_fwd_train_ref(k, y, mean, var, invstd, x, gamma, beta, rows, C, eps);
        return;
    }
    double s[MAXC], q[MAXC];
    const int nb = bn_blocks(k, C);
#pragma omp parallel for num_threads(nb) schedule(static)
    for (int b = 0; b < nb; b++) {
        int c0, c1;
        bn_block(C, nb, b, &c0, &c1);
        col_sums(s, x, rows, C, c0, c1);
        col_sqdev(q, s, x, rows, C, c0, c1);
    }
    float mu[MAXC], a[MAXC], b[MAXC];
    for (int c = 0; c < C; c++) {
        mean[c] = mu[c] = (float)(rows ? s[c] / (double)rows : 0.0);
        var[c] = (float)(rows ? q[c] / (double)rows : 0.0);
        invstd[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps));
        a[c] = invstd[c] * (gamma ? gamma[c] : 1.0f);
        b[c] = beta ? beta[c] : 0.0f;
    }
    affine_rows(k, y, x, mu, a, b, rows, C);
}

void mw_bn_fwd_infer_cpu(const mw_kctx *k, float *y, const float *x, const float *gamma,
                         const float *beta, const float *mean, const float *var, size_t rows, int C,
                         float eps)
{
    if (C > MAXC) {
        mw_bn_fwd_infer_ref(k, y, x, gamma, beta, mean, var, rows, C, eps);
        return;
    }
    float a[MAXC], b[MAXC];
    for (int c = 0; c < C; c++) {
        a[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps)) * (gamma ? gamma[c] : 1.0f);
        b[c] = beta ? beta[c] : 0.0f;
    }
    affine_rows(k, y, x, mean, a, b, rows, C);
}

/* sdy[c] = sum dy, sdyx[c] = sum dy xhat (xhat in float) over all rows, c in [c0, c1); tiled
 * as col_sums. */
static void bn_grad_sums(double *restrict sdy, double *restrict sdyx, const float *restrict dy,
                         const float *restrict x, const float *restrict mean,
                         const float *restrict invstd, size_t rows, int C, int c0, int c1)
{
    const size_t R = tile_rows(c0, c1);
    for (int c = c0; c < c1; c++)
        sdy[c] = sdyx[c] = 0.0;
    for (size_t r0 = 0; r0 < rows; r0 += R) {
        const size_t r1 = rows - r0 < R ? rows : r0 + R;
        int c = c0;
        for (; c + CW <= c1; c += CW) {
            double a[CW], b[CW];
            float mu[CW], is[CW];
            memcpy(a, sdy + c, sizeof a);
            memcpy(b, sdyx + c, sizeof b);
            memcpy(mu, mean + c, sizeof mu);
            memcpy(is, invstd + c, sizeof is);
            for (size_t r = r0; r < r1; r++) {
                const float *dr = dy + r * C + c, *xr = x + r * C + c;
                for (int j = 0; j < CW; j++) {
                    float xh = (xr[j] - mu[j]) * is[j];
                    a[j] += dr[j];
                    b[j] += (double)(dr[j] * xh);
                }
            }
            memcpy(sdy + c, a, sizeof a);
            memcpy(sdyx + c, b, sizeof b);
        }
        for (; c < c1; c++)
            for (size_t r = r0; r < r1; r++) {
                float xh = (x[r * C + c] - mean[c]) * invstd[c];
                sdy[c] += dy[r * C + c];
                sdyx[c] += (double)(dy[r * C + c] * xh);
            }
    }
}

/* dx[r][c] += f[c] (dy[r][c] - u[c] - xhat v[c]), rows spread over the threads. */
static void dx_rows(const mw_kctx *k, float *dx, const float *dy, const float *x, const float *mean,
                    const float *invstd, const float *f, const float *u, const float *v,
                    size_t rows, int C)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) {
            float xh = (x[r * C + c] - mean[c]) * invstd[c];
            dx[r * C + c] += f[c] * (dy[r * C + c] - u[c] - xh * v[c]);
        }
}

void mw_bn_bwd_cpu(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                   const float *x, const float *mean, const float *invstd, const float *gamma,
                   size_t rows, int C)
{
    if (C > MAXC) {
        mw_bn_bwd_ref(k, dx, dgamma, dbeta, dy, x, mean, invstd, gamma, rows, C);
        return;
    }
    double sdy[MAXC], sdyx[MAXC];
    const int nb = bn_blocks(k, C);
#pragma omp parallel for num_threads(nb) schedule(static)
    for (int b = 0; b < nb; b++) {
        int c0, c1;
        bn_block(C, nb, b, &c0, &c1);
        bn_grad_sums(sdy, sdyx, dy, x, mean, invstd, rows, C, c0, c1);
    }
    float f[MAXC], u[MAXC], v[MAXC];
    for (int c = 0; c < C; c++) {
        if (dgamma)
            dgamma[c] += (float)sdyx[c];
        if (dbeta)
            dbeta[c] += (float)sdy[c];
        double M = rows ? (double)rows : 1.0, g = gamma ? gamma[c] : 1.0;
        f[c] = (float)(g * invstd[c]); /* dx = f (dy - u - xhat v) */
        u[c] = (float)(sdy[c] / M);
        v[c] = (float)(sdyx[c] / M);
    }
    if (dx)
        dx_rows(k, dx, dy, x, mean, invstd, f, u, v, rows, C);
}

/* Synchronized BatchNormalization: the same channel blocks and tiles as above. */

/* s[c] = sum x, q[c] = sum x^2 over all rows, c in [c0, c1); tiled as col_sums. */
static void col_moments(double *restrict s, double *restrict q, const float *restrict x,
                        size_t rows, int C, int c0, int c1)
{
    const size_t R = tile_rows(c0, c1);
    for (int c = c0; c < c1; c++)
        s[c] = q[c] = 0.0;
    for (size_t r0 = 0; r0 < rows; r0 += R) {
        const size_t r1 = rows - r0 < R ? rows : r0 + R;
        int c = c0;
        for (; c + CW <= c1; c += CW) {
            double a[CW], b[CW];
            memcpy(a, s + c, sizeof a);
            memcpy(b, q + c, sizeof b);
            for (size_t r = r0; r < r1; r++) {
                const float *xr = x + r * C + c;
                for (int j = 0; j < CW; j++) {
                    double v = xr[j];
                    a[j] += v;
                    b[j] += v * v;
                }
            }
            memcpy(s + c, a, sizeof a);
            memcpy(q + c, b, sizeof b);
        }
        for (; c < c1; c++)
            for (size_t r = r0; r < r1; r++) {
                double v = x[r * C + c];
                s[c] += v;
                q[c] += v * v;
            }
    }
}

void mw_bn_sums_cpu(const mw_kctx *k, double *s, const float *x, const float *dy, const float *mean,
                    const float *invstd, float *dgamma, float *dbeta, size_t rows, int C)
{
    if (C > MAXC) {
        mw_bn_sums_ref(k, s, x, dy, mean, invstd, dgamma, dbeta, rows, C);
        return;
    }
    const int nb = bn_blocks(k, C);
#pragma omp parallel for num_threads(nb) schedule(static)
    for (int b = 0; b < nb; b++) {
        int c0, c1;
        bn_block(C, nb, b, &c0, &c1);
        if (dy)
            bn_grad_sums(s, s + C, dy, x, mean, invstd, rows, C, c0, c1);
        else
            col_moments(s, s + C, x, rows, C, c0, c1);
    }
    for (int c = 0; c < C && dy; c++) {
        if (dgamma)
            dgamma[c] += (float)s[C + c];
        if (dbeta)
            dbeta[c] += (float)s[c];
    }
}

void mw_bn_sync_fwd_cpu(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                        const float *x, const float *gamma, const float *beta, const double *s,
                        double M, size_t rows, int C, float eps)
{
    mw_bn_sync_stats(mean, var, invstd, s, M, C, eps);
    mw_bn_fwd_infer_cpu(k, y, x, gamma, beta, mean, var, rows, C, eps);
}

void mw_bn_sync_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const float *x,
                        const float *mean, const float *invstd, const float *gamma, const double *s,
                        double M, size_t rows, int C)
{
    if (C > MAXC) {
        mw_bn_sync_bwd_ref(k, dx, dy, x, mean, invstd, gamma, s, M, rows, C);
        return;
    }
    if (!dx || M <= 0)
        return;
    float f[MAXC], u[MAXC], v[MAXC];
    for (int c = 0; c < C; c++) {
        f[c] = (float)((gamma ? gamma[c] : 1.0) * invstd[c]); /* dx += f (dy - u - xhat v) */
        u[c] = (float)(s[c] / M);
        v[c] = (float)(s[C + c] / M);
    }
    dx_rows(k, dx, dy, x, mean, invstd, f, u, v, rows, C);
}

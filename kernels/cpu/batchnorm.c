/* The fast CPU BatchNormalization (kernels/batchnorm.h): it walks row by row instead of down
 * each channel and forms xhat in float, so it agrees with the reference to rounding. Its sums
 * are split over threads by CHANNEL blocks, each channel still summed over all rows in order,
 * so its results do not depend on the thread count: they are those of the single-threaded
 * version (bitwise). The moving statistics' entries are the reference's in both CPU tables
 * (2 C floats per layer and step). */
#include "kernels/batchnorm.h"
#include "kernels/twins.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

/* Per-channel sums in double: 2 C doubles (and 5 C floats), on the stack (144 KB at most) for
 * the channel counts models use: keras.applications reaches 2,048 (ResNet50's and Xception's
 * last stage), where 1,024 sent those layers to the reference's channel-by-channel loops. */
#define MAXC 4096
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
MW_WIDE_CLONES static void col_sums(double *restrict s, const float *restrict x, size_t rows, int C,
                                    int c0, int c1)
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
MW_WIDE_CLONES static void col_sqdev(double *restrict q, const double *restrict s,
                                     const float *restrict x, size_t rows, int C, int c0, int c1)
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

/* The per-channel constants of the output: mu (the mean), is (1 / stddev), g (gamma or 1),
 * b (beta or 0); and a ReLU of max_value M fused after it (relu). The backward's sums without
 * a ReLU read neither g nor b (NULL there). */
typedef struct {
    const float *mu, *is, *g, *b;
    int relu;
    float M;
} bn_affine;

/* v = (x - mu) * is * g + b in the reference's order of float operations (bn_out), so every
 * twin forms the same v, and the fused ReLU's mask recomputed in the backward is the forward's.
 * The ReLU: min(max(v, 0), M), relux_value's with slope and threshold 0. */
static inline __attribute__((always_inline)) void
affine_loop(float *restrict yr, const float *restrict xr, const bn_affine *A, int C, int relu)
{
    for (int c = 0; c < C; c++) {
        float v = (xr[c] - A->mu[c]) * A->is[c] * A->g[c] + A->b[c];
        if (relu) {
            v = v > 0.0f ? v : 0.0f;
            v = v < A->M ? v : A->M;
        }
        yr[c] = v;
    }
}

/* y[r][c] = v (clipped with A->relu) for rows [r0, r1). */
MW_WIDE_CLONES static void affine_span(float *y, const float *x, const bn_affine *A, size_t r0,
                                       size_t r1, int C)
{
    for (size_t r = r0; r < r1; r++)
        if (A->relu)
            affine_loop(y + r * C, x + r * C, A, C, 1);
        else
            affine_loop(y + r * C, x + r * C, A, C, 0);
}

/* affine_span over all rows, an equal span of rows per thread. */
static void affine_rows(const mw_kctx *k, float *y, const float *x, const bn_affine *A, size_t rows,
                        int C)
{
    const int nt = MW_NT(k);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++)
        affine_span(y, x, A, MW_SPAN_LO(rows, t, nt), MW_SPAN_LO(rows, t + 1, nt), C);
}

/* gamma and beta as arrays (1 and 0 where the layer has none). */
static void gamma_beta(float *g, float *b, const float *gamma, const float *beta, int C)
{
    for (int c = 0; c < C; c++) {
        g[c] = gamma ? gamma[c] : 1.0f;
        b[c] = beta ? beta[c] : 0.0f;
    }
}

/* The training forward, with a ReLU of max_value M after it when relu. */
static void fwd_train(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                      const float *x, const float *gamma, const float *beta, size_t rows, int C,
                      float eps, int relu, float M)
{
    double s[MAXC], q[MAXC];
    const int nb = bn_blocks(k, C);
#pragma omp parallel for num_threads(nb) schedule(static)
    for (int b = 0; b < nb; b++) {
        int c0, c1;
        bn_block(C, nb, b, &c0, &c1);
        col_sums(s, x, rows, C, c0, c1);
        col_sqdev(q, s, x, rows, C, c0, c1);
    }
    float g[MAXC], b[MAXC];
    for (int c = 0; c < C; c++) {
        mean[c] = (float)(rows ? s[c] / (double)rows : 0.0);
        var[c] = (float)(rows ? q[c] / (double)rows : 0.0);
        invstd[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps));
    }
    gamma_beta(g, b, gamma, beta, C);
    const bn_affine A = {mean, invstd, g, b, relu, M};
    affine_rows(k, y, x, &A, rows, C);
}

void mw_bn_fwd_train_cpu(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                         const float *x, const float *gamma, const float *beta, size_t rows, int C,
                         float eps)
{
    if (C > MAXC)
        mw_bn_fwd_train_ref(k, y, mean, var, invstd, x, gamma, beta, rows, C, eps);
    else
        fwd_train(k, y, mean, var, invstd, x, gamma, beta, rows, C, eps, 0, 0.0f);
}

void mw_bn_relu_fwd_train_cpu(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                              const float *x, const float *gamma, const float *beta, size_t rows,
                              int C, float eps, float max_value)
{
    if (C > MAXC)
        mw_bn_relu_fwd_train_ref(k, y, mean, var, invstd, x, gamma, beta, rows, C, eps, max_value);
    else
        fwd_train(k, y, mean, var, invstd, x, gamma, beta, rows, C, eps, 1, max_value);
}

void mw_bn_fwd_infer_cpu(const mw_kctx *k, float *y, const float *x, const float *gamma,
                         const float *beta, const float *mean, const float *var, size_t rows, int C,
                         float eps)
{
    if (C > MAXC) {
        mw_bn_fwd_infer_ref(k, y, x, gamma, beta, mean, var, rows, C, eps);
        return;
    }
    float is[MAXC], g[MAXC], b[MAXC];
    for (int c = 0; c < C; c++)
        is[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps));
    gamma_beta(g, b, gamma, beta, C);
    const bn_affine A = {mean, is, g, b, 0, 0.0f};
    affine_rows(k, y, x, &A, rows, C);
}

/* The gradient the sums and dx read for an element of input x and normalized value xh = (x -
 * mu) * is in float: dy, or with a fused ReLU dy where 0 < xh * g + b < M (the forward's v,
 * bn_out's operations), else 0 (bitwise as the reference's bn_dy). */
static inline __attribute__((always_inline)) float masked_dy(float d, float xh, float g, float b,
                                                             float M, int relu)
{
    if (!relu)
        return d;
    const float v = xh * g + b;
    uint32_t u; /* d or +0 by a mask of its bits: no branch, so the loops stay vectorized */
    memcpy(&u, &d, sizeof u);
    u &= 0u - (uint32_t)((v > 0.0f) & (v < M));
    memcpy(&d, &u, sizeof d);
    return d;
}

/* sdy[c] = sum dy, sdyx[c] = sum dy xhat (xhat in float) over all rows, c in [c0, c1), dy masked
 * by A's ReLU when relu; tiled as col_sums. */
static inline __attribute__((always_inline)) void
grad_sums_loop(double *restrict sdy, double *restrict sdyx, const float *restrict dy,
               const float *restrict x, const bn_affine *A, size_t rows, int C, int c0, int c1,
               int relu)
{
    const float *restrict mean = A->mu, *restrict invstd = A->is;
    const size_t R = tile_rows(c0, c1);
    for (int c = c0; c < c1; c++)
        sdy[c] = sdyx[c] = 0.0;
    for (size_t r0 = 0; r0 < rows; r0 += R) {
        const size_t r1 = rows - r0 < R ? rows : r0 + R;
        int c = c0;
        for (; c + CW <= c1; c += CW) {
            double a[CW], b[CW];
            float mu[CW], is[CW], g[CW], bb[CW];
            memcpy(a, sdy + c, sizeof a);
            memcpy(b, sdyx + c, sizeof b);
            memcpy(mu, mean + c, sizeof mu);
            memcpy(is, invstd + c, sizeof is);
            if (relu) { /* g, b: only a ReLU reads them (else NULL) */
                memcpy(g, A->g + c, sizeof g);
                memcpy(bb, A->b + c, sizeof bb);
            }
            for (size_t r = r0; r < r1; r++) {
                const float *dr = dy + r * C + c, *xr = x + r * C + c;
                for (int j = 0; j < CW; j++) {
                    float xh = (xr[j] - mu[j]) * is[j];
                    float d = masked_dy(dr[j], xh, g[j], bb[j], A->M, relu);
                    a[j] += d;
                    b[j] += (double)(d * xh);
                }
            }
            memcpy(sdy + c, a, sizeof a);
            memcpy(sdyx + c, b, sizeof b);
        }
        for (; c < c1; c++)
            for (size_t r = r0; r < r1; r++) {
                float xh = (x[r * C + c] - mean[c]) * invstd[c];
                float d = masked_dy(dy[r * C + c], xh, relu ? A->g[c] : 0.0f, relu ? A->b[c] : 0.0f,
                                    A->M, relu);
                sdy[c] += d;
                sdyx[c] += (double)(d * xh);
            }
    }
}

MW_WIDE_CLONES static void bn_grad_sums(double *sdy, double *sdyx, const float *dy, const float *x,
                                        const bn_affine *A, size_t rows, int C, int c0, int c1)
{
    if (A->relu)
        grad_sums_loop(sdy, sdyx, dy, x, A, rows, C, c0, c1, 1);
    else
        grad_sums_loop(sdy, sdyx, dy, x, A, rows, C, c0, c1, 0);
}

/* The backward's per-channel factors: dx = f (dy - u - xhat v). */
typedef struct {
    const float *f, *u, *v;
} bn_dx_coef;

/* One row: o[c] = (or += when add) f[c] (dy[c] - u[c] - xhat v[c]), dy masked when relu. */
static inline __attribute__((always_inline)) void
dx_loop(float *restrict o, const float *restrict dr, const float *restrict xr, const bn_affine *A,
        const bn_dx_coef *K, int C, int add, int relu)
{
    for (int c = 0; c < C; c++) {
        const float xh = (xr[c] - A->mu[c]) * A->is[c];
        const float d =
            masked_dy(dr[c], xh, relu ? A->g[c] : 0.0f, relu ? A->b[c] : 0.0f, A->M, relu);
        const float t = K->f[c] * (d - K->u[c] - xh * K->v[c]);
        o[c] = add ? o[c] + t : t;
    }
}

/* dx[r][c] += f[c] (dy[r][c] - u[c] - xhat v[c]) for rows [r0, r1), or = when set_dx. */
MW_WIDE_CLONES static void dx_span(float *dx, const float *dy, const float *x, const bn_affine *A,
                                   const bn_dx_coef *K, size_t r0, size_t r1, int C, int set_dx)
{
    for (size_t r = r0; r < r1; r++) {
        float *o = dx + r * C;
        const float *dr = dy + r * C, *xr = x + r * C;
        if (A->relu)
            set_dx ? dx_loop(o, dr, xr, A, K, C, 0, 1) : dx_loop(o, dr, xr, A, K, C, 1, 1);
        else
            set_dx ? dx_loop(o, dr, xr, A, K, C, 0, 0) : dx_loop(o, dr, xr, A, K, C, 1, 0);
    }
}

/* dx_span over all rows, an equal span of rows per thread. */
static void dx_rows(const mw_kctx *k, float *dx, const float *dy, const float *x,
                    const bn_affine *A, const bn_dx_coef *K, size_t rows, int C, int set_dx)
{
    const int nt = MW_NT(k);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++)
        dx_span(dx, dy, x, A, K, MW_SPAN_LO(rows, t, nt), MW_SPAN_LO(rows, t + 1, nt), C, set_dx);
}

/* The backward, with dy masked by a ReLU of max_value fused after the forward when relu (beta:
 * the forward's, for its v). */
static void bwd(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                const float *x, const float *mean, const float *invstd, const float *gamma,
                const float *beta, size_t rows, int C, int set_dx, int relu, float max_value)
{
    double sdy[MAXC], sdyx[MAXC];
    float gg[MAXC], bb[MAXC];
    gamma_beta(gg, bb, gamma, beta, C);
    const bn_affine A = {mean, invstd, gg, bb, relu, max_value};
    const int nb = bn_blocks(k, C);
#pragma omp parallel for num_threads(nb) schedule(static)
    for (int b = 0; b < nb; b++) {
        int c0, c1;
        bn_block(C, nb, b, &c0, &c1);
        bn_grad_sums(sdy, sdyx, dy, x, &A, rows, C, c0, c1);
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
    const bn_dx_coef K = {f, u, v};
    if (dx)
        dx_rows(k, dx, dy, x, &A, &K, rows, C, set_dx);
}

void mw_bn_bwd_cpu(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                   const float *x, const float *mean, const float *invstd, const float *gamma,
                   size_t rows, int C, int set_dx)
{
    if (C > MAXC)
        mw_bn_bwd_ref(k, dx, dgamma, dbeta, dy, x, mean, invstd, gamma, rows, C, set_dx);
    else
        bwd(k, dx, dgamma, dbeta, dy, x, mean, invstd, gamma, NULL, rows, C, set_dx, 0, 0.0f);
}

void mw_bn_relu_bwd_cpu(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                        const float *x, const float *mean, const float *invstd, const float *gamma,
                        const float *beta, size_t rows, int C, float max_value, int set_dx)
{
    if (C > MAXC)
        mw_bn_relu_bwd_ref(k, dx, dgamma, dbeta, dy, x, mean, invstd, gamma, beta, rows, C,
                           max_value, set_dx);
    else
        bwd(k, dx, dgamma, dbeta, dy, x, mean, invstd, gamma, beta, rows, C, set_dx, 1, max_value);
}

/* Synchronized BatchNormalization: the same channel blocks and tiles as above. */

/* s[c] = sum x, q[c] = sum x^2 over all rows, c in [c0, c1); tiled as col_sums. */
MW_WIDE_CLONES static void col_moments(double *restrict s, double *restrict q,
                                       const float *restrict x, size_t rows, int C, int c0, int c1)
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
    const bn_affine A = {mean, invstd, NULL, NULL, 0, 0.0f}; /* no ReLU: g, b unread */
    const int nb = bn_blocks(k, C);
#pragma omp parallel for num_threads(nb) schedule(static)
    for (int b = 0; b < nb; b++) {
        int c0, c1;
        bn_block(C, nb, b, &c0, &c1);
        if (dy)
            bn_grad_sums(s, s + C, dy, x, &A, rows, C, c0, c1);
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
    const bn_affine A = {mean, invstd, NULL, NULL, 0, 0.0f}; /* no ReLU: g, b unread */
    const bn_dx_coef K = {f, u, v};
    dx_rows(k, dx, dy, x, &A, &K, rows, C, 0);
}

/* Reference loops of the graph ops (kernels/graphops.h): the spec the tests trust. The
 * fast CPU twins are kernels/cpu/graphops.c. */
#include "kernels/graphops.h"

#include <math.h>
#include <string.h>

#define MW_ACT_HD static inline
#include "kernels/act_rules.h"

void mw_bn_fwd_train_ref(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                         const float *x, const float *gamma, const float *beta, size_t rows, int C,
                         float eps)
{
    (void)k;
    for (int c = 0; c < C; c++) {
        double s = 0.0;
        for (size_t r = 0; r < rows; r++)
            s += x[r * C + c];
        double mu = rows ? s / (double)rows : 0.0, q = 0.0;
        for (size_t r = 0; r < rows; r++) {
            double d = x[r * C + c] - mu;
            q += d * d;
        }
        mean[c] = (float)mu;
        var[c] = (float)(rows ? q / (double)rows : 0.0);
        invstd[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps));
    }
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) {
            float g = gamma ? gamma[c] : 1.0f, b = beta ? beta[c] : 0.0f;
            y[r * C + c] = (x[r * C + c] - mean[c]) * invstd[c] * g + b;
        }
}

void mw_bn_fwd_infer_ref(const mw_kctx *k, float *y, const float *x, const float *gamma,
                         const float *beta, const float *mean, const float *var, size_t rows, int C,
                         float eps)
{
    (void)k;
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) {
            float g = gamma ? gamma[c] : 1.0f, b = beta ? beta[c] : 0.0f;
            float inv = (float)(1.0 / sqrt((double)var[c] + (double)eps));
            y[r * C + c] = (x[r * C + c] - mean[c]) * inv * g + b;
        }
}

/* dx = gamma invstd / M (M dy - sum dy - xhat sum dy xhat), xhat = (x - mean) invstd. */
void mw_bn_bwd_ref(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                   const float *x, const float *mean, const float *invstd, const float *gamma,
                   size_t rows, int C)
{
    (void)k;
    for (int c = 0; c < C; c++) {
        double sdy = 0.0, sdyx = 0.0;
        for (size_t r = 0; r < rows; r++) {
            double xh = ((double)x[r * C + c] - mean[c]) * invstd[c];
            sdy += dy[r * C + c];
            sdyx += dy[r * C + c] * xh;
        }
        if (dgamma)
            dgamma[c] += (float)sdyx;
        if (dbeta)
            dbeta[c] += (float)sdy;
        if (!dx || rows == 0)
            continue;
        double g = gamma ? gamma[c] : 1.0, M = (double)rows;
        double f = g * invstd[c] / M;
        for (size_t r = 0; r < rows; r++) {
            double xh = ((double)x[r * C + c] - mean[c]) * invstd[c];
            dx[r * C + c] += (float)(f * (M * dy[r * C + c] - sdy - xh * sdyx));
        }
    }
}

void mw_bn_stats_acc_ref(const mw_kctx *k, float *g, const float *st, size_t count, float w)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        g[i] += w * st[i];
}

void mw_bn_stats_update_ref(const mw_kctx *k, float *p, float *g, size_t count, float momentum)
{
    (void)k;
    for (size_t i = 0; i < count; i++) {
        p[i] = p[i] * momentum + g[i] * (1.0f - momentum);
        g[i] = 0.0f;
    }
}

void mw_bn_sums_ref(const mw_kctx *k, double *s, const float *x, const float *dy, const float *mean,
                    const float *invstd, float *dgamma, float *dbeta, size_t rows, int C)
{
    (void)k;
    for (int c = 0; c < C; c++) {
        double a = 0.0, b = 0.0;
        for (size_t r = 0; r < rows; r++) {
            double v = x[r * C + c];
            if (dy) {
                double xh = (v - mean[c]) * invstd[c];
                a += dy[r * C + c];
                b += dy[r * C + c] * xh;
            } else {
                a += v;
                b += v * v;
            }
        }
        s[c] = a, s[C + c] = b;
        if (dy && dgamma)
            dgamma[c] += (float)b;
        if (dy && dbeta)
            dbeta[c] += (float)a;
    }
}

void mw_bn_sync_stats(float *mean, float *var, float *invstd, const double *s, double M, int C,
                      float eps)
{
    for (int c = 0; c < C; c++) {
        double mu = M > 0 ? s[c] / M : 0.0, v = M > 0 ? s[C + c] / M - mu * mu : 0.0;
        mean[c] = (float)mu;
        var[c] = (float)(v > 0.0 ? v : 0.0);
        invstd[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps));
    }
}

void mw_bn_sync_fwd_ref(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                        const float *x, const float *gamma, const float *beta, const double *s,
                        double M, size_t rows, int C, float eps)
{
    mw_bn_sync_stats(mean, var, invstd, s, M, C, eps);
    mw_bn_fwd_infer_ref(k, y, x, gamma, beta, mean, var, rows, C, eps);
}

void mw_bn_sync_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const float *x,
                        const float *mean, const float *invstd, const float *gamma, const double *s,
                        double M, size_t rows, int C)
{
    (void)k;
    if (!dx || M <= 0)
        return;
    for (int c = 0; c < C; c++) {
        double f = (gamma ? gamma[c] : 1.0) * invstd[c] / M;
        for (size_t r = 0; r < rows; r++) {
            double xh = ((double)x[r * C + c] - mean[c]) * invstd[c];
            dx[r * C + c] += (float)(f * (M * dy[r * C + c] - s[c] - xh * s[C + c]));
        }
    }
}

/* Cells of window (oh, ow) inside the image. */
static int window(const mw_pool_geom *g, int oh, int ow, int *h0, int *h1, int *w0, int *w1)
{
    *h0 = oh * g->SH - g->PT, *w0 = ow * g->SW - g->PL;
    *h1 = *h0 + g->PH, *w1 = *w0 + g->PW;
    *h0 = *h0 < 0 ? 0 : *h0, *w0 = *w0 < 0 ? 0 : *w0;
    *h1 = *h1 > g->H ? g->H : *h1, *w1 = *w1 > g->W ? g->W : *w1;
    return (*h1 - *h0) * (*w1 - *w0);
}

void mw_avgpool_fwd_ref(const mw_kctx *k, float *y, const float *x, const mw_pool_geom *g, int N)
{
    (void)k;
    const int C = g->C;
    for (int n = 0; n < N; n++) {
        const float *xi = x + (size_t)n * g->H * g->W * C;
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++) {
                int h0, h1, w0, w1, cells = window(g, oh, ow, &h0, &h1, &w0, &w1);
                float *yo = y + (((size_t)n * g->OH + oh) * g->OW + ow) * C;
                for (int c = 0; c < C; c++) {
                    double s = 0.0;
                    for (int h = h0; h < h1; h++)
                        for (int w = w0; w < w1; w++)
                            s += xi[((size_t)h * g->W + w) * C + c];
                    yo[c] = (float)(s / cells);
                }
            }
    }
}

void mw_avgpool_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const mw_pool_geom *g, int N)
{
    (void)k;
    const int C = g->C;
    for (int n = 0; n < N; n++) {
        float *dxi = dx + (size_t)n * g->H * g->W * C;
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++) {
                int h0, h1, w0, w1, cells = window(g, oh, ow, &h0, &h1, &w0, &w1);
                const float *d = dy + (((size_t)n * g->OH + oh) * g->OW + ow) * C;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++)
                        for (int c = 0; c < C; c++)
                            dxi[((size_t)h * g->W + w) * C + c] += d[c] / (float)cells;
            }
    }
}

void mw_pad2d_fwd_ref(const mw_kctx *k, float *y, const float *x, int H, int W, int C, int PT,
                      int PB, int PL, int PR, int N)
{
    (void)k;
    const int OH = PT + H + PB, OW = PL + W + PR;
    memset(y, 0, (size_t)N * OH * OW * C * sizeof *y);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            memcpy(y + (((size_t)n * OH + h + PT) * OW + PL) * C, x + (((size_t)n * H + h) * W) * C,
                   (size_t)W * C * sizeof *x);
}

void mw_pad2d_bwd_ref(const mw_kctx *k, float *dx, const float *dy, int H, int W, int C, int PT,
                      int PB, int PL, int PR, int N)
{
    (void)k;
    const int OH = PT + H + PB, OW = PL + W + PR;
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            const float *d = dy + (((size_t)n * OH + h + PT) * OW + PL) * C;
            float *o = dx + (((size_t)n * H + h) * W) * C;
            for (size_t i = 0; i < (size_t)W * C; i++)
                o[i] += d[i];
        }
}

void mw_acc_ref(const mw_kctx *k, float *y, const float *x, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        y[i] += x[i];
}

void mw_mul_fwd_ref(const mw_kctx *k, float *y, const float *a, const float *b, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        y[i] = a[i] * b[i];
}

void mw_mul_bwd_ref(const mw_kctx *k, float *da, float *db, const float *dy, const float *a,
                    const float *b, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++) {
        float d = dy[i];
        if (da)
            da[i] += d * b[i];
        if (db)
            db[i] += d * a[i];
    }
}

void mw_concat_fwd_ref(const mw_kctx *k, float *y, const float *x, size_t rows, int CX, int CY,
                       int off)
{
    (void)k;
    for (size_t r = 0; r < rows; r++)
        memcpy(y + r * CY + off, x + r * CX, (size_t)CX * sizeof *x);
}

void mw_concat_bwd_ref(const mw_kctx *k, float *dx, const float *dy, size_t rows, int CX, int CY,
                       int off)
{
    (void)k;
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < CX; c++)
            dx[r * CX + c] += dy[r * CY + off + c];
}

void mw_act_fwd_ref(const mw_kctx *k, float *y, const float *x, size_t count, mw_act_kind kind,
                    float alpha)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        y[i] = act_value(x[i], kind, alpha);
}

void mw_act_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const float *x, const float *y,
                    size_t count, mw_act_kind kind, float alpha)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        dx[i] += dy[i] * act_slope(x[i], y[i], kind, alpha);
}

void mw_softmax_fwd_ref(const mw_kctx *k, float *y, const float *x, size_t rows, int C)
{
    (void)k;
    for (size_t r = 0; r < rows; r++) {
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

void mw_softmax_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const float *y, size_t rows,
                        int C)
{
    (void)k;
    for (size_t r = 0; r < rows; r++) {
        const float *d = dy + r * C, *yr = y + r * C;
        double s = 0.0;
        for (int c = 0; c < C; c++)
            s += (double)d[c] * yr[c];
        for (int c = 0; c < C; c++)
            dx[r * C + c] += (float)(yr[c] * (d[c] - s));
    }
}

/* Reference loops of BatchNormalization (kernels/batchnorm.h), its moving statistics and its
 * synchronized form: the spec the tests trust. */
#include "kernels/batchnorm.h"
#include "kernels/twins.h"

#include <math.h>
#include <string.h>

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
                   size_t rows, int C, int set_dx)
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
            const float d = (float)(f * (M * dy[r * C + c] - sdy - xh * sdyx));
            dx[r * C + c] = set_dx ? d : dx[r * C + c] + d;
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

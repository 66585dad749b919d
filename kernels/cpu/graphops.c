/* The fast CPU path of the graph ops that dominate a ResNet's time besides the convolutions:
 * BatchNormalization, row by row (the reference walks each channel down the rows, a stride
 * of C floats per step). Sums in double per channel, as the reference; the order of the
 * additions differs, so results agree with it to rounding. */
#include "kernels/graphops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Per-channel sums in double: 2 C doubles, on the stack for the channel counts models use. */
#define MAXC 1024

void mw_bn_fwd_train_cpu(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                         const float *x, const float *gamma, const float *beta, size_t rows, int C,
                         float eps)
{
    if (C > MAXC) {
        mw_bn_fwd_train_ref(k, y, mean, var, invstd, x, gamma, beta, rows, C, eps);
        return;
    }
    double s[MAXC], q[MAXC];
    float mu[MAXC];
    memset(s, 0, (size_t)C * sizeof *s);
    memset(q, 0, (size_t)C * sizeof *q);
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++)
            s[c] += x[r * C + c];
    for (int c = 0; c < C; c++)
        mu[c] = (float)(rows ? s[c] / (double)rows : 0.0);
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) {
            double d = (double)x[r * C + c] - (double)(rows ? s[c] / (double)rows : 0.0);
            q[c] += d * d;
        }
    float a[MAXC], b[MAXC];
    for (int c = 0; c < C; c++) {
        mean[c] = mu[c];
        var[c] = (float)(rows ? q[c] / (double)rows : 0.0);
        invstd[c] = (float)(1.0 / sqrt((double)var[c] + (double)eps));
        a[c] = invstd[c] * (gamma ? gamma[c] : 1.0f);
        b[c] = beta ? beta[c] : 0.0f;
    }
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++)
            y[r * C + c] = (x[r * C + c] - mu[c]) * a[c] + b[c];
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
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++)
            y[r * C + c] = (x[r * C + c] - mean[c]) * a[c] + b[c];
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
    memset(sdy, 0, (size_t)C * sizeof *sdy);
    memset(sdyx, 0, (size_t)C * sizeof *sdyx);
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) {
            float xh = (x[r * C + c] - mean[c]) * invstd[c];
            sdy[c] += dy[r * C + c];
            sdyx[c] += (double)(dy[r * C + c] * xh);
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
    if (!dx)
        return;
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) {
            float xh = (x[r * C + c] - mean[c]) * invstd[c];
            dx[r * C + c] += f[c] * (dy[r * C + c] - u[c] - xh * v[c]);
        }
}

/* Synchronized BatchNormalization: row-major sweeps, as above. */
void mw_bn_sums_cpu(const mw_kctx *k, double *s, const float *x, const float *dy, const float *mean,
                    const float *invstd, size_t rows, int C)
{
    if (C > MAXC) {
        mw_bn_sums_ref(k, s, x, dy, mean, invstd, rows, C);
        return;
    }
    memset(s, 0, 2 * (size_t)C * sizeof *s);
    double *a = s, *b = s + C;
    if (!dy) {
        for (size_t r = 0; r < rows; r++)
            for (int c = 0; c < C; c++) {
                double v = x[r * C + c];
                a[c] += v;
                b[c] += v * v;
            }
        return;
    }
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) {
            float xh = (x[r * C + c] - mean[c]) * invstd[c];
            a[c] += dy[r * C + c];
            b[c] += (double)(dy[r * C + c] * xh);
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
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) {
            float xh = (x[r * C + c] - mean[c]) * invstd[c];
            dx[r * C + c] += f[c] * (dy[r * C + c] - u[c] - xh * v[c]);
        }
}

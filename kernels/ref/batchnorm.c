/* Reference loops of BatchNormalization (kernels/batchnorm.h), its moving statistics and its
 * synchronized form: the spec the tests trust. */
#include "kernels/batchnorm.h"
#include "kernels/twins.h"

#include <math.h>
#include <string.h>

#define MW_ACT_HD static inline
#include "kernels/act_rules.h"

/* The forward's output before any clip: (x - mean) * invstd * gamma + beta, each operation
 * rounded to float in that order (bn_fwd_train's y; bn_relu_bwd's mask recomputes it). */
static float bn_out(const float *x, const float *mean, const float *invstd, const float *gamma,
                    const float *beta, size_t r, int C, int c)
{
    float g = gamma ? gamma[c] : 1.0f, b = beta ? beta[c] : 0.0f;
    return (x[r * C + c] - mean[c]) * invstd[c] * g + b;
}

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
        for (int c = 0; c < C; c++)
            y[r * C + c] = bn_out(x, mean, invstd, gamma, beta, r, C, c);
}

void mw_bn_relu_fwd_train_ref(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                              const float *x, const float *gamma, const float *beta, size_t rows,
                              int C, float eps, float max_value)
{
    mw_bn_fwd_train_ref(k, y, mean, var, invstd, x, gamma, beta, rows, C, eps);
    for (size_t i = 0; i < rows * (size_t)C; i++)
        y[i] = relux_value(y[i], max_value, 0.0f, 0.0f);
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

/* The gradient the normalization's backward reads: dy, or with a ReLU of max_value M fused after
 * it (relu set), dy where 0 < v < M for the forward's v, else 0 (bn_relu_bwd). */
typedef struct {
    int relu;
    const float *beta;
    float max_value;
} bn_relu_mask;

static float bn_dy(const float *dy, const float *x, const float *mean, const float *invstd,
                   const float *gamma, const bn_relu_mask *m, size_t r, int C, int c)
{
    if (!m->relu)
        return dy[r * C + c];
    const float v = bn_out(x, mean, invstd, gamma, m->beta, r, C, c);
    return v > 0.0f && v < m->max_value ? dy[r * C + c] : 0.0f;
}

/* dx = gamma invstd / M (M dy - sum dy - xhat sum dy xhat), xhat = (x - mean) invstd, with dy
 * masked by m. */
static void bn_bwd(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                   const float *mean, const float *invstd, const float *gamma, size_t rows, int C,
                   int set_dx, const bn_relu_mask *m)
{
    for (int c = 0; c < C; c++) {
        double sdy = 0.0, sdyx = 0.0;
        for (size_t r = 0; r < rows; r++) {
            double xh = ((double)x[r * C + c] - mean[c]) * invstd[c];
            const float d = bn_dy(dy, x, mean, invstd, gamma, m, r, C, c);
            sdy += d;
            sdyx += d * xh;
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
            const float dv = bn_dy(dy, x, mean, invstd, gamma, m, r, C, c);
            const float d = (float)(f * (M * dv - sdy - xh * sdyx));
            dx[r * C + c] = set_dx ? d : dx[r * C + c] + d;
        }
    }
}

void mw_bn_bwd_ref(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                   const float *x, const float *mean, const float *invstd, const float *gamma,
                   size_t rows, int C, int set_dx)
{
    (void)k;
    const bn_relu_mask none = {0, NULL, 0.0f};
    bn_bwd(dx, dgamma, dbeta, dy, x, mean, invstd, gamma, rows, C, set_dx, &none);
}

void mw_bn_relu_bwd_ref(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                        const float *x, const float *mean, const float *invstd, const float *gamma,
                        const float *beta, size_t rows, int C, float max_value, int set_dx)
{
    (void)k;
    const bn_relu_mask relu = {1, beta, max_value};
    bn_bwd(dx, dgamma, dbeta, dy, x, mean, invstd, gamma, rows, C, set_dx, &relu);
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

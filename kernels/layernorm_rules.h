/* LayerNormalization's per-row arithmetic, written once for the reference (kernels/ref/
 * layernorm.c) and its CUDA twin (kernels/cuda/layernorm.cu): the mean and the biased variance
 * in double (two passes, as jnp.mean and jnp.var), then Keras' form y = x * inv + (beta -
 * mean * inv), inv = gamma / sqrt(var + eps), in float32; the input's gradient
 * dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma, xhat = (x - mean) rstd. Private
 * to kernels/: each includer defines MW_LN_HD (static inline, or __device__ static inline). */
#ifndef MW_KERNELS_LAYERNORM_RULES_H
#define MW_KERNELS_LAYERNORM_RULES_H

#include <math.h>

/* One row of D values: y, and its mean and 1 / sqrt(var + eps) into *mean, *rstd. */
MW_LN_HD void ln_row_fwd(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                         const float *beta, int D, float eps)
{
    double s = 0, v = 0;
    for (int j = 0; j < D; j++)
        s += x[j];
    const float m = (float)(s / D);
    for (int j = 0; j < D; j++)
        v += ((double)x[j] - m) * ((double)x[j] - m);
    const float r = 1.0f / sqrtf((float)(v / D) + eps);
    *mean = m, *rstd = r;
    for (int j = 0; j < D; j++) {
        const float inv = gamma ? r * gamma[j] : r;
        y[j] = x[j] * inv + ((beta ? beta[j] : 0.0f) - m * inv);
    }
}

/* A row's mean(g) and mean(g xhat) of its input gradient, into mg[0], mg[1]. */
MW_LN_HD void ln_row_means(float mg[2], const float *dy, const float *x, const float *gamma,
                           float mean, float rstd, int D)
{
    double sg = 0, sgx = 0;
    for (int j = 0; j < D; j++) {
        const float xh = (x[j] - mean) * rstd, g = gamma ? dy[j] * gamma[j] : dy[j];
        sg += g, sgx += (double)g * xh;
    }
    mg[0] = (float)(sg / D), mg[1] = (float)(sgx / D);
}

/* One row's input gradient added into dx. */
MW_LN_HD void ln_row_dx(float *dx, const float *dy, const float *x, const float *gamma, float mean,
                        float rstd, int D)
{
    float m2[2];
    ln_row_means(m2, dy, x, gamma, mean, rstd, D);
    const float mg = m2[0], mgx = m2[1];
    for (int j = 0; j < D; j++) {
        const float xh = (x[j] - mean) * rstd, g = gamma ? dy[j] * gamma[j] : dy[j];
        dx[j] += rstd * (g - mg - xh * mgx);
    }
}

/* The same, fused with the residual Add before the norm: t = ds + the row's input gradient
 * (the expression ln_row_dx adds, so the same bits) added into da and db (NULL: none). */
MW_LN_HD void ln_row_dx_add(float *da, float *db, const float *ds, const float *dy, const float *x,
                            const float *gamma, float mean, float rstd, int D)
{
    float m2[2];
    ln_row_means(m2, dy, x, gamma, mean, rstd, D);
    const float mg = m2[0], mgx = m2[1];
    for (int j = 0; j < D; j++) {
        const float xh = (x[j] - mean) * rstd, g = gamma ? dy[j] * gamma[j] : dy[j];
        const float t = ds[j] + rstd * (g - mg - xh * mgx);
        if (da)
            da[j] += t;
        if (db)
            db[j] += t;
    }
}

/* A residual Add's row as Add sums it: s = (0 + a) + b (0 + a keeps Add's +0 for a -0). */
MW_LN_HD void ln_row_sum(float *s, const float *a, const float *b, int D)
{
    for (int j = 0; j < D; j++)
        s[j] = (0.0f + a[j]) + b[j];
}

#endif

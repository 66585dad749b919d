/* LayerNormalization, the reference (kernels/layernorm.h): per row the mean and the biased
 * variance in double (two passes, as jnp.mean and jnp.var), then Keras' form
 * y = x * inv + (beta - mean * inv), inv = gamma / sqrt(var + eps), in float32. */
#include "kernels/layernorm.h"

#include <math.h>

void mw_layernorm_fwd_ref(const mw_kctx *k, float *y, float *stat, const float *x,
                          const float *gamma, const float *beta, int rows, int D, float eps)
{
    (void)k;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * D;
        float *yr = y + (size_t)r * D;
        double s = 0, v = 0;
        for (int j = 0; j < D; j++)
            s += xr[j];
        const float mean = (float)(s / D);
        for (int j = 0; j < D; j++)
            v += ((double)xr[j] - mean) * ((double)xr[j] - mean);
        const float rstd = 1.0f / sqrtf((float)(v / D) + eps);
        stat[r] = mean, stat[rows + r] = rstd;
        for (int j = 0; j < D; j++) {
            const float inv = gamma ? rstd * gamma[j] : rstd;
            yr[j] = xr[j] * inv + ((beta ? beta[j] : 0.0f) - mean * inv);
        }
    }
}

/* xhat = (x - mean) rstd, g = dy gamma: dx = rstd (g - mean(g) - xhat mean(g xhat));
 * dgamma += sum over rows of dy xhat, dbeta += sum of dy (rows in order). */
void mw_layernorm_bwd_ref(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                          const float *x, const float *stat, const float *gamma, int rows, int D)
{
    (void)k;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * D, *dr = dy + (size_t)r * D;
        const float mean = stat[r], rstd = stat[rows + r];
        double sg = 0, sgx = 0;
        for (int j = 0; j < D; j++) {
            const float xh = (xr[j] - mean) * rstd, g = gamma ? dr[j] * gamma[j] : dr[j];
            sg += g, sgx += (double)g * xh;
            if (dgamma)
                dgamma[j] += dr[j] * xh;
            if (dbeta)
                dbeta[j] += dr[j];
        }
        if (!dx)
            continue;
        const float mg = (float)(sg / D), mgx = (float)(sgx / D);
        float *o = dx + (size_t)r * D;
        for (int j = 0; j < D; j++) {
            const float xh = (xr[j] - mean) * rstd, g = gamma ? dr[j] * gamma[j] : dr[j];
            o[j] += rstd * (g - mg - xh * mgx);
        }
    }
}

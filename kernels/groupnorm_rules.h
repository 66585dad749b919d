/* GroupNormalization's per-group arithmetic, written once for the reference (kernels/ref/
 * groupnorm.c) and its CUDA twin (kernels/cuda/groupnorm.cu). An example is S positions of C
 * channels (channels last); group g is channels [c0, c0 + cg) at every position, cg = C / G.
 * As Keras 3.15 computes it (keras/src/layers/normalization/group_normalization.py): the mean
 * and the biased variance of the group's S cg values (ops.moments; here in double, two
 * passes), inv = gamma[c] / sqrt(var + eps), y = x * inv + (beta[c] - mean * inv); the input's
 * gradient, per group, dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma[c],
 * xhat = (x - mean) rstd. Private to kernels/: each includer defines MW_GN_HD (static inline,
 * or __device__ static inline). */
#ifndef MW_KERNELS_GROUPNORM_RULES_H
#define MW_KERNELS_GROUPNORM_RULES_H

#include <math.h>
#include <stddef.h>

/* One group of one example (x, y at the example's first value): y, and the group's mean and
 * 1 / sqrt(var + eps) into *mean, *rstd. */
MW_GN_HD void gn_group_fwd(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                           const float *beta, int S, int C, int c0, int cg, float eps)
{
    const double cnt = (double)S * cg;
    double s = 0, v = 0;
    for (int p = 0; p < S; p++)
        for (int j = 0; j < cg; j++)
            s += x[(size_t)p * C + c0 + j];
    const float m = (float)(s / cnt);
    for (int p = 0; p < S; p++)
        for (int j = 0; j < cg; j++) {
            const double d = (double)x[(size_t)p * C + c0 + j] - m;
            v += d * d;
        }
    const float r = 1.0f / sqrtf((float)(v / cnt) + eps);
    *mean = m, *rstd = r;
    for (int p = 0; p < S; p++)
        for (int j = 0; j < cg; j++) {
            const int c = c0 + j;
            const size_t at = (size_t)p * C + c;
            const float inv = gamma ? r * gamma[c] : r;
            y[at] = x[at] * inv + ((beta ? beta[c] : 0.0f) - m * inv);
        }
}

/* One group's input gradient added into dx (dx, dy, x at the example's first value). */
MW_GN_HD void gn_group_dx(float *dx, const float *dy, const float *x, const float *gamma,
                          float mean, float rstd, int S, int C, int c0, int cg)
{
    const double cnt = (double)S * cg;
    double sg = 0, sgx = 0;
    for (int p = 0; p < S; p++)
        for (int j = 0; j < cg; j++) {
            const size_t at = (size_t)p * C + c0 + j;
            const float xh = (x[at] - mean) * rstd, g = gamma ? dy[at] * gamma[c0 + j] : dy[at];
            sg += g, sgx += (double)g * xh;
        }
    const float mg = (float)(sg / cnt), mgx = (float)(sgx / cnt);
    for (int p = 0; p < S; p++)
        for (int j = 0; j < cg; j++) {
            const size_t at = (size_t)p * C + c0 + j;
            const float xh = (x[at] - mean) * rstd, g = gamma ? dy[at] * gamma[c0 + j] : dy[at];
            dx[at] += rstd * (g - mg - xh * mgx);
        }
}

/* Channel c's gamma and beta gradients over n examples of S positions, summed in example then
 * position order (dgamma, dbeta NULL: none); stat: the n G means, then the n G rstds. */
MW_GN_HD void gn_channel_params(float *dgamma, float *dbeta, const float *dy, const float *x,
                                const float *stat, int n, int S, int C, int G, int c)
{
    const int g = c / (C / G);
    float gg = dgamma ? dgamma[c] : 0.0f, gb = dbeta ? dbeta[c] : 0.0f;
    for (int i = 0; i < n; i++) {
        const float m = stat[(size_t)i * G + g], r = stat[(size_t)n * G + (size_t)i * G + g];
        for (int p = 0; p < S; p++) {
            const size_t at = ((size_t)i * S + p) * C + c;
            gg += dy[at] * ((x[at] - m) * r);
            gb += dy[at];
        }
    }
    if (dgamma)
        dgamma[c] = gg;
    if (dbeta)
        dbeta[c] = gb;
}

#endif

/* RMS normalization's per-row arithmetic, written once for the reference (kernels/ref/
 * rmsnorm.c), the fast CPU twin (kernels/cpu/rmsnorm.c) and the CUDA twin (kernels/cuda/
 * rmsnorm.cu). A row's statistic v is the mean of the squares (Keras' RMSNormalization,
 * KerasHub's LlamaLayerNorm and Gemma's RMSNormalization), or, centered, the biased variance
 * around the mean m (Keras' LayerNormalization(rms_scaling=True), which still multiplies x, not
 * x - m), summed in double; then, in float32 and in Keras' order, y = (x * r) * (gamma + offset),
 * r = 1 / sqrt(v + eps) (offset 1: Gemma's (1 + scale)). The input's gradient: with
 * g = dy (gamma + offset) and c = x - m (m = 0 uncentered), dx = r (g - c r^2 mean(g x)); the
 * centered m's own term vanishes, as the deviations sum to 0. Private to kernels/: each
 * includer defines MW_RMS_HD (static inline, or __device__ static inline). */
#ifndef MW_KERNELS_RMSNORM_RULES_H
#define MW_KERNELS_RMSNORM_RULES_H

#include <math.h>

/* A row's output from its r: y = (x * r) * (gamma + offset). */
MW_RMS_HD void rms_row_scale(float *y, const float *x, const float *gamma, float r, int D,
                             float offset)
{
    for (int j = 0; j < D; j++)
        y[j] = (x[j] * r) * (gamma[j] + offset);
}

/* One row of D values: y, and its mean (0 uncentered) and r into *mean, *r. */
MW_RMS_HD void rms_row_fwd(float *y, float *mean, float *r, const float *x, const float *gamma,
                           int D, float eps, int centered, float offset)
{
    double s = 0, v = 0;
    for (int j = 0; centered && j < D; j++)
        s += x[j];
    const float m = centered ? (float)(s / D) : 0.0f;
    for (int j = 0; j < D; j++)
        v += ((double)x[j] - m) * ((double)x[j] - m);
    const float rr = 1.0f / sqrtf((float)(v / D) + eps);
    *mean = m, *r = rr;
    rms_row_scale(y, x, gamma, rr, D, offset);
}

/* A row's r^2 mean(g x), g = dy (gamma + offset): the input gradient's second term's factor. */
MW_RMS_HD float rms_row_k(const float *dy, const float *x, const float *gamma, float r, int D,
                          float offset)
{
    double sgx = 0;
    for (int j = 0; j < D; j++)
        sgx += (double)(dy[j] * (gamma[j] + offset)) * x[j];
    return r * r * (float)(sgx / D);
}

/* A row's input gradient from k = rms_row_k: added into dx; or (dx NULL), fused with the residual
 * Add before the norm, t = ds + it (the same expression, so the same bits) added into da and db
 * (NULL: none). */
MW_RMS_HD void rms_row_dx_k(float *dx, float *da, float *db, const float *ds, const float *dy,
                            const float *x, const float *gamma, float mean, float r, float k, int D,
                            float offset)
{
    if (dx) {
        for (int j = 0; j < D; j++)
            dx[j] += r * (dy[j] * (gamma[j] + offset) - (x[j] - mean) * k);
        return;
    }
    for (int j = 0; j < D; j++) {
        const float t = ds[j] + r * (dy[j] * (gamma[j] + offset) - (x[j] - mean) * k);
        if (da)
            da[j] += t;
        if (db)
            db[j] += t;
    }
}

/* One row's input gradient added into dx. */
MW_RMS_HD void rms_row_dx(float *dx, const float *dy, const float *x, const float *gamma,
                          float mean, float r, int D, float offset)
{
    rms_row_dx_k(dx, NULL, NULL, NULL, dy, x, gamma, mean, r, rms_row_k(dy, x, gamma, r, D, offset),
                 D, offset);
}

/* The same, fused with the residual Add before the norm (rms_row_dx_k). */
MW_RMS_HD void rms_row_dx_add(float *da, float *db, const float *ds, const float *dy,
                              const float *x, const float *gamma, float mean, float r, int D,
                              float offset)
{
    rms_row_dx_k(NULL, da, db, ds, dy, x, gamma, mean, r, rms_row_k(dy, x, gamma, r, D, offset), D,
                 offset);
}

#endif

/* Reference optimizer updates, Keras' formulas (see kernels.h). */
#include "kernels/optim.h"

#include <math.h>

void mw_adam_ref(const mw_kctx *k, float *p, float *m, float *v, const float *g, size_t count,
                 float lr_t, float b1, float b2, float eps)
{
    (void)k;
    for (size_t i = 0; i < count; i++) {
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        p[i] -= lr_t * m[i] / (sqrtf(v[i]) + eps);
    }
}

void mw_sgd_ref(const mw_kctx *k, float *p, float *vel, const float *g, size_t count, float lr,
                float mu)
{
    (void)k;
    for (size_t i = 0; i < count; i++) {
        vel[i] = mu * vel[i] - lr * g[i];
        p[i] += vel[i];
    }
}

void mw_regularize_ref(const mw_kctx *k, float *g, double *acc, const float *w, size_t count,
                       double l1, double l2, float scale)
{
    (void)k;
    const float l1f = (float)l1, two_l2f = (float)(2.0 * l2);
    double s1 = 0.0, s2 = 0.0;
    for (size_t i = 0; i < count; i++) {
        s1 += fabs((double)w[i]);
        s2 += (double)w[i] * w[i];
        if (g) {
            float sgn = (float)((w[i] > 0.0f) - (w[i] < 0.0f));
            g[i] += scale * (l1f * sgn + two_l2f * w[i]);
        }
    }
    *acc += (double)scale * (l1 * s1 + l2 * s2);
}

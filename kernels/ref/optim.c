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

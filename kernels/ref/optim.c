/* Reference optimizer updates, Keras' formulas (see kernels.h). */
#include "kernels/twins.h"

#include <math.h>

#define MW_OPTIM_HD static inline
#include "kernels/optim_rules.h"

void mw_sgd_step_ref(const mw_kctx *k, float *p, float *s1, float *s2, float *s3, const float *g,
                     size_t count, const mw_optim_hyper *h)
{
    (void)k, (void)s2, (void)s3;
    for (size_t i = 0; i < count; i++)
        rule_sgd(p + i, s1 ? s1 + i : NULL, g[i], h);
}

void mw_adam_step_ref(const mw_kctx *k, float *p, float *s1, float *s2, float *s3, const float *g,
                      size_t count, const mw_optim_hyper *h)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        rule_adam(p + i, s1 + i, s2 + i, s3 ? s3 + i : NULL, g[i], h);
}

void mw_rmsprop_step_ref(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,
                         const float *g, size_t count, const mw_optim_hyper *h)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        rule_rmsprop(p + i, s1 + i, s2 ? s2 + i : NULL, s3 ? s3 + i : NULL, g[i], h);
}

void mw_adagrad_step_ref(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,
                         const float *g, size_t count, const mw_optim_hyper *h)
{
    (void)k, (void)s2, (void)s3;
    for (size_t i = 0; i < count; i++)
        rule_adagrad(p + i, s1 + i, g[i], h);
}

void mw_adamax_step_ref(const mw_kctx *k, float *p, float *s1, float *s2, float *s3, const float *g,
                        size_t count, const mw_optim_hyper *h)
{
    (void)k, (void)s3;
    for (size_t i = 0; i < count; i++)
        rule_adamax(p + i, s1 + i, s2 + i, g[i], h);
}

void mw_sumsq_ref(const mw_kctx *k, double *out, const float *g, size_t count)
{
    (void)k;
    double s = 0.0;
    for (size_t i = 0; i < count; i++)
        s += (double)g[i] * g[i];
    *out = s;
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

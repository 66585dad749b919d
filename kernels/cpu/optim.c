/* Fast CPU optimizer updates: the reference formulas, parallel and vectorized.
 * Each element's arithmetic is identical to the reference, so results match
 * it bitwise for any thread count. */
#include "kernels/cpu/cpu.h"
#include "kernels/twins.h"

#include <math.h>

#define MW_OPTIM_HD static inline
#include "kernels/optim_rules.h"

/* Without weight decay and clipvalue (the usual case) rule_decay returns the parameter as it
 * is and rule_grad only multiplies by gscale: the loops below are the rules' expressions with
 * those branches gone, so they vectorize (bitwise the rules: kernel_check). A model of 25
 * million parameters spent a tenth of its step in the scalar loop. */
static int plain(const mw_optim_hyper *h)
{
    return !(h->weight_decay > 0.0f) && !(h->clipvalue > 0.0f);
}

static void sgd_plain(const mw_kctx *k, float *p, float *s1, const float *g, size_t count,
                      const mw_optim_hyper *h)
{
    const float lr = h->lr, gs = h->gscale, mu = h->momentum;
    if (mu == 0.0f) {
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
        for (size_t i = 0; i < count; i++)
            p[i] = p[i] - g[i] * gs * lr;
    } else if (h->nesterov) {
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
        for (size_t i = 0; i < count; i++) {
            const float gi = g[i] * gs, m = s1[i] * mu - gi * lr;
            s1[i] = m;
            p[i] = p[i] + (m * mu - gi * lr);
        }
    } else {
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
        for (size_t i = 0; i < count; i++) {
            const float m = s1[i] * mu - g[i] * gs * lr;
            s1[i] = m;
            p[i] = p[i] + m;
        }
    }
}

/* Keras 3's rules (optim_rules.h), element by element over the threads. */
void mw_sgd_step_cpu(const mw_kctx *k, float *p, float *s1, float *s2, float *s3, const float *g,
                     size_t count, const mw_optim_hyper *h)
{
    (void)s2, (void)s3;
    if (plain(h) && (h->momentum == 0.0f || s1)) {
        sgd_plain(k, p, s1, g, count, h);
        return;
    }
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        rule_sgd(p + i, s1 ? s1 + i : NULL, g[i], h);
}

void mw_adam_step_cpu(const mw_kctx *k, float *p, float *s1, float *s2, float *s3, const float *g,
                      size_t count, const mw_optim_hyper *h)
{
    if (plain(h) && !h->amsgrad) {
        const float gs = h->gscale, b1 = h->one_minus_beta1, b2 = h->one_minus_beta2;
        const float lr = h->lr, eps = h->epsilon;
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
        for (size_t i = 0; i < count; i++) {
            const float gi = g[i] * gs;
            const float m = s1[i] + (gi - s1[i]) * b1, v = s2[i] + (gi * gi - s2[i]) * b2;
            s1[i] = m;
            s2[i] = v;
            p[i] = p[i] - m * lr / (sqrtf(v) + eps);
        }
        return;
    }
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        rule_adam(p + i, s1 + i, s2 + i, s3 ? s3 + i : NULL, g[i], h);
}

void mw_rmsprop_step_cpu(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,
                         const float *g, size_t count, const mw_optim_hyper *h)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        rule_rmsprop(p + i, s1 + i, s2 ? s2 + i : NULL, s3 ? s3 + i : NULL, g[i], h);
}

void mw_adagrad_step_cpu(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,
                         const float *g, size_t count, const mw_optim_hyper *h)
{
    (void)s2, (void)s3;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        rule_adagrad(p + i, s1 + i, g[i], h);
}

void mw_adamax_step_cpu(const mw_kctx *k, float *p, float *s1, float *s2, float *s3, const float *g,
                        size_t count, const mw_optim_hyper *h)
{
    (void)s3;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        rule_adamax(p + i, s1 + i, s2 + i, g[i], h);
}

/* Fast CPU optimizer updates: the reference formulas, parallel and vectorized.
 * Each element's arithmetic is identical to the reference, so results match
 * it bitwise for any thread count. */
#include "kernels/cpu/cpu.h"
#include "kernels/twins.h"

#include <math.h>

#define MW_OPTIM_HD static inline
#include "kernels/optim_rules.h"

/* Keras 3's rules (optim_rules.h), element by element over the threads. */
void mw_sgd_step_cpu(const mw_kctx *k, float *p, float *s1, float *s2, float *s3, const float *g,
                     size_t count, const mw_optim_hyper *h)
{
    (void)s2, (void)s3;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        rule_sgd(p + i, s1 ? s1 + i : NULL, g[i], h);
}

void mw_adam_step_cpu(const mw_kctx *k, float *p, float *s1, float *s2, float *s3, const float *g,
                      size_t count, const mw_optim_hyper *h)
{
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

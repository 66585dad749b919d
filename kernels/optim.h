/* Optimizer update twins: Adam, SGD with momentum, and the L1/L2 weight penalty
 * (see kernels.h). */
#ifndef MW_KERNELS_OPTIM_H
#define MW_KERNELS_OPTIM_H

#include "kernels/kernels.h"

#define MW_OPTIM_DECL(sfx)                                                                         \
    void mw_adam_##sfx(const mw_kctx *k, float *p, float *m, float *v, const float *g,             \
                       size_t count, float lr_t, float b1, float b2, float eps);                   \
    void mw_sgd_##sfx(const mw_kctx *k, float *p, float *vel, const float *g, size_t count,        \
                      float lr, float mu);
MW_OPTIM_DECL(ref)
MW_OPTIM_DECL(cpu)
MW_OPTIM_DECL(cuda)
#undef MW_OPTIM_DECL

/* The penalty runs once per step over the weights: the CPU table keeps the
 * reference (its double sums are sequential, so the penalty is reproducible). */
void mw_regularize_ref(const mw_kctx *k, float *g, double *acc, const float *w, size_t count,
                       double l1, double l2, float scale);
void mw_regularize_cuda(const mw_kctx *k, float *g, double *acc, const float *w, size_t count,
                        double l1, double l2, float scale);

#endif

/* Optimizer update twins: Adam and SGD with momentum (see kernels.h). */
#ifndef MW_KERNELS_OPTIM_H
#define MW_KERNELS_OPTIM_H

#include "kernels/kernels.h"

#define MW_OPTIM_DECL(sfx)                                                                  \
    void mw_adam_##sfx(const mw_kctx *k, float *p, float *m, float *v, const float *g,        \
                       size_t count, float lr_t, float b1, float b2, float eps);             \
    void mw_sgd_##sfx(const mw_kctx *k, float *p, float *vel, const float *g, size_t count,   \
                      float lr, float mu);
MW_OPTIM_DECL(ref)
MW_OPTIM_DECL(cpu)
MW_OPTIM_DECL(cuda)
#undef MW_OPTIM_DECL

#endif

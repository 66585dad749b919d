/* LayerNormalization's twins (see kernels.h: mw_layernorm_fwd_fn, mw_layernorm_bwd_fn); the fast
 * CPU twin runs the reference's rows on k's threads, bitwise the same. */
#ifndef MW_KERNELS_LAYERNORM_H
#define MW_KERNELS_LAYERNORM_H

#include "kernels/kernels.h"

#define MW_LAYERNORM_DECL(sfx)                                                                     \
    void mw_layernorm_fwd_##sfx(const mw_kctx *k, float *y, float *stat, const float *x,           \
                                const float *gamma, const float *beta, int rows, int D,            \
                                float eps);                                                        \
    void mw_layernorm_bwd_##sfx(const mw_kctx *k, float *dx, float *dgamma, float *dbeta,          \
                                const float *dy, const float *x, const float *stat,                \
                                const float *gamma, int rows, int D);
MW_LAYERNORM_DECL(ref)
MW_LAYERNORM_DECL(cpu)
MW_LAYERNORM_DECL(cuda)
#undef MW_LAYERNORM_DECL

#endif

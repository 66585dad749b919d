/* MaxPooling2D forward/backward twins (see kernels.h for the contract). */
#ifndef MW_KERNELS_MAXPOOL_H
#define MW_KERNELS_MAXPOOL_H

#include "kernels/kernels.h"

#define MW_MAXPOOL_DECL(sfx)                                                                       \
    void mw_maxpool_fwd_##sfx(const mw_kctx *k, float *y, int32_t *argmax, const float *x,         \
                              const mw_pool_geom *g, int N);                                       \
    void mw_maxpool_bwd_##sfx(const mw_kctx *k, float *dx, const float *dy, const int32_t *argmax, \
                              const mw_pool_geom *g, int N);
MW_MAXPOOL_DECL(ref)
MW_MAXPOOL_DECL(cpu)
MW_MAXPOOL_DECL(cuda)
#undef MW_MAXPOOL_DECL

#endif

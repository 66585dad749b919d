/* Dense forward/backward twins (see kernels.h for the contract). */
#ifndef MW_KERNELS_DENSE_H
#define MW_KERNELS_DENSE_H

#include "kernels/kernels.h"

#define MW_DENSE_DECL(sfx)                                                                         \
    void mw_dense_fwd_##sfx(const mw_kctx *k, float *y, const float *x, const float *w,            \
                            const float *b, int N, int I, int O);                                  \
    void mw_dense_bwd_##sfx(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,    \
                            const float *x, const float *w, int N, int I, int O);
MW_DENSE_DECL(ref)
MW_DENSE_DECL(cpu)
MW_DENSE_DECL(cuda)
#undef MW_DENSE_DECL

#endif

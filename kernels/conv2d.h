/* Conv2D forward/backward twins (see kernels.h for the contract). */
#ifndef MW_KERNELS_CONV2D_H
#define MW_KERNELS_CONV2D_H

#include "kernels/kernels.h"

#define MW_CONV2D_DECL(sfx)                                                                        \
    void mw_conv2d_fwd_##sfx(const mw_kctx *k, float *y, const float *x, const float *w,           \
                             const float *b, const mw_conv2d_geom *g, int N);                      \
    void mw_conv2d_bwd_##sfx(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,   \
                             const float *x, const float *w, const mw_conv2d_geom *g, int N);
MW_CONV2D_DECL(ref)
MW_CONV2D_DECL(cpu)
MW_CONV2D_DECL(cuda)
#undef MW_CONV2D_DECL

#endif

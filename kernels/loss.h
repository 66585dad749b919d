/* The dense-target losses' twins (see kernels.h: mw_dloss_fwd_fn, mw_dloss_bwd_fn); the CPU
 * table takes the reference's (a loss is n x K elements once per step). */
#ifndef MW_KERNELS_LOSS_H
#define MW_KERNELS_LOSS_H

#include "kernels/kernels.h"

#define MW_LOSS_DECL(sfx)                                                                          \
    void mw_dloss_fwd_##sfx(const mw_kctx *k, const mw_dloss *p, float *loss, float *prob,         \
                            const float *out, const float *y, int N, int K);                       \
    void mw_dloss_bwd_##sfx(const mw_kctx *k, const mw_dloss *p, float *dout, const float *out,    \
                            const float *prob, const float *y, float scale, int N, int K);         \
    void mw_scale_rows_##sfx(const mw_kctx *k, float *a, const float *w, int n, int width);        \
    void mw_row_mean_##sfx(const mw_kctx *k, float *out, const float *in, int n, int P);
MW_LOSS_DECL(ref)
MW_LOSS_DECL(cuda)
#undef MW_LOSS_DECL

#endif

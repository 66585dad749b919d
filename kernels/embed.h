/* Embedding's twins and the padding mask's mean (see kernels.h: mw_embed_fwd_fn,
 * mw_embed_bwd_fn, mw_masked_mean_fwd_fn, mw_masked_mean_bwd_fn); the CPU table takes the
 * reference's (a gather, a scatter-add, a masked sum: memory-bound, n x T x D values). */
#ifndef MW_KERNELS_EMBED_H
#define MW_KERNELS_EMBED_H

#include "kernels/kernels.h"

#define MW_EMBED_DECL(sfx)                                                                         \
    void mw_embed_fwd_##sfx(const mw_kctx *k, float *y, const float *ids, const float *table,      \
                            int n, int T, int D, int V);                                           \
    void mw_embed_bwd_##sfx(const mw_kctx *k, float *gtable, const float *dy, const float *ids,    \
                            int n, int T, int D, int V);                                           \
    void mw_masked_mean_fwd_##sfx(const mw_kctx *k, float *y, const float *x, const float *ids,    \
                                  int n, int T, int D);                                            \
    void mw_masked_mean_bwd_##sfx(const mw_kctx *k, float *dx, const float *dy, const float *ids,  \
                                  int n, int T, int D);
MW_EMBED_DECL(ref)
MW_EMBED_DECL(cuda)
#undef MW_EMBED_DECL

/* The row of an id held as a float: its index in [0, V), or -1 (not an integer in range). */
static inline long mw_embed_row(float id, int V)
{
    return id >= 0.0f && id < (float)V && id == (float)(long)id ? (long)id : -1;
}

#endif

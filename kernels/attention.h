/* MultiHeadAttention's core between its projections (see kernels.h: mw_attn_geom,
 * mw_attn_fwd_fn, mw_attn_bwd_fn). The reference and the CUDA twin compute each row by
 * kernels/attention_rules.h; the fast CPU twin multiplies each example's and head's matrices
 * with sgemm (other sums' order: within float32 rounding of the reference). */
#ifndef MW_KERNELS_ATTENTION_H
#define MW_KERNELS_ATTENTION_H

#include "kernels/kernels.h"

#define MW_ATTN_DECL(sfx)                                                                          \
    void mw_attn_fwd_##sfx(const mw_kctx *k, float *o, float *p, const float *q, const float *kk,  \
                           const float *v, const mw_attn_geom *g, int n);                          \
    void mw_attn_bwd_##sfx(const mw_kctx *k, float *dq, float *dk, float *dv, float *p,            \
                           const float *dout, const float *q, const float *kk, const float *v,     \
                           const mw_attn_geom *g, int n);
MW_ATTN_DECL(ref)
MW_ATTN_DECL(cpu)
MW_ATTN_DECL(cuda)
#undef MW_ATTN_DECL

#endif

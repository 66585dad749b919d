/* ReLU and sparse softmax cross-entropy twins (see kernels.h for the contract). */
#ifndef MW_KERNELS_ACTIVATION_H
#define MW_KERNELS_ACTIVATION_H

#include "kernels/kernels.h"

#define MW_ACT_DECL(sfx)                                                                           \
    void mw_relu_fwd_##sfx(const mw_kctx *k, float *y, const float *x, size_t count);              \
    void mw_relu_bwd_##sfx(const mw_kctx *k, float *dx, const float *dy, const float *y,           \
                           size_t count);                                                          \
    void mw_xent_fwd_##sfx(const mw_kctx *k, float *loss, float *prob, const float *logits,        \
                           const int32_t *labels, int N, int K);                                   \
    void mw_xent_bwd_##sfx(const mw_kctx *k, float *dlogits, const float *prob,                    \
                           const int32_t *labels, float scale, int N, int K);
MW_ACT_DECL(ref)
MW_ACT_DECL(cpu)
MW_ACT_DECL(cuda)
#undef MW_ACT_DECL

#endif

/* Optimizer update twins: the L1/L2 weight penalty (see kernels.h), and Keras 3's update
 * rules with weight decay and clipping (mw_optim_hyper, the formulas in
 * kernels/optim_rules.h):
 *
 *   sgd_step      s1 = momentum (when momentum != 0)
 *   adam_step     s1 = m, s2 = v, s3 = vhat (amsgrad)     (Adam and AdamW)
 *   rmsprop_step  s1 = velocity (mean square), s2 = momentum (when > 0), s3 = average
 *                 gradient (centered)
 *   adagrad_step  s1 = accumulator (initial_accumulator_value at the start)
 *   adamax_step   s1 = m, s2 = u (the exponentially weighted infinity norm)
 *
 * and sumsq, the squared norm behind clipnorm and global_clipnorm. */
#ifndef MW_KERNELS_OPTIM_H
#define MW_KERNELS_OPTIM_H

#include "kernels/kernels.h"

#define MW_OPTIM_DECL(sfx)                                                                         \
    void mw_sgd_step_##sfx(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,            \
                           const float *g, size_t count, const mw_optim_hyper *h);                 \
    void mw_adam_step_##sfx(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,           \
                            const float *g, size_t count, const mw_optim_hyper *h);                \
    void mw_rmsprop_step_##sfx(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,        \
                               const float *g, size_t count, const mw_optim_hyper *h);             \
    void mw_adagrad_step_##sfx(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,        \
                               const float *g, size_t count, const mw_optim_hyper *h);             \
    void mw_adamax_step_##sfx(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,         \
                              const float *g, size_t count, const mw_optim_hyper *h);
MW_OPTIM_DECL(ref)
MW_OPTIM_DECL(cpu)
MW_OPTIM_DECL(cuda)
#undef MW_OPTIM_DECL

/* The penalty runs once per step over the weights: the CPU table keeps the
 * reference (its double sums are sequential, so the penalty is reproducible). */
void mw_regularize_ref(const mw_kctx *k, float *g, double *acc, const float *w, size_t count,
                       double l1, double l2, float scale);
/* sumsq: sequential in double on the CPU (the CPU table keeps the reference). */
void mw_sumsq_ref(const mw_kctx *k, double *out, const float *g, size_t count);
void mw_sumsq_cuda(const mw_kctx *k, double *out, const float *g, size_t count);
void mw_regularize_cuda(const mw_kctx *k, float *g, double *acc, const float *w, size_t count,
                        double l1, double l2, float scale);

#endif

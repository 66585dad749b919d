/* Twins of the ops Functional graphs and their layers add (see kernels.h for the contract):
 * BatchNormalization (and its moving statistics), average pooling, zero padding, the
 * elementwise merges (Add, Multiply, Concatenate), the smooth activations and a softmax
 * layer. The reference is kernels/ref/graphops.c, the CUDA twins kernels/cuda/graphops.cu. */
#ifndef MW_KERNELS_GRAPHOPS_H
#define MW_KERNELS_GRAPHOPS_H

#include "kernels/kernels.h"

#define MW_GRAPHOPS_DECL(sfx)                                                                      \
    void mw_bn_fwd_train_##sfx(const mw_kctx *k, float *y, float *mean, float *var, float *invstd, \
                               const float *x, const float *gamma, const float *beta, size_t rows, \
                               int C, float eps);                                                  \
    void mw_bn_fwd_infer_##sfx(const mw_kctx *k, float *y, const float *x, const float *gamma,     \
                               const float *beta, const float *mean, const float *var,             \
                               size_t rows, int C, float eps);                                     \
    void mw_bn_bwd_##sfx(const mw_kctx *k, float *dx, float *dgamma, float *dbeta,                 \
                         const float *dy, const float *x, const float *mean, const float *invstd,  \
                         const float *gamma, size_t rows, int C);                                  \
    void mw_bn_stats_acc_##sfx(const mw_kctx *k, float *g, const float *st, size_t count,          \
                               float w);                                                           \
    void mw_bn_stats_update_##sfx(const mw_kctx *k, float *p, float *g, size_t count,              \
                                  float momentum);                                                 \
    void mw_avgpool_fwd_##sfx(const mw_kctx *k, float *y, const float *x, const mw_pool_geom *g,   \
                              int N);                                                              \
    void mw_avgpool_bwd_##sfx(const mw_kctx *k, float *dx, const float *dy, const mw_pool_geom *g, \
                              int N);                                                              \
    void mw_pad2d_fwd_##sfx(const mw_kctx *k, float *y, const float *x, int H, int W, int C,       \
                            int PT, int PB, int PL, int PR, int N);                                \
    void mw_pad2d_bwd_##sfx(const mw_kctx *k, float *dx, const float *dy, int H, int W, int C,     \
                            int PT, int PB, int PL, int PR, int N);                                \
    void mw_acc_##sfx(const mw_kctx *k, float *y, const float *x, size_t count);                   \
    void mw_mul_fwd_##sfx(const mw_kctx *k, float *y, const float *a, const float *b,              \
                          size_t count);                                                           \
    void mw_mul_bwd_##sfx(const mw_kctx *k, float *da, float *db, const float *dy, const float *a, \
                          const float *b, size_t count);                                           \
    void mw_concat_fwd_##sfx(const mw_kctx *k, float *y, const float *x, size_t rows, int CX,      \
                             int CY, int off);                                                     \
    void mw_concat_bwd_##sfx(const mw_kctx *k, float *dx, const float *dy, size_t rows, int CX,    \
                             int CY, int off);                                                     \
    void mw_act_fwd_##sfx(const mw_kctx *k, float *y, const float *x, size_t count,                \
                          mw_act_kind kind, float alpha);                                          \
    void mw_act_bwd_##sfx(const mw_kctx *k, float *dx, const float *dy, const float *x,            \
                          const float *y, size_t count, mw_act_kind kind, float alpha);            \
    void mw_softmax_fwd_##sfx(const mw_kctx *k, float *y, const float *x, size_t rows, int C);     \
    void mw_softmax_bwd_##sfx(const mw_kctx *k, float *dx, const float *dy, const float *y,        \
                              size_t rows, int C);
MW_GRAPHOPS_DECL(ref)
MW_GRAPHOPS_DECL(cuda)
#undef MW_GRAPHOPS_DECL

/* The fast CPU path (kernels/cpu/graphops.c) overrides every graph op but the statistics
 * entries, which are the reference's loops in both CPU tables (2 C floats per layer and step).
 * BatchNormalization, parallel over channel blocks (results independent of k's threads): */
void mw_bn_fwd_train_cpu(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                         const float *x, const float *gamma, const float *beta, size_t rows, int C,
                         float eps);
void mw_bn_fwd_infer_cpu(const mw_kctx *k, float *y, const float *x, const float *gamma,
                         const float *beta, const float *mean, const float *var, size_t rows, int C,
                         float eps);
void mw_bn_bwd_cpu(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                   const float *x, const float *mean, const float *invstd, const float *gamma,
                   size_t rows, int C);
/* The fast CPU path of the other graph ops (kernels/cpu/graphops.c), parallel over k's
 * threads; bitwise equal to the reference. */
void mw_avgpool_fwd_cpu(const mw_kctx *k, float *y, const float *x, const mw_pool_geom *g, int N);
void mw_avgpool_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const mw_pool_geom *g, int N);
void mw_pad2d_fwd_cpu(const mw_kctx *k, float *y, const float *x, int H, int W, int C, int PT,
                      int PB, int PL, int PR, int N);
void mw_pad2d_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, int H, int W, int C, int PT,
                      int PB, int PL, int PR, int N);
void mw_acc_cpu(const mw_kctx *k, float *y, const float *x, size_t count);
void mw_mul_fwd_cpu(const mw_kctx *k, float *y, const float *a, const float *b, size_t count);
void mw_mul_bwd_cpu(const mw_kctx *k, float *da, float *db, const float *dy, const float *a,
                    const float *b, size_t count);
void mw_concat_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t rows, int CX, int CY,
                       int off);
void mw_concat_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, size_t rows, int CX, int CY,
                       int off);
void mw_act_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t count, mw_act_kind kind,
                    float alpha);
void mw_act_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const float *x, const float *y,
                    size_t count, mw_act_kind kind, float alpha);
void mw_softmax_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t rows, int C);
void mw_softmax_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const float *y, size_t rows,
                        int C);

/* Synchronized BatchNormalization (kernels.h): the reference loops, the fast CPU ones and the
 * CUDA twins. */
#define MW_BN_SYNC_DECL(sfx)                                                                       \
    void mw_bn_sums_##sfx(const mw_kctx *k, double *s, const float *x, const float *dy,            \
                          const float *mean, const float *invstd, float *dgamma, float *dbeta,     \
                          size_t rows, int C);                                                     \
    void mw_bn_sync_fwd_##sfx(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,  \
                              const float *x, const float *gamma, const float *beta,               \
                              const double *s, double M, size_t rows, int C, float eps);           \
    void mw_bn_sync_bwd_##sfx(const mw_kctx *k, float *dx, const float *dy, const float *x,        \
                              const float *mean, const float *invstd, const float *gamma,          \
                              const double *s, double M, size_t rows, int C);
MW_BN_SYNC_DECL(ref)
MW_BN_SYNC_DECL(cpu)
MW_BN_SYNC_DECL(cuda)
#undef MW_BN_SYNC_DECL
/* The synchronized statistics from the summed sums s over M rows (host arrays; the CUDA twin
 * has its own kernel): mean, biased variance (never below 0), 1 / sqrt(var + eps). */
void mw_bn_sync_stats(float *mean, float *var, float *invstd, const double *s, double M, int C,
                      float eps);

#endif

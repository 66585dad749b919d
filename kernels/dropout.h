/* Inverted dropout twins (see kernels.h for the contract).
 *
 * The mask is a pure function of (seed, stream, example id, element): the
 * reference hashes with mw_rng_hash (common/rng.h), the CPU twin does the same
 * in parallel, and the CUDA twin carries a device copy of the same splitmix64
 * mix, so the three masks are bitwise equal and independent of how a global
 * batch is cut among replicas, threads and micro-batches. */
#ifndef MW_KERNELS_DROPOUT_H
#define MW_KERNELS_DROPOUT_H

#include "kernels/kernels.h"

/* Elements whose 24-bit hash value is below this are dropped. */
uint32_t mw_dropout_threshold(float rate);

#define MW_DROPOUT_DECL(sfx)                                                                       \
    void mw_dropout_fwd_##sfx(const mw_kctx *k, float *y, float *mask, const float *x,             \
                              const uint32_t *ids, uint64_t seed, uint64_t stream, float rate,     \
                              int N, size_t D);                                                    \
    void mw_dropout_bwd_##sfx(const mw_kctx *k, float *dx, const float *dy, const float *mask,     \
                              size_t count);
MW_DROPOUT_DECL(ref)
MW_DROPOUT_DECL(cpu)
MW_DROPOUT_DECL(cuda)
#undef MW_DROPOUT_DECL

#endif

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

#endif

/* Deterministic random numbers.
 *
 * mw_rng is PCG32 (O'Neill): small state, good statistics, reproducible on
 * every platform. mw_rng_hash is a stateless splitmix64 mix of (seed, stream,
 * counter) for values that must not depend on the order they are drawn in,
 * such as a dropout mask keyed by global example id. */
#ifndef MW_COMMON_RNG_H
#define MW_COMMON_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t state;
    uint64_t inc;
} mw_rng;

void mw_rng_seed(mw_rng *r, uint64_t seed, uint64_t stream);
uint32_t mw_rng_u32(mw_rng *r);
/* Uniform in [0, bound) without modulo bias; bound > 0. */
uint32_t mw_rng_below(mw_rng *r, uint32_t bound);
/* Uniform float in [0, 1). */
float mw_rng_uniform(mw_rng *r);
/* Standard normal (Box-Muller). */
float mw_rng_normal(mw_rng *r);
/* Fisher-Yates shuffle of a permutation of n ids. */
void mw_rng_shuffle(mw_rng *r, uint32_t *ids, uint32_t n);

uint64_t mw_rng_hash(uint64_t seed, uint64_t stream, uint64_t counter);

#endif

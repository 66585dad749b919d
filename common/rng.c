/* PCG32 and splitmix64; see rng.h. */
#include "common/rng.h"

#include <math.h>

void mw_rng_seed(mw_rng *r, uint64_t seed, uint64_t stream)
{
    r->state = 0;
    r->inc = (stream << 1u) | 1u;
    mw_rng_u32(r);
    r->state += seed;
    mw_rng_u32(r);
}

uint32_t mw_rng_u32(mw_rng *r)
{
    uint64_t old = r->state;
    r->state = old * 6364136223846793005ULL + r->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

uint32_t mw_rng_below(mw_rng *r, uint32_t bound)
{
    uint32_t threshold = (uint32_t)(-bound) % bound;
    for (;;) {
        uint32_t v = mw_rng_u32(r);
        if (v >= threshold)
            return v % bound;
    }
}

float mw_rng_uniform(mw_rng *r)
{
    return (float)(mw_rng_u32(r) >> 8) * (1.0f / 16777216.0f);
}

float mw_rng_normal(mw_rng *r)
{
    double u1 = ((double)mw_rng_u32(r) + 1.0) / 4294967297.0; /* (0, 1] */
    double u2 = (double)mw_rng_u32(r) / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void mw_rng_shuffle(mw_rng *r, uint32_t *ids, uint32_t n)
{
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = mw_rng_below(r, i);
        uint32_t t = ids[i - 1];
        ids[i - 1] = ids[j];
        ids[j] = t;
    }
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t mw_rng_hash(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ counter);
}

/* NumPy's RandomState shuffle order (see np_shuffle.h): MT19937 as in its reference code, and
 * NumPy's random_interval. */
#include "worker/data/np_shuffle.h"

#define MT_N 624
#define MT_M 397

typedef struct {
    uint32_t mt[MT_N];
    int i;
} mt19937;

static void mt_seed(mt19937 *s, uint32_t seed)
{
    s->mt[0] = seed;
    for (int i = 1; i < MT_N; i++)
        s->mt[i] = 1812433253u * (s->mt[i - 1] ^ (s->mt[i - 1] >> 30)) + (uint32_t)i;
    s->i = MT_N;
}

static uint32_t mt_next(mt19937 *s)
{
    if (s->i >= MT_N) {
        for (int k = 0; k < MT_N; k++) {
            const uint32_t y = (s->mt[k] & 0x80000000u) | (s->mt[(k + 1) % MT_N] & 0x7fffffffu);
            s->mt[k] = s->mt[(k + MT_M) % MT_N] ^ (y >> 1) ^ (y & 1 ? 0x9908b0dfu : 0);
        }
        s->i = 0;
    }
    uint32_t y = s->mt[s->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

/* NumPy's random_interval(max): uniform in [0, max] by masking and rejection. */
static uint64_t interval(mt19937 *s, uint64_t max)
{
    if (max == 0)
        return 0;
    uint64_t mask = max, v;
    for (int sh = 1; sh <= 32; sh *= 2)
        mask |= mask >> sh;
    if (max <= 0xffffffffu) {
        while ((v = mt_next(s) & mask) > max)
            ;
    } else {
        do {
            const uint64_t hi = mt_next(s);
            v = (hi << 32 | mt_next(s)) & mask;
        } while (v > max);
    }
    return v;
}

void mw_np_shuffle(uint32_t *perm, uint32_t n, uint32_t seed)
{
    mt19937 s;
    mt_seed(&s, seed);
    for (uint32_t k = 0; k < n; k++)
        perm[k] = k;
    for (uint32_t i = n > 0 ? n - 1 : 0; i >= 1; i--) {
        const uint32_t j = (uint32_t)interval(&s, i);
        const uint32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

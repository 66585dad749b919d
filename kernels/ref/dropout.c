/* Reference inverted dropout: the mask from mw_rng_hash, element by element. */
#include "kernels/dropout.h"
#include "kernels/twins.h"

#include <math.h>

#include "common/rng.h"

uint32_t mw_dropout_threshold(float rate)
{
    /* rate * 2^24 is exact in double, so host and device agree on the cut */
    return (uint32_t)ceil((double)rate * 16777216.0);
}

void mw_dropout_fwd_ref(const mw_kctx *k, float *y, float *mask, const float *x,
                        const uint32_t *ids, uint64_t seed, uint64_t stream, float rate, int N,
                        size_t D)
{
    (void)k;
    const uint32_t thr = mw_dropout_threshold(rate);
    const float keep = 1.0f / (1.0f - rate);
    for (int n = 0; n < N; n++) {
        uint64_t base = (uint64_t)(ids ? ids[n] : (uint32_t)n) * D;
        for (size_t e = 0; e < D; e++) {
            size_t i = (size_t)n * D + e;
            uint32_t u = (uint32_t)(mw_rng_hash(seed, stream, base + e) >> 40);
            mask[i] = u >= thr ? keep : 0.0f;
            y[i] = x[i] * mask[i];
        }
    }
}

void mw_dropout_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const float *mask,
                        size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        dx[i] = dy[i] * mask[i];
}

/* Fast CPU inverted dropout: the reference's mask, computed in parallel (each
 * element's hash is independent, so the split does not change a bit). */
#include "kernels/dropout.h"
#include "kernels/cpu/cpu.h"
#include "kernels/twins.h"

#include "common/rng.h"

void mw_dropout_fwd_cpu(const mw_kctx *k, float *y, float *mask, const float *x,
                        const uint32_t *ids, uint64_t seed, uint64_t stream, float rate, int N,
                        size_t D)
{
    const uint32_t thr = mw_dropout_threshold(rate);
    const float keep = 1.0f / (1.0f - rate);
    const size_t count = (size_t)(N > 0 ? N : 0) * D;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++) {
        size_t n = i / D, e = i % D;
        uint64_t id = ids ? ids[n] : (uint32_t)n;
        uint32_t u = (uint32_t)(mw_rng_hash(seed, stream, id * D + e) >> 40);
        float m = u >= thr ? keep : 0.0f;
        mask[i] = m;
        y[i] = x[i] * m;
    }
}

void mw_dropout_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const float *mask,
                        size_t count)
{
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        dx[i] = dy[i] * mask[i];
}

/* Embedding, the reference (kernels/embed.h): a gather forward, a scatter-add backward in
 * example and position order (the same sums every run). */
#include <math.h>

#define MW_SINE_HD static inline
#include "kernels/embed.h"
#include "kernels/twins.h"

#include <string.h>

void mw_embed_fwd_ref(const mw_kctx *k, float *y, const float *ids, const float *table, int n,
                      int T, int D, int V)
{
    (void)k;
    for (size_t p = 0; p < (size_t)n * T; p++) {
        const long r = mw_embed_row(ids[p], V);
        if (r >= 0)
            memcpy(y + p * D, table + (size_t)r * D, (size_t)D * sizeof *y);
        else
            memset(y + p * D, 0, (size_t)D * sizeof *y);
    }
}

void mw_embed_bwd_ref(const mw_kctx *k, float *gtable, const float *dy, const float *ids, int n,
                      int T, int D, int V)
{
    (void)k;
    for (size_t p = 0; p < (size_t)n * T; p++) {
        const long r = mw_embed_row(ids[p], V);
        if (r < 0)
            continue;
        float *g = gtable + (size_t)r * D;
        const float *d = dy + p * D;
        for (int j = 0; j < D; j++)
            g[j] += d[j];
    }
}

/* The steps of example i that are not padding. */
static int unmasked(const float *ids, int T)
{
    int c = 0;
    for (int t = 0; t < T; t++)
        c += ids[t] != 0.0f;
    return c;
}

void mw_masked_mean_fwd_ref(const mw_kctx *k, float *y, const float *x, const float *ids, int n,
                            int T, int D)
{
    (void)k;
    for (int i = 0; i < n; i++) {
        const float *id = ids + (size_t)i * T, *xi = x + (size_t)i * T * D;
        const float cnt = (float)unmasked(id, T);
        float *yi = y + (size_t)i * D;
        for (int j = 0; j < D; j++) {
            float s = 0.0f; /* Keras: sum(x * mask) / sum(mask), in float32 */
            for (int t = 0; t < T; t++)
                s += id[t] != 0.0f ? xi[(size_t)t * D + j] : 0.0f;
            yi[j] = s / cnt;
        }
    }
}

void mw_masked_mean_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const float *ids, int n,
                            int T, int D)
{
    (void)k;
    for (int i = 0; i < n; i++) {
        const float *id = ids + (size_t)i * T, *d = dy + (size_t)i * D;
        const float cnt = (float)unmasked(id, T);
        float *dxi = dx + (size_t)i * T * D;
        for (int t = 0; t < T; t++)
            if (id[t] != 0.0f)
                for (int j = 0; j < D; j++)
                    dxi[(size_t)t * D + j] += d[j] / cnt;
    }
}

void mw_sine_pos_ref(const mw_kctx *k, float *y, int n, int T, int D, float max_wavelength)
{
    (void)k;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < D; j++)
            y[(size_t)t * D + j] = mw_sine_pos_value(t, j, D, max_wavelength);
    for (int i = 1; i < n; i++) /* every example the same */
        memcpy(y + (size_t)i * T * D, y, (size_t)T * D * sizeof(float));
}

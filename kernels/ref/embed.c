/* Embedding, the reference (kernels/embed.h): a gather forward, a scatter-add backward in
 * example and position order (the same sums every run). */
#include "kernels/embed.h"

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

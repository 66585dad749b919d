/* GroupNormalization, the reference: each example's groups by kernels/groupnorm_rules.h, gamma's
 * and beta's gradients channel by channel, summed over the examples and positions in order. */
#include "kernels/twins.h"

#define MW_GN_HD static inline
#include "kernels/groupnorm_rules.h"

void mw_groupnorm_fwd_ref(const mw_kctx *k, float *y, float *stat, const float *x,
                          const float *gamma, const float *beta, int n, int S, int C, int G,
                          float eps)
{
    (void)k;
    const int cg = C / G;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) {
            const size_t e = (size_t)i * S * C, s = (size_t)i * G + g;
            gn_group_fwd(y + e, stat + s, stat + (size_t)n * G + s, x + e, gamma, beta, S, C,
                         g * cg, cg, eps);
        }
}

void mw_groupnorm_bwd_ref(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                          const float *x, const float *stat, const float *gamma, int n, int S,
                          int C, int G)
{
    (void)k;
    const int cg = C / G;
    for (int c = 0; (dgamma || dbeta) && c < C; c++)
        gn_channel_params(dgamma, dbeta, dy, x, stat, n, S, C, G, c);
    for (int i = 0; dx && i < n; i++)
        for (int g = 0; g < G; g++) {
            const size_t e = (size_t)i * S * C, s = (size_t)i * G + g;
            gn_group_dx(dx + e, dy + e, x + e, gamma, stat[s], stat[(size_t)n * G + s], S, C,
                        g * cg, cg);
        }
}

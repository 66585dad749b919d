/* LayerNormalization, the reference (kernels/kernel_list.h: layernorm_fwd, layernorm_bwd): each row
 * by kernels/layernorm_rules.h; gamma's and beta's gradients summed over the rows in order. */
#include "kernels/twins.h"

#define MW_LN_HD static inline
#include "kernels/layernorm_rules.h"

void mw_layernorm_fwd_ref(const mw_kctx *k, float *y, float *stat, const float *x,
                          const float *gamma, const float *beta, int rows, int D, float eps)
{
    (void)k;
    for (int r = 0; r < rows; r++)
        ln_row_fwd(y + (size_t)r * D, stat + r, stat + rows + r, x + (size_t)r * D, gamma, beta, D,
                   eps);
}

void mw_layernorm_bwd_ref(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                          const float *x, const float *stat, const float *gamma, int rows, int D)
{
    (void)k;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * D, *dr = dy + (size_t)r * D;
        for (int j = 0; (dgamma || dbeta) && j < D; j++) {
            if (dgamma)
                dgamma[j] += dr[j] * ((xr[j] - stat[r]) * stat[rows + r]);
            if (dbeta)
                dbeta[j] += dr[j];
        }
        if (dx)
            ln_row_dx(dx + (size_t)r * D, dr, xr, gamma, stat[r], stat[rows + r], D);
    }
}

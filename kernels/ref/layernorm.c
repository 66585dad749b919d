/* LayerNormalization, the reference (kernels/kernel_list.h: layernorm_fwd, layernorm_bwd): each row
 * by kernels/layernorm_rules.h; gamma's and beta's gradients summed over the rows in order. Also
 * the residual Add fused with LayerNormalization or RMS normalization (add_layernorm_*,
 * add_rmsnorm_*): the rules' rows over the sum, the parameters' gradients by the plain kernels. */
#include "kernels/twins.h"

#define MW_LN_HD static inline
#include "kernels/layernorm_rules.h"
#define MW_RMS_HD static inline
#include "kernels/rmsnorm_rules.h"

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

void mw_add_layernorm_fwd_ref(const mw_kctx *k, float *s, float *y, float *stat, const float *a,
                              const float *b, const float *gamma, const float *beta, int rows,
                              int D, float eps)
{
    (void)k;
    for (int r = 0; r < rows; r++) {
        const size_t o = (size_t)r * D;
        ln_row_sum(s + o, a + o, b + o, D);
        ln_row_fwd(y + o, stat + r, stat + rows + r, s + o, gamma, beta, D, eps);
    }
}

void mw_add_layernorm_bwd_ref(const mw_kctx *k, float *da, float *db, float *dgamma, float *dbeta,
                              const float *ds, const float *dy, const float *s, const float *stat,
                              const float *gamma, int rows, int D)
{
    mw_layernorm_bwd_ref(k, NULL, dgamma, dbeta, dy, s, stat, gamma, rows, D);
    for (int r = 0; r < rows; r++) {
        const size_t o = (size_t)r * D;
        ln_row_dx_add(da ? da + o : NULL, db ? db + o : NULL, ds + o, dy + o, s + o, gamma, stat[r],
                      stat[rows + r], D);
    }
}

void mw_add_rmsnorm_fwd_ref(const mw_kctx *k, float *s, float *y, float *stat, const float *a,
                            const float *b, const float *gamma, int rows, int D, float eps,
                            int centered, float offset)
{
    (void)k;
    for (int r = 0; r < rows; r++) {
        const size_t o = (size_t)r * D;
        ln_row_sum(s + o, a + o, b + o, D);
        rms_row_fwd(y + o, stat + r, stat + rows + r, s + o, gamma, D, eps, centered, offset);
    }
}

void mw_add_rmsnorm_bwd_ref(const mw_kctx *k, float *da, float *db, float *dgamma, const float *ds,
                            const float *dy, const float *s, const float *stat, const float *gamma,
                            int rows, int D, float offset)
{
    mw_rmsnorm_bwd_ref(k, NULL, dgamma, dy, s, stat, gamma, rows, D, offset);
    for (int r = 0; r < rows; r++) {
        const size_t o = (size_t)r * D;
        rms_row_dx_add(da ? da + o : NULL, db ? db + o : NULL, ds + o, dy + o, s + o, gamma,
                       stat[r], stat[rows + r], D, offset);
    }
}

/* RMS normalization, the reference (kernels/kernel_list.h: rmsnorm_fwd, rmsnorm_bwd): each row
 * by kernels/rmsnorm_rules.h; gamma's gradient summed over the rows in order. */
#include "kernels/twins.h"

#define MW_RMS_HD static inline
#include "kernels/rmsnorm_rules.h"

void mw_rmsnorm_fwd_ref(const mw_kctx *k, float *y, float *stat, const float *x, const float *gamma,
                        int rows, int D, float eps, int centered, float offset)
{
    (void)k;
    for (int r = 0; r < rows; r++)
        rms_row_fwd(y + (size_t)r * D, stat + r, stat + rows + r, x + (size_t)r * D, gamma, D, eps,
                    centered, offset);
}

void mw_rmsnorm_bwd_ref(const mw_kctx *k, float *dx, float *dgamma, const float *dy, const float *x,
                        const float *stat, const float *gamma, int rows, int D, float offset)
{
    (void)k;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * D, *dr = dy + (size_t)r * D;
        for (int j = 0; dgamma && j < D; j++)
            dgamma[j] += dr[j] * (xr[j] * stat[rows + r]);
        if (dx)
            rms_row_dx(dx + (size_t)r * D, dr, xr, gamma, stat[r], stat[rows + r], D, offset);
    }
}

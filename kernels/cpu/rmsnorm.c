/* RMS normalization, the fast CPU twin (kernels/kernel_list.h: rmsnorm_fwd, rmsnorm_bwd): the
 * reference's rows (kernels/rmsnorm_rules.h) spread over k's threads, and gamma's gradient 32
 * features at a time, each summing the rows in order: the same sums as the reference, so the
 * results are bitwise equal. */
#include "kernels/twins.h"

#include "kernels/cpu/cpu.h"

#define MW_RMS_HD static inline
#include "kernels/rmsnorm_rules.h"

void mw_rmsnorm_fwd_cpu(const mw_kctx *k, float *y, float *stat, const float *x, const float *gamma,
                        int rows, int D, float eps, int centered, float offset)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int r = 0; r < rows; r++)
        rms_row_fwd(y + (size_t)r * D, stat + r, stat + rows + r, x + (size_t)r * D, gamma, D, eps,
                    centered, offset);
}

void mw_rmsnorm_bwd_cpu(const mw_kctx *k, float *dx, float *dgamma, const float *dy, const float *x,
                        const float *stat, const float *gamma, int rows, int D, float offset)
{
    enum { W = 32 };
    if (dgamma) {
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
        for (int j0 = 0; j0 < D; j0 += W) {
            const int w = D - j0 < W ? D - j0 : W;
            float gg[W];
            for (int j = 0; j < w; j++)
                gg[j] = dgamma[j0 + j];
            for (int r = 0; r < rows; r++) {
                const float *dr = dy + (size_t)r * D + j0, *xr = x + (size_t)r * D + j0;
                const float s = stat[rows + r];
                for (int j = 0; j < w; j++)
                    gg[j] += dr[j] * (xr[j] * s);
            }
            for (int j = 0; j < w; j++)
                dgamma[j0 + j] = gg[j];
        }
    }
    if (dx) {
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
        for (int r = 0; r < rows; r++)
            rms_row_dx(dx + (size_t)r * D, dy + (size_t)r * D, x + (size_t)r * D, gamma, stat[r],
                       stat[rows + r], D, offset);
    }
}

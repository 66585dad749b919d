/* LayerNormalization, the fast CPU twin (kernels/kernel_list.h: layernorm_fwd, layernorm_bwd): the
 * reference's rows (kernels/layernorm_rules.h) spread over k's threads, and gamma's and beta's
 * gradients one features 32 at a time, each summing the rows in order (a row's 32 in one pass, so
 * memory is read along rows): the same sums as the reference, so the results are bitwise equal. */
#include "kernels/twins.h"

#include "kernels/cpu/cpu.h"

#define MW_LN_HD static inline
#include "kernels/layernorm_rules.h"

void mw_layernorm_fwd_cpu(const mw_kctx *k, float *y, float *stat, const float *x,
                          const float *gamma, const float *beta, int rows, int D, float eps)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int r = 0; r < rows; r++)
        ln_row_fwd(y + (size_t)r * D, stat + r, stat + rows + r, x + (size_t)r * D, gamma, beta, D,
                   eps);
}

void mw_layernorm_bwd_cpu(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                          const float *x, const float *stat, const float *gamma, int rows, int D)
{
    enum { W = 32 };
    if (dgamma || dbeta) {
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
        for (int j0 = 0; j0 < D; j0 += W) {
            const int w = D - j0 < W ? D - j0 : W;
            float gg[W], gb[W];
            for (int j = 0; j < w; j++)
                gg[j] = dgamma ? dgamma[j0 + j] : 0.0f, gb[j] = dbeta ? dbeta[j0 + j] : 0.0f;
            for (int r = 0; r < rows; r++) {
                const float *dr = dy + (size_t)r * D + j0, *xr = x + (size_t)r * D + j0;
                const float m = stat[r], s = stat[rows + r];
                for (int j = 0; j < w; j++) {
                    gg[j] += dr[j] * ((xr[j] - m) * s);
                    gb[j] += dr[j];
                }
            }
            for (int j = 0; j < w; j++) {
                if (dgamma)
                    dgamma[j0 + j] = gg[j];
                if (dbeta)
                    dbeta[j0 + j] = gb[j];
            }
        }
    }
    if (dx) {
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
        for (int r = 0; r < rows; r++)
            ln_row_dx(dx + (size_t)r * D, dy + (size_t)r * D, x + (size_t)r * D, gamma, stat[r],
                      stat[rows + r], D);
    }
}

/* LayerNormalization, the fast CPU twin (kernels/kernel_list.h: layernorm_fwd, layernorm_bwd): the
 * reference's rows (kernels/layernorm_rules.h) spread over k's threads. The forward's mean and
 * variance are sums in double as the reference's, but in LANES partial sums (feature j into
 * lane j % LANES, the lanes added in order last) so that they vectorize (the reference's
 * sequential double sums were half of the row's time; MW_WIDE_CLONES, the same sums on every
 * vector width): the two sums differ by a few 2^-53 of the sum, so y, the mean and rstd are
 * within a float32 rounding of the reference's. The backward is the reference's rows, and
 * gamma's and beta's gradients go 32 features at a time, each summing the rows in order (a
 * row's 32 in one pass, so memory is read along rows): the same sums as the reference,
 * bitwise. The residual Add fused with the norm (add_layernorm_*; add_rmsnorm_* in rmsnorm.c) sums
 * each row into s and normalizes it while it is in cache, and adds each row's input gradient, with
 * the sum's other gradient, into both Add inputs' gradients in the pass that computes it: the same
 * rows as the unfused twins, so the same bits. */
#include "kernels/twins.h"

#include <math.h>

#include "kernels/cpu/cpu.h"

#define MW_LN_HD static inline
#include "kernels/layernorm_rules.h"

/* layernorm_rules.h's ln_row_fwd with the lane sums. */
MW_WIDE_CLONES static void row_fwd(float *y, float *mean, float *rstd, const float *x,
                                   const float *gamma, const float *beta, int D, float eps)
{
    const float m = (float)(mw_lane_sum(x, D, 0.0f, 0) / D);
    const float r = 1.0f / sqrtf((float)(mw_lane_sum(x, D, m, 1) / D) + eps);
    *mean = m, *rstd = r;
    for (int j = 0; j < D; j++) {
        const float inv = gamma ? r * gamma[j] : r;
        y[j] = x[j] * inv + ((beta ? beta[j] : 0.0f) - m * inv);
    }
}

void mw_layernorm_fwd_cpu(const mw_kctx *k, float *y, float *stat, const float *x,
                          const float *gamma, const float *beta, int rows, int D, float eps)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int r = 0; r < rows; r++)
        row_fwd(y + (size_t)r * D, stat + r, stat + rows + r, x + (size_t)r * D, gamma, beta, D,
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

void mw_add_layernorm_fwd_cpu(const mw_kctx *k, float *s, float *y, float *stat, const float *a,
                              const float *b, const float *gamma, const float *beta, int rows,
                              int D, float eps)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int r = 0; r < rows; r++) {
        const size_t o = (size_t)r * D;
        ln_row_sum(s + o, a + o, b + o, D);
        row_fwd(y + o, stat + r, stat + rows + r, s + o, gamma, beta, D, eps);
    }
}

void mw_add_layernorm_bwd_cpu(const mw_kctx *k, float *da, float *db, float *dgamma, float *dbeta,
                              const float *ds, const float *dy, const float *s, const float *stat,
                              const float *gamma, int rows, int D)
{
    mw_layernorm_bwd_cpu(k, NULL, dgamma, dbeta, dy, s, stat, gamma, rows, D);
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int r = 0; r < rows; r++) {
        const size_t o = (size_t)r * D;
        ln_row_dx_add(da ? da + o : NULL, db ? db + o : NULL, ds + o, dy + o, s + o, gamma, stat[r],
                      stat[rows + r], D);
    }
}

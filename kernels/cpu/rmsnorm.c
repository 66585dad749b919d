/* RMS normalization, the fast CPU twin (kernels/kernel_list.h: rmsnorm_fwd, rmsnorm_bwd, and the
 * residual Add fused with it, add_rmsnorm_*): the reference's rows (kernels/rmsnorm_rules.h)
 * spread over k's threads, their double sums (the statistic, and the input gradient's mean(g x))
 * in lanes (cpu.h: mw_lane_sum; a sequential double sum was most of a row's time), so the
 * statistic and the gradient are within a float32 rounding of the reference's; gamma's gradient
 * 32 features at a time, each summing the rows in order: the reference's sums, bitwise. The
 * fused twins run the same rows over the sum, so they give the unfused twins' bits. */
#include "kernels/twins.h"

#include "kernels/cpu/cpu.h"

#include <math.h>

#define MW_LN_HD static inline
#include "kernels/layernorm_rules.h"
#define MW_RMS_HD static inline
#include "kernels/rmsnorm_rules.h"

/* rmsnorm_rules.h's rms_row_fwd with the lane sums (cpu.h). */
MW_WIDE_CLONES static void row_fwd(float *y, float *mean, float *r, const float *x,
                                   const float *gamma, int D, float eps, int centered, float offset)
{
    const float m = centered ? (float)(mw_lane_sum(x, D, 0.0f, 0) / D) : 0.0f;
    const float rr = 1.0f / sqrtf((float)(mw_lane_sum(x, D, m, 1) / D) + eps);
    *mean = m, *r = rr;
    rms_row_scale(y, x, gamma, rr, D, offset);
}

/* rmsnorm_rules.h's rms_row_k with the sum in lanes. */
MW_WIDE_CLONES static float row_k(const float *dy, const float *x, const float *gamma, float r,
                                  int D, float offset)
{
    double a[MW_LANES] = {0}, s = 0;
    int j = 0;
    for (; j + MW_LANES <= D; j += MW_LANES)
        for (int q = 0; q < MW_LANES; q++)
            a[q] += (double)(dy[j + q] * (gamma[j + q] + offset)) * x[j + q];
    for (; j < D; j++)
        a[j % MW_LANES] += (double)(dy[j] * (gamma[j] + offset)) * x[j];
    for (int q = 0; q < MW_LANES; q++)
        s += a[q];
    return r * r * (float)(s / D);
}

/* rms_row_dx_k with row_k: into dx, or (dx NULL) fused, ds + it into da and db. */
static void row_dx(float *dx, float *da, float *db, const float *ds, const float *dy,
                   const float *x, const float *gamma, float mean, float r, int D, float offset)
{
    rms_row_dx_k(dx, da, db, ds, dy, x, gamma, mean, r, row_k(dy, x, gamma, r, D, offset), D,
                 offset);
}

void mw_rmsnorm_fwd_cpu(const mw_kctx *k, float *y, float *stat, const float *x, const float *gamma,
                        int rows, int D, float eps, int centered, float offset)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int r = 0; r < rows; r++)
        row_fwd(y + (size_t)r * D, stat + r, stat + rows + r, x + (size_t)r * D, gamma, D, eps,
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
            row_dx(dx + (size_t)r * D, NULL, NULL, NULL, dy + (size_t)r * D, x + (size_t)r * D,
                   gamma, stat[r], stat[rows + r], D, offset);
    }
}

void mw_add_rmsnorm_fwd_cpu(const mw_kctx *k, float *s, float *y, float *stat, const float *a,
                            const float *b, const float *gamma, int rows, int D, float eps,
                            int centered, float offset)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int r = 0; r < rows; r++) {
        const size_t o = (size_t)r * D;
        ln_row_sum(s + o, a + o, b + o, D);
        row_fwd(y + o, stat + r, stat + rows + r, s + o, gamma, D, eps, centered, offset);
    }
}

void mw_add_rmsnorm_bwd_cpu(const mw_kctx *k, float *da, float *db, float *dgamma, const float *ds,
                            const float *dy, const float *s, const float *stat, const float *gamma,
                            int rows, int D, float offset)
{
    mw_rmsnorm_bwd_cpu(k, NULL, dgamma, dy, s, stat, gamma, rows, D, offset);
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int r = 0; r < rows; r++) {
        const size_t o = (size_t)r * D;
        row_dx(NULL, da ? da + o : NULL, db ? db + o : NULL, ds + o, dy + o, s + o, gamma, stat[r],
               stat[rows + r], D, offset);
    }
}

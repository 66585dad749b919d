/* The reference dense-target losses: kernels/loss_rules.h per element, the mean over K in
 * double (the sum for CCE). */
#include <stddef.h>

#define MW_LOSS_HD static inline
#include "kernels/loss_rules.h"
#include "kernels/twins.h"

void mw_dloss_fwd_ref(const mw_kctx *k, const mw_dloss *p, float *loss, float *prob,
                      const float *out, const float *y, int N, int K)
{
    (void)k;
    for (int i = 0; i < N; i++) {
        const size_t r = (size_t)i * K;
        if (p->kind == MW_DLOSS_CCE) {
            loss[i] = loss_cce_row(p, prob + r, out + r, y + r, K);
            continue;
        }
        double s = 0.0;
        for (int j = 0; j < K; j++) {
            float slope;
            s += loss_elem(p, out[r + j], y[r + j], &slope);
            prob[r + j] = out[r + j];
        }
        loss[i] = (float)(s / K);
    }
}

void mw_dloss_bwd_ref(const mw_kctx *k, const mw_dloss *p, float *dout, const float *out,
                      const float *prob, const float *y, float scale, int N, int K)
{
    (void)k;
    for (int i = 0; i < N; i++) {
        const size_t r = (size_t)i * K;
        if (p->kind == MW_DLOSS_CCE) {
            loss_cce_row_grad(p, dout + r, prob + r, y + r, scale, K);
            continue;
        }
        for (int j = 0; j < K; j++) {
            float slope;
            (void)loss_elem(p, out[r + j], y[r + j], &slope);
            dout[r + j] = scale / K * slope;
        }
    }
}

void mw_scale_rows_ref(const mw_kctx *k, float *a, const float *w, int n, int width)
{
    (void)k;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < width; j++)
            a[(size_t)i * width + j] *= w[i];
}

void mw_row_mean_ref(const mw_kctx *k, float *out, const float *in, int n, int P)
{
    (void)k;
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int p = 0; p < P; p++)
            s += in[(size_t)i * P + p];
        out[i] = (float)(s / P);
    }
}

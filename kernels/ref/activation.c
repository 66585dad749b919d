/* Reference ReLU, sparse softmax cross-entropy from logits, and the smooth activations
 * (kernels/act_rules.h). */
#include "kernels/twins.h"

#include <math.h>

#define MW_ACT_HD static inline
#include "kernels/act_rules.h"

void mw_relu_fwd_ref(const mw_kctx *k, float *y, const float *x, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void mw_relu_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const float *y, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* loss = logsumexp(z) - z[label], with the max subtracted first so exp never
 * overflows; prob = exp(z - max) / sum. */
void mw_xent_fwd_ref(const mw_kctx *k, float *loss, float *prob, const float *logits,
                     const int32_t *labels, int N, int K)
{
    (void)k;
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * K;
        float *p = prob + (size_t)n * K;
        float mx = z[0];
        for (int j = 1; j < K; j++)
            mx = z[j] > mx ? z[j] : mx;
        double sum = 0.0;
        for (int j = 0; j < K; j++) {
            p[j] = expf(z[j] - mx);
            sum += p[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < K; j++)
            p[j] *= inv;
        const int32_t t = labels[n]; /* outside [0, K): ignored (kernels.h) */
        loss[n] = t >= 0 && t < K ? (float)(log(sum) + mx - z[t]) : 0.0f;
    }
}

void mw_xent_bwd_ref(const mw_kctx *k, float *dlogits, const float *prob, const int32_t *labels,
                     float scale, int N, int K)
{
    (void)k;
    for (int n = 0; n < N; n++)
        for (int j = 0; j < K; j++) {
            float t = j == labels[n] ? 1.0f : 0.0f;
            dlogits[(size_t)n * K + j] = scale * (prob[(size_t)n * K + j] - t);
        }
}

void mw_act_fwd_ref(const mw_kctx *k, float *y, const float *x, size_t count, mw_act_kind kind,
                    float alpha)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        y[i] = act_value(x[i], kind, alpha);
}

void mw_act_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const float *x, const float *y,
                    size_t count, mw_act_kind kind, float alpha)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        dx[i] += dy[i] * act_slope(x[i], y[i], kind, alpha);
}

void mw_relux_fwd_ref(const mw_kctx *k, float *y, const float *x, size_t count, float max_value,
                      float slope, float threshold)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        y[i] = relux_value(x[i], max_value, slope, threshold);
}

void mw_relux_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const float *x, size_t count,
                      float max_value, float slope, float threshold, int set_dx)
{
    (void)k;
    for (size_t i = 0; i < count; i++) {
        const float d = dy[i] * relux_slope(x[i], max_value, slope, threshold);
        dx[i] = set_dx ? d : dx[i] + d;
    }
}

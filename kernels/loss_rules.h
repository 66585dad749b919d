/* The dense-target losses' value and slope per element, and the metrics' value per example,
 * written once for the reference (ref/loss.c) and the CUDA twin (cuda/loss.cu, metrics.cu).
 * Keras 3.6's formulas: keras/src/losses/losses.py, keras/src/backend/jax/nn.py (the JAX
 * backend, the oracle's), keras/src/metrics/. Private to kernels/: each includer defines
 * MW_LOSS_HD first ("static inline", or "__device__ static inline"). */
#ifndef MW_KERNELS_LOSS_RULES_H
#define MW_KERNELS_LOSS_RULES_H

#include <math.h>
#include <stdint.h>

#include "kernels/kernels.h"

#define MW_LOSS_EPS 1e-7f /* keras.config.epsilon(): the clip of probabilities */

MW_LOSS_HD float loss_softplus(float x) /* log(1 + e^x), as jax.numpy.logaddexp(x, 0) */
{
    return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));
}

MW_LOSS_HD float loss_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* The target after label smoothing (binary losses: towards 1/2). */
MW_LOSS_HD float loss_target(const mw_dloss *p, float y)
{
    return p->smoothing != 0.0f ? y * (1.0f - p->smoothing) + 0.5f * p->smoothing : y;
}

/* Binary cross-entropy of probability q against t, q clipped as Keras clips it; *slope:
 * d/dq (0 where the clip holds q). */
MW_LOSS_HD float loss_bce_prob(float q, float t, float *slope)
{
    const float lo = MW_LOSS_EPS, hi = 1.0f - MW_LOSS_EPS;
    const float c = fminf(fmaxf(q, lo), hi);
    *slope = q > lo && q < hi ? -(t / c - (1.0f - t) / (1.0f - c)) : 0.0f;
    return -(t * logf(c) + (1.0f - t) * logf(1.0f - c));
}

/* The loss of one element: output o against target y; *slope: d loss / d o. */
MW_LOSS_HD float loss_elem(const mw_dloss *p, float o, float y, float *slope)
{
    const float e = o - y;
    switch (p->kind) {
    case MW_DLOSS_MSE:
        *slope = 2.0f * e;
        return e * e;
    case MW_DLOSS_MAE:
        *slope = e > 0.0f ? 1.0f : e < 0.0f ? -1.0f : 0.0f;
        return fabsf(e);
    case MW_DLOSS_HUBER: {
        const float a = fabsf(e), d = p->delta;
        if (a <= d) {
            *slope = e;
            return 0.5f * e * e;
        }
        *slope = e > 0.0f ? d : -d;
        return d * a - 0.5f * d * d;
    }
    case MW_DLOSS_LOGCOSH:
        *slope = tanhf(e);
        return e + loss_softplus(-2.0f * e) - 0.69314718055994531f;
    case MW_DLOSS_BCE: {
        const float t = loss_target(p, y);
        if (p->from_logits) { /* -(t log sigmoid(o) + (1 - t) log sigmoid(-o)) */
            *slope = loss_sigmoid(o) - t;
            return t * loss_softplus(-o) + (1.0f - t) * loss_softplus(o);
        }
        return loss_bce_prob(o, t, slope);
    }
    case MW_DLOSS_FOCAL: {
        const float t = loss_target(p, y);
        const float q = p->from_logits ? loss_sigmoid(o) : o;
        float dbce;
        const float bce = loss_bce_prob(q, t, &dbce);
        const float pt = t * q + (1.0f - t) * (1.0f - q), u = 1.0f - pt;
        const float f = powf(u, p->gamma);
        /* d f / d q = -gamma u^(gamma - 1) (2 t - 1); u^(gamma - 1) at u = 0 taken as 0
         * (gamma > 1) or 1 (gamma = 1) */
        const float ug = u > 0.0f ? powf(u, p->gamma - 1.0f) : p->gamma == 1.0f ? 1.0f : 0.0f;
        const float df = -p->gamma * ug * (2.0f * t - 1.0f);
        const float w = p->balanced ? t * p->alpha + (1.0f - t) * (1.0f - p->alpha) : 1.0f;
        float s = w * (df * bce + f * dbce);
        if (p->from_logits)
            s *= q * (1.0f - q);
        *slope = s;
        return w * f * bce;
    }
    case MW_DLOSS_CCE: /* a row loss: loss_cce_row */
        break;
    }
    *slope = 0.0f;
    return 0.0f;
}

/* Categorical cross-entropy of one row from logits z (K), prob = softmax(z) written, the
 * targets smoothed towards 1 / K. Returns the loss. */
MW_LOSS_HD float loss_cce_row(const mw_dloss *p, float *prob, const float *z, const float *y, int K)
{
    float mx = z[0];
    for (int j = 1; j < K; j++)
        mx = z[j] > mx ? z[j] : mx;
    double sum = 0.0;
    for (int j = 0; j < K; j++) {
        prob[j] = expf(z[j] - mx);
        sum += prob[j];
    }
    const float inv = (float)(1.0 / sum), lse = (float)log(sum) + mx;
    double loss = 0.0;
    for (int j = 0; j < K; j++) {
        prob[j] *= inv;
        const float t =
            p->smoothing != 0.0f ? y[j] * (1.0f - p->smoothing) + p->smoothing / K : y[j];
        loss += (double)t * (lse - z[j]);
    }
    return (float)loss;
}

/* d/dz of loss_cce_row: scale (prob_k sum(t) - t_k). */
MW_LOSS_HD void loss_cce_row_grad(const mw_dloss *p, float *dz, const float *prob, const float *y,
                                  float scale, int K)
{
    float tsum = 0.0f;
    for (int j = 0; j < K; j++)
        tsum += p->smoothing != 0.0f ? y[j] * (1.0f - p->smoothing) + p->smoothing / K : y[j];
    for (int j = 0; j < K; j++) {
        const float t =
            p->smoothing != 0.0f ? y[j] * (1.0f - p->smoothing) + p->smoothing / K : y[j];
        dz[j] = scale * (prob[j] * tsum - t);
    }
}

/* The first index of the largest of v[0..K). */
MW_LOSS_HD int loss_argmax(const float *v, int K)
{
    int best = 0;
    for (int j = 1; j < K; j++)
        if (v[j] > v[best])
            best = j;
    return best;
}

/* One example's metric value from the output as Keras sees it (q, K) and its target: an
 * int32 label (MW_METRIC_SPARSE_ACC) or K floats. Accuracies are 0 or 1 (binary: the share
 * of the K outputs right, threshold 0.5), the errors a mean over K. */
MW_LOSS_HD double metric_value(mw_metric_kind kind, const float *q, const void *target, int K)
{
    const float *y = (const float *)target;
    double s = 0.0;
    switch (kind) {
    case MW_METRIC_NONE:
        return 0.0;
    case MW_METRIC_SPARSE_ACC:
        return loss_argmax(q, K) == *(const int32_t *)target;
    case MW_METRIC_CAT_ACC:
        return loss_argmax(q, K) == loss_argmax(y, K);
    case MW_METRIC_BIN_ACC:
        for (int j = 0; j < K; j++)
            s += (q[j] > 0.5f ? 1.0f : 0.0f) == y[j];
        return s / K;
    case MW_METRIC_MAE:
        for (int j = 0; j < K; j++)
            s += fabsf(q[j] - y[j]);
        return s / K;
    case MW_METRIC_MSE:
    case MW_METRIC_RMSE:
        for (int j = 0; j < K; j++)
            s += (double)(q[j] - y[j]) * (q[j] - y[j]);
        return s / K;
    case MW_METRIC_AUC: /* counted per bucket: metric_auc_bucket */
        return 0.0;
    }
    return 0.0;
}

/* The AUC bucket of an output (Keras' metrics_utils, evenly spaced thresholds with epsilon):
 * q clipped to [0, 1] (NaN as 0), then max(0, ceil(q (T - 1)) - 1) in float32. */
MW_LOSS_HD int metric_auc_bucket(float q)
{
    if (!(q > 0.0f))
        q = 0.0f;
    if (q > 1.0f)
        q = 1.0f;
    const int b = (int)ceilf(q * (float)(MW_AUC_THRESHOLDS - 1)) - 1;
    return b < 0 ? 0 : b;
}

/* How much output position p of an example counts: 0 where a mask says padding (ids: the
 * example's input ids, as floats: 0 there), times its sample weight for weighted metrics (w:
 * the example's weights, one per position, NULL: 1); else 1. */
MW_LOSS_HD double metric_counts(const mw_metric_list *ml, const float *ids, const float *w, int p)
{
    const double c = !ml->masked || !ids || ids[p] != 0.0f;
    return ml->weighted && w ? c * w[p] : c;
}

/* One example's value of a metric (not AUC): the mean over its positions (ml->positions rows
 * of K outputs, each against its target: an int32 label, or K floats); with a mask or weights
 * the sum over the positions of each value times how much it counts (metric_counts). */
MW_LOSS_HD double metric_example(const mw_metric_list *ml, mw_metric_kind kind, const float *q,
                                 const void *target, int K, const float *ids, const float *w)
{
    const int P = ml->positions > 1 ? ml->positions : 1;
    const size_t tb = kind == MW_METRIC_SPARSE_ACC ? sizeof(int32_t) : (size_t)K * sizeof(float);
    double v = 0.0;
    for (int p = 0; p < P; p++)
        v += metric_counts(ml, ids, w, p) *
             metric_value(kind, q + (size_t)p * K, (const uint8_t *)target + p * tb, K);
    return P > 1 && !ml->masked && !ml->weighted ? v / P : v;
}

/* One example's contributions to the running sums (kernels.h' MW_SUM_*): each listed metric's
 * value into its slot, with a mask or weights how much its positions count into MW_SUM_VALID;
 * an AUC's outputs (K per position that counts; never weighted) counted in their buckets,
 * positive where the target is not 0 (Keras casts it to bool). ids: the example's input ids
 * (a mask's), or NULL; w: its sample weights (one per position), or NULL. */
MW_LOSS_HD void metrics_add_example(const mw_metric_list *ml, double *acc, const float *q,
                                    const void *target, int K, const float *ids, const float *w)
{
    const int P = ml->positions > 1 ? ml->positions : 1;
    for (int p = 0; (ml->masked || ml->weighted) && p < P; p++)
        acc[MW_SUM_VALID] += metric_counts(ml, ids, w, p);
    for (int m = 0; m < ml->n; m++) {
        if (ml->kind[m] != MW_METRIC_AUC) {
            acc[MW_SUM_METRIC(m)] += metric_example(ml, ml->kind[m], q, target, K, ids, w);
            continue;
        }
        const float *y = (const float *)target;
        for (int j = 0; j < P * K; j++)
            if (metric_counts(ml, ids, NULL, j / K) != 0.0)
                acc[(y[j] != 0.0f ? MW_SUM_AUC_POS : MW_SUM_AUC_NEG) + metric_auc_bucket(q[j])] +=
                    1.0;
    }
}

#endif

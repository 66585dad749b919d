/* CUDA training metrics on the device (see metrics.h): the loss sum and the metrics' sums of a
 * micro-batch added into device accumulators, so the GPU loop never downloads the n x K
 * probabilities; the host reads the accumulators at progress and epoch boundaries.
 *
 * One block: each thread takes examples t, t + B, ... (kernels/loss_rules.h' metric_value, as
 * the host's), then a shared-memory tree sums the threads' parts in a fixed order: the same
 * inputs give the same sums on every run. An AUC's bucket counts are integers, counted with
 * shared-memory atomics: exact in any order. */
#include "kernels/cuda/metrics.h"
#include "kernels/cuda/runtime.cuh"

#define MW_LOSS_HD __device__ static inline
#include "kernels/loss_rules.h"

#define METRICS_BLOCK 256

/* ybytes: one example's target (an int32 label, or K floats); ids: with a mask, the input ids
 * (n x positions), else NULL */
static __global__ void metrics_add_kernel(double *acc, const float *loss, const float *prob,
                                          const uint8_t *y, size_t ybytes, const float *ids,
                                          const float *w, mw_metric_list ml, int n, int K)
{
    /* the loss, the positions counted, each metric */
    __shared__ double s_sum[2 + MW_METRICS_MAX][METRICS_BLOCK];
    __shared__ unsigned s_auc[2 * MW_AUC_THRESHOLDS]; /* positives, negatives */
    const int t = threadIdx.x;
    int auc = 0;
    for (int m = 0; m < ml.n; m++)
        auc |= ml.kind[m] == MW_METRIC_AUC;
    for (int j = t; auc && j < 2 * MW_AUC_THRESHOLDS; j += METRICS_BLOCK)
        s_auc[j] = 0;
    __syncthreads();
    double part[2 + MW_METRICS_MAX] = {0};
    const int P = ml.positions > 1 ? ml.positions : 1, PK = P * K; /* outputs per example */
    for (int i = t; i < n; i += METRICS_BLOCK) {
        const float *q = prob + (size_t)i * PK;
        const uint8_t *yi = y + (size_t)i * ybytes;
        const float *xi = ids ? ids + (size_t)i * P : NULL;
        const float *wi = w ? w + (size_t)i * P : NULL;
        part[0] += loss[i];
        for (int p = 0; (ml.masked || ml.weighted) && p < P; p++)
            part[1] += metric_counts(&ml, xi, wi, p);
        for (int m = 0; m < ml.n; m++)
            if (ml.kind[m] != MW_METRIC_AUC)
                part[2 + m] += metric_example(&ml, ml.kind[m], q, yi, K, xi, wi);
        for (int j = 0; auc && j < PK; j++) {
            const int neg = ((const float *)yi)[j] == 0.0f;
            if (metric_counts(&ml, xi, NULL, j / K) != 0.0)
                atomicAdd(&s_auc[neg * MW_AUC_THRESHOLDS + metric_auc_bucket(q[j])], 1u);
        }
    }
    for (int m = 0; m < 2 + ml.n; m++)
        s_sum[m][t] = part[m];
    __syncthreads();
    for (int w = METRICS_BLOCK / 2; w > 0; w /= 2) {
        if (t < w)
            for (int m = 0; m < 2 + ml.n; m++)
                s_sum[m][t] += s_sum[m][t + w];
        __syncthreads();
    }
    if (t == 0) {
        acc[MW_SUM_LOSS] += s_sum[0][0];
        acc[MW_SUM_VALID] += s_sum[1][0];
        for (int m = 0; m < ml.n; m++)
            acc[MW_SUM_METRIC(m)] += s_sum[2 + m][0];
    }
    for (int j = t; auc && j < 2 * MW_AUC_THRESHOLDS; j += METRICS_BLOCK)
        acc[MW_SUM_AUC_POS + j] += (double)s_auc[j];
}

extern "C" void mw_cuda_metrics_add(const mw_kctx *k, double *acc, const float *loss,
                                    const float *prob, const void *y, size_t ybytes,
                                    const float *ids, const float *w, const mw_metric_list *ml,
                                    int n, int K)
{
    const char *op = "mw_cuda_metrics_add";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || n <= 0)
        return;
    metrics_add_kernel<<<1, METRICS_BLOCK, 0, d->stream>>>(acc, loss, prob, (const uint8_t *)y,
                                                           ybytes, ml->masked ? ids : NULL,
                                                           ml->weighted ? w : NULL, *ml, n, K);
    MW_LAUNCHED_K(d, "metrics_add_kernel");
    mw_cuda_end(d, op);
}

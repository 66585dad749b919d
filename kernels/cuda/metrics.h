/* The GPU loop's loss and metric sums on the device (metrics.cu). */
#ifndef MW_KERNELS_CUDA_METRICS_H
#define MW_KERNELS_CUDA_METRICS_H

#include <stddef.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The running sums (kernels.h' MW_SUM_* layout, MW_SUMS doubles of device memory) of n more
 * examples: acc[MW_SUM_LOSS] += the sum of loss[0..n); for each metric i of ml, its values
 * over the rows of prob (n x ml->positions x K) against the targets (ybytes each: an int32 label or
 * K floats; kernels/loss_rules.h metrics_add_example) into acc[MW_SUM_METRIC(i)], an AUC's outputs
 * counted in its buckets; with ml->masked, only the positions whose input id (ids: n x
 * positions floats) is not 0, counted into acc[MW_SUM_VALID]; with ml->weighted each position's
 * value times its sample weight (w: n x positions floats, NULL: 1), the weights summed into
 * acc[MW_SUM_VALID]; acc[MW_SUM_COUNT] is the host's. Every array on k's device; ml is read when
 * the call is made. Enqueued on k's stream: the GPU loop's metrics stay on the device. CPU twin:
 * mw_metrics_add_host (worker/model/loss.h). Each example's values pass through k's scratch:
 * mw_cuda_metrics_ws(n, ml->n) floats, checked (a smaller workspace fails naming it). */
void mw_cuda_metrics_add(const mw_kctx *k, double *acc, const float *loss, const float *prob,
                         const void *y, size_t ybytes, const float *ids, const float *w,
                         const mw_metric_list *ml, int n, int K);

/* Floats of device scratch mw_cuda_metrics_add needs for n examples of nmetrics metrics: one
 * double per example for its counted positions and one per metric. */
static inline size_t mw_cuda_metrics_ws(int n, int nmetrics)
{
    return n > 0 ? (size_t)n * (size_t)(1 + nmetrics) * (sizeof(double) / sizeof(float)) : 0;
}

#ifdef __cplusplus
}
#endif

#endif

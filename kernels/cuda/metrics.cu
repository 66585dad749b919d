/* CUDA training metrics on the device (see cuda.h): the loss sum and the metric's sum of a
 * micro-batch added into device accumulators, so the GPU loop never downloads the n x K
 * probabilities; the host reads the accumulators at progress and epoch boundaries.
 *
 * One block: each thread takes examples t, t + B, ... (kernels/loss_rules.h' metric_value, as
 * the host's), then a shared-memory tree sums the threads' parts in a fixed
 * order: the same inputs give the same sums on every run. */
#include "kernels/cuda/dev.cuh"

#define MW_LOSS_HD __device__ static inline
#include "kernels/loss_rules.h"

#define METRICS_BLOCK 256

/* ybytes: one example's target (an int32 label, or K floats) */
static __global__ void metrics_add_kernel(double *acc, const float *loss, const float *prob,
                                          const uint8_t *y, size_t ybytes, mw_metric_kind kind,
                                          int n, int K)
{
    __shared__ double s_loss[METRICS_BLOCK], s_metric[METRICS_BLOCK];
    const int t = threadIdx.x;
    double ls = 0, met = 0;
    for (int i = t; i < n; i += METRICS_BLOCK) {
        met += metric_value(kind, prob + (size_t)i * K, y + (size_t)i * ybytes, K);
        ls += loss[i];
    }
    s_loss[t] = ls, s_metric[t] = met;
    __syncthreads();
    for (int w = METRICS_BLOCK / 2; w > 0; w /= 2) {
        if (t < w)
            s_loss[t] += s_loss[t + w], s_metric[t] += s_metric[t + w];
        __syncthreads();
    }
    if (t == 0)
        acc[0] += s_loss[0], acc[1] += s_metric[0];
}

extern "C" void mw_cuda_metrics_add(const mw_kctx *k, double *acc, const float *loss,
                                    const float *prob, const void *y, size_t ybytes,
                                    mw_metric_kind kind, int n, int K)
{
    const char *op = "mw_cuda_metrics_add";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || n <= 0)
        return;
    metrics_add_kernel<<<1, METRICS_BLOCK, 0, d->stream>>>(acc, loss, prob, (const uint8_t *)y,
                                                           ybytes, kind, n, K);
    MW_LAUNCHED_K(d, "metrics_add_kernel");
    mw_cuda_end(d, op);
}

/* CUDA training metrics on the device (see cuda.h): the loss sum and the correct count of a
 * micro-batch added into device accumulators, so the GPU loop never downloads the n x K
 * probabilities; the host reads the accumulators at progress and epoch boundaries.
 *
 * One block: each thread takes examples t, t + B, ... (argmax with the first maximum winning,
 * as mw_model_correct_host), then a shared-memory tree sums the threads' parts in a fixed
 * order: the same inputs give the same sums on every run. */
#include "kernels/cuda/dev.cuh"

#define METRICS_BLOCK 256

static __global__ void metrics_add_kernel(double *acc, const float *loss, const float *prob,
                                          const int32_t *labels, int n, int K)
{
    __shared__ double s_loss[METRICS_BLOCK], s_corr[METRICS_BLOCK];
    const int t = threadIdx.x;
    double ls = 0, corr = 0;
    for (int i = t; i < n; i += METRICS_BLOCK) {
        const float *p = prob + (size_t)i * K;
        int best = 0;
        for (int j = 1; j < K; j++)
            if (p[j] > p[best])
                best = j;
        corr += best == labels[i];
        ls += loss[i];
    }
    s_loss[t] = ls, s_corr[t] = corr;
    __syncthreads();
    for (int w = METRICS_BLOCK / 2; w > 0; w /= 2) {
        if (t < w)
            s_loss[t] += s_loss[t + w], s_corr[t] += s_corr[t + w];
        __syncthreads();
    }
    if (t == 0)
        acc[0] += s_loss[0], acc[1] += s_corr[0];
}

extern "C" void mw_cuda_metrics_add(const mw_kctx *k, double *acc, const float *loss,
                                    const float *prob, const int32_t *labels, int n, int K)
{
    const char *op = "mw_cuda_metrics_add";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || n <= 0)
        return;
    metrics_add_kernel<<<1, METRICS_BLOCK, 0, d->stream>>>(acc, loss, prob, labels, n, K);
    MW_LAUNCHED_K(d, "metrics_add_kernel");
    mw_cuda_end(d, op);
}

/* CUDA training metrics on the device (see metrics.h): the loss sum and the metrics' sums of a
 * micro-batch added into device accumulators, so the GPU loop never downloads the n x K
 * probabilities; the host reads the accumulators at progress and epoch boundaries.
 *
 * Two kernels, each in a fixed order, so the same inputs give the same sums on every run:
 *   1. one block per example, a warp per output position (warp w takes positions w, w + 8, ...):
 *      each position's value of every metric (kernels/loss_rules.h' metric_value, its K outputs
 *      split over the lanes: an argmax by a warp reduction that picks loss_argmax's index, the
 *      other sums in double joined by an xor butterfly) times how much it counts; each warp adds
 *      its positions in order, then the block its 8 warps in order, into the example's row of
 *      the context's scratch (n x (1 + metrics) doubles);
 *   2. one block: thread t takes examples t, t + B, ... (the loss, the rows of stage 1), then a
 *      shared-memory tree sums the threads' parts; the AUC's bucket counts are integers,
 *      counted over every output with shared-memory atomics: exact in any order.
 * Argmax accuracies of one position are integers (exact in any order); the other values are
 * double sums of at most K float terms per position, P positions per example: their order
 * differs from the host's sequential one by far below float32's rounding. */
#include <math.h>

#include "kernels/cuda/metrics.h"
#include "kernels/cuda/runtime.cuh"

#define MW_LOSS_HD __device__ static inline
#include "kernels/loss_rules.h"

#define METRICS_BLOCK 256
#define METRICS_WARPS (METRICS_BLOCK / 32)

/* loss_argmax of v[0..K) by a warp: each lane's strided share with its rule (the first of the
 * largest; a NaN never becomes the best), then the lanes' bests joined, the larger value or on a
 * tie the smaller index (a total order: every lane ends with the same). A NaN at 0 stays the
 * answer, as in loss_argmax. */
__device__ static int warp_argmax(const float *v, int K, int lane)
{
    int best = -1;
    float bv = 0.0f;
    for (int j = lane; j < K; j += 32)
        if (!isnan(v[j]) && (best < 0 || v[j] > bv))
            best = j, bv = v[j];
    for (int o = 16; o > 0; o >>= 1) {
        const int ob = __shfl_xor_sync(0xffffffffu, best, o);
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        if (ob >= 0 && (best < 0 || ov > bv || (ov == bv && ob < best)))
            best = ob, bv = ov;
    }
    return best < 0 || isnan(v[0]) ? 0 : best;
}

/* metric_value by a warp (every lane gets it). */
__device__ static double warp_value(mw_metric_kind kind, const float *q, const void *target, int K,
                                    int lane)
{
    const float *y = (const float *)target;
    double s = 0.0;
    switch (kind) {
    case MW_METRIC_SPARSE_ACC:
        return warp_argmax(q, K, lane) == *(const int32_t *)target;
    case MW_METRIC_CAT_ACC:
        return warp_argmax(q, K, lane) == warp_argmax(y, K, lane);
    case MW_METRIC_BIN_ACC:
        for (int j = lane; j < K; j += 32)
            s += (q[j] > 0.5f ? 1.0f : 0.0f) == y[j];
        return mw_warp_sum(s) / K;
    case MW_METRIC_MAE:
        for (int j = lane; j < K; j += 32)
            s += fabsf(q[j] - y[j]);
        return mw_warp_sum(s) / K;
    case MW_METRIC_MSE:
    case MW_METRIC_RMSE:
        for (int j = lane; j < K; j += 32)
            s += (double)(q[j] - y[j]) * (q[j] - y[j]);
        return mw_warp_sum(s) / K;
    default: /* none, AUC (counted per bucket) */
        return 0.0;
    }
}

/* Stage 1: ex[i][0] = example i's counted positions (a mask's or the weights' sum), ex[i][1 + m]
 * = metric m's value (metric_example's). ybytes: one example's target (P int32 labels, or P K
 * floats); ids: with a mask, the input ids (n x P), else NULL. */
static __global__ void metrics_rows_kernel(double *ex, const float *prob, const uint8_t *y,
                                           size_t ybytes, const float *ids, const float *w,
                                           mw_metric_list ml, int n, int K)
{
    __shared__ double s_part[METRICS_WARPS][1 + MW_METRICS_MAX];
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, E = 1 + ml.n;
    const int P = ml.positions > 1 ? ml.positions : 1;
    for (int i = blockIdx.x; i < n; i += gridDim.x) {
        const uint8_t *yi = y + (size_t)i * ybytes;
        const float *xi = ids ? ids + (size_t)i * P : NULL, *wi = w ? w + (size_t)i * P : NULL;
        double part[1 + MW_METRICS_MAX] = {0};
        for (int p = wp; p < P; p += METRICS_WARPS) {
            const double c = metric_counts(&ml, xi, wi, p);
            part[0] += c;
            for (int m = 0; m < ml.n; m++) {
                const size_t tb = ml.kind[m] == MW_METRIC_SPARSE_ACC ? sizeof(int32_t)
                                                                     : (size_t)K * sizeof(float);
                part[1 + m] += c * warp_value(ml.kind[m], prob + ((size_t)i * P + p) * K,
                                              yi + (size_t)p * tb, K, lane);
            }
        }
        if (lane == 0)
            for (int m = 0; m < E; m++)
                s_part[wp][m] = part[m];
        __syncthreads();
        if (threadIdx.x < E) {
            double s = 0.0;
            for (int q = 0; q < METRICS_WARPS; q++)
                s += s_part[q][threadIdx.x];
            const int mean = threadIdx.x > 0 && P > 1 && !ml.masked && !ml.weighted;
            ex[(size_t)i * E + threadIdx.x] = mean ? s / P : s;
        }
        __syncthreads();
    }
}

/* Stage 2, one block: the loss, the rows of stage 1 and the AUC's buckets into acc. */
static __global__ void metrics_add_kernel(double *acc, const float *loss, const double *ex,
                                          const float *prob, const uint8_t *y, size_t ybytes,
                                          const float *ids, mw_metric_list ml, int n, int K)
{
    __shared__ double s_sum[2 + MW_METRICS_MAX][METRICS_BLOCK]; /* the loss, then ex's row */
    __shared__ unsigned s_auc[2 * MW_AUC_THRESHOLDS];           /* positives, negatives */
    const int t = threadIdx.x, E = 1 + ml.n;
    int auc = 0;
    for (int m = 0; m < ml.n; m++)
        auc |= ml.kind[m] == MW_METRIC_AUC;
    for (int j = t; auc && j < 2 * MW_AUC_THRESHOLDS; j += METRICS_BLOCK)
        s_auc[j] = 0;
    __syncthreads();
    double part[2 + MW_METRICS_MAX] = {0};
    for (int i = t; i < n; i += METRICS_BLOCK) {
        part[0] += loss[i];
        for (int m = 0; m < E; m++)
            part[1 + m] += ex[(size_t)i * E + m];
    }
    const size_t P = ml.positions > 1 ? (size_t)ml.positions : 1, PK = P * (size_t)K;
    for (size_t j = t; auc && j < (size_t)n * PK; j += METRICS_BLOCK) { /* every output */
        const size_t i = j / PK, r = j % PK;
        const int neg = ((const float *)(y + i * ybytes))[r] == 0.0f;
        if (metric_counts(&ml, ids ? ids + i * P : NULL, NULL, (int)(r / K)) != 0.0)
            atomicAdd(&s_auc[neg * MW_AUC_THRESHOLDS + metric_auc_bucket(prob[j])], 1u);
    }
    for (int m = 0; m < 1 + E; m++)
        s_sum[m][t] = part[m];
    __syncthreads();
    for (int h = METRICS_BLOCK / 2; h > 0; h /= 2) {
        if (t < h)
            for (int m = 0; m < 1 + E; m++)
                s_sum[m][t] += s_sum[m][t + h];
        __syncthreads();
    }
    if (t == 0) {
        acc[MW_SUM_LOSS] += s_sum[0][0];
        if (ml.masked || ml.weighted)
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
    const size_t need = mw_cuda_metrics_ws(n, ml->n), have = k->ws ? k->ws_count : 0;
    if (have < need) {
        mw_cuda_note(d, mw_err(MW_EINVAL,
                               "%s: device workspace %zu floats, %d examples of %d metrics need "
                               "%zu (mw_cuda_metrics_ws, mw_cuda_ws_reserve)",
                               op, have, n, ml->n, need));
        return;
    }
    double *ex = (double *)k->ws; /* cudaMalloc'ed: aligned for double */
    const float *dids = ml->masked ? ids : NULL;
    const unsigned grid = (unsigned)(n < 65535 ? n : 65535);
    metrics_rows_kernel<<<grid, METRICS_BLOCK, 0, d->stream>>>(
        ex, prob, (const uint8_t *)y, ybytes, dids, ml->weighted ? w : NULL, *ml, n, K);
    MW_LAUNCHED_K(d, "metrics_rows_kernel");
    metrics_add_kernel<<<1, METRICS_BLOCK, 0, d->stream>>>(acc, loss, ex, prob, (const uint8_t *)y,
                                                           ybytes, dids, *ml, n, K);
    MW_LAUNCHED_K(d, "metrics_add_kernel");
    mw_cuda_end(d, op);
}

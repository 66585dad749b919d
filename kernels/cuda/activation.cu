/* CUDA ReLU, sparse softmax cross-entropy from logits, and the smooth activations
 * (kernels/act_rules.h; the spec is kernels/ref/activation.c).
 *
 * ReLU and the cross-entropy backward are element-wise grid-stride loops. The
 * cross-entropy forward gives each row (example) one warp: lanes stride over
 * the K classes, the max and the sum of exp(z - max) are reduced with shuffles
 * in a fixed order (reproducible), and the sum is kept in double like the
 * reference. A label outside [0, K) gives a NaN loss instead of a stray read,
 * so a bad label cannot pass unnoticed (the host validates labels on load). */
#include <math.h>

#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}

#define MW_ACT_HD static __device__ inline
#include "kernels/act_rules.h"

static __global__ void relu_fwd_kernel(float *y, const float *x, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

static __global__ void relu_bwd_kernel(float *dx, const float *dy, const float *y, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f; /* overwrite, may run in place (kernels.h) */
}

extern "C" void mw_relu_fwd_cuda(const mw_kctx *k, float *y, const float *x, size_t count)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_relu_fwd_cuda");
    if (!d || count == 0)
        return;
    relu_fwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(y, x, count);
    MW_LAUNCHED_K(d, "relu_fwd_kernel");
    mw_cuda_end(d, "mw_relu_fwd_cuda");
}

extern "C" void mw_relu_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, const float *y,
                                 size_t count)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_relu_bwd_cuda");
    if (!d || count == 0)
        return;
    relu_bwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(dx, dy, y, count);
    MW_LAUNCHED_K(d, "relu_bwd_kernel");
    mw_cuda_end(d, "mw_relu_bwd_cuda");
}

#define XENT_WARPS 8 /* rows per block */

static __global__ void xent_fwd_kernel(float *loss, float *prob, const float *logits,
                                       const int32_t *labels, int N, int K)
{
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    int n = blockIdx.x * XENT_WARPS + (threadIdx.x >> 5);
    if (n >= N) /* the whole warp leaves together */
        return;
    const float *z = logits + (size_t)n * K;
    float *p = prob + (size_t)n * K;

    float mx = -INFINITY;
    for (int j = lane; j < K; j += 32)
        mx = fmaxf(mx, z[j]);
    for (int s = 16; s > 0; s >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(full, mx, s));

    double sum = 0.0;
    for (int j = lane; j < K; j += 32) {
        float e = expf(z[j] - mx);
        p[j] = e;
        sum += e;
    }
    for (int s = 16; s > 0; s >>= 1)
        sum += __shfl_xor_sync(full, sum, s);

    float inv = (float)(1.0 / sum);
    for (int j = lane; j < K; j += 32)
        p[j] *= inv;
    if (lane == 0) {
        int32_t t = labels[n];
        /* outside [0, K): an ignored label (kernels.h) */
        loss[n] = t >= 0 && t < K ? (float)(log(sum) + (double)mx - (double)z[t]) : 0.0f;
    }
}

static __global__ void xent_bwd_kernel(float *dlogits, const float *prob, const int32_t *labels,
                                       float scale, size_t count, int K)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        int j = (int)(i % (size_t)K);
        float t = j == labels[i / (size_t)K] ? 1.0f : 0.0f;
        dlogits[i] = scale * (prob[i] - t);
    }
}

extern "C" void mw_xent_fwd_cuda(const mw_kctx *k, float *loss, float *prob, const float *logits,
                                 const int32_t *labels, int N, int K)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_xent_fwd_cuda");
    if (!d || N <= 0 || K <= 0)
        return;
    unsigned grid = (unsigned)((N + XENT_WARPS - 1) / XENT_WARPS);
    xent_fwd_kernel<<<grid, XENT_WARPS * 32, 0, d->stream>>>(loss, prob, logits, labels, N, K);
    MW_LAUNCHED_K(d, "xent_fwd_kernel");
    mw_cuda_end(d, "mw_xent_fwd_cuda");
}

extern "C" void mw_xent_bwd_cuda(const mw_kctx *k, float *dlogits, const float *prob,
                                 const int32_t *labels, float scale, int N, int K)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_xent_bwd_cuda");
    if (!d || N <= 0 || K <= 0)
        return;
    size_t count = (size_t)N * K;
    xent_bwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(dlogits, prob, labels,
                                                                          scale, count, K);
    MW_LAUNCHED_K(d, "xent_bwd_kernel");
    mw_cuda_end(d, "mw_xent_bwd_cuda");
}

static __global__ void act_fwd_kernel(float *y, const float *x, size_t count, mw_act_kind kind,
                                      float alpha)
{
    MW_GRID_STRIDE(i, count)
    {
        y[i] = act_value(x[i], kind, alpha);
    }
}

static __global__ void act_bwd_kernel(float *dx, const float *dy, const float *x, const float *y,
                                      size_t count, mw_act_kind kind, float alpha)
{
    MW_GRID_STRIDE(i, count)
    {
        dx[i] += dy[i] * act_slope(x[i], y[i], kind, alpha);
    }
}

extern "C" void mw_act_fwd_cuda(const mw_kctx *k, float *y, const float *x, size_t count,
                                mw_act_kind kind, float alpha)
{
    MW_EW_LAUNCH("mw_act_fwd_cuda", act_fwd_kernel, count, y, x, count, kind, alpha);
}

extern "C" void mw_act_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, const float *x,
                                const float *y, size_t count, mw_act_kind kind, float alpha)
{
    MW_EW_LAUNCH("mw_act_bwd_cuda", act_bwd_kernel, count, dx, dy, x, y, count, kind, alpha);
}

static __global__ void relux_fwd_kernel(float *y, const float *x, size_t count, float max_value,
                                        float slope, float threshold)
{
    MW_GRID_STRIDE(i, count)
    {
        y[i] = relux_value(x[i], max_value, slope, threshold);
    }
}

static __global__ void relux_bwd_kernel(float *dx, const float *dy, const float *x, size_t count,
                                        float max_value, float slope, float threshold, int set_dx)
{
    MW_GRID_STRIDE(i, count)
    {
        const float d = dy[i] * relux_slope(x[i], max_value, slope, threshold);
        dx[i] = set_dx ? d : dx[i] + d;
    }
}

extern "C" void mw_relux_fwd_cuda(const mw_kctx *k, float *y, const float *x, size_t count,
                                  float max_value, float slope, float threshold)
{
    MW_EW_LAUNCH("mw_relux_fwd_cuda", relux_fwd_kernel, count, y, x, count, max_value, slope,
                 threshold);
}

extern "C" void mw_relux_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, const float *x,
                                  size_t count, float max_value, float slope, float threshold,
                                  int set_dx)
{
    MW_EW_LAUNCH("mw_relux_bwd_cuda", relux_bwd_kernel, count, dx, dy, x, count, max_value, slope,
                 threshold, set_dx);
}

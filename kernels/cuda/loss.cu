/* CUDA twins of the dense-target losses (kernels/kernel_list.h: dloss_fwd, dloss_bwd; the formulas
 * are kernels/loss_rules.h, shared with the reference). One thread per example: K is a model's
 * output width, and the row's mean (or CCE's softmax) is then the reference's loop in the
 * reference's order. The loss's parameters travel by value. */
#include "kernels/cuda/runtime.cuh"

#define MW_LOSS_HD __device__ static inline
extern "C" {
#include "kernels/twins.h"
}
#include "kernels/loss_rules.h"

static __global__ void dloss_fwd_kernel(mw_dloss p, float *loss, float *prob, const float *out,
                                        const float *y, int N, int K)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) {
        const size_t r = (size_t)i * K;
        if (p.kind == MW_DLOSS_CCE) {
            loss[i] = loss_cce_row(&p, prob + r, out + r, y + r, K);
            continue;
        }
        double s = 0.0;
        for (int j = 0; j < K; j++) {
            float slope;
            s += loss_elem(&p, out[r + j], y[r + j], &slope);
            prob[r + j] = out[r + j];
        }
        loss[i] = (float)(s / K);
    }
}

static __global__ void dloss_bwd_kernel(mw_dloss p, float *dout, const float *out,
                                        const float *prob, const float *y, float scale, int N,
                                        int K)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) {
        const size_t r = (size_t)i * K;
        if (p.kind == MW_DLOSS_CCE) {
            loss_cce_row_grad(&p, dout + r, prob + r, y + r, scale, K);
            continue;
        }
        for (int j = 0; j < K; j++) {
            float slope;
            (void)loss_elem(&p, out[r + j], y[r + j], &slope);
            dout[r + j] = scale / K * slope;
        }
    }
}

extern "C" void mw_dloss_fwd_cuda(const mw_kctx *k, const mw_dloss *p, float *loss, float *prob,
                                  const float *out, const float *y, int N, int K)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_dloss_fwd_cuda");
    if (!d || N <= 0 || K <= 0)
        return;
    dloss_fwd_kernel<<<mw_cuda_grid((size_t)N), MW_CUDA_BLOCK, 0, d->stream>>>(*p, loss, prob, out,
                                                                               y, N, K);
    MW_LAUNCHED_K(d, "dloss_fwd_kernel");
    mw_cuda_end(d, "mw_dloss_fwd_cuda");
}

extern "C" void mw_dloss_bwd_cuda(const mw_kctx *k, const mw_dloss *p, float *dout,
                                  const float *out, const float *prob, const float *y, float scale,
                                  int N, int K)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_dloss_bwd_cuda");
    if (!d || N <= 0 || K <= 0)
        return;
    dloss_bwd_kernel<<<mw_cuda_grid((size_t)N), MW_CUDA_BLOCK, 0, d->stream>>>(*p, dout, out, prob,
                                                                               y, scale, N, K);
    MW_LAUNCHED_K(d, "dloss_bwd_kernel");
    mw_cuda_end(d, "mw_dloss_bwd_cuda");
}

static __global__ void scale_rows_kernel(float *a, const float *w, size_t count, int width)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        a[i] *= w[i / (size_t)width];
}

extern "C" void mw_scale_rows_cuda(const mw_kctx *k, float *a, const float *w, int n, int width)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_scale_rows_cuda");
    if (!d || n <= 0 || width <= 0)
        return;
    const size_t count = (size_t)n * width;
    scale_rows_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(a, w, count, width);
    MW_LAUNCHED_K(d, "scale_rows_kernel");
    mw_cuda_end(d, "mw_scale_rows_cuda");
}

static __global__ void row_mean_kernel(float *out, const float *in, int n, int P)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        double s = 0;
        for (int p = 0; p < P; p++)
            s += in[(size_t)i * P + p];
        out[i] = (float)(s / P);
    }
}

extern "C" void mw_row_mean_cuda(const mw_kctx *k, float *out, const float *in, int n, int P)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_row_mean_cuda");
    if (!d || n <= 0)
        return;
    row_mean_kernel<<<mw_cuda_grid((size_t)n), MW_CUDA_BLOCK, 0, d->stream>>>(out, in, n, P);
    MW_LAUNCHED_K(d, "row_mean_kernel");
    mw_cuda_end(d, "mw_row_mean_cuda");
}

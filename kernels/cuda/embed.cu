/* Embedding's CUDA twins (kernels/embed.h): the gather one thread per output value; the
 * scatter-add one thread per gradient value with atomicAdd into the table's gradient (rows
 * that repeat in a batch are summed in another order than the reference's: within float32
 * rounding of it, which test_cuda bounds). */
#include "kernels/cuda/runtime.cuh"

#define MW_SINE_HD __device__ static inline
extern "C" {
#include "kernels/embed.h"
#include "kernels/twins.h"
}

static __device__ long embed_row(float id, int V)
{
    return id >= 0.0f && id < (float)V && id == (float)(long)id ? (long)id : -1;
}

static __global__ void embed_fwd_kernel(float *y, const float *ids, const float *table,
                                        size_t count, int D, int V)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        const long r = embed_row(ids[i / D], V);
        y[i] = r >= 0 ? table[(size_t)r * D + i % D] : 0.0f;
    }
}

static __global__ void embed_bwd_kernel(float *gtable, const float *dy, const float *ids,
                                        size_t count, int D, int V)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        const long r = embed_row(ids[i / D], V);
        if (r >= 0)
            atomicAdd(gtable + (size_t)r * D + i % D, dy[i]);
    }
}

extern "C" void mw_embed_fwd_cuda(const mw_kctx *k, float *y, const float *ids, const float *table,
                                  int n, int T, int D, int V)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_embed_fwd_cuda");
    const size_t count = (size_t)n * T * D;
    if (!d || count == 0)
        return;
    embed_fwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(y, ids, table, count, D,
                                                                           V);
    MW_LAUNCHED_K(d, "embed_fwd_kernel");
    mw_cuda_end(d, "mw_embed_fwd_cuda");
}

extern "C" void mw_embed_bwd_cuda(const mw_kctx *k, float *gtable, const float *dy,
                                  const float *ids, int n, int T, int D, int V)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_embed_bwd_cuda");
    const size_t count = (size_t)n * T * D;
    if (!d || count == 0)
        return;
    embed_bwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(gtable, dy, ids, count,
                                                                           D, V);
    MW_LAUNCHED_K(d, "embed_bwd_kernel");
    mw_cuda_end(d, "mw_embed_bwd_cuda");
}

/* One thread per (example, feature): the steps in order, as the reference. */
static __global__ void masked_mean_fwd_kernel(float *y, const float *x, const float *ids, int n,
                                              int T, int D)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)n * D;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t e = i / D, j = i % D;
        const float *id = ids + e * T, *xe = x + e * T * D;
        float s = 0.0f, c = 0.0f;
        for (int t = 0; t < T; t++)
            if (id[t] != 0.0f)
                s += xe[(size_t)t * D + j], c += 1.0f;
        y[i] = s / c;
    }
}

static __global__ void masked_mean_bwd_kernel(float *dx, const float *dy, const float *ids, int n,
                                              int T, int D)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)n * T * D;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t e = i / ((size_t)T * D), t = i / D % T, j = i % D;
        const float *id = ids + e * T;
        if (id[t] == 0.0f)
            continue;
        float c = 0.0f;
        for (int u = 0; u < T; u++)
            c += id[u] != 0.0f;
        dx[i] += dy[e * D + j] / c;
    }
}

extern "C" void mw_masked_mean_fwd_cuda(const mw_kctx *k, float *y, const float *x,
                                        const float *ids, int n, int T, int D)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_masked_mean_fwd_cuda");
    const size_t count = (size_t)n * D;
    if (!d || count == 0)
        return;
    masked_mean_fwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(y, x, ids, n, T,
                                                                                 D);
    MW_LAUNCHED_K(d, "masked_mean_fwd_kernel");
    mw_cuda_end(d, "mw_masked_mean_fwd_cuda");
}

extern "C" void mw_masked_mean_bwd_cuda(const mw_kctx *k, float *dx, const float *dy,
                                        const float *ids, int n, int T, int D)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_masked_mean_bwd_cuda");
    const size_t count = (size_t)n * T * D;
    if (!d || count == 0)
        return;
    masked_mean_bwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(dx, dy, ids, n, T,
                                                                                 D);
    MW_LAUNCHED_K(d, "masked_mean_bwd_kernel");
    mw_cuda_end(d, "mw_masked_mean_bwd_cuda");
}

static __global__ void sine_pos_kernel(float *y, size_t count, int T, int D, float max_wavelength)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t r = e % ((size_t)T * D);
        y[e] = mw_sine_pos_value((int)(r / D), (int)(r % D), D, max_wavelength);
    }
}

extern "C" void mw_sine_pos_cuda(const mw_kctx *k, float *y, int n, int T, int D,
                                 float max_wavelength)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_sine_pos_cuda");
    const size_t count = (size_t)(n > 0 ? n : 0) * T * D;
    if (!d || count == 0)
        return;
    sine_pos_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(y, count, T, D,
                                                                          max_wavelength);
    MW_LAUNCHED_K(d, "sine_pos_kernel");
    mw_cuda_end(d, "mw_sine_pos_cuda");
}

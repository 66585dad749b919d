/* Embedding's CUDA twins (kernels/embed.h): the gather one thread per output value; the
 * scatter-add one thread per gradient value with atomicAdd into the table's gradient (rows
 * that repeat in a batch are summed in another order than the reference's: within float32
 * rounding of it, which test_cuda bounds). */
#include "kernels/cuda/dev.cuh"

extern "C" {
#include "kernels/embed.h"
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

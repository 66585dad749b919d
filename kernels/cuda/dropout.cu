/* CUDA inverted dropout (see kernels.h): element-wise grid-stride loops.
 *
 * The mask must equal the reference's bit for bit: the device's copy of common/rng.c's
 * mw_rng_hash (dev.cuh), and the threshold from mw_dropout_threshold on the host. ids is a
 * device pointer (or NULL: example n has id n). The step's seed is read from the context's device
 * word (runtime.cuh: mw_cuda_seed_at), so a CUDA graph of the forward draws each step's masks. */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/dropout.h"
#include "kernels/twins.h"
}

static __global__ void dropout_fwd_kernel(float *y, float *mask, const float *x,
                                          const uint32_t *ids, uint64_t seed,
                                          const uint64_t *seed_at, uint64_t stream, uint32_t thr,
                                          float keep, size_t D, size_t count)
{
    if (seed_at) /* the step's seed, as it is when a captured graph runs */
        seed = *seed_at;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / D, e = i % D;
        uint64_t id = ids ? ids[n] : (uint32_t)n;
        uint32_t u = (uint32_t)(mw_cuda_rng_hash(seed, stream, id * D + e) >> 40);
        float m = u >= thr ? keep : 0.0f;
        mask[i] = m;
        y[i] = x[i] * m;
    }
}

static __global__ void dropout_bwd_kernel(float *dx, const float *dy, const float *mask,
                                          size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        dx[i] = dy[i] * mask[i];
}

extern "C" void mw_dropout_fwd_cuda(const mw_kctx *k, float *y, float *mask, const float *x,
                                    const uint32_t *ids, uint64_t seed, uint64_t stream, float rate,
                                    int N, size_t D)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_dropout_fwd_cuda");
    if (!d || N <= 0 || D == 0)
        return;
    size_t count = (size_t)N * D;
    uint32_t thr = mw_dropout_threshold(rate);
    float keep = 1.0f / (1.0f - rate);
    dropout_fwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(
        y, mask, x, ids, seed, mw_cuda_seed_at(d, seed), stream, thr, keep, D, count);
    MW_LAUNCHED_K(d, "dropout_fwd_kernel");
    mw_cuda_end(d, "mw_dropout_fwd_cuda");
}

extern "C" void mw_dropout_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, const float *mask,
                                    size_t count)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_dropout_bwd_cuda");
    if (!d || count == 0)
        return;
    dropout_bwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(dx, dy, mask, count);
    MW_LAUNCHED_K(d, "dropout_bwd_kernel");
    mw_cuda_end(d, "mw_dropout_bwd_cuda");
}

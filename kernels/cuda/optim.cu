/* CUDA optimizer updates, Keras' formulas (see kernels.h): element-wise
 * grid-stride loops over the flat parameter arena. */
#include "kernels/cuda/dev.cuh"

extern "C" {
#include "kernels/optim.h"
}

static __global__ void adam_kernel(float *p, float *m, float *v, const float *g, size_t count,
                                   float lr_t, float b1, float b2, float eps)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= lr_t * mi / (sqrtf(vi) + eps);
    }
}

static __global__ void sgd_kernel(float *p, float *vel, const float *g, size_t count, float lr,
                                  float mu)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        float vi = mu * vel[i] - lr * g[i];
        vel[i] = vi;
        p[i] += vi;
    }
}

extern "C" void mw_adam_cuda(const mw_kctx *k, float *p, float *m, float *v, const float *g,
                             size_t count, float lr_t, float b1, float b2, float eps)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_adam_cuda");
    if (!d || count == 0)
        return;
    adam_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(p, m, v, g, count, lr_t,
                                                                      b1, b2, eps);
    MW_LAUNCHED_K(d, "adam_kernel");
    mw_cuda_end(d, "mw_adam_cuda");
}

extern "C" void mw_sgd_cuda(const mw_kctx *k, float *p, float *vel, const float *g, size_t count,
                            float lr, float mu)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_sgd_cuda");
    if (!d || count == 0)
        return;
    sgd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(p, vel, g, count, lr, mu);
    MW_LAUNCHED_K(d, "sgd_kernel");
    mw_cuda_end(d, "mw_sgd_cuda");
}

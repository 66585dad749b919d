/* CUDA optimizer updates, Keras' formulas (see kernels.h): element-wise
 * grid-stride loops over the flat parameter arena. */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}

#define MW_OPTIM_HD static __device__ inline
#include "kernels/optim_rules.h"

/* Keras 3's rules (optim_rules.h): one grid-stride kernel per rule; the scalars travel by
 * value. */
#define MW_RULE_KERNEL(name, body)                                                                 \
    static __global__ void name##_kernel(float *p, float *s1, float *s2, float *s3,                \
                                         const float *g, size_t count, mw_optim_hyper h)           \
    {                                                                                              \
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;                  \
             i += (size_t)gridDim.x * blockDim.x) {                                                \
            body;                                                                                  \
        }                                                                                          \
    }                                                                                              \
    extern "C" void mw_##name##_cuda(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,  \
                                     const float *g, size_t count, const mw_optim_hyper *h)        \
    {                                                                                              \
        mw_cuda_dev *d = mw_cuda_begin(k, "mw_" #name "_cuda");                                    \
        if (!d || count == 0)                                                                      \
            return;                                                                                \
        name##_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(p, s1, s2, s3, g,      \
                                                                            count, *h);            \
        MW_LAUNCHED_K(d, #name "_kernel");                                                         \
        mw_cuda_end(d, "mw_" #name "_cuda");                                                       \
    }

MW_RULE_KERNEL(sgd_step, rule_sgd(p + i, s1 ? s1 + i : NULL, g[i], &h))
MW_RULE_KERNEL(adam_step, rule_adam(p + i, s1 + i, s2 + i, s3 ? s3 + i : NULL, g[i], &h))
MW_RULE_KERNEL(rmsprop_step,
               rule_rmsprop(p + i, s1 + i, s2 ? s2 + i : NULL, s3 ? s3 + i : NULL, g[i], &h))
MW_RULE_KERNEL(adagrad_step, rule_adagrad(p + i, s1 + i, g[i], &h))
MW_RULE_KERNEL(adamax_step, rule_adamax(p + i, s1 + i, s2 + i, g[i], &h))
#undef MW_RULE_KERNEL

/* sumsq: per-block partial sums in double (a fixed tree), then the blocks in order by one
 * thread, into k's scratch; the host waits for the one double. */
#define MW_SUMSQ_BLOCKS 256

static __global__ void sumsq_kernel(double *part, const float *g, size_t count)
{
    __shared__ double s[MW_CUDA_BLOCK];
    double a = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        a += (double)g[i] * g[i];
    s[threadIdx.x] = a;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h /= 2) {
        if (threadIdx.x < h)
            s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        part[blockIdx.x] = s[0];
}

static __global__ void sumsq_total_kernel(double *out, const double *part, unsigned nblocks)
{
    double a = 0.0;
    for (unsigned i = 0; i < nblocks; i++)
        a += part[i];
    *out = a;
}

extern "C" void mw_sumsq_cuda(const mw_kctx *k, double *out, const float *g, size_t count)
{
    *out = 0.0;
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_sumsq_cuda");
    if (!d || count == 0)
        return;
    unsigned nb = mw_cuda_grid(count);
    if (nb > MW_SUMSQ_BLOCKS)
        nb = MW_SUMSQ_BLOCKS;
    const size_t need = 2 * ((size_t)nb + 1) * sizeof(double) / sizeof(float);
    if (k->ws_count < need) {
        mw_cuda_note(d, mw_err(MW_EDEVICE, "mw_sumsq_cuda: %zu floats of scratch, needs %zu",
                               k->ws_count, need));
        return;
    }
    double *part = (double *)k->ws; /* cudaMalloc'ed: aligned for double */
    sumsq_kernel<<<nb, MW_CUDA_BLOCK, 0, d->stream>>>(part + 1, g, count);
    MW_LAUNCHED_K(d, "sumsq_kernel");
    sumsq_total_kernel<<<1, 1, 0, d->stream>>>(part, part + 1, nb);
    MW_LAUNCHED_K(d, "sumsq_total_kernel");
    MW_CUDA_K(d, cudaMemcpyAsync(out, part, sizeof(double), cudaMemcpyDeviceToHost, d->stream));
    if (mw_cuda_wait_idle_(d, d->stream, "reading the gradient norm (clipnorm)") != MW_OK)
        return;
    mw_cuda_end(d, "mw_sumsq_cuda");
}

/* The weight penalty (kernels.h): the gradient term element-wise, and the two
 * sums in double, first per block (a fixed tree), then over the blocks in block
 * order by one thread, so the penalty is the same bits on every run. */
#define MW_REG_BLOCKS 256

static __global__ void regularize_kernel(float *g, double *part, const float *w, size_t count,
                                         float l1f, float two_l2f, float scale)
{
    __shared__ double s1[MW_CUDA_BLOCK], s2[MW_CUDA_BLOCK];
    double a = 0.0, b = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = w[i];
        a += fabs((double)x);
        b += (double)x * x;
        if (g) {
            float sgn = (float)((x > 0.0f) - (x < 0.0f));
            g[i] += scale * (l1f * sgn + two_l2f * x);
        }
    }
    s1[threadIdx.x] = a;
    s2[threadIdx.x] = b;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h /= 2) {
        if (threadIdx.x < h) {
            s1[threadIdx.x] += s1[threadIdx.x + h];
            s2[threadIdx.x] += s2[threadIdx.x + h];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        part[2 * blockIdx.x] = s1[0];
        part[2 * blockIdx.x + 1] = s2[0];
    }
}

static __global__ void regularize_total_kernel(double *acc, const double *part, unsigned nblocks,
                                               double l1, double l2, double scale)
{
    double a = 0.0, b = 0.0;
    for (unsigned i = 0; i < nblocks; i++) {
        a += part[2 * i];
        b += part[2 * i + 1];
    }
    *acc += scale * (l1 * a + l2 * b);
}

extern "C" void mw_regularize_cuda(const mw_kctx *k, float *g, double *acc, const float *w,
                                   size_t count, double l1, double l2, float scale)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_regularize_cuda");
    if (!d || count == 0)
        return;
    unsigned nb = mw_cuda_grid(count);
    if (nb > MW_REG_BLOCKS)
        nb = MW_REG_BLOCKS;
    const size_t need = 2 * (size_t)nb * sizeof(double) / sizeof(float);
    if (k->ws_count < need) {
        mw_cuda_note(d, mw_err(MW_EDEVICE, "mw_regularize_cuda: %zu floats of scratch, needs %zu",
                               k->ws_count, need));
        return;
    }
    double *part = (double *)k->ws; /* cudaMalloc'ed: aligned for double */
    regularize_kernel<<<nb, MW_CUDA_BLOCK, 0, d->stream>>>(g, part, w, count, (float)l1,
                                                           (float)(2.0 * l2), scale);
    MW_LAUNCHED_K(d, "regularize_kernel");
    regularize_total_kernel<<<1, 1, 0, d->stream>>>(acc, part, nb, l1, l2, (double)scale);
    MW_LAUNCHED_K(d, "regularize_total_kernel");
    mw_cuda_end(d, "mw_regularize_cuda");
}

/* CUDA MaxPooling2D (see kernels.h; ties and padding as in kernels/ref).
 *
 * Forward: one thread per output, scanning its window in the reference's order,
 * so y and argmax equal the reference exactly. Backward is a gather, not an
 * atomicAdd scatter: one thread per INPUT element walks the outputs whose
 * windows cover it in ascending (oh, ow) order and adds the dy of those whose
 * argmax is this element. That is the reference's order of additions, so dx is
 * bitwise the reference's and bitwise reproducible, overlapping windows too.
 *
 * The per-element work lives in __host__ __device__ functions so it can be
 * checked against the reference on a machine without a GPU. */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}

/* Output o = ((n*OH + oh)*OW + ow)*C + c. */
__host__ __device__ static inline void pool_fwd_one(float *y, int32_t *argmax, const float *x,
                                                    mw_pool_geom g, size_t o)
{
    const mw_nhwc at = mw_cuda_nhwc(o, g.OH, g.OW, g.C);
    size_t n = at.n;
    int oh = at.h, ow = at.w, c = at.c;
    const float *xi = x + n * ((size_t)g.H * g.W * g.C);
    float best = -3.402823466e+38f; /* -FLT_MAX */
    int32_t arg = -1;
    for (int ph = 0; ph < g.PH; ph++) {
        int ih = oh * g.SH + ph - g.PT;
        if (ih < 0 || ih >= g.H)
            continue;
        for (int pw = 0; pw < g.PW; pw++) {
            int iw = ow * g.SW + pw - g.PL;
            if (iw < 0 || iw >= g.W)
                continue;
            int32_t off = (int32_t)(((size_t)ih * g.W + iw) * g.C + c);
            if (arg < 0 || xi[off] > best) {
                best = xi[off];
                arg = off;
            }
        }
    }
    y[o] = best;
    argmax[o] = arg;
}

/* Input i = ((n*H + ih)*W + iw)*C + c: dx[i] += dy of every output whose
 * window holds (ih, iw) and whose argmax is this element. */
__host__ __device__ static inline void pool_bwd_one(float *dx, const float *dy,
                                                    const int32_t *argmax, mw_pool_geom g, size_t i)
{
    const mw_nhwc at = mw_cuda_nhwc(i, g.H, g.W, g.C);
    size_t n = at.n;
    int ih = at.h, iw = at.w, c = at.c;
    int32_t off = (int32_t)(((size_t)ih * g.W + iw) * g.C + c);
    /* oh covers ih when oh*SH - PT <= ih <= oh*SH - PT + PH - 1. */
    int lo = ih + g.PT - g.PH + 1, hi = ih + g.PT;
    int oh0 = lo <= 0 ? 0 : (lo + g.SH - 1) / g.SH, oh1 = hi / g.SH;
    lo = iw + g.PL - g.PW + 1, hi = iw + g.PL;
    int ow0 = lo <= 0 ? 0 : (lo + g.SW - 1) / g.SW, ow1 = hi / g.SW;
    if (oh1 > g.OH - 1)
        oh1 = g.OH - 1;
    if (ow1 > g.OW - 1)
        ow1 = g.OW - 1;
    size_t out_img = (size_t)g.OH * g.OW * g.C;
    float acc = dx[i];
    for (int oh = oh0; oh <= oh1; oh++)
        for (int ow = ow0; ow <= ow1; ow++) {
            size_t o = n * out_img + ((size_t)oh * g.OW + ow) * g.C + c;
            if (argmax[o] == off)
                acc += dy[o];
        }
    dx[i] = acc;
}

static __global__ void pool_fwd_kernel(float *y, int32_t *argmax, const float *x, mw_pool_geom g,
                                       size_t count)
{
    for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < count;
         o += (size_t)gridDim.x * blockDim.x)
        pool_fwd_one(y, argmax, x, g, o);
}

static __global__ void pool_bwd_kernel(float *dx, const float *dy, const int32_t *argmax,
                                       mw_pool_geom g, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        pool_bwd_one(dx, dy, argmax, g, i);
}

extern "C" void mw_maxpool_fwd_cuda(const mw_kctx *k, float *y, int32_t *argmax, const float *x,
                                    const mw_pool_geom *g, int N)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_maxpool_fwd_cuda");
    if (!d || N <= 0)
        return;
    size_t count = (size_t)N * g->OH * g->OW * g->C;
    if (count == 0)
        return;
    pool_fwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(y, argmax, x, *g, count);
    MW_LAUNCHED_K(d, "pool_fwd_kernel");
    mw_cuda_end(d, "mw_maxpool_fwd_cuda");
}

extern "C" void mw_maxpool_bwd_cuda(const mw_kctx *k, float *dx, const float *dy,
                                    const int32_t *argmax, const mw_pool_geom *g, int N)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_maxpool_bwd_cuda");
    if (!d || N <= 0)
        return;
    size_t count = (size_t)N * g->H * g->W * g->C;
    if (count == 0)
        return;
    pool_bwd_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(dx, dy, argmax, *g,
                                                                          count);
    MW_LAUNCHED_K(d, "pool_bwd_kernel");
    mw_cuda_end(d, "mw_maxpool_bwd_cuda");
}

/* CUDA twins of AveragePooling2D (the spec is kernels/ref/avgpool.c). The forward is a
 * grid-stride loop, one thread per output element. Where the reference scatters (the
 * backward adds dy / cells into every cell of each window), the twin gathers instead: one
 * thread per INPUT element adds the outputs whose windows cover it, in the reference's
 * ascending (oh, ow) order, so no atomics are needed and dx is bitwise the reference's. */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}

/* Cells of window (oh, ow) inside the image (the reference's window()). */
__device__ static inline int pool_window(const mw_pool_geom &g, int oh, int ow, int *h0, int *h1,
                                         int *w0, int *w1)
{
    *h0 = oh * g.SH - g.PT, *w0 = ow * g.SW - g.PL;
    *h1 = *h0 + g.PH, *w1 = *w0 + g.PW;
    *h0 = *h0 < 0 ? 0 : *h0, *w0 = *w0 < 0 ? 0 : *w0;
    *h1 = *h1 > g.H ? g.H : *h1, *w1 = *w1 > g.W ? g.W : *w1;
    return (*h1 - *h0) * (*w1 - *w0);
}

/* Output o = ((n*OH + oh)*OW + ow)*C + c: the window's mean, summed in double. */
static __global__ void avgpool_fwd_kernel(float *y, const float *x, mw_pool_geom g, size_t count)
{
    MW_GRID_STRIDE(o, count)
    {
        const mw_nhwc at = mw_cuda_nhwc(o, g.OH, g.OW, g.C);
        const size_t n = at.n;
        const int oh = at.h, ow = at.w, c = at.c;
        const float *xi = x + n * ((size_t)g.H * g.W * g.C);
        int h0, h1, w0, w1, cells = pool_window(g, oh, ow, &h0, &h1, &w0, &w1);
        double s = 0.0;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++)
                s += xi[((size_t)h * g.W + w) * g.C + c];
        y[o] = (float)(s / cells);
    }
}

/* Input i = ((n*H + ih)*W + iw)*C + c: dx[i] += dy / cells of every output whose window holds
 * (ih, iw), in ascending (oh, ow). */
static __global__ void avgpool_bwd_kernel(float *dx, const float *dy, mw_pool_geom g, size_t count)
{
    MW_GRID_STRIDE(i, count)
    {
        const mw_nhwc at = mw_cuda_nhwc(i, g.H, g.W, g.C);
        const size_t n = at.n;
        const int ih = at.h, iw = at.w, c = at.c;
        /* oh covers ih when oh*SH - PT <= ih <= oh*SH - PT + PH - 1 */
        int lo = ih + g.PT - g.PH + 1, hi = ih + g.PT;
        const int oh0 = lo <= 0 ? 0 : (lo + g.SH - 1) / g.SH;
        int oh1 = hi / g.SH;
        lo = iw + g.PL - g.PW + 1, hi = iw + g.PL;
        const int ow0 = lo <= 0 ? 0 : (lo + g.SW - 1) / g.SW;
        int ow1 = hi / g.SW;
        oh1 = oh1 > g.OH - 1 ? g.OH - 1 : oh1;
        ow1 = ow1 > g.OW - 1 ? g.OW - 1 : ow1;
        const float *d = dy + n * ((size_t)g.OH * g.OW * g.C);
        float acc = dx[i];
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) {
                int h0, h1, w0, w1, cells = pool_window(g, oh, ow, &h0, &h1, &w0, &w1);
                acc += d[((size_t)oh * g.OW + ow) * g.C + c] / (float)cells;
            }
        dx[i] = acc;
    }
}

extern "C" void mw_avgpool_fwd_cuda(const mw_kctx *k, float *y, const float *x,
                                    const mw_pool_geom *g, int N)
{
    const size_t count = N > 0 ? (size_t)N * g->OH * g->OW * g->C : 0;
    MW_EW_LAUNCH("mw_avgpool_fwd_cuda", avgpool_fwd_kernel, count, y, x, *g, count);
}

extern "C" void mw_avgpool_bwd_cuda(const mw_kctx *k, float *dx, const float *dy,
                                    const mw_pool_geom *g, int N)
{
    const size_t count = N > 0 ? (size_t)N * g->H * g->W * g->C : 0;
    MW_EW_LAUNCH("mw_avgpool_bwd_cuda", avgpool_bwd_kernel, count, dx, dy, *g, count);
}

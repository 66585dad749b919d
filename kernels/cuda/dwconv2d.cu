/* CUDA depthwise Conv2D (the spec is kernels/ref/dwconv2d.c): grid-stride loops, one thread per
 * value computed, each summing its terms in a fixed order (no atomics, reproducible). Forward:
 * one thread per output value over its KH x KW taps. Backward: dx one thread per input value,
 * gathering the output pixels that read it; dw one thread per weight, summing over every output
 * pixel; db one thread per channel. Depthwise is memory-bound and small next to the pointwise
 * convolutions around it, so this plain form is the twin; cuDNN's grouped convolution would be
 * the faster one. */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}

static __global__ void dw_fwd_kernel(float *y, const float *x, const float *w, const float *b,
                                     mw_conv2d_geom g, size_t count)
{
    const int M = g.O / g.C;
    MW_GRID_STRIDE(e, count)
    {
        const mw_nhwc at = mw_cuda_nhwc(e, g.OH, g.OW, g.O);
        const size_t n = at.n;
        const int oh = at.h, ow = at.w, o = at.c;
        float acc = b ? b[o] : 0.0f;
        for (int kh = 0; kh < g.KH; kh++) {
            const int ih = oh * g.SH + kh * g.DH - g.PT;
            if (ih < 0 || ih >= g.H)
                continue;
            for (int kw = 0; kw < g.KW; kw++) {
                const int iw = ow * g.SW + kw * g.DW - g.PL;
                if (iw >= 0 && iw < g.W)
                    acc += x[((n * g.H + ih) * g.W + iw) * g.C + o / M] *
                           w[((size_t)kh * g.KW + kw) * g.O + o];
            }
        }
        y[e] = acc;
    }
}

static __global__ void dw_dx_kernel(float *dx, const float *dy, const float *w, mw_conv2d_geom g,
                                    size_t count, int set_dx)
{
    const int M = g.O / g.C;
    MW_GRID_STRIDE(i, count)
    {
        const mw_nhwc at = mw_cuda_nhwc(i, g.H, g.W, g.C);
        const size_t n = at.n;
        const int ih = at.h, iw = at.w, c = at.c;
        float acc = 0.0f;
        for (int kh = 0; kh < g.KH; kh++) {
            const int t = ih + g.PT - kh * g.DH; /* = oh * SH */
            if (t < 0 || t % g.SH || t / g.SH >= g.OH)
                continue;
            for (int kw = 0; kw < g.KW; kw++) {
                const int u = iw + g.PL - kw * g.DW; /* = ow * SW */
                if (u < 0 || u % g.SW || u / g.SW >= g.OW)
                    continue;
                const float *dyp = dy + ((n * g.OH + t / g.SH) * g.OW + u / g.SW) * g.O + c * M;
                const float *wp = w + ((size_t)kh * g.KW + kw) * g.O + c * M;
                for (int m = 0; m < M; m++)
                    acc += wp[m] * dyp[m];
            }
        }
        dx[i] = set_dx ? acc : dx[i] + acc;
    }
}

/* dw[(kh, kw, o)] and, for the first tap, db[o]: sums over every output pixel. */
static __global__ void dw_dw_kernel(float *dw, float *db, const float *dy, const float *x,
                                    mw_conv2d_geom g, int N, size_t count)
{
    const int M = g.O / g.C;
    MW_GRID_STRIDE(e, count)
    {
        const int o = (int)(e % g.O);
        const int kw = (int)(e / g.O % g.KW), kh = (int)(e / g.O / g.KW);
        float acc = 0.0f, bacc = 0.0f;
        for (size_t n = 0; n < (size_t)N; n++)
            for (int oh = 0; oh < g.OH; oh++) {
                const int ih = oh * g.SH + kh * g.DH - g.PT;
                for (int ow = 0; ow < g.OW; ow++) {
                    const float d = dy[((n * g.OH + oh) * g.OW + ow) * g.O + o];
                    bacc += d;
                    const int iw = ow * g.SW + kw * g.DW - g.PL;
                    if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
                        acc += x[((n * g.H + ih) * g.W + iw) * g.C + o / M] * d;
                }
            }
        dw[e] += acc;
        if (db && e < (size_t)g.O)
            db[o] += bacc;
    }
}

extern "C" void mw_dwconv2d_fwd_cuda(const mw_kctx *k, float *y, const float *x, const float *w,
                                     const float *b, const mw_conv2d_geom *g, int N)
{
    const size_t count = N > 0 ? (size_t)N * g->OH * g->OW * g->O : 0;
    MW_EW_LAUNCH("mw_dwconv2d_fwd_cuda", dw_fwd_kernel, count, y, x, w, b, *g, count);
}

extern "C" void mw_dwconv2d_bwd_cuda(const mw_kctx *k, float *dx, float *dw, float *db,
                                     const float *dy, const float *x, const float *w,
                                     const mw_conv2d_geom *g, int N, int set_dx)
{
    const char *op = "mw_dwconv2d_bwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || N <= 0)
        return;
    const size_t nw = (size_t)g->KH * g->KW * g->O, nx = (size_t)N * g->H * g->W * g->C;
    MW_LAUNCH_K(d, dw_dw_kernel, nw, dw, db, dy, x, *g, N, nw);
    if (dx)
        MW_LAUNCH_K(d, dw_dx_kernel, nx, dx, dy, w, *g, nx, set_dx);
    mw_cuda_end(d, op);
}

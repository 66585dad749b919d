/* CUDA twins of UpSampling2D (the spec is kernels/ref/upsample.c): grid-stride loops, one thread
 * per output element forward, one per input element backward (a gather over the output pixels
 * that read it: no atomics, a fixed order). */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}
#include "kernels/upsample_rules.h"

struct up_geom {
    int H, W, C, SH, SW, bilinear;
};

/* The weight with which output index o reads input index i along one axis (0: none). */
__device__ static float weight_of(int o, int i, int in, int s, int bilinear)
{
    int i0, i1;
    float f;
    mw_upsample_src(o, in, s, bilinear, &i0, &i1, &f);
    if (!bilinear)
        return i0 == i ? 1.0f : 0.0f;
    return (i0 == i ? 1.0f - f : 0.0f) + (i1 == i ? f : 0.0f);
}

static __global__ void upsample_fwd_kernel(float *y, const float *x, up_geom p, size_t count)
{
    const int OH = p.H * p.SH, OW = p.W * p.SW;
    MW_GRID_STRIDE(e, count)
    {
        const mw_nhwc at = mw_cuda_nhwc(e, OH, OW, p.C);
        const size_t n = at.n;
        const int oh = at.h, ow = at.w, c = at.c;
        int h0, h1, w0, w1;
        float fh, fw;
        mw_upsample_src(oh, p.H, p.SH, p.bilinear, &h0, &h1, &fh);
        mw_upsample_src(ow, p.W, p.SW, p.bilinear, &w0, &w1, &fw);
        const float *xb = x + n * p.H * p.W * p.C + c;
        const float v00 = xb[((size_t)h0 * p.W + w0) * p.C];
        y[e] = !p.bilinear ? v00
                           : (1.0f - fh) * (1.0f - fw) * v00 +
                                 (1.0f - fh) * fw * xb[((size_t)h0 * p.W + w1) * p.C] +
                                 fh * (1.0f - fw) * xb[((size_t)h1 * p.W + w0) * p.C] +
                                 fh * fw * xb[((size_t)h1 * p.W + w1) * p.C];
    }
}

static __global__ void upsample_bwd_kernel(float *dx, const float *dy, up_geom p, size_t count)
{
    const int OH = p.H * p.SH, OW = p.W * p.SW;
    MW_GRID_STRIDE(i, count)
    {
        const mw_nhwc at = mw_cuda_nhwc(i, p.H, p.W, p.C);
        const size_t n = at.n;
        const int h = at.h, w = at.w, c = at.c;
        /* the output rows and columns that can read (h, w): within s + 1 of its centre */
        const int oh0 = (h - 1) * p.SH > 0 ? (h - 1) * p.SH : 0;
        const int oh1 = (h + 2) * p.SH < OH ? (h + 2) * p.SH : OH;
        const int ow0 = (w - 1) * p.SW > 0 ? (w - 1) * p.SW : 0;
        const int ow1 = (w + 2) * p.SW < OW ? (w + 2) * p.SW : OW;
        float acc = 0.0f;
        for (int oh = oh0; oh < oh1; oh++) {
            const float wh = weight_of(oh, h, p.H, p.SH, p.bilinear);
            for (int ow = ow0; ow < ow1 && wh != 0.0f; ow++) {
                const float ww = weight_of(ow, w, p.W, p.SW, p.bilinear);
                if (ww != 0.0f)
                    acc += wh * ww * dy[((n * OH + oh) * OW + ow) * p.C + c];
            }
        }
        dx[i] += acc;
    }
}

extern "C" void mw_upsample_fwd_cuda(const mw_kctx *k, float *y, const float *x, int H, int W,
                                     int C, int SH, int SW, int bilinear, int N)
{
    const up_geom p = {H, W, C, SH, SW, bilinear};
    const size_t count = N > 0 ? (size_t)N * H * SH * W * SW * C : 0;
    MW_EW_LAUNCH("mw_upsample_fwd_cuda", upsample_fwd_kernel, count, y, x, p, count);
}

extern "C" void mw_upsample_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, int H, int W,
                                     int C, int SH, int SW, int bilinear, int N)
{
    const up_geom p = {H, W, C, SH, SW, bilinear};
    const size_t count = N > 0 ? (size_t)N * H * W * C : 0;
    MW_EW_LAUNCH("mw_upsample_bwd_cuda", upsample_bwd_kernel, count, dx, dy, p, count);
}

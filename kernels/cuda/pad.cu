/* CUDA twins of ZeroPadding2D (the spec is kernels/ref/pad.c): grid-stride loops, one thread
 * per output element. */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}

struct pad_geom {
    int H, W, C, PT, PL, OH, OW;
};

static __global__ void pad2d_fwd_kernel(float *y, const float *x, pad_geom p, size_t count)
{
    MW_GRID_STRIDE(o, count)
    {
        const mw_nhwc at = mw_cuda_nhwc(o, p.OH, p.OW, p.C);
        const size_t n = at.n;
        const int h = at.h - p.PT, w = at.w - p.PL, c = at.c;
        const bool in = h >= 0 && h < p.H && w >= 0 && w < p.W;
        y[o] = in ? x[((n * p.H + h) * p.W + w) * p.C + c] : 0.0f;
    }
}

static __global__ void pad2d_bwd_kernel(float *dx, const float *dy, pad_geom p, size_t count)
{
    MW_GRID_STRIDE(i, count)
    {
        const mw_nhwc at = mw_cuda_nhwc(i, p.H, p.W, p.C);
        const size_t n = at.n;
        const int h = at.h, w = at.w, c = at.c;
        dx[i] += dy[((n * p.OH + h + p.PT) * p.OW + w + p.PL) * p.C + c];
    }
}

extern "C" void mw_pad2d_fwd_cuda(const mw_kctx *k, float *y, const float *x, int H, int W, int C,
                                  int PT, int PB, int PL, int PR, int N)
{
    const pad_geom p = {H, W, C, PT, PL, PT + H + PB, PL + W + PR};
    const size_t count = N > 0 ? (size_t)N * p.OH * p.OW * C : 0;
    MW_EW_LAUNCH("mw_pad2d_fwd_cuda", pad2d_fwd_kernel, count, y, x, p, count);
}

extern "C" void mw_pad2d_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, int H, int W, int C,
                                  int PT, int PB, int PL, int PR, int N)
{
    const pad_geom p = {H, W, C, PT, PL, PT + H + PB, PL + W + PR};
    const size_t count = N > 0 ? (size_t)N * H * W * C : 0;
    MW_EW_LAUNCH("mw_pad2d_bwd_cuda", pad2d_bwd_kernel, count, dx, dy, p, count);
}

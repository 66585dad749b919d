/* CUDA Conv2D: cuDNN where it is built and takes the shape (cudnn.cu), else im2col + cuBLAS
 * SGEMM (see kernels.h for the contract). The rest of this comment is the im2col path.
 *
 * For a chunk of nb images, with M = nb*OH*OW rows and Kc = KH*KW*C columns:
 *   im2col:  col (M, Kc), row (n,oh,ow), column (kh,kw,c); padding reads as 0
 *   forward: y (M, O)    = col (M, Kc) w (Kc, O) + b
 *   dw:      dw (Kc, O) += col^T dy (M, O)
 *   dx:      dcol (M, Kc) = dy w^T, then col2im adds dcol back onto dx
 *   db:      db (O)     += column sums of dy (all N images at once)
 * All row-major like the reference; mw_cuda_gemm_rm maps them onto cuBLAS. With G groups
 * (cuDNN declines them) each product runs once per group on its KG = Kc/G columns of col (a
 * row holds the groups' patches one after another), its O/G filters and their rows of w
 * (KG, O), with the leading dimensions of the whole matrices; G = 1 is the product above.
 *
 * col lives in k->ws (device), so the batch is cut into chunks of as many
 * images as fit; at least mw_conv2d_ws_min floats are needed. A 1x1 kernel
 * with stride 1 and no padding needs no im2col at all: col is x itself, and
 * dcol is dx itself. col2im is a gather (one thread per dx element, summing the
 * dcol cells that came from it in a fixed order): no atomics, reproducible.
 *
 * The per-element work lives in __host__ __device__ functions so it can be
 * checked against the reference on a machine without a GPU. */
#include <limits.h>

#include "kernels/cuda/cudnn.cuh"
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/runtime.cuh"
#include "kernels/geom.h"

extern "C" {
#include "kernels/twins.h"
}

/* col[e], e = r*Kc + j, r = (n*OH + oh)*OW + ow, j = gi*KG + (kh*KW + kw)*Cg + c for group gi
 * (KG = KH*KW*Cg, Cg = C/G: the groups' patches one after another; with G = 1, j = (kh*KW +
 * kw)*C + c); x points at the chunk's first image. */
__host__ __device__ static inline void im2col_one(float *col, const float *x, mw_conv2d_geom g,
                                                  size_t e)
{
    size_t kc = (size_t)g.KH * g.KW * g.C;
    const int cg = g.C / g.G;
    const size_t kg = kc / g.G;
    size_t r = e / kc, j = e % kc;
    const int gi = (int)(j / kg);
    j %= kg;
    int c = gi * cg + (int)(j % cg);
    j /= cg;
    int kw = (int)(j % g.KW), kh = (int)(j / g.KW);
    int ow = (int)(r % g.OW);
    r /= g.OW;
    int oh = (int)(r % g.OH);
    size_t n = r / g.OH;
    int ih = oh * g.SH + kh * g.DH - g.PT, iw = ow * g.SW + kw * g.DW - g.PL;
    float v = 0.0f;
    if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
        v = x[((n * g.H + ih) * g.W + iw) * g.C + c];
    col[e] = v;
}

/* dx[i] += sum of dcol over every (oh, ow, kh, kw) that read x[i], with
 * i = ((n*H + ih)*W + iw)*C + c; dx and dcol point at the chunk's first image. */
__host__ __device__ static inline void col2im_one(float *dx, const float *dcol, mw_conv2d_geom g,
                                                  size_t i)
{
    size_t kc = (size_t)g.KH * g.KW * g.C;
    const int cg = g.C / g.G;
    const mw_nhwc at = mw_cuda_nhwc(i, g.H, g.W, g.C);
    size_t n = at.n;
    int ih = at.h, iw = at.w;
    /* channel c of group c / Cg: column (c / Cg) KG + tap Cg + c % Cg */
    const size_t base = (size_t)(at.c / cg) * (kc / g.G) + (size_t)(at.c % cg);
    float acc = 0.0f;
    for (int kh = 0; kh < g.KH; kh++) {
        int t = ih + g.PT - kh * g.DH; /* = oh * SH */
        if (t < 0 || t % g.SH)
            continue;
        int oh = t / g.SH;
        if (oh >= g.OH)
            continue;
        for (int kw = 0; kw < g.KW; kw++) {
            int u = iw + g.PL - kw * g.DW; /* = ow * SW */
            if (u < 0 || u % g.SW)
                continue;
            int ow = u / g.SW;
            if (ow >= g.OW)
                continue;
            size_t row = (n * g.OH + oh) * g.OW + ow;
            acc += dcol[row * kc + base + ((size_t)kh * g.KW + kw) * cg];
        }
    }
    dx[i] += acc;
}

static __global__ void im2col_kernel(float *col, const float *x, mw_conv2d_geom g, size_t count)
{
    MW_GRID_STRIDE(e, count)
    {
        im2col_one(col, x, g, e);
    }
}

static __global__ void col2im_kernel(float *dx, const float *dcol, mw_conv2d_geom g, size_t count)
{
    MW_GRID_STRIDE(i, count)
    {
        col2im_one(dx, dcol, g, i);
    }
}

/* 1x1, stride 1, no padding: the image rows are already the col rows. */
static bool is_pointwise(const mw_conv2d_geom *g)
{
    return g->KH == 1 && g->KW == 1 && g->SH == 1 && g->SW == 1 && g->PT == 0 && g->PL == 0 &&
           g->OH == g->H && g->OW == g->W;
}

/* Images per chunk: as many as fit in the scratch (and in cuBLAS's int
 * dimensions), at least 1; 0 with an error recorded when not even one fits. */
static int chunk_images(mw_cuda_dev *d, const mw_kctx *k, const mw_conv2d_geom *g, int N,
                        const char *op)
{
    size_t rows = (size_t)g->OH * g->OW;
    size_t per = mw_conv2d_ws_min(g);
    if (is_pointwise(g)) /* no scratch; only the int limit */
        per = 0;
    if (per > 0 && (!k->ws || k->ws_count < per)) {
        mw_cuda_note(d, mw_err(MW_EINVAL,
                               "%s: device workspace %zu floats, one image needs %zu "
                               "(mw_cuda_ws_reserve)",
                               op, k->ws ? k->ws_count : (size_t)0, per));
        return 0;
    }
    size_t nb = per > 0 ? k->ws_count / per : (size_t)N;
    size_t int_cap = (size_t)INT_MAX / rows;
    if (nb > int_cap)
        nb = int_cap;
    if (nb > (size_t)N)
        nb = (size_t)N;
    if (nb == 0) {
        mw_cuda_note(d, mw_err(MW_EINVAL, "%s: %zu output pixels per image is too many", op, rows));
        return 0;
    }
    return (int)nb;
}

extern "C" void mw_conv2d_fwd_cuda(const mw_kctx *k, float *y, const float *x, const float *w,
                                   const float *b, const mw_conv2d_geom *g, int N)
{
    const char *op = "mw_conv2d_fwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || N <= 0)
        return;
    if (mw_cudnn_conv_fwd(d, k, y, x, w, b, g, N)) {
        mw_cuda_end(d, op);
        return;
    }
    int nb = chunk_images(d, k, g, N, op);
    if (nb == 0)
        return;
    int kc = g->KH * g->KW * g->C, kg = kc / g->G, og = g->O / g->G;
    size_t in_img = (size_t)g->H * g->W * g->C, rows = (size_t)g->OH * g->OW;
    bool pw = is_pointwise(g);
    for (int n0 = 0; n0 < N; n0 += nb) {
        int cnt = N - n0 < nb ? N - n0 : nb;
        int M = (int)(rows * cnt);
        const float *xc = x + (size_t)n0 * in_img;
        float *yc = y + (size_t)n0 * rows * g->O;
        const float *col = xc;
        if (!pw) {
            size_t count = (size_t)M * kc;
            MW_LAUNCH_K(d, im2col_kernel, count, k->ws, xc, *g, count);
            col = k->ws;
        }
        float beta = 0.0f;
        if (b) {
            MW_TRY_K(d, mw_cuda_bias_fill(d, yc, b, (size_t)M, g->O));
            beta = 1.0f;
        }
        for (int gi = 0; gi < g->G; gi++)
            MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), false, false, M, og, kg, 1.0f,
                                        col + gi * kg, kc, w + gi * og, g->O, beta, yc + gi * og,
                                        g->O));
    }
    mw_cuda_end(d, op);
}

extern "C" void mw_conv2d_bwd_cuda(const mw_kctx *k, float *dx, float *dw, float *db,
                                   const float *dy, const float *x, const float *w,
                                   const mw_conv2d_geom *g, int N, int set_dx)
{
    const char *op = "mw_conv2d_bwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || N <= 0)
        return;
    size_t in_img = (size_t)g->H * g->W * g->C, rows = (size_t)g->OH * g->OW;
    if (dx && set_dx) /* every path below adds into dx */
        MW_CUDA_K(d, cudaMemsetAsync(dx, 0, (size_t)N * in_img * sizeof *dx, d->stream));
    if (db)
        MW_TRY_K(d, mw_cuda_colsum_add(d, db, dy, rows * N, g->O));
    switch (mw_cudnn_conv_bwd(d, k, dx, dw, dy, x, w, g, N)) {
    case MW_CUDNN_DONE:
        mw_cuda_end(d, op);
        return;
    case MW_CUDNN_IM2COL_DW: /* cuDNN added dx already */
        dx = NULL;
        break;
    case MW_CUDNN_IM2COL:
        break;
    }
    int nb = chunk_images(d, k, g, N, op);
    if (nb == 0)
        return;
    int kc = g->KH * g->KW * g->C, kg = kc / g->G, og = g->O / g->G;
    bool pw = is_pointwise(g);
    for (int n0 = 0; n0 < N; n0 += nb) {
        int cnt = N - n0 < nb ? N - n0 : nb;
        int M = (int)(rows * cnt);
        const float *xc = x + (size_t)n0 * in_img;
        const float *dyc = dy + (size_t)n0 * rows * g->O;
        const float *col = xc;
        if (!pw) {
            size_t count = (size_t)M * kc;
            MW_LAUNCH_K(d, im2col_kernel, count, k->ws, xc, *g, count);
            col = k->ws;
        }
        /* dw (Kc,O) += col^T (Kc,M) dy (M,O), per group */
        for (int gi = 0; gi < g->G; gi++)
            MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), true, false, kg, og, M, 1.0f,
                                        col + gi * kg, kc, dyc + gi * og, g->O, 1.0f, dw + gi * og,
                                        g->O));
        if (!dx)
            continue;
        float *dxc = dx + (size_t)n0 * in_img;
        if (pw) { /* dx (M,C) += dy (M,O) w^T (O,C), per group */
            for (int gi = 0; gi < g->G; gi++)
                MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), false, true, M, kg, og, 1.0f,
                                            dyc + gi * og, g->O, w + gi * og, g->O, 1.0f,
                                            dxc + gi * kg, kc));
            continue;
        }
        /* dcol (M,Kc) = dy (M,O) w^T (O,Kc) per group, over col (stream order keeps the
         * dw GEMMs' reads ahead of these writes), then gathered onto dx. */
        for (int gi = 0; gi < g->G; gi++)
            MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), false, true, M, kg, og, 1.0f,
                                        dyc + gi * og, g->O, w + gi * og, g->O, 0.0f,
                                        k->ws + gi * kg, kc));
        size_t count = (size_t)cnt * in_img;
        MW_LAUNCH_K(d, col2im_kernel, count, dxc, k->ws, *g, count);
    }
    mw_cuda_end(d, op);
}

/* Conv2DTranspose (the spec is kernels/ref/upsample.c): this file's im2col path run backwards,
 * g being the Conv2D whose input gradient it is (kernels/geom.h). Per chunk of images:
 *   forward:  dcol (M, Kc) = x (M, O) w^T, gathered onto y (the bias, or zeros) by col2im
 *   backward: col = im2col(dy); dw (Kc, O) += col^T x; dx (M, O) += col w
 * with M = cnt OH OW the chunk's input pixels; no cuDNN. */
extern "C" void mw_conv2d_tr_fwd_cuda(const mw_kctx *k, float *y, const float *x, const float *w,
                                      const float *b, const mw_conv2d_geom *g, int N)
{
    const char *op = "mw_conv2d_tr_fwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || N <= 0)
        return;
    const size_t out_img = (size_t)g->H * g->W * g->C, rows = (size_t)g->OH * g->OW;
    if (b)
        MW_TRY_K(d, mw_cuda_bias_fill(d, y, b, (size_t)N * g->H * g->W, g->C));
    else
        MW_CUDA_K(d, cudaMemsetAsync(y, 0, (size_t)N * out_img * sizeof *y, d->stream));
    const int nb = chunk_images(d, k, g, N, op);
    if (nb == 0)
        return;
    const int kc = g->KH * g->KW * g->C;
    for (int n0 = 0; n0 < N; n0 += nb) {
        const int cnt = N - n0 < nb ? N - n0 : nb, M = (int)(rows * cnt);
        MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), false, true, M, kc, g->O, 1.0f,
                                    x + (size_t)n0 * rows * g->O, g->O, w, g->O, 0.0f, k->ws, kc));
        const size_t count = (size_t)cnt * out_img;
        MW_LAUNCH_K(d, col2im_kernel, count, y + (size_t)n0 * out_img, k->ws, *g, count);
    }
    mw_cuda_end(d, op);
}

extern "C" void mw_conv2d_tr_bwd_cuda(const mw_kctx *k, float *dx, float *dw, float *db,
                                      const float *dy, const float *x, const float *w,
                                      const mw_conv2d_geom *g, int N)
{
    const char *op = "mw_conv2d_tr_bwd_cuda";
    mw_cuda_dev *d = mw_cuda_begin(k, op);
    if (!d || N <= 0)
        return;
    const size_t out_img = (size_t)g->H * g->W * g->C, rows = (size_t)g->OH * g->OW;
    if (db)
        MW_TRY_K(d, mw_cuda_colsum_add(d, db, dy, (size_t)N * g->H * g->W, g->C));
    const int nb = chunk_images(d, k, g, N, op);
    if (nb == 0)
        return;
    const int kc = g->KH * g->KW * g->C;
    for (int n0 = 0; n0 < N; n0 += nb) {
        const int cnt = N - n0 < nb ? N - n0 : nb, M = (int)(rows * cnt);
        const float *xc = x + (size_t)n0 * rows * g->O;
        const size_t count = (size_t)M * kc;
        MW_LAUNCH_K(d, im2col_kernel, count, k->ws, dy + (size_t)n0 * out_img, *g, count);
        MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), true, false, kc, g->O, M, 1.0f, k->ws, kc,
                                    xc, g->O, 1.0f, dw, g->O));
        if (dx)
            MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), false, false, M, g->O, kc, 1.0f, k->ws,
                                        kc, w, g->O, 1.0f, dx + (size_t)n0 * rows * g->O, g->O));
    }
    mw_cuda_end(d, op);
}

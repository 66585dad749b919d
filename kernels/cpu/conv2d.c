/* Fast CPU Conv2D: im2col + sgemm, in chunks of images that fit the scratch.
 *
 * In NHWC a patch row (KH*KW*C values) times the kernel matrix (KH*KW*C, O)
 * is one output pixel's O channels, so
 *   forward:  y (n*OH*OW, O)   = col (n*OH*OW, K) x w (K, O) + b
 *   backward: dw (K, O)       += col^T x dy
 *             dcol (n*OH*OW, K) = dy x w^T, then col2im adds dcol into dx.
 * A 1x1 stride-1 unpadded conv uses x as col directly. Dilation (DH, DW) only moves
 * where a tap reads.
 *
 * With G groups a col row holds the groups one after another, each KG = KH*KW*C/G values
 * (tap, then the group's channels), so group i's patch is the row's columns [i KG, (i+1) KG)
 * and its products are the ones above on those columns (leading dimension K), on the filters
 * [i O/G, (i+1) O/G) (leading dimension O) and on w's rows for those filters, w being
 * (KG, O). A pointwise conv's col is still x: group i's columns are its channels. With G = 1
 * every line below is the ungrouped product. */
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/geom.h"
#include "kernels/twins.h"

#include <string.h>

static int is_pointwise(const mw_conv2d_geom *g)
{
    return g->KH == 1 && g->KW == 1 && g->SH == 1 && g->SW == 1 && g->PT == 0 && g->PL == 0;
}

/* memcpy for the short runs of a thin input (C = 1: three floats). */
static inline void copy_run(float *restrict dst, const float *restrict src, int count)
{
    if (count >= 16) {
        memcpy(dst, src, sizeof(float) * count);
        return;
    }
    for (int i = 0; i < count; i++)
        dst[i] = src[i];
}

/* col rows for images [0, n) of x; rows are output pixels, zero where padded. */
static void im2col(float *col, const float *x, const mw_conv2d_geom *g, int n, int nt)
{
    const int G = g->G, Cg = g->C / G, K = g->KH * g->KW * g->C, KG = K / G;
    const size_t img = (size_t)g->H * g->W * g->C;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int i = 0; i < n * g->OH; i++) {
        int b = i / g->OH, oh = i % g->OH;
        const float *xb = x + (size_t)b * img;
        for (int ow = 0; ow < g->OW; ow++) {
            float *row = col + ((size_t)i * g->OW + ow) * K;
            for (int kh = 0; kh < g->KH; kh++) {
                int ih = oh * g->SH + kh * g->DH - g->PT;
                float *dst = row + (size_t)kh * g->KW * Cg;
                if (ih < 0 || ih >= g->H) {
                    for (int gi = 0; gi < G; gi++)
                        memset(dst + (size_t)gi * KG, 0, sizeof(float) * g->KW * Cg);
                    continue;
                }
                int iw0 = ow * g->SW - g->PL;
                if (G == 1 && g->DW == 1 && iw0 >= 0 && iw0 + g->KW <= g->W) { /* row inside */
                    copy_run(dst, xb + ((size_t)ih * g->W + iw0) * g->C, g->KW * g->C);
                    continue;
                }
                for (int kw = 0; kw < g->KW; kw++) {
                    int iw = iw0 + kw * g->DW;
                    const float *src = xb + ((size_t)ih * g->W + iw) * g->C;
                    for (int gi = 0; gi < G; gi++) {
                        float *d = dst + (size_t)gi * KG + (size_t)kw * Cg;
                        if (iw < 0 || iw >= g->W)
                            memset(d, 0, sizeof(float) * Cg);
                        else
                            copy_run(d, src + (size_t)gi * Cg, Cg);
                    }
                }
            }
        }
    }
}

/* dx[images 0..n) += col2im(dcol), or = when zero (each image zeroed just before, while
 * cached). Parallel over images: windows of one image overlap, different images never do. */
static void col2im(float *dx, const float *dcol, const mw_conv2d_geom *g, int n, int nt, int zero)
{
    const int G = g->G, Cg = g->C / G, K = g->KH * g->KW * g->C, KG = K / G;
    const size_t img = (size_t)g->H * g->W * g->C;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < n; b++) {
        float *dxb = dx + (size_t)b * img;
        if (zero)
            memset(dxb, 0, img * sizeof *dxb);
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++) {
                const float *row = dcol + (((size_t)b * g->OH + oh) * g->OW + ow) * K;
                for (int kh = 0; kh < g->KH; kh++) {
                    int ih = oh * g->SH + kh * g->DH - g->PT;
                    if (ih < 0 || ih >= g->H)
                        continue;
                    for (int kw = 0; kw < g->KW; kw++) {
                        int iw = ow * g->SW + kw * g->DW - g->PL;
                        if (iw < 0 || iw >= g->W)
                            continue;
                        float *d = dxb + ((size_t)ih * g->W + iw) * g->C;
                        const float *s = row + ((size_t)kh * g->KW + kw) * Cg;
                        for (int gi = 0; gi < G; gi++, d += Cg, s += KG)
                            for (int c = 0; c < Cg; c++)
                                d[c] += s[c];
                    }
                }
            }
    }
}

/* db[o] += the sum of dy[r][o] over rows r, each channel summed in row order by one thread
 * (blocks of channels, as many as threads but at least 16 channels each): the same sums for
 * any thread count. */
static void bias_grad(const mw_kctx *k, float *db, const float *dy, size_t rows, int O)
{
    int nb = O / 16 < MW_NT(k) ? O / 16 : MW_NT(k);
    nb = nb < 1 ? 1 : nb;
#pragma omp parallel for num_threads(nb) schedule(static)
    for (int bl = 0; bl < nb; bl++) {
        const int o0 = (int)((long)O * bl / nb), o1 = (int)((long)O * (bl + 1) / nb);
        for (size_t r = 0; r < rows; r++)
            for (int o = o0; o < o1; o++)
                db[o] += dy[r * O + o];
    }
}

static int chunk_images(const mw_kctx *k, const mw_conv2d_geom *g, int N)
{
    size_t per = mw_conv2d_ws_min(g);
    size_t fit = k->ws_count / per;
    if (fit < 1)
        fit = 1; /* the model guarantees ws >= mw_conv2d_ws_min */
    return fit < (size_t)N ? (int)fit : N;
}

void mw_conv2d_fwd_cpu(const mw_kctx *k, float *y, const float *x, const float *w, const float *b,
                       const mw_conv2d_geom *g, int N)
{
    const int K = g->KH * g->KW * g->C, P = g->OH * g->OW, G = g->G, KG = K / G, OG = g->O / G;
    const size_t in_img = (size_t)g->H * g->W * g->C, out_img = (size_t)P * g->O;
    int step = is_pointwise(g) ? N : chunk_images(k, g, N);
    for (int n0 = 0; n0 < N; n0 += step) {
        int n = N - n0 < step ? N - n0 : step;
        const float *col = x + n0 * in_img;
        if (!is_pointwise(g)) {
            im2col(k->ws, col, g, n, MW_NT(k));
            col = k->ws;
        }
        float *yc = y + n0 * out_img;
        float beta = 0.0f;
        if (b) {
            const long rows = (long)n * P;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
            for (long r = 0; r < rows; r++)
                memcpy(yc + r * g->O, b, sizeof(float) * g->O);
            beta = 1.0f;
        }
        for (int gi = 0; gi < G; gi++)
            mw_gemm_cpu(k, 'N', 'N', n * P, OG, KG, 1.0f, col + gi * KG, K, w + gi * OG, g->O, beta,
                        yc + gi * OG, g->O);
    }
}

void mw_conv2d_bwd_cpu(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                       const float *x, const float *w, const mw_conv2d_geom *g, int N, int set_dx)
{
    const int K = g->KH * g->KW * g->C, P = g->OH * g->OW, G = g->G, KG = K / G, OG = g->O / G;
    const size_t in_img = (size_t)g->H * g->W * g->C, out_img = (size_t)P * g->O;
    if (db)
        bias_grad(k, db, dy, (size_t)N * P, g->O);
    if (is_pointwise(g)) {
        for (int gi = 0; gi < G; gi++) {
            mw_gemm_cpu(k, 'T', 'N', KG, OG, N * P, 1.0f, x + gi * KG, K, dy + gi * OG, g->O, 1.0f,
                        dw + gi * OG, g->O);
            if (dx) /* set_dx: beta 0 writes dx (sgemm reads no C then) */
                mw_gemm_cpu(k, 'N', 'T', N * P, KG, OG, 1.0f, dy + gi * OG, g->O, w + gi * OG, g->O,
                            set_dx ? 0.0f : 1.0f, dx + gi * KG, K);
        }
        return;
    }
    int step = chunk_images(k, g, N);
    for (int n0 = 0; n0 < N; n0 += step) {
        int n = N - n0 < step ? N - n0 : step;
        const float *dyc = dy + n0 * out_img;
        im2col(k->ws, x + n0 * in_img, g, n, MW_NT(k));
        for (int gi = 0; gi < G; gi++)
            mw_gemm_cpu(k, 'T', 'N', KG, OG, n * P, 1.0f, k->ws + gi * KG, K, dyc + gi * OG, g->O,
                        1.0f, dw + gi * OG, g->O);
        if (dx) {
            for (int gi = 0; gi < G; gi++)
                mw_gemm_cpu(k, 'N', 'T', n * P, KG, OG, 1.0f, dyc + gi * OG, g->O, w + gi * OG,
                            g->O, 0.0f, k->ws + gi * KG, K);
            col2im(dx + n0 * in_img, k->ws, g, n, MW_NT(k), set_dx);
        }
    }
}

/* For Conv2DTranspose (conv2d_tr.c), whose forward is this file's backward on the data and whose
 * input gradient is its forward. */
void mw_conv2d_im2col_cpu(float *col, const float *x, const mw_conv2d_geom *g, int n, int nt)
{
    im2col(col, x, g, n, nt);
}

void mw_conv2d_col2im_cpu(float *dx, const float *dcol, const mw_conv2d_geom *g, int n, int nt)
{
    col2im(dx, dcol, g, n, nt, 0);
}

int mw_conv2d_chunk_cpu(const mw_kctx *k, const mw_conv2d_geom *g, int N)
{
    return chunk_images(k, g, N);
}

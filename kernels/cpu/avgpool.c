/* The fast CPU AveragePooling2D: images over k's threads, the channel loop (channels-last:
 * contiguous) innermost so the compiler vectorizes it. Each output sums its window's cells in
 * the reference's order: bitwise equal, for any thread count. */
#include "kernels/twins.h"

#include "kernels/cpu/cpu.h"

/* Channels summed at once (double accumulators on the stack). */
#define POOL_CB 128

/* Cells of window (oh, ow) inside the image (the reference's rule). */
static int window(const mw_pool_geom *g, int oh, int ow, int *h0, int *h1, int *w0, int *w1)
{
    *h0 = oh * g->SH - g->PT, *w0 = ow * g->SW - g->PL;
    *h1 = *h0 + g->PH, *w1 = *w0 + g->PW;
    *h0 = *h0 < 0 ? 0 : *h0, *w0 = *w0 < 0 ? 0 : *w0;
    *h1 = *h1 > g->H ? g->H : *h1, *w1 = *w1 > g->W ? g->W : *w1;
    return (*h1 - *h0) * (*w1 - *w0);
}

/* One output cell yo (C) of image xi: per channel the double sum over the window in the
 * reference's order (h, then w), the channels of a block side by side. */
static void avg_window(float *restrict yo, const float *restrict xi, const mw_pool_geom *g, int oh,
                       int ow)
{
    int h0, h1, w0, w1, cells = window(g, oh, ow, &h0, &h1, &w0, &w1);
    const int C = g->C;
    for (int c0 = 0; c0 < C; c0 += POOL_CB) {
        const int cw = C - c0 < POOL_CB ? C - c0 : POOL_CB;
        double s[POOL_CB];
        for (int c = 0; c < cw; c++)
            s[c] = 0.0;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++) {
                const float *xr = xi + ((size_t)h * g->W + w) * C + c0;
                for (int c = 0; c < cw; c++)
                    s[c] += xr[c];
            }
        for (int c = 0; c < cw; c++)
            yo[c0 + c] = (float)(s[c] / cells);
    }
}

void mw_avgpool_fwd_cpu(const mw_kctx *k, float *y, const float *x, const mw_pool_geom *g, int N)
{
    const size_t in_img = (size_t)g->H * g->W * g->C;
#pragma omp parallel for collapse(2) num_threads(MW_NT(k)) schedule(static)
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++)
                avg_window(y + (((size_t)n * g->OH + oh) * g->OW + ow) * g->C, x + n * in_img, g,
                           oh, ow);
}

/* One image: every window's dy / cells (one float division per channel, as the reference's
 * d[c] / (float)cells) added into its cells, windows in the reference's order. */
static void avg_bwd_image(float *restrict dxi, const float *restrict dyi, const mw_pool_geom *g)
{
    const int C = g->C;
    for (int oh = 0; oh < g->OH; oh++)
        for (int ow = 0; ow < g->OW; ow++) {
            int h0, h1, w0, w1, cells = window(g, oh, ow, &h0, &h1, &w0, &w1);
            const float *d = dyi + ((size_t)oh * g->OW + ow) * C;
            for (int c0 = 0; c0 < C; c0 += POOL_CB) {
                const int cw = C - c0 < POOL_CB ? C - c0 : POOL_CB;
                float q[POOL_CB];
                for (int c = 0; c < cw; c++)
                    q[c] = d[c0 + c] / (float)cells;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++) {
                        float *o = dxi + ((size_t)h * g->W + w) * C + c0;
                        for (int c = 0; c < cw; c++)
                            o[c] += q[c];
                    }
            }
        }
}

void mw_avgpool_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const mw_pool_geom *g, int N)
{
    const size_t in_img = (size_t)g->H * g->W * g->C, out_img = (size_t)g->OH * g->OW * g->C;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int n = 0; n < N; n++)
        avg_bwd_image(dx + n * in_img, dy + n * out_img, g);
}

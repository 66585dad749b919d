/* Reference loops of AveragePooling2D: the spec the tests trust. */
#include "kernels/twins.h"

/* Cells of window (oh, ow) inside the image. */
static int window(const mw_pool_geom *g, int oh, int ow, int *h0, int *h1, int *w0, int *w1)
{
    *h0 = oh * g->SH - g->PT, *w0 = ow * g->SW - g->PL;
    *h1 = *h0 + g->PH, *w1 = *w0 + g->PW;
    *h0 = *h0 < 0 ? 0 : *h0, *w0 = *w0 < 0 ? 0 : *w0;
    *h1 = *h1 > g->H ? g->H : *h1, *w1 = *w1 > g->W ? g->W : *w1;
    return (*h1 - *h0) * (*w1 - *w0);
}

void mw_avgpool_fwd_ref(const mw_kctx *k, float *y, const float *x, const mw_pool_geom *g, int N)
{
    (void)k;
    const int C = g->C;
    for (int n = 0; n < N; n++) {
        const float *xi = x + (size_t)n * g->H * g->W * C;
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++) {
                int h0, h1, w0, w1, cells = window(g, oh, ow, &h0, &h1, &w0, &w1);
                float *yo = y + (((size_t)n * g->OH + oh) * g->OW + ow) * C;
                for (int c = 0; c < C; c++) {
                    double s = 0.0;
                    for (int h = h0; h < h1; h++)
                        for (int w = w0; w < w1; w++)
                            s += xi[((size_t)h * g->W + w) * C + c];
                    yo[c] = (float)(s / cells);
                }
            }
    }
}

void mw_avgpool_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const mw_pool_geom *g, int N)
{
    (void)k;
    const int C = g->C;
    for (int n = 0; n < N; n++) {
        float *dxi = dx + (size_t)n * g->H * g->W * C;
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++) {
                int h0, h1, w0, w1, cells = window(g, oh, ow, &h0, &h1, &w0, &w1);
                const float *d = dy + (((size_t)n * g->OH + oh) * g->OW + ow) * C;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++)
                        for (int c = 0; c < C; c++)
                            dxi[((size_t)h * g->W + w) * C + c] += d[c] / (float)cells;
            }
    }
}

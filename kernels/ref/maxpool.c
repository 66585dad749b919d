/* Reference MaxPooling2D. Ties go to the first element in window order
 * (row-major), and padded cells never win, as in TensorFlow. */
#include "kernels/twins.h"

#include <float.h>

void mw_maxpool_fwd_ref(const mw_kctx *k, float *y, int32_t *argmax, const float *x,
                        const mw_pool_geom *g, int N)
{
    (void)k;
    size_t in_img = (size_t)g->H * g->W * g->C;
    for (int n = 0; n < N; n++) {
        const float *xi = x + (size_t)n * in_img;
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++)
                for (int c = 0; c < g->C; c++) {
                    float best = -FLT_MAX;
                    int32_t arg = -1;
                    for (int ph = 0; ph < g->PH; ph++) {
                        int ih = oh * g->SH + ph - g->PT;
                        if (ih < 0 || ih >= g->H)
                            continue;
                        for (int pw = 0; pw < g->PW; pw++) {
                            int iw = ow * g->SW + pw - g->PL;
                            if (iw < 0 || iw >= g->W)
                                continue;
                            int32_t off = (int32_t)(((size_t)ih * g->W + iw) * g->C + c);
                            if (arg < 0 || xi[off] > best) {
                                best = xi[off];
                                arg = off;
                            }
                        }
                    }
                    size_t o = (((size_t)n * g->OH + oh) * g->OW + ow) * g->C + c;
                    y[o] = best;
                    argmax[o] = arg;
                }
    }
}

void mw_maxpool_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const int32_t *argmax,
                        const mw_pool_geom *g, int N)
{
    (void)k;
    size_t in_img = (size_t)g->H * g->W * g->C;
    size_t out_img = (size_t)g->OH * g->OW * g->C;
    for (int n = 0; n < N; n++)
        for (size_t i = 0; i < out_img; i++)
            dx[(size_t)n * in_img + argmax[(size_t)n * out_img + i]] += dy[(size_t)n * out_img + i];
}

/* Reference depthwise Conv2D (Keras' DepthwiseConv2D, and Conv2D with groups equal to its input
 * channels): direct loops in the order of the definition, the spec the fast twins are tested
 * against. Output channel o = c*M + m reads input channel c = o / M only, under the filter
 * w[kh][kw][o] (Keras' (KH, KW, C, M) kernel, flat over its last two axes). */
#include "kernels/twins.h"

void mw_dwconv2d_fwd_ref(const mw_kctx *k, float *y, const float *x, const float *w, const float *b,
                         const mw_conv2d_geom *g, int N)
{
    (void)k;
    const int M = g->O / g->C;
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++) {
                float *yp = y + (((size_t)n * g->OH + oh) * g->OW + ow) * g->O;
                for (int o = 0; o < g->O; o++)
                    yp[o] = b ? b[o] : 0.0f;
                for (int kh = 0; kh < g->KH; kh++) {
                    int ih = oh * g->SH + kh * g->DH - g->PT;
                    if (ih < 0 || ih >= g->H)
                        continue;
                    for (int kw = 0; kw < g->KW; kw++) {
                        int iw = ow * g->SW + kw * g->DW - g->PL;
                        if (iw < 0 || iw >= g->W)
                            continue;
                        const float *xp = x + (((size_t)n * g->H + ih) * g->W + iw) * g->C;
                        const float *wp = w + ((size_t)kh * g->KW + kw) * g->O;
                        for (int o = 0; o < g->O; o++)
                            yp[o] += xp[o / M] * wp[o];
                    }
                }
            }
}

void mw_dwconv2d_bwd_ref(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                         const float *x, const float *w, const mw_conv2d_geom *g, int N)
{
    (void)k;
    const int M = g->O / g->C;
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++) {
                const float *dyp = dy + (((size_t)n * g->OH + oh) * g->OW + ow) * g->O;
                if (db)
                    for (int o = 0; o < g->O; o++)
                        db[o] += dyp[o];
                for (int kh = 0; kh < g->KH; kh++) {
                    int ih = oh * g->SH + kh * g->DH - g->PT;
                    if (ih < 0 || ih >= g->H)
                        continue;
                    for (int kw = 0; kw < g->KW; kw++) {
                        int iw = ow * g->SW + kw * g->DW - g->PL;
                        if (iw < 0 || iw >= g->W)
                            continue;
                        size_t xo = (((size_t)n * g->H + ih) * g->W + iw) * g->C;
                        size_t wo = ((size_t)kh * g->KW + kw) * g->O;
                        for (int o = 0; o < g->O; o++) {
                            dw[wo + o] += x[xo + o / M] * dyp[o];
                            if (dx)
                                dx[xo + o / M] += w[wo + o] * dyp[o];
                        }
                    }
                }
            }
}

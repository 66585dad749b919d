/* Reference Conv2D: direct loops in the order of the definition. The spec the
 * fast paths are tested against; clarity over speed. Written once as the grouped convolution
 * (conv2d.h), which DepthwiseConv2D's reference (dwconv2d.c) runs with one group per input
 * channel: output pixel p, tap t = kh*KW + kw reads input pixel px (mw_conv2d_tap_input: row
 * oh*SH + kh*DH - PT, dilation DH, DW; 1 without). */
#include "kernels/ref/conv2d.h"
#include "kernels/twins.h"

#include <string.h>

void mw_conv2d_grouped_fwd_ref(float *y, const float *x, const float *w, const float *b,
                               const mw_conv2d_geom *g, int N, int G)
{
    const int Cg = g->C / G, Og = g->O / G;
    const size_t P = (size_t)N * g->OH * g->OW;
    for (size_t p = 0; p < P; p++) {
        float *yp = y + p * g->O;
        for (int o = 0; o < g->O; o++)
            yp[o] = b ? b[o] : 0.0f;
        for (int t = 0; t < g->KH * g->KW; t++) {
            size_t px;
            if (!mw_conv2d_tap_input(g, p, t, &px))
                continue;
            const float *xp = x + px * g->C;
            const float *wp = w + (size_t)t * Cg * g->O;
            for (int j = 0; j < Cg; j++)
                for (int o = 0; o < g->O; o++)
                    yp[o] += xp[o / Og * Cg + j] * wp[(size_t)j * g->O + o];
        }
    }
}

void mw_conv2d_grouped_bwd_ref(float *dx, float *dw, float *db, const float *dy, const float *x,
                               const float *w, const mw_conv2d_geom *g, int N, int G)
{
    const int Cg = g->C / G, Og = g->O / G;
    const size_t P = (size_t)N * g->OH * g->OW;
    for (size_t p = 0; p < P; p++) {
        const float *dyp = dy + p * g->O;
        if (db)
            for (int o = 0; o < g->O; o++)
                db[o] += dyp[o];
        for (int t = 0; t < g->KH * g->KW; t++) {
            size_t px;
            if (!mw_conv2d_tap_input(g, p, t, &px))
                continue;
            for (int j = 0; j < Cg; j++)
                for (int o = 0; o < g->O; o++) {
                    const size_t xi = px * g->C + (size_t)(o / Og * Cg + j);
                    const size_t wi = ((size_t)t * Cg + j) * g->O + o;
                    dw[wi] += x[xi] * dyp[o];
                    if (dx)
                        dx[xi] += w[wi] * dyp[o];
                }
        }
    }
}

void mw_conv2d_fwd_ref(const mw_kctx *k, float *y, const float *x, const float *w, const float *b,
                       const mw_conv2d_geom *g, int N)
{
    (void)k;
    mw_conv2d_grouped_fwd_ref(y, x, w, b, g, N, g->G);
}

void mw_conv2d_bwd_ref(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                       const float *x, const float *w, const mw_conv2d_geom *g, int N, int set_dx)
{
    (void)k;
    if (dx && set_dx)
        memset(dx, 0, (size_t)N * g->H * g->W * g->C * sizeof *dx);
    mw_conv2d_grouped_bwd_ref(dx, dw, db, dy, x, w, g, N, g->G);
}

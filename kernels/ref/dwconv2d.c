/* Reference depthwise Conv2D (Keras' DepthwiseConv2D, and Conv2D with groups equal to its input
 * channels): the grouped convolution of conv2d.c with one group per input channel, the spec the
 * fast twins are tested against. Output channel o = c*M + m reads input channel c = o / M only,
 * under the filter w[kh][kw][o] (Keras' (KH, KW, C, M) kernel, flat over its last two axes). */
#include "kernels/ref/conv2d.h"
#include "kernels/twins.h"

#include <string.h>

void mw_dwconv2d_fwd_ref(const mw_kctx *k, float *y, const float *x, const float *w, const float *b,
                         const mw_conv2d_geom *g, int N)
{
    (void)k;
    mw_conv2d_grouped_fwd_ref(y, x, w, b, g, N, g->C);
}

void mw_dwconv2d_bwd_ref(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                         const float *x, const float *w, const mw_conv2d_geom *g, int N, int set_dx)
{
    (void)k;
    if (dx && set_dx)
        memset(dx, 0, (size_t)N * g->H * g->W * g->C * sizeof *dx);
    mw_conv2d_grouped_bwd_ref(dx, dw, db, dy, x, w, g, N, g->C);
}

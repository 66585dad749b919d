/* The reference convolution (conv2d.c) that Conv2D, DepthwiseConv2D (dwconv2d.c) and the
 * transposed convolution (upsample.c) are written with: the grouped convolution, and the window
 * geometry (which input pixel a kernel tap of an output pixel reads). One set of loops, so the
 * reference twins cannot differ in where they read or in the order they sum. */
#ifndef MW_KERNELS_REF_CONV2D_H
#define MW_KERNELS_REF_CONV2D_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/kernels.h"

/* Output pixel p = (n*OH + oh)*OW + ow of g and kernel tap t = kh*KW + kw: the input pixel
 * *px = (n*H + ih)*W + iw it reads, ih = oh*SH + kh*DH - PT and iw = ow*SW + kw*DW - PL, and
 * true; false (and *px untouched) where the tap falls in the zero padding. p runs over
 * [0, N*OH*OW), t over [0, KH*KW): y + p*O is the output pixel, x + *px*C the input one. */
static inline bool mw_conv2d_tap_input(const mw_conv2d_geom *g, size_t p, int t, size_t *px)
{
    const int ow = (int)(p % (size_t)g->OW), oh = (int)(p / (size_t)g->OW % (size_t)g->OH);
    const size_t n = p / (size_t)g->OW / (size_t)g->OH;
    const int ih = oh * g->SH + t / g->KW * g->DH - g->PT;
    const int iw = ow * g->SW + t % g->KW * g->DW - g->PL;
    if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W)
        return false;
    *px = (n * (size_t)g->H + (size_t)ih) * (size_t)g->W + (size_t)iw;
    return true;
}

/* Keras' Conv2D(groups=G) on g (G divides C and O): output channel o reads the Cg = C/G input
 * channels of its group o / (O/G) under w[kh][kw][j][o], the (KH, KW, Cg, O) kernel. G = 1 is
 * Conv2D, G = C DepthwiseConv2D (its (KH, KW, C, M) kernel is this one flat over its last two
 * axes). Forward: y = conv(x) + b (b may be NULL). */
void mw_conv2d_grouped_fwd_ref(float *y, const float *x, const float *w, const float *b,
                               const mw_conv2d_geom *g, int N, int G);
/* dx += d/dx, dw += d/dw, db += sum dy of mw_conv2d_grouped_fwd_ref; dx and db may be NULL. */
void mw_conv2d_grouped_bwd_ref(float *dx, float *dw, float *db, const float *dy, const float *x,
                               const float *w, const mw_conv2d_geom *g, int N, int G);

#endif

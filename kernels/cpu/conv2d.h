/* The fast CPU Conv2D's pieces (conv2d.c) that Conv2DTranspose (conv2d_tr.c) reuses: its
 * forward is Conv2D's backward on the data, its input gradient Conv2D's forward. */
#ifndef MW_KERNELS_CPU_CONV2D_H
#define MW_KERNELS_CPU_CONV2D_H

#include "kernels/kernels.h"

/* Writes the (n OH OW, KH KW C) patch rows of images [0, n) of x (zero where padded), on nt
 * threads. */
void mw_conv2d_im2col_cpu(float *col, const float *x, const mw_conv2d_geom *g, int n, int nt);
/* Adds such rows back into images [0, n) of dx (each input pixel the sum of the cells that read
 * it). */
void mw_conv2d_col2im_cpu(float *dx, const float *dcol, const mw_conv2d_geom *g, int n, int nt);
/* The images per chunk whose patch rows fit k's scratch: at least 1, at most N. */
int mw_conv2d_chunk_cpu(const mw_kctx *k, const mw_conv2d_geom *g, int N);

#endif

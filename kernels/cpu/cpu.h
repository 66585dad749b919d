/* Internals shared by the fast CPU path's kernels (the matrix product is gemm.h). */
#ifndef MW_KERNELS_CPU_CPU_H
#define MW_KERNELS_CPU_CPU_H

#include "kernels/kernels.h"

/* Threads a kernel may use: the context's, at least 1. Called inside an
 * outer parallel region (batch-split training), OpenMP runs it on one. */
#define MW_NT(k) ((k)->nthreads > 0 ? (k)->nthreads : 1)

/* The Conv2D path's pieces (conv2d.c), which Conv2DTranspose (conv2d_tr.c) reuses: im2col
 * writes the (n OH OW, KH KW C) patch rows of images [0, n) of x, col2im adds such rows back
 * into dx, and the chunk is the images whose rows fit k's scratch (at least one). */
void mw_conv2d_im2col_cpu(float *col, const float *x, const mw_conv2d_geom *g, int n, int nt);
void mw_conv2d_col2im_cpu(float *dx, const float *dcol, const mw_conv2d_geom *g, int n, int nt);
int mw_conv2d_chunk_cpu(const mw_kctx *k, const mw_conv2d_geom *g, int N);

#endif

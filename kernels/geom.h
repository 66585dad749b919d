/* Output shapes and scratch sizes of the convolution and pooling layers (geom.c), shared by
 * every backend. */
#ifndef MW_KERNELS_GEOM_H
#define MW_KERNELS_GEOM_H

#include <stddef.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" { /* kernels/cuda/conv2d.cu sizes its scratch with these */
#endif

/* Fill g for padding 'valid' (same = 0) or 'same' (same = 1, TF's rule:
 * out = ceil(in / stride), the odd pixel of padding goes after). Returns 0, or
 * -1 when the output would be empty. */
int mw_conv2d_geom_init(mw_conv2d_geom *g, int H, int W, int C, int O, int KH, int KW, int SH,
                        int SW, int same);

/* Dilate g's kernel by (DH, DW) (mw_conv2d_geom_init sets 1, 1): the output size and padding
 * recomputed for the dilated extent (K - 1) * D + 1, as TensorFlow and Keras do. Returns 0, or
 * -1 when a rate is not positive or the output would be empty. */
int mw_conv2d_geom_dilate(mw_conv2d_geom *g, int DH, int DW, int same);
/* Split g into G groups (mw_conv2d_geom_init sets 1): -1 unless G divides both C and O. */
int mw_conv2d_geom_group(mw_conv2d_geom *g, int G);
/* Conv2DTranspose (Keras 3's output sizes and padding, its JAX backend's rule): g is filled as
 * the Conv2D whose input gradient the transposed convolution is, so the conv kernels' im2col
 * and col2im serve it: g's input H x W x C is the transposed conv's OUTPUT (C = filters), g's
 * output OH x OW x O its input (in_h x in_w x in_c), PT / PL the rows and columns that output
 * starts before the first kernel tap. oph / opw: output_padding, -1 for None (then 'valid'
 * gives (in - 1) s + max(k, s), 'same' in s). Returns 0, or -1 when a size is not positive. */
int mw_conv2d_tr_geom_init(mw_conv2d_geom *g, int in_h, int in_w, int in_c, int filters, int KH,
                           int KW, int SH, int SW, int same, int oph, int opw);

/* Fill g as mw_conv2d_geom_init does, for a PH x PW pool. */
int mw_pool_geom_init(mw_pool_geom *g, int H, int W, int C, int PH, int PW, int SH, int SW,
                      int same);

/* Scratch floats the fast conv path wants for N images (the ref needs none);
 * callers give at least mw_conv2d_ws_min and at most this. */
size_t mw_conv2d_ws_count(const mw_conv2d_geom *g, int N);
size_t mw_conv2d_ws_min(const mw_conv2d_geom *g);
/* The scratch the chunking actually uses when given at most cap floats: as many whole images
 * as fit in cap (at least one, at most N, and no more rows than an int holds) times
 * mw_conv2d_ws_min. A device reserves this instead of mw_conv2d_ws_count, which for large
 * images and batches is gigabytes. */
size_t mw_conv2d_ws_capped(const mw_conv2d_geom *g, int N, size_t cap);

#ifdef __cplusplus
}
#endif

#endif

/* DepthwiseConv2D, Conv2D(groups = its input channels) and SeparableConv2D: the builders of the
 * depthwise family (layers/dwconv.c). */
#ifndef MW_WORKER_MODEL_LAYERS_DWCONV_H
#define MW_WORKER_MODEL_LAYERS_DWCONV_H

#include <stddef.h>

#include "worker/model/kread.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"

/* A depthwise convolution's window: kernel, strides, dilation, padding same (1) or valid (0). */
typedef struct {
    int kh, kw, sh, sw, dh, dw, same;
} mw_dwconv_win;

/* DepthwiseConv2D(kernel, strides, padding, depth_multiplier mult, dilation_rate, use_bias) on
 * the current output: C*mult output channels, channel c*mult + m the input channel c under its
 * own filter; MW_EMODEL naming the layer when it does not fit. A NULL name gets Keras' automatic
 * one (depthwise_conv2d, ...). */
mw_status mw_model_add_dwconv2d(mw_model *m, const char *name, int mult, const mw_dwconv_win *win,
                                int use_bias);
/* SeparableConv2D(filters, ...): the depthwise convolution above, then a 1x1 convolution of its
 * C*mult channels to filters, one Keras layer (separable_conv2d, ...). */
mw_status mw_model_add_sepconv2d(mw_model *m, const char *name, int filters, int mult,
                                 const mw_dwconv_win *win, int use_bias);

/* l's geometry for O output channels and the window win (kernel kh, kw, strides sh, sw,
 * dilation dh, dw, same): MW_EMODEL naming the layer when it does not fit its input. */
mw_status mw_dwconv_fit(mw_layer *l, int O, const int win[7]);
/* The first difference of two convolutions' (Conv2D's too) strides, dilation or padding (layer.h's
 * differs); 0: none. */
int mw_dwconv_window_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y);

/* Conv2D with groups equal to its input channels (> 1) and filters a multiple of them, the rest
 * of its config read by conv2d.c: a depthwise convolution, filters / groups per channel (other
 * groups are conv2d.c's own grouped convolution). */
mw_status mw_dwconv_parse_grouped(mw_kread *R, const char *name, int filters, int groups,
                                  const int ks[2], const int st[2], const int dil[2], int same,
                                  const mw_kweights *w);

#endif

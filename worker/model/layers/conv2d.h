/* Conv2D and Conv1D: the builder of the conv2d family (layers/conv2d.c). */
#ifndef MW_WORKER_MODEL_LAYERS_CONV2D_H
#define MW_WORKER_MODEL_LAYERS_CONV2D_H

#include <stddef.h>

#include "worker/model/model.h"

/* Conv2D(filters, (kh, kw), (sh, sw), padding same or valid, use_bias) on the current output;
 * MW_EMODEL with a message naming the layer when it does not fit. A NULL name gets Keras'
 * automatic name (conv2d, conv2d_1, ...). */
mw_status mw_model_add_conv2d(mw_model *m, const char *name, int filters, int kh, int kw, int sh,
                              int sw, int same, int use_bias);
/* The same with the kernel dilated by (dh, dw) (Keras' dilation_rate; 1, 1: none), in groups
 * (Keras' groups; 1: none): the filters' i-th 1/groups sees only the input channels' i-th
 * 1/groups, through a kernel (kh, kw, channels / groups, filters); groups must divide both. */
mw_status mw_model_add_conv2d_dilated(mw_model *m, const char *name, int filters, int groups,
                                      int kh, int kw, int sh, int sw, int dh, int dw, int same,
                                      int use_bias);

#endif

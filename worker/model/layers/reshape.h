/* Reshaping layers: Flatten, Reshape, ZeroPadding2D; the builders of the reshape family
 * (layers/reshape.c). */
#ifndef MW_WORKER_MODEL_LAYERS_RESHAPE_H
#define MW_WORKER_MODEL_LAYERS_RESHAPE_H

#include <stddef.h>

#include "worker/model/model.h"

mw_status mw_model_add_flatten(mw_model *m, const char *name);
/* Keras Reshape(target_shape dims[0..nd), nd 1 to 3, one of them -1 at most): (d) flat,
 * (T, C) a sequence, (H, W, C) an image, the values in place. */
mw_status mw_model_add_reshape(mw_model *m, const char *name, const int *dims, int nd);
mw_status mw_model_add_zeropad(mw_model *m, const char *name, int top, int bottom, int left,
                               int right);

#endif

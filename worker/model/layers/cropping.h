/* Cropping2D's family (cropping.c): the builder others call. */
#ifndef MW_WORKER_MODEL_LAYERS_CROPPING_H
#define MW_WORKER_MODEL_LAYERS_CROPPING_H

#include "common/status.h"
#include "worker/model/model.h"

/* Keras' GetItem x[:, k, :] on the current input, a sequence (None, T, D): step k (k < 0:
 * from the end) as a flat (None, D), a Cropping2D of the other steps (kind MW_LAYER_CROP). */
mw_status mw_model_add_take_step(mw_model *m, const char *name, int k);

#endif

/* keras.applications' own layers: the builders of the scale family (layers/scale.c). */
#ifndef MW_WORKER_MODEL_LAYERS_SCALE_H
#define MW_WORKER_MODEL_LAYERS_SCALE_H

#include "worker/model/model.h"

/* ConvNeXt's LayerScale: the input times a trainable gamma of dim values (the input's
 * channels), initialized to init. */
mw_status mw_model_add_layer_scale(mw_model *m, const char *name, float init, int dim);

#endif

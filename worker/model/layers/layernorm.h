/* LayerNormalization: the builder of the layernorm family (layers/layernorm.c). */
#ifndef MW_WORKER_MODEL_LAYERS_LAYERNORM_H
#define MW_WORKER_MODEL_LAYERS_LAYERNORM_H

#include <stddef.h>

#include "worker/model/model.h"

/* LayerNormalization(axis=-1, epsilon, center, scale): over each position's channels. */
mw_status mw_model_add_layernorm(mw_model *m, const char *name, float epsilon, int center,
                                 int scale);

#endif

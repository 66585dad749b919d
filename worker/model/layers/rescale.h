/* Rescaling and an adapted Normalization as model layers: the builders of the rescale family
 * (layers/rescale.c). */
#ifndef MW_WORKER_MODEL_LAYERS_RESCALE_H
#define MW_WORKER_MODEL_LAYERS_RESCALE_H

#include "worker/model/model.h"

/* Keras Rescaling(scale, offset): y = x * scale + offset, anywhere in the model; r->C 1 (one
 * pair) or the input's channels (a pair per channel, at most MW_RESCALE_MAX_C). */
mw_status mw_model_add_rescale(mw_model *m, const char *name, const mw_rescale *r);
/* Keras Normalization over the last axis with its statistics (mean, variance, count) as
 * non-trainable weights: y = (x - mean) / max(sqrt(variance), 1e-7). */
mw_status mw_model_add_normalize(mw_model *m, const char *name);

#endif

/* Dropout: the builder of the dropout family (layers/dropout.c). */
#ifndef MW_WORKER_MODEL_LAYERS_DROPOUT_H
#define MW_WORKER_MODEL_LAYERS_DROPOUT_H

#include <stddef.h>

#include "worker/model/model.h"

/* Keras Dropout(rate), 0 <= rate < 1: inverted dropout while the workspace
 * says training (see mw_model_ws), the identity otherwise. */
mw_status mw_model_add_dropout(mw_model *m, const char *name, float rate);

#endif

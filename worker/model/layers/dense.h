/* Dense: the builder of the dense family (layers/dense.c). */
#ifndef MW_WORKER_MODEL_LAYERS_DENSE_H
#define MW_WORKER_MODEL_LAYERS_DENSE_H

#include <stddef.h>

#include "worker/model/model.h"

mw_status mw_model_add_dense(mw_model *m, const char *name, int units, int use_bias);

#endif

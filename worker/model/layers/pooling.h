/* Pooling: MaxPooling2D, AveragePooling2D and the global poolings (1-D ones too); the
 * builders of the pooling family (layers/pooling.c). */
#ifndef MW_WORKER_MODEL_LAYERS_POOLING_H
#define MW_WORKER_MODEL_LAYERS_POOLING_H

#include <stddef.h>

#include "worker/model/model.h"

mw_status mw_model_add_maxpool(mw_model *m, const char *name, int ph, int pw, int sh, int sw,
                               int same);
/* AveragePooling2D (padded cells are not counted). */
mw_status mw_model_add_avgpool(mw_model *m, const char *name, int ph, int pw, int sh, int sw,
                               int same);
/* GlobalAveragePooling2D (max = 0) or GlobalMaxPooling2D (max = 1): (None, C) outputs. */
mw_status mw_model_add_global_pool(mw_model *m, const char *name, int max, int one_d);

#endif

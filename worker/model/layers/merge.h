/* Merges: Add, Multiply, Concatenate; the builders of the merge family (layers/merge.c). */
#ifndef MW_WORKER_MODEL_LAYERS_MERGE_H
#define MW_WORKER_MODEL_LAYERS_MERGE_H

#include <stddef.h>

#include "worker/model/model.h"

/* Merges of the inputs set by mw_model_set_inputs: Add (equal shapes), Multiply (two
 * inputs of equal shapes), Concatenate (channels; equal heights and widths). */
mw_status mw_model_add_add(mw_model *m, const char *name);
mw_status mw_model_add_multiply(mw_model *m, const char *name);
mw_status mw_model_add_concat(mw_model *m, const char *name);

#endif

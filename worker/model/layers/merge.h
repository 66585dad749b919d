/* Merges: Add, Multiply, Concatenate; the builders of the merge family (layers/merge.c). */
#ifndef MW_WORKER_MODEL_LAYERS_MERGE_H
#define MW_WORKER_MODEL_LAYERS_MERGE_H

#include <stddef.h>

#include "worker/model/model.h"

/* Merges of the inputs set by mw_model_set_inputs: Add, Multiply (two inputs), both of equal
 * shapes or shapes that broadcast as Keras' merges do ((None, 1, 1, C) or (None, C) against
 * (None, H, W, C), in either order), Concatenate (channels; equal heights and widths). */
mw_status mw_model_add_add(mw_model *m, const char *name);
mw_status mw_model_add_multiply(mw_model *m, const char *name);
mw_status mw_model_add_concat(mw_model *m, const char *name);
/* keras.applications' CustomScaleLayer (Inception-ResNet): inputs[0] + inputs[1] * scale, an
 * Add whose second input is scaled. */
mw_status mw_model_add_scaled_sum(mw_model *m, const char *name, float scale);
/* An operation on the one input set and a constant: x + c (mul 0) or x * c (mul 1), as Keras 3
 * writes x + 3.0 in a model's code (keras.src.ops.numpy's Add, Multiply). */
mw_status mw_model_add_const(mw_model *m, const char *name, int mul, float c);

#endif

/* Dense: the builder of the dense family (layers/dense.c). */
#ifndef MW_WORKER_MODEL_LAYERS_DENSE_H
#define MW_WORKER_MODEL_LAYERS_DENSE_H

#include <stddef.h>

#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"

mw_status mw_model_add_dense(mw_model *m, const char *name, int units, int use_bias);

/* Dense's row fields that EinsumDense (layers/einsum_dense.c), a Dense on the last axis, shares:
 * its mask rule (on each position of a sequence it keeps the steps; a flat input has none) and
 * its Keras variables (the kernel (in, out), then the bias). */
mw_mask_rule mw_dense_mask_rule(const mw_layer *l);
void mw_dense_keras_vars(const mw_layer *l, mw_keras_var *v, int *nv);

#endif

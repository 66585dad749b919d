/* LayerNormalization: the builder of the layernorm family (layers/layernorm.c). */
#ifndef MW_WORKER_MODEL_LAYERS_LAYERNORM_H
#define MW_WORKER_MODEL_LAYERS_LAYERNORM_H

#include <stddef.h>

#include "worker/model/kvars.h"
#include "worker/model/model.h"

/* LayerNormalization(axis=-1, epsilon, center, scale): over each position's channels. */
mw_status mw_model_add_layernorm(mw_model *m, const char *name, float epsilon, int center,
                                 int scale);

/* A normalization over the channels that keeps its input's shape: epsilon, gamma (l's kernel,
 * ones, when scale) and beta (its bias, zeros, when center); LayerNormalization's and
 * GroupNormalization's. */
void mw_layernorm_affine(mw_layer *l, float epsilon, int center, int scale);

/* A normalization's Keras variables: gamma (l's kernel, when scale) and beta (its bias, when
 * center), as Keras' build() makes them; LayerNormalization's and GroupNormalization's. */
void mw_layernorm_keras_vars(const mw_layer *l, mw_keras_var *v, int *nv);

#endif

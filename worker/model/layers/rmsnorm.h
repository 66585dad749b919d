/* RMS normalization: the builder of the rmsnorm family (layers/rmsnorm.c), which
 * LayerNormalization(rms_scaling=True) (layers/layernorm.c) calls too. */
#ifndef MW_WORKER_MODEL_LAYERS_RMSNORM_H
#define MW_WORKER_MODEL_LAYERS_RMSNORM_H

#include "worker/model/model.h"

/* The Keras classes one layer of the family stands for (its arithmetic and its variable). */
typedef enum {
    MW_RMS_KERAS, /* keras.layers.RMSNormalization: the mean of squares, "scale" */
    MW_RMS_LN,    /* LayerNormalization(rms_scaling=True): the variance, "gamma" */
    MW_RMS_LLAMA, /* KerasHub's LlamaLayerNorm: the mean of squares, "scale" */
    MW_RMS_GEMMA, /* KerasHub's Gemma RMSNormalization: the mean of squares, (1 + "scale") */
} mw_rms_class;

/* y = x / sqrt(v + epsilon) * (gamma + offset) over each position's channels (the last axis),
 * v and offset as cls computes them; gamma (l's kernel, C values) starts as cls's initializer
 * (ones; Gemma's zeros), which the reader may replace. */
mw_status mw_model_add_rmsnorm(mw_model *m, const char *name, mw_rms_class cls, float epsilon);

#endif

/* KerasHub's TransformerEncoder and TransformerDecoder, built from this program's layers
 * (worker/model/layers/transformer.c). */
#ifndef MW_WORKER_MODEL_LAYERS_TRANSFORMER_H
#define MW_WORKER_MODEL_LAYERS_TRANSFORMER_H

#include <jansson.h>

#include "common/status.h"
#include "worker/model/layer.h"

/* The Keras reader's parse (mw_layer_ops.parse) of "TransformerEncoder" and
 * "TransformerDecoder": adds the block's parts on the input set by mw_model_set_inputs (or the
 * last layer), named name (NULL: Keras' automatic name). */
mw_status mw_transformer_parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name);

#endif

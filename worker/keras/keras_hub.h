/* KerasHub's task models (keras_hub.c): a .keras archive of GPT2CausalLM holds only the
 * arguments its Python code builds the model from (the backbone's vocabulary_size, num_layers,
 * ...), not a layer graph. This reader writes the Functional graph that code builds, layer for
 * layer and in the same order (so each layer's group in .weights.h5 is where KerasHub saved it:
 * layers/<backbone>/layers/<snake-case class>[_n]), and the Functional reader builds it like
 * any other. */
#ifndef MW_WORKER_KERAS_KERAS_HUB_H
#define MW_WORKER_KERAS_KERAS_HUB_H

#include <jansson.h>

#include "common/status.h"

/* 1 when a model object (a .keras config.json's) is one of KerasHub's models: its
 * registered_name is "keras_hub>...". */
int mw_keras_hub_is(const json_t *model);

/* The Functional model of KerasHub model `model` (a task model: GPT2CausalLM, ...): *out a new
 * {"class_name": "Functional", "config": {...}} the caller releases; *backbone the snake-case
 * class of its backbone (static, "gpt2_backbone"): the group in .weights.h5 the backbone's
 * layers live in. One error naming the model, the key and what is supported for a class or
 * an argument this reader does not build. */
mw_status mw_keras_hub_expand(const char *origin, const json_t *model, json_t **out,
                              const char **backbone);

/* The task models mw_keras_hub_expand builds, ", "-separated (static). */
const char *mw_keras_hub_tasks(void);

#endif

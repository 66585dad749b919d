/* Pieces of a Functional model's config (keras_hub_parts.c), from which keras_hub.c writes the
 * graphs of KerasHub's task models: tensor references, calls, layer entries, the
 * initializers and functions as Keras writes them. Each returns a new JSON value (NULL when
 * out of memory) or 1 when it appended its entry (0 when out of memory). */
#ifndef MW_WORKER_KERAS_KERAS_HUB_PARTS_H
#define MW_WORKER_KERAS_KERAS_HUB_PARTS_H

#include <jansson.h>

/* A reference to layer's output (its first node's first tensor). */
json_t *mw_khub_tensor(const char *layer);

/* inbound_nodes of one call: args (stolen), kwargs (stolen; NULL: none). */
json_t *mw_khub_call(json_t *args, json_t *kwargs);

/* The call on one tensor, the output of layer. */
json_t *mw_khub_on(const char *layer);

/* A layer entry: Keras class cls (KerasHub's when hub), config (stolen) to which its name and
 * the model's dtype policy are added, and its nodes (stolen). 0 when out of memory. */
int mw_khub_add(json_t *layers, const char *cls, int hub, const char *name, json_t *config,
                const json_t *dtype, json_t *nodes);

/* The last entry's "module" (the rows that read a class from one module alone). */
int mw_khub_in_module(json_t *layers, const char *module);

/* An InputLayer of token ids (None, None). */
int mw_khub_input(json_t *layers, const char *name);

/* A backbone's layer list ls when every entry was made (ok), else NULL (ls released). */
json_t *mw_khub_built(json_t *ls, int ok);

/* keras.initializers.RandomNormal(0, stddev), as Keras writes it. */
json_t *mw_khub_normal(double stddev);

/* keras.initializers.TruncatedNormal(0, stddev). */
json_t *mw_khub_truncated(double stddev);

/* LayerNormalization(epsilon) over the last axis, as KerasHub configures it. */
json_t *mw_khub_layer_norm(double epsilon);

/* KerasHub's gelu_approximate, as a .keras config names the function. */
json_t *mw_khub_gelu_approximate(void);

#endif

/* The per-layer reading of a Keras model JSON (keras_read.c), below both model readers: the
 * Sequential one (keras.c) and the Functional graph's (keras_graph.h). Each takes a layer the
 * same way: read_layer (class, config, name, dtype policy), the InputLayer's check, add_layer
 * (the layer table's row or a preprocessing layer), and at the end the output check; the input
 * shape is found and checked against the data before the first layer. */
#ifndef MW_WORKER_KERAS_READ_H
#define MW_WORKER_KERAS_READ_H

#include <stddef.h>

#include <jansson.h>

#include "common/status.h"
#include "worker/model/kread.h"

/* Most layers a model may list. */
#define MW_KERAS_MAX_LAYERS 1000

/* A Keras input shape, without its batch dimension. */
typedef struct {
    int rank; /* 3: (H, W, C); 2: (H, W); 1: (D); 0: none given */
    int d[3];
    char from[MW_KQUOTE_MAX * 8 + 160]; /* where it was found, for messages */
} mw_kshape;

/* "origin: message" recorded with mw_err; returns s. */
mw_status mw_keras_fail_at(const char *origin, mw_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The input shape, from the first layer (an InputLayer's batch_input_shape or batch_shape,
 * or another layer's batch_input_shape) or the model's build_input_shape / build_config;
 * s->rank 0 when none is given. */
mw_status mw_keras_find_input(const char *origin, const json_t *model, const json_t *conf,
                              const json_t *layers, mw_kshape *s);
/* Check the Keras input shape against the data (h, w, c; all 0: take the file's) and start
 * the model with the matching per-example layout. */
mw_status mw_keras_start_model(mw_kbuilder *B, const mw_kshape *s, int h, int w, int c);
/* config.name, when given, becomes the model's name. */
mw_status mw_keras_set_model_name(mw_kbuilder *B, const json_t *conf);

/* What every layers[i] entry needs whatever its class: an object with a built-in class_name,
 * a config object, an optional valid name, trainable, float32. Sets L->where to name the
 * layer and returns its class, config and name (NULL when it has none), all borrowed. */
mw_status mw_keras_read_layer(mw_klayer *L, const json_t *e, size_t i, const char **cls_out,
                              const json_t **cfg_out, const char **name_out);
/* An InputLayer (layers[i]) adds nothing: it must come first and take dense inputs. */
mw_status mw_keras_check_input_layer(const mw_klayer *L, const json_t *cfg, size_t i);
/* Add a layer of Keras class cls (not InputLayer) to the model, once its name is known to be
 * unique. kwargs: a Functional node's keyword arguments, or NULL. */
mw_status mw_keras_add_layer(mw_kbuilder *B, const mw_klayer *L, const char *cls, const json_t *cfg,
                             const char *name, int is_last, const json_t *kwargs);
/* Plan the padding masks, then check the model's output: (None, classes) logits (or one row
 * per position of a sequence), matching the data's class count when known (nclasses > 0). */
mw_status mw_keras_check_output(const mw_kbuilder *B, int nclasses);

#endif

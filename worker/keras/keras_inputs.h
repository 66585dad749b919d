/* Models of several named inputs (keras_inputs.c): the data's parts (x_train.<name>) and the
 * Functional model's InputLayers, matched by name; the model's input is one row per example,
 * the parts side by side in name order, each InputLayer taking its part
 * (worker/model/inputs.h). keras_graph.c calls these while it reads the graph. */
#ifndef MW_WORKER_KERAS_KERAS_INPUTS_H
#define MW_WORKER_KERAS_KERAS_INPUTS_H

#include <jansson.h>

#include "common/status.h"
#include "worker/model/kread.h"

/* InputLayer name (its entry L, config cfg) of a model of several named inputs: the layer
 * taking its part of the input's row (layers/input.h); *idx its index. One message when the
 * data have no such part or its length differs from the InputLayer's. */
mw_status mw_keras_add_input(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg,
                             const char *name, int *idx);
/* Every part of the data is an input of the model. */
mw_status mw_keras_check_parts_used(const mw_kbuilder *B);
/* A model of several (ninputs) named inputs: the model's input is their row (the data's parts
 * B->parts, or without data the InputLayers' own lengths or those a run recorded), and its
 * first InputLayer, layers[0] (*name0, *idx0), takes its part; the others as the graph meets
 * them (mw_keras_add_input). */
mw_status mw_keras_start_named(mw_kbuilder *B, const json_t *conf, const json_t *layers,
                               const int shape[3], int ninputs, const char **name0, int *idx0);

#endif

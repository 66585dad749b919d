/* Keras Functional models (keras_graph.c): layers with inbound_nodes, one input and one
 * output, a graph in which a layer reads earlier layers' outputs, and the mask ops Keras
 * writes between them. keras.c calls it once it has found a Functional model. */
#ifndef MW_WORKER_KERAS_GRAPH_H
#define MW_WORKER_KERAS_GRAPH_H

#include <jansson.h>

#include "common/status.h"
#include "worker/model/kread.h"

/* Build B's model from a Functional model's config (model, its config conf and its layer list
 * layers) for data of shape[0..2] (h, w, c; all 0: the file's) and nclasses (0: any). */
mw_status mw_keras_build_graph(mw_kbuilder *B, const json_t *model, const json_t *conf,
                               const json_t *layers, const int shape[3], int nclasses);

#endif

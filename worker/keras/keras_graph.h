/* Keras Functional models (keras_graph.c): layers with inbound_nodes, one input and one
 * output, a graph in which a layer reads earlier layers' outputs, and the mask ops Keras
 * writes between them; and a Sequential or Functional model used as a layer of another, whose
 * layers are added in its place (mw_keras_add_nested). keras.c calls it once it has found a
 * Functional model, or a nested one in a Sequential model. */
#ifndef MW_WORKER_KERAS_GRAPH_H
#define MW_WORKER_KERAS_GRAPH_H

#include <jansson.h>

#include "common/status.h"
#include "worker/model/kread.h"

/* Build B's model from a Functional model's config (model, its config conf and its layer list
 * layers) for data of shape[0..2] (h, w, c; all 0: the file's) and nclasses (0: any). */
mw_status mw_keras_build_graph(mw_kbuilder *B, const json_t *model, const json_t *conf,
                               const json_t *layers, const int shape[3], int nclasses);

/* 1 when a layers[] entry of class cls is a Keras model used as a layer (Sequential,
 * Functional). */
int mw_keras_is_nested(const char *cls);

/* Adds nested model cls (its config cfg, named name; L: its entry, read by mw_keras_read_layer)
 * whose input is model layer in (-1: the model's input) in its place: its layers, which its
 * messages name through it; *out the layer holding its output. siblings and at: the layer list
 * it is entry at of (its group's key in .weights.h5); last: it is the model's last layer. */
mw_status mw_keras_add_nested(mw_kbuilder *B, const mw_klayer *L, const char *cls,
                              const json_t *cfg, const char *name, int in, int last,
                              const json_t *siblings, size_t at, int *out);

#endif

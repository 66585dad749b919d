/* The Functional graph's entries that are operations on one tensor rather than a layer of the
 * table (keras_ops.c): a tied layer's second call (a ReversibleEmbedding called with
 * reverse=True: the logits from its table) and Keras' GetItem (x[:, k, :]). keras_graph.c
 * resolves the entry's input tensor and hands it here. */
#ifndef MW_WORKER_KERAS_KERAS_OPS_H
#define MW_WORKER_KERAS_KERAS_OPS_H

#include <jansson.h>

#include "common/status.h"
#include "worker/model/kread.h"

/* 1 when layers[] entry e of class cls is one of these operations. */
int mw_keras_op_is(const char *cls, const json_t *e);
/* Its input tensor's reference (inbound_nodes[0].args[0]; NULL when it has none). */
const json_t *mw_keras_op_input(const json_t *e);
/* Adds entry e (L: it, for messages; name: its Keras name) on model layer in (-1: the
 * model's input) as the model's next layer, in the nested model being read; one message
 * naming the entry for a call or an index this program does not compute. */
mw_status mw_keras_op_add(mw_kbuilder *B, const mw_klayer *L, const char *cls, const json_t *e,
                          int in, const char *name);
/* A ReversibleEmbedding called twice (emb(ids), then emb(h, reverse=True)), which Keras
 * writes as one entry of two inbound nodes, in the form the reader takes: the second call an
 * entry of its own of the same name after the layer it reads, read as node 0 by the layers
 * and outputs after it (in nested Functionals too). *out: the rewritten copy of model, or
 * NULL when it holds none; one message when a layer after the reverse call reads the first
 * call's output. */
mw_status mw_keras_ops_unshare(const char *origin, const json_t *model, json_t **out);

#endif

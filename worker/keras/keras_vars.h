/* The Keras variables of each Keras layer of a model, from its rows' lists (worker/model/
 * kvars.h: which variables Keras gives a layer, in which order, with which shapes, and where
 * each lives in mwtrain's parameter arena) and KerasHub's blocks' parts. Every file format that
 * names weights the Keras way reads it: the safetensors export (<layer>/<variable>), and the
 * .weights.h5 inside a .keras archive, where variable i of a layer is the dataset
 * layers/<layer>/vars/<i> (i = the variable's place in Keras' layer.weights). The arena layouts ARE
 * Keras' layouts (Conv2D kernel (KH, KW, Cin, Cout), Dense kernel (in, out), row-major), so a
 * variable is one contiguous run of floats. */
#ifndef MW_WORKER_KERAS_VARS_H
#define MW_WORKER_KERAS_VARS_H

#include <stddef.h>

#include "common/status.h"
#include "worker/model/kvars.h"
#include "worker/model/model.h"

/* l's variables in Keras order into v (room for MW_KERAS_LAYER_VARS), their number into *nv
 * (0 for a layer without weights). MW_EUNSUPPORTED when l has parameters its row lists none of,
 * MW_EINTERNAL when the model's counts disagree with the shapes (a bug). */
mw_status mw_keras_layer_vars(const mw_layer *l, mw_keras_var *v, int *nv);

/* The variables of Keras layer i of m (mw_keras_layer_is_own) in Keras' order: layer i's, or,
 * for the first layer of a KerasHub block (mw_layer.block), every part's, by part_rank, each
 * with its sub prefixed by the part's path. */
mw_status mw_keras_vars(const mw_model *m, int i, mw_keras_var *v, int *nv);

/* The sublayer groups Keras writes in the group of Keras layer i of m in .weights.h5, with or
 * without variables (MultiHeadAttention: query_dense, key_dense, value_dense, output_dense,
 * _softmax, _dropout_layer; a block: its parts' paths and their sublayers'), into
 * out[0..return), each at most MW_KERAS_SUB_MAX bytes; max the room in out. */
int mw_keras_layer_subs(const mw_model *m, int i, char (*out)[MW_KERAS_SUB_MAX], int max);

/* Keras' class of layer l's Keras layer: the block's for a part. */
const char *mw_keras_class(const mw_layer *l);

/* Keras' naming.to_snake_case of a class name: "Conv2D" -> "conv2d", "MaxPooling2D" ->
 * "max_pooling2d", "ReLU" -> "re_lu", "BatchNormalization" -> "batch_normalization". */
void mw_keras_snake_case(const char *cls, char *out, size_t len);

/* The key of own layer i of m in .weights.h5 (layers/<key>/vars): NOT the layer's name but,
 * as keras/src/saving/saving_lib.py's _save_container_state makes it, the snake-case class
 * name numbered by how many own layers of the same class come before it in model order
 * (dense, dense_1, dense_2, ... whatever the layers are called); a nested model's layer's
 * within that model, under its path (sequential/layers/conv2d: mw_nest). */
void mw_keras_layer_key(const mw_model *m, int i, char *out, size_t len);
/* Bytes of each key mw_keras_layer_keys makes. */
#define MW_KERAS_KEY_MAX 256
/* Every layer's key at once, layer i's at *keys + i * MW_KERAS_KEY_MAX (an allocation the
 * caller frees; MW_ENOMEM): each class is made snake-case once, where a key at a time costs
 * a pass over the layers before it (a file of a thousand layers read in seconds, not ms). */
mw_status mw_keras_layer_keys(const mw_model *m, char **keys);

/* 1 when layer l is a layer of its own in Keras' model (not an activation folded into the
 * Conv2D or Dense before it, which Keras keeps inside that layer, nor a part of a KerasHub
 * block other than its first layer, which stands for the block, nor a tied layer's second
 * call: a ReversibleEmbedding's reverse). */
int mw_keras_layer_is_own(const mw_layer *l);

#endif

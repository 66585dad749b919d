/* A layer's Keras variables as its row lists them (layer.h: mw_layer_ops.keras_vars): which
 * variables Keras gives the layer, in the order its build() creates them (the index i of
 * layers/<name>/vars/<i> in .weights.h5 and the order of layer.weights), with their Keras names
 * and shapes and where each lives in the parameter arena. The arena layouts ARE Keras'
 * layouts (Conv2D kernel (KH, KW, Cin, Cout), Dense kernel (in, out), row-major), so a variable
 * is one contiguous run of floats. worker/keras/keras_vars.h builds the files' table from it. */
#ifndef MW_WORKER_MODEL_KVARS_H
#define MW_WORKER_MODEL_KVARS_H

#include <stddef.h>

struct mw_layer;

/* Most variables one layer of this program lists (a MultiHeadAttention's 8, a BatchNormalization's
 * 4), and one Keras layer has: a KerasHub block is several of this program's layers, and a
 * ViTEncoder of 32 blocks has 16 per block and its LayerNormalization's 2. */
#define MW_KERAS_LAYER_VARS 16
#define MW_KERAS_MAX_VARS 640

/* Longest sublayer path in a layer's .weights.h5 group ("_self_attention_layer/query_dense",
 * "encoder_layers/vi_t_encoder_block_11/mha/query_dense"). */
#define MW_KERAS_SUB_MAX 96

typedef struct {
    const char *name;           /* Keras' variable path in the layer: "kernel", "bias", ..., or a
                                   sublayer's "query/kernel" (static) */
    char sub[MW_KERAS_SUB_MAX]; /* the sublayer whose variable it is in .weights.h5
                                   (layers/<key>/<sub>/vars/<idx>: MultiHeadAttention's
                                   "query_dense", a TransformerEncoder's
                                   "_self_attention_layer/query_dense", ...), "" for the layer's
                                   own (layers/<key>/vars/<idx>) */
    int idx;                    /* its index in that vars group */
    const struct mw_layer *l;   /* the model's layer that holds it (a part, for a KerasHub block) */
    size_t off;                 /* first float in the parameter arena */
    size_t count;               /* floats: the product of shape */
    int rank;
    long long shape[4];
    int trainable; /* 1: in model.trainable_variables, so the optimizer has slots for it */
    int integer;   /* an integer Keras keeps (Normalization's count, int32 under JAX): one float
                      in the arena, read from any integer type, written as int32 */
    int swap01;    /* 1: the arena holds it with its first two axes swapped, (shape[1], shape[0],
                      shape[2..]), where Keras has shape (Gemma's query kernel (H, D, head_dim),
                      kept (D, H, head_dim) as every attention's): every file's reader and
                      writer reorders with mw_kvar_swap01 */
} mw_keras_var;

/* Appends variable name (the layer's own: sub "", idx its place, trainable) at arena offset off,
 * count floats of shape (d0, ..., d[rank-1]), to v[*nv]; returns it, for a row to set sub, idx
 * or trainable (BatchNormalization's moving statistics are variables Keras does not train).
 * Raise MW_KERAS_MAX_VARS if a row needs more. */
mw_keras_var *mw_kvar_add(mw_keras_var *v, int *nv, const char *name, size_t off, size_t count,
                          int rank, long long d0, long long d1, long long d2, long long d3);

/* count floats of src, laid out (d0, d1, rest), into dst laid out (d1, d0, rest) (dst is not
 * src): a variable of swap01 from the arena to Keras' layout is (shape[1], shape[0]), back
 * (shape[0], shape[1]). */
void mw_kvar_swap01(const float *src, float *dst, long long d0, long long d1, size_t count);

#endif

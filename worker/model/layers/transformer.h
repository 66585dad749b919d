/* What KerasHub's blocks share (layers/transformer.c, layers/llama.c): each is one Keras layer
 * that this program builds from its own layers, its parts (mw_layer.block). */
#ifndef MW_WORKER_MODEL_LAYERS_TRANSFORMER_H
#define MW_WORKER_MODEL_LAYERS_TRANSFORMER_H

#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/model.h"

/* The layers added since first become parts of block (class cls, its first layer head): tagged
 * with the attribute path part of their variables in .weights.h5 and rank, the place of those
 * in the block's Keras weights, and named <block>/<sub>. */
void mw_block_tag(mw_model *m, int first, const char *block, const char *cls, int head,
                  const char *part, const char *sub, int rank);

/* name, or Keras' automatic one for the next block of class cls (base, base_1, ...) in buf. */
const char *mw_block_name(const mw_model *m, const char *cls, const char *base, const char *name,
                          char buf[64]);

/* The call's keyword arguments (inbound_nodes[0].kwargs): the padding mask (planned, or a named
 * input as mask_key: kmask, which the graph reader checked), training; with causal (a decoder),
 * use_causal_mask into *causal and encoder_sequence only as null; the other masks and the
 * caches only as null. */
mw_status mw_block_read_call(const mw_klayer *L, const json_t *kw, const char *mask_key, int kmask,
                             int *causal);

/* layer_norm_epsilon (0 < epsilon < 1; 1e-5 when absent) and the feed-forward activation (def
 * when absent or null; an element-wise one). */
mw_status mw_block_read_ff(const mw_klayer *L, const json_t *cfg, mw_activation def,
                           double *epsilon, mw_activation *act);

/* Where a KerasHub block's parts go: the model, the block's name and class, its first layer. */
typedef struct {
    mw_model *m;
    const char *block, *cls;
    int head;
} mw_block_at;
/* The mw_block_at of a block's configuration c (its fields m, block and head), class cls. */
#define MW_BLOCK_AT(c, cls) (&(const mw_block_at){(c)->m, (c)->block, (cls), (c)->head})
/* On layer in, a part of b whose weights have rank rank, named <block>/<sub> (part: its path in
 * .weights.h5), its last layer into *out: an RMS normalization of class rms (mw_rms_class)... */
mw_status mw_block_rmsnorm(const mw_block_at *b, int in, int rms, float epsilon, const char *part,
                           const char *sub, int rank, int *out);
/* ... a Dense(units) without bias, its kernel drawn by kinit, then act. */
mw_status mw_block_dense(const mw_block_at *b, int in, int units, mw_activation act,
                         const mw_init *kinit, const char *part, const char *sub, int rank,
                         int *out);
/* Add (mul 0) or Multiply (1) of x and y, a part without weights named <block>/<sub>. */
mw_status mw_block_merge(const mw_block_at *b, int x, int y, int mul, const char *sub, int *out);
/* What a KerasHub block of class cls checks first: one sequence as its input, its config's
 * keys against table (worker/model/keras_keys.h). */
mw_status mw_block_begin(const mw_klayer *L, const mw_model *m, const char *cls, const json_t *cfg,
                         const mw_kkey *table);
/* rc of building the block whose first layer is first: on a failure none of its layers stays,
 * and the model's message gets origin's prefix. */
mw_status mw_block_end(mw_model *m, int first, const char *origin, mw_status rc);

/* The block's input: the layer the call names (the last one when none; -1 the model's input)
 * into x, its shape into s; it must be a sequence (None, steps, features). */
mw_status mw_block_input(const mw_klayer *L, mw_model *m, int *x, int s[3]);
/* The block's call in R: its keyword arguments when it has some (mw_block_read_call, the mask
 * as mask_key), then its input (mw_block_input). */
mw_status mw_block_call(const struct mw_kread *R, const char *mask_key, int *causal, int *x,
                        int s[3]);

#endif

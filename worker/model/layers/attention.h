/* MultiHeadAttention: its builder and where its weights lie in its kernel block
 * (layers/attention.c). */
#ifndef MW_WORKER_MODEL_LAYERS_ATTENTION_H
#define MW_WORKER_MODEL_LAYERS_ATTENTION_H

#include <stddef.h>

#include "worker/model/model.h"

/* Keras MultiHeadAttention(num_heads, key_dim, value_dim, dropout, use_bias, output_shape
 * out_dim (0: the query's width)) called on the inputs set by mw_model_set_inputs (query,
 * value, and a key), with use_causal_mask causal. */
mw_status mw_model_add_mha(mw_model *m, const char *name, int heads, int key_dim, int value_dim,
                           int out_dim, int use_bias, float dropout, int causal);
/* KerasHub's LlamaAttention on the one input set (its query, key and value): heads query heads
 * on kv_heads key and value heads (grouped-query attention) of head_dim features, projected
 * without biases, the query and key rotated per head (RotaryEmbedding's rule with
 * max_wavelength, its scaling 1: KerasHub 0.32's LlamaRotaryEmbedding applies none), causal,
 * 1 / sqrt(head_dim), and the heads projected back to the input's width. */
mw_status mw_model_add_llama_attention(mw_model *m, const char *name, int heads, int kv_heads,
                                       int head_dim, float max_wavelength);
/* Where the query, key, value and output kernels (w, wn floats) and biases (b, bn; 0 floats
 * without use_bias) of a MultiHeadAttention lie in its kernel block (offsets from w_off), in
 * Keras' order: kernel, bias, kernel, bias, ... */
void mw_mha_parts(const mw_layer *l, size_t w[4], size_t wn[4], size_t b[4], size_t bn[4]);

#endif

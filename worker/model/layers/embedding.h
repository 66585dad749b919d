/* Embedding, and KerasHub's TokenAndPositionEmbedding, PositionEmbedding and
 * SinePositionEncoding: the builders of the embedding family (layers/embedding.c). */
#ifndef MW_WORKER_MODEL_LAYERS_EMBEDDING_H
#define MW_WORKER_MODEL_LAYERS_EMBEDDING_H

#include <stddef.h>

#include "worker/model/model.h"

/* Token ids travel as floats, exact below 2^24: the largest vocabulary. */
#define MW_EMBED_MAX_VOCAB (1 << 24)
/* Embedding(input_dim, output_dim): the model's input (None, T) of token ids (held as floats)
 * into (None, T, output_dim) (here (1, T, output_dim)); weights "embeddings" (input_dim,
 * output_dim), RandomUniform(-0.05, 0.05) unless the config says otherwise. The first layer
 * only: it reads the model's input. */
mw_status mw_model_add_embedding(mw_model *m, const char *name, int input_dim, int output_dim);
/* KerasHub's ReversibleEmbedding: an Embedding whose table a later reverse call (below) also
 * uses (tie 1), or whose weights hold the reverse call's own (D, V) kernel after the table
 * (tie 0: tie_weights=False). */
mw_status mw_model_add_reversible_embedding(mw_model *m, const char *name, int input_dim,
                                            int output_dim, int tie);
/* Its reverse call (MW_LAYER_REVEMB) on the current input (None, T, D) or (None, D): logits
 * (None, T, V) = x E^T of layer table's (V, D) table, its weights tied to that layer's. */
mw_status mw_model_add_reverse_embedding(mw_model *m, const char *name, int table);
/* Positions a position table may hold (KerasHub's sequence_length). */
#define MW_KMAX_POSITIONS (1 << 20)
/* KerasHub's TokenAndPositionEmbedding(vocabulary_size, sequence_length, embedding_dim): an
 * Embedding (kind MW_LAYER_EMBED) whose output adds row t of a position table (positions
 * rows) at step t; the kernel block holds the token table, then the position table. */
mw_status mw_model_add_token_position(mw_model *m, const char *name, int vocab, int positions,
                                      int dim);
/* KerasHub's PositionEmbedding(sequence_length): (None, T, D) into the first T rows of a
 * (positions, D) table, for every example (the input's values unused; Add it to them). */
mw_status mw_model_add_position_embedding(mw_model *m, const char *name, int positions);
/* KerasHub's SinePositionEncoding(max_wavelength): (None, T, D) into the sinusoid of
 * kernels.h's mw_sine_pos_fn (kind MW_LAYER_POSEMB without a table; max_wavelength in alpha). */
mw_status mw_model_add_sine_position(mw_model *m, const char *name, float max_wavelength);

#endif

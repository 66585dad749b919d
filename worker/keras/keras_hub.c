/* KerasHub's task models as Functional graphs; see keras_hub.h.
 *
 * Each builder below writes, for a model's arguments, the layer list KerasHub 0.32's Python
 * builds (keras_hub/src/models/<model>/<model>_backbone.py and the task's file): the same
 * classes with the same configs, called on the same tensors, in the same order. Keras numbers
 * the groups of .weights.h5 by class in that order, so the order is part of the format. The
 * graph goes through the Functional reader (keras_graph.c), so every layer's config is checked
 * there as in any model; here only the model's own arguments are, each against its table.
 * The entries are made of keras_hub_parts.h's pieces. */
#include "worker/keras/keras_hub.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "worker/keras/keras_hub_parts.h"
#include "worker/keras/keras_read.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/layers/embedding.h"

int mw_keras_hub_is(const json_t *model)
{
    const char *reg = json_string_value(json_object_get(model, "registered_name"));
    return reg && !strncmp(reg, "keras_hub>", 10);
}

/* ---- the backbones ------------------------------------------------------------------------ */

/* A backbone's arguments, read from its config against its table. */
typedef struct {
    int vocab, layers, heads, hidden, ff, max_len, segments;
    int kv_heads, tie;                      /* Llama: num_key_value_heads, tie_word_embeddings */
    int image[3], patch[2], mlp;            /* ViT: image_shape, patch_size, mlp_dim */
    int mha_bias, mlp_bias, class_token;    /* ViT: use_mha_bias, use_mlp_bias, use_class_token */
    int patch_bias;                         /* ViT: use_patch_bias */
    double att_dropout;                     /* ViT: attention_dropout */
    int pre_logits;                         /* ViTImageClassifier: intermediate_dim (0: none) */
    int gap;                                /* its pooling: "gap" (1) or "token" (0) */
    double wavelength, rope_scale, epsilon; /* Llama: RoPE's, its norms' */
    int head_dim, post_att, post_ffw;       /* Gemma: its use_post_attention_norm, _ffw_norm */
    double soft_cap;                        /* Gemma: final_logit_soft_cap (0: none) */
    double att_cap;                         /* Gemma: attention_logit_soft_cap (0: none) */
    int sliding, window; /* Gemma: use_sliding_window_attention, sliding_window_size */
    double dropout;
    const json_t *dtype;
    int classes;              /* a classifier task's num_classes */
    double head_dropout;      /* its dropout */
    const json_t *activation; /* its output's activation (borrowed from its config) */
} hub_args;

static const mw_kkey gpt2_keys[] = {
    MW_KREAD("vocabulary_size"),     MW_KREAD("num_layers"),
    MW_KREAD("num_heads"),           MW_KREAD("hidden_dim"),
    MW_KREAD("intermediate_dim"),    MW_KREAD("dropout"),
    MW_KREAD("max_sequence_length"), MW_KEND,
};

/* The arguments GPT-2's and BERT's backbones share (max_sequence_length's default: max_len). */
static mw_status text_args(const mw_klayer *L, const json_t *cfg, hub_args *a, int max_len)
{
    MW_TRY(mw_kget_int(L, cfg, "vocabulary_size", 0, 1, 1, 1 << 24, &a->vocab));
    MW_TRY(mw_kget_int(L, cfg, "num_layers", 0, 1, 1, 256, &a->layers));
    MW_TRY(mw_kget_int(L, cfg, "num_heads", 0, 1, 1, 1024, &a->heads));
    MW_TRY(mw_kget_int(L, cfg, "hidden_dim", 0, 1, 1, MW_KMAX_DIM, &a->hidden));
    MW_TRY(mw_kget_int(L, cfg, "intermediate_dim", 0, 1, 1, MW_KMAX_DIM, &a->ff));
    MW_TRY(
        mw_kget_int(L, cfg, "max_sequence_length", max_len, 0, 1, MW_KMAX_POSITIONS, &a->max_len));
    MW_TRY(mw_kget_num(L, "", cfg, "dropout", 0.1, &a->dropout));
    if (a->hidden % a->heads)
        return mw_kfail(L, MW_EMODEL, "hidden_dim %d is not a multiple of num_heads %d", a->hidden,
                        a->heads);
    return MW_OK;
}

static mw_status gpt2_args(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    MW_TRY(mw_kcheck_keys(L->origin, L->where, "GPT2Backbone", cfg, gpt2_keys, 1));
    return text_args(L, cfg, a, 1024);
}

/* num_layers KerasHub blocks of class cls (TransformerDecoder, TransformerEncoder) named
 * transformer_layer_<i> after layer prev (updated to the last), given the padding mask as
 * their call argument mask_arg; gelu_approximate, epsilon eps, kernels drawn by init. 0 when
 * out of memory. */
static int blocks(json_t *ls, const hub_args *a, const char *cls, double eps,
                  json_t *(*init)(double), int pre_norm, const char *mask_arg, char prev[64])
{
    char name[64];
    int ok = 1;
    for (int i = 0; ok && i < a->layers; i++) {
        snprintf(name, sizeof name, "transformer_layer_%d", i);
        ok = mw_khub_add(
            ls, cls, 1, name,
            json_pack("{s:i, s:i, s:f, s:o, s:f, s:o, s:{s:s, s:{}}, s:b}", "intermediate_dim",
                      a->ff, "num_heads", a->heads, "dropout", a->dropout, "activation",
                      mw_khub_gelu_approximate(), "layer_norm_epsilon", eps, "kernel_initializer",
                      init(0.02), "bias_initializer", "class_name", "Zeros", "config",
                      "normalize_first", pre_norm),
            a->dtype,
            mw_khub_call(json_pack("[o]", mw_khub_tensor(prev)),
                         json_pack("{s:o}", mask_arg, mw_khub_tensor("padding_mask"))));
        snprintf(prev, 64, "%s", name);
    }
    return ok;
}

/* GPT2Backbone: token and position embeddings, added, dropout, num_layers pre-norm
 * TransformerDecoders (gelu_approximate, epsilon 1e-5, RandomNormal(0.02)) given the padding
 * mask, a final LayerNormalization. */
static json_t *gpt2_layers(const hub_args *a)
{
    json_t *ls = json_array();
    const json_t *dt = a->dtype;
    int ok =
        ls && mw_khub_input(ls, "token_ids") &&
        mw_khub_add(ls, "ReversibleEmbedding", 1, "token_embedding",
                    json_pack("{s:i, s:i, s:o, s:b, s:b}", "input_dim", a->vocab, "output_dim",
                              a->hidden, "embeddings_initializer", mw_khub_normal(0.01),
                              "mask_zero", 0, "tie_weights", 1),
                    dt, mw_khub_on("token_ids")) &&
        mw_khub_add(ls, "PositionEmbedding", 1, "position_embedding",
                    json_pack("{s:i, s:o}", "sequence_length", a->max_len, "initializer",
                              mw_khub_normal(0.02)),
                    dt, mw_khub_on("token_embedding")) &&
        mw_khub_add(ls, "Add", 0, "embeddings_add", json_object(), dt,
                    mw_khub_call(json_pack("[[o, o]]", mw_khub_tensor("token_embedding"),
                                           mw_khub_tensor("position_embedding")),
                                 NULL)) &&
        mw_khub_add(ls, "Dropout", 0, "embeddings_dropout", json_pack("{s:f}", "rate", a->dropout),
                    dt, mw_khub_on("embeddings_add")) &&
        mw_khub_input(ls, "padding_mask");
    char prev[64] = "embeddings_dropout";
    ok = ok &&
         blocks(ls, a, "TransformerDecoder", 1e-5, mw_khub_normal, 1, "decoder_padding_mask", prev);
    ok = ok && mw_khub_add(ls, "LayerNormalization", 0, "layer_norm", mw_khub_layer_norm(1e-5), dt,
                           mw_khub_on(prev));
    return mw_khub_built(ls, ok);
}

static const mw_kkey bert_keys[] = {
    MW_KREAD("vocabulary_size"),     MW_KREAD("num_layers"),       MW_KREAD("num_heads"),
    MW_KREAD("hidden_dim"),          MW_KREAD("intermediate_dim"), MW_KREAD("dropout"),
    MW_KREAD("max_sequence_length"), MW_KREAD("num_segments"),     MW_KEND,
};

static mw_status bert_args(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    MW_TRY(mw_kcheck_keys(L->origin, L->where, "BertBackbone", cfg, bert_keys, 1));
    MW_TRY(text_args(L, cfg, a, 512));
    return mw_kget_int(L, cfg, "num_segments", 2, 0, 1, 1 << 16, &a->segments);
}

/* x[:, 0, :]: a sequence's first position (Keras' GetItem operation). */
static json_t *first_step(const char *layer)
{
    json_t *all = json_pack("{s:s, s:{s:n, s:n, s:n}}", "class_name", "__slice__", "config",
                            "start", "stop", "step");
    return mw_khub_call(json_pack("[o, [O, i, o]]", mw_khub_tensor(layer), all, 0, all), NULL);
}

/* BertBackbone: token (ReversibleEmbedding), position and segment embeddings added,
 * LayerNormalization (epsilon 1e-12), dropout, num_layers post-norm TransformerEncoders
 * given the padding mask, then the pooler: the first position's features, Dense(tanh). All
 * initializers TruncatedNormal(0.02). */
static json_t *bert_layers(const hub_args *a)
{
    json_t *ls = json_array();
    const json_t *dt = a->dtype;
    int ok =
        ls && mw_khub_input(ls, "token_ids") &&
        mw_khub_add(ls, "ReversibleEmbedding", 1, "token_embedding",
                    json_pack("{s:i, s:i, s:o, s:b, s:b}", "input_dim", a->vocab, "output_dim",
                              a->hidden, "embeddings_initializer", mw_khub_truncated(0.02),
                              "mask_zero", 0, "tie_weights", 1),
                    dt, mw_khub_on("token_ids")) &&
        mw_khub_input(ls, "segment_ids") &&
        mw_khub_add(ls, "PositionEmbedding", 1, "position_embedding",
                    json_pack("{s:i, s:o}", "sequence_length", a->max_len, "initializer",
                              mw_khub_truncated(0.02)),
                    dt, mw_khub_on("token_embedding")) &&
        mw_khub_add(ls, "Embedding", 0, "segment_embedding",
                    json_pack("{s:i, s:i, s:o, s:b}", "input_dim", a->segments, "output_dim",
                              a->hidden, "embeddings_initializer", mw_khub_truncated(0.02),
                              "mask_zero", 0),
                    dt, mw_khub_on("segment_ids")) &&
        mw_khub_add(ls, "Add", 0, "embeddings_add", json_object(), dt,
                    mw_khub_call(json_pack("[[o, o, o]]", mw_khub_tensor("token_embedding"),
                                           mw_khub_tensor("position_embedding"),
                                           mw_khub_tensor("segment_embedding")),
                                 NULL)) &&
        mw_khub_add(ls, "LayerNormalization", 0, "embeddings_layer_norm", mw_khub_layer_norm(1e-12),
                    dt, mw_khub_on("embeddings_add")) &&
        mw_khub_add(ls, "Dropout", 0, "embeddings_dropout", json_pack("{s:f}", "rate", a->dropout),
                    dt, mw_khub_on("embeddings_layer_norm")) &&
        mw_khub_input(ls, "padding_mask");
    char prev[64] = "embeddings_dropout";
    ok = ok &&
         blocks(ls, a, "TransformerEncoder", 1e-12, mw_khub_truncated, 0, "padding_mask", prev);
    ok = ok && mw_khub_add(ls, "GetItem", 0, "get_item", json_object(), dt, first_step(prev)) &&
         mw_khub_add(ls, "Dense", 0, "pooled_dense",
                     json_pack("{s:i, s:s, s:b, s:o}", "units", a->hidden, "activation", "tanh",
                               "use_bias", 1, "kernel_initializer", mw_khub_truncated(0.02)),
                     dt, mw_khub_on("get_item"));
    return mw_khub_built(ls, ok);
}

static const mw_kkey llama_keys[] = {
    MW_KREAD("vocabulary_size"),
    MW_KREAD("num_layers"),
    MW_KREAD("num_query_heads"),
    MW_KREAD("hidden_dim"),
    MW_KREAD("intermediate_dim"),
    MW_KREAD("num_key_value_heads"),
    MW_KREAD("rope_max_wavelength"),
    MW_KREAD("rope_position_scaling_factor"),
    MW_KDEF("rope_frequency_adjustment_factor", "null", "Llama 3.1's RoPE scaling"),
    MW_KDEF("rope_low_freq_factor", "null", "Llama 3.1's RoPE scaling"),
    MW_KDEF("rope_high_freq_factor", "null", "Llama 3.1's RoPE scaling"),
    MW_KDEF("rope_pretraining_sequence_length", "null", "Llama 3.1's RoPE scaling"),
    MW_KREAD("layer_norm_epsilon"),
    MW_KREAD("dropout"),
    MW_KREAD("tie_word_embeddings"),
    MW_KEND,
};

/* The arguments Llama's and Gemma's backbones share. */
static mw_status gqa_args(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    MW_TRY(mw_kget_int(L, cfg, "vocabulary_size", 0, 1, 1, 1 << 24, &a->vocab));
    MW_TRY(mw_kget_int(L, cfg, "num_layers", 0, 1, 1, 256, &a->layers));
    MW_TRY(mw_kget_int(L, cfg, "num_query_heads", 0, 1, 1, 1024, &a->heads));
    MW_TRY(mw_kget_int(L, cfg, "num_key_value_heads", 0, 1, 1, 1024, &a->kv_heads));
    MW_TRY(mw_kget_int(L, cfg, "hidden_dim", 0, 1, 1, MW_KMAX_DIM, &a->hidden));
    return mw_kget_int(L, cfg, "intermediate_dim", 0, 1, 1, MW_KMAX_DIM, &a->ff);
}

static mw_status llama_args(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    MW_TRY(mw_kcheck_keys(L->origin, L->where, "LlamaBackbone", cfg, llama_keys, 1));
    MW_TRY(gqa_args(L, cfg, a));
    MW_TRY(mw_kget_num(L, "", cfg, "rope_max_wavelength", 10000.0, &a->wavelength));
    MW_TRY(mw_kget_num(L, "", cfg, "rope_position_scaling_factor", 1.0, &a->rope_scale));
    MW_TRY(mw_kget_num(L, "", cfg, "layer_norm_epsilon", 1e-6, &a->epsilon));
    MW_TRY(mw_kget_num(L, "", cfg, "dropout", 0.0, &a->dropout));
    MW_TRY(mw_kget_bool(L, cfg, "tie_word_embeddings", 0, &a->tie));
    return MW_OK;
}

/* LlamaBackbone: the token embedding (tied or not), num_layers LlamaTransformerDecoders given
 * the padding mask, a final LlamaLayerNorm; initializers RandomNormal(0.01) and (0.02). The two
 * Llama classes are not registered under keras_hub> (Keras writes their bare class name as
 * registered_name): each entry names its module, which the rows read them from alone. */
static json_t *llama_layers(const hub_args *a)
{
    json_t *ls = json_array();
    const json_t *dt = a->dtype;
    int ok = ls && mw_khub_input(ls, "token_ids") &&
             mw_khub_add(ls, "ReversibleEmbedding", 1, "token_embedding",
                         json_pack("{s:i, s:i, s:o, s:b, s:b}", "input_dim", a->vocab, "output_dim",
                                   a->hidden, "embeddings_initializer", mw_khub_normal(0.01),
                                   "mask_zero", 0, "tie_weights", a->tie),
                         dt, mw_khub_on("token_ids")) &&
             mw_khub_input(ls, "padding_mask");
    char prev[64] = "token_embedding", name[64];
    for (int i = 0; ok && i < a->layers; i++) {
        snprintf(name, sizeof name, "transformer_layer_%d", i);
        ok = mw_khub_add(ls, "LlamaTransformerDecoder", 0, name,
                         json_pack("{s:i, s:i, s:i, s:f, s:f, s:n, s:n, s:n, s:s, s:f, s:o, s:f}",
                                   "intermediate_dim", a->ff, "num_query_heads", a->heads,
                                   "num_key_value_heads", a->kv_heads, "rope_max_wavelength",
                                   a->wavelength, "rope_scaling_factor", a->rope_scale,
                                   "rope_low_freq_factor", "rope_high_freq_factor",
                                   "rope_pretraining_sequence_length", "activation", "silu",
                                   "layer_norm_epsilon", a->epsilon, "kernel_initializer",
                                   mw_khub_normal(0.02), "dropout", a->dropout),
                         dt,
                         mw_khub_call(json_pack("[o]", mw_khub_tensor(prev)),
                                      json_pack("{s:o}", "decoder_padding_mask",
                                                mw_khub_tensor("padding_mask")))) &&
             mw_khub_in_module(ls, "keras_hub.src.models.llama.llama_decoder");
        snprintf(prev, sizeof prev, "%s", name);
    }
    ok = ok &&
         mw_khub_add(ls, "LlamaLayerNorm", 0, "sequence_output_layernorm",
                     json_pack("{s:f}", "epsilon", a->epsilon), dt, mw_khub_on(prev)) &&
         mw_khub_in_module(ls, "keras_hub.src.models.llama.llama_layernorm");
    return mw_khub_built(ls, ok);
}

static const mw_kkey gemma_keys[] = {
    MW_KREAD("vocabulary_size"),
    MW_KREAD("num_layers"),
    MW_KREAD("num_query_heads"),
    MW_KREAD("num_key_value_heads"),
    MW_KREAD("hidden_dim"),
    MW_KREAD("intermediate_dim"),
    MW_KREAD("head_dim"),
    MW_KREAD("layer_norm_epsilon"),
    MW_KDEF("dropout", "0|0.0", "dropout in the decoder blocks"),
    MW_KIGN("query_head_dim_normalize",
            "GemmaDecoderBlock passes True to its attention whatever it holds (KerasHub 0.32)"),
    MW_KREAD("use_post_ffw_norm"),
    MW_KREAD("use_post_attention_norm"),
    MW_KREAD("final_logit_soft_cap"),
    MW_KREAD("attention_logit_soft_cap"),
    MW_KREAD("use_sliding_window_attention"),
    MW_KREAD("sliding_window_size"),
    MW_KEND,
};

static mw_status gemma_args(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    MW_TRY(mw_kcheck_keys(L->origin, L->where, "GemmaBackbone", cfg, gemma_keys, 1));
    MW_TRY(gqa_args(L, cfg, a));
    MW_TRY(mw_kget_int(L, cfg, "head_dim", 0, 1, 1, MW_KMAX_DIM, &a->head_dim));
    MW_TRY(mw_kget_num(L, "", cfg, "layer_norm_epsilon", 1e-6, &a->epsilon));
    MW_TRY(mw_kget_bool(L, cfg, "use_post_ffw_norm", 0, &a->post_ffw));
    MW_TRY(mw_kget_bool(L, cfg, "use_post_attention_norm", 0, &a->post_att));
    MW_TRY(mw_kget_cap(L, cfg, "final_logit_soft_cap", &a->soft_cap));
    MW_TRY(mw_kget_cap(L, cfg, "attention_logit_soft_cap", &a->att_cap));
    MW_TRY(mw_kget_bool(L, cfg, "use_sliding_window_attention", 0, &a->sliding));
    return mw_kget_int(L, cfg, "sliding_window_size", 4096, 0, 1, INT_MAX, &a->window);
}

/* The compute dtype of a backbone's policy (its dtype: a name, or a policy object), as Keras
 * names a tensor's. */
static const char *compute_dtype(const json_t *dt)
{
    const char *n = json_is_string(dt)
                        ? json_string_value(dt)
                        : json_string_value(json_object_get(json_object_get(dt, "config"), "name"));
    return n && !strcmp(n, "mixed_bfloat16")  ? "bfloat16"
           : n && !strcmp(n, "mixed_float16") ? "float16"
                                              : "float32";
}

/* layer's output times the scalar v in the backbone's compute dtype (Keras writes it as
 * __tensor__): a Multiply operation named name (GemmaBackbone's
 * x * ops.cast(ops.sqrt(hidden_dim), x.dtype); a 16-bit Multiply rounds v at use). */
static int times(json_t *ls, const hub_args *a, const char *name, const char *layer, float v)
{
    json_t *e = json_pack("{s:s, s:s, s:{s:s}, s:s, s:s, s:o}", "module", "keras.src.ops.numpy",
                          "class_name", "Multiply", "config", "name", name, "registered_name",
                          "Multiply", "name", name, "inbound_nodes",
                          mw_khub_call(json_pack("[o, {s:s, s:{s:f, s:s}}]", mw_khub_tensor(layer),
                                                 "class_name", "__tensor__", "config", "value",
                                                 (double)v, "dtype", compute_dtype(a->dtype)),
                                       NULL));
    return e && json_array_append_new(ls, e) == 0;
}

/* Decoder block i's config: the backbone's arguments, the attention's soft cap (null: none),
 * the sliding window on the even blocks alone (GemmaBackbone's i % 2 == 0). */
static json_t *gemma_block(const hub_args *a, int i)
{
    return json_pack(
        "{s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:b, s:b, s:o, s:b, s:i, s:b}", "hidden_dim",
        a->hidden, "intermediate_dim", a->ff, "head_dim", a->head_dim, "num_query_heads", a->heads,
        "num_key_value_heads", a->kv_heads, "layer_norm_epsilon", a->epsilon, "dropout", 0,
        "use_post_ffw_norm", a->post_ffw, "use_post_attention_norm", a->post_att, "logit_soft_cap",
        a->att_cap > 0.0 ? json_real(a->att_cap) : json_null(), "use_sliding_window_attention",
        a->sliding && i % 2 == 0, "sliding_window_size", a->window, "query_head_dim_normalize", 1);
}

/* GemmaBackbone: the tied token embedding times sqrt(hidden_dim), num_layers GemmaDecoderBlocks
 * given the padding mask, a final RMSNormalization (Gemma's: (1 + scale)). The two Gemma
 * classes are not registered under keras_hub>: each entry names its module. */
static json_t *gemma_layers(const hub_args *a)
{
    json_t *ls = json_array();
    const json_t *dt = a->dtype;
    json_t *init =
        json_pack("{s:s, s:{s:f, s:s, s:s, s:n}}", "class_name", "VarianceScaling", "config",
                  "scale", 1.0, "mode", "fan_in", "distribution", "untruncated_normal", "seed");
    int ok = ls && mw_khub_input(ls, "token_ids") &&
             mw_khub_add(ls, "ReversibleEmbedding", 1, "token_embedding",
                         json_pack("{s:i, s:i, s:o, s:b, s:b}", "input_dim", a->vocab, "output_dim",
                                   a->hidden, "embeddings_initializer", init, "mask_zero", 0,
                                   "tie_weights", 1),
                         dt, mw_khub_on("token_ids")) &&
             mw_khub_input(ls, "padding_mask") &&
             times(ls, a, "multiply", "token_embedding", sqrtf((float)a->hidden));
    char prev[64] = "multiply", name[64];
    for (int i = 0; ok && i < a->layers; i++) {
        snprintf(name, sizeof name, "decoder_block_%d", i);
        ok = mw_khub_add(ls, "GemmaDecoderBlock", 0, name, gemma_block(a, i), dt,
                         mw_khub_call(
                             json_pack("[o]", mw_khub_tensor(prev)),
                             json_pack("{s:o}", "padding_mask", mw_khub_tensor("padding_mask")))) &&
             mw_khub_in_module(ls, "keras_hub.src.models.gemma.gemma_decoder_block");
        snprintf(prev, sizeof prev, "%s", name);
    }
    ok = ok &&
         mw_khub_add(ls, "RMSNormalization", 0, "final_normalization",
                     json_pack("{s:f}", "epsilon", a->epsilon), dt, mw_khub_on(prev)) &&
         mw_khub_in_module(ls, "keras_hub.src.models.gemma.rms_normalization");
    return mw_khub_built(ls, ok);
}

static const mw_kkey vit_keys[] = {
    MW_KREAD("image_shape"),
    MW_KREAD("patch_size"),
    MW_KREAD("num_layers"),
    MW_KREAD("num_heads"),
    MW_KREAD("hidden_dim"),
    MW_KREAD("mlp_dim"),
    MW_KREAD("dropout_rate"),
    MW_KREAD("attention_dropout"),
    MW_KREAD("layer_norm_epsilon"),
    MW_KREAD("use_mha_bias"),
    MW_KREAD("use_mlp_bias"),
    MW_KREAD("use_class_token"),
    MW_KREAD("use_patch_bias"),
    MW_KDEF("data_format", "null|\"channels_last\"", "channels-first images"),
    MW_KEND,
};

/* patch_size: n, or [h, w]. */
static mw_status vit_patch(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    const json_t *p = json_object_get(cfg, "patch_size");
    if (json_is_array(p) && json_array_size(p) == 2 &&
        mw_kas_int(json_array_get(p, 0), 1, MW_KMAX_DIM, &a->patch[0]) &&
        mw_kas_int(json_array_get(p, 1), 1, MW_KMAX_DIM, &a->patch[1]))
        return MW_OK;
    MW_TRY(mw_kget_int(L, cfg, "patch_size", 0, 1, 1, MW_KMAX_DIM, &a->patch[0]));
    a->patch[1] = a->patch[0];
    return MW_OK;
}

static mw_status vit_args(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    MW_TRY(mw_kcheck_keys(L->origin, L->where, "ViTBackbone", cfg, vit_keys, 1));
    const json_t *im = json_object_get(cfg, "image_shape");
    mw_kdbuf d;
    for (int k = 0; k < 3; k++)
        if (json_array_size(im) != 3 ||
            !mw_kas_int(json_array_get(im, (size_t)k), 1, MW_KMAX_DIM, &a->image[k]))
            return mw_kfail(L, MW_EMODEL,
                            "image_shape: found %s; expected [height, width, channels]",
                            mw_kdescribe(d, im));
    MW_TRY(vit_patch(L, cfg, a));
    if (a->image[0] % a->patch[0] || a->image[1] % a->patch[1])
        return mw_kfail(L, MW_EMODEL, "image_shape %dx%d is not a multiple of patch_size %dx%d",
                        a->image[0], a->image[1], a->patch[0], a->patch[1]);
    MW_TRY(mw_kget_int(L, cfg, "num_layers", 0, 1, 1, 256, &a->layers));
    MW_TRY(mw_kget_int(L, cfg, "num_heads", 0, 1, 1, 1024, &a->heads));
    MW_TRY(mw_kget_int(L, cfg, "hidden_dim", 0, 1, 1, MW_KMAX_DIM, &a->hidden));
    MW_TRY(mw_kget_int(L, cfg, "mlp_dim", 0, 1, 1, MW_KMAX_DIM, &a->mlp));
    MW_TRY(mw_kget_num(L, "", cfg, "dropout_rate", 0.0, &a->dropout));
    MW_TRY(mw_kget_num(L, "", cfg, "attention_dropout", 0.0, &a->att_dropout));
    MW_TRY(mw_kget_num(L, "", cfg, "layer_norm_epsilon", 1e-6, &a->epsilon));
    MW_TRY(mw_kget_bool(L, cfg, "use_mha_bias", 1, &a->mha_bias));
    MW_TRY(mw_kget_bool(L, cfg, "use_mlp_bias", 1, &a->mlp_bias));
    MW_TRY(mw_kget_bool(L, cfg, "use_patch_bias", 1, &a->patch_bias));
    return mw_kget_bool(L, cfg, "use_class_token", 1, &a->class_token);
}

/* ViTBackbone: the images, ViTPatchingAndEmbedding, ViTEncoder (their configs as their
 * get_config writes them; not registered with Keras: no keras_hub> registered_name, their
 * module names them, as Keras writes them). */
static json_t *vit_layers(const hub_args *a)
{
    json_t *ls = json_array();
    const int patches = (a->image[0] / a->patch[0]) * (a->image[1] / a->patch[1]);
    json_t *img =
        json_pack("{s:s, s:s, s:{s:s, s:[n, i, i, i], s:s}, s:[]}", "class_name", "InputLayer",
                  "name", "images", "config", "name", "images", "batch_shape", a->image[0],
                  a->image[1], a->image[2], "dtype", "float32", "inbound_nodes");
    int ok =
        ls && img && json_array_append_new(ls, img) == 0 &&
        mw_khub_add(ls, "ViTPatchingAndEmbedding", 0, "vit_patching_and_embedding",
                    json_pack("{s:[i, i], s:[i, i], s:i, s:i, s:i, s:i, s:b, s:b}", "image_size",
                              a->image[0], a->image[1], "patch_size", a->patch[0], a->patch[1],
                              "hidden_dim", a->hidden, "num_channels", a->image[2], "num_patches",
                              patches, "num_positions", patches + (a->class_token ? 1 : 0),
                              "use_class_token", a->class_token, "use_patch_bias", a->patch_bias),
                    a->dtype, mw_khub_on("images")) &&
        mw_khub_in_module(ls, "keras_hub.src.models.vit.vit_layers") &&
        mw_khub_add(ls, "ViTEncoder", 0, "vit_encoder",
                    json_pack("{s:i, s:i, s:i, s:i, s:b, s:b, s:f, s:f, s:f}", "num_layers",
                              a->layers, "num_heads", a->heads, "hidden_dim", a->hidden, "mlp_dim",
                              a->mlp, "use_mha_bias", a->mha_bias, "use_mlp_bias", a->mlp_bias,
                              "dropout_rate", a->dropout, "attention_dropout", a->att_dropout,
                              "layer_norm_epsilon", a->epsilon),
                    a->dtype, mw_khub_on("vit_patching_and_embedding")) &&
        mw_khub_in_module(ls, "keras_hub.src.models.vit.vit_layers");
    return mw_khub_built(ls, ok);
}

/* ---- the task models ---------------------------------------------------------------------- */

/* A causal LM's head: the reverse call of the backbone's token embedding (the tied output
 * projection) on its output. */
static int lm_head(json_t *ls, const char *bb, const hub_args *a, const char **out)
{
    json_t *rev = json_pack(
        "{s:s, s:s, s:s, s:{s:s}, s:o}", "class_name", "ReversibleEmbedding", "registered_name",
        "keras_hub>ReversibleEmbedding", "name", "token_embedding", "config", "name",
        "token_embedding", "inbound_nodes",
        mw_khub_call(json_pack("[o]", mw_khub_tensor(bb)), json_pack("{s:b}", "reverse", 1)));
    /* the backbone's token_embedding: its policy (reverse_dtype null: the logits in the
     * compute dtype, 16 bits under a mixed policy) */
    if (rev && a->dtype)
        json_object_set(json_object_get(rev, "config"), "dtype", (json_t *)a->dtype);
    *out = "token_embedding";
    return rev && json_array_append_new(ls, rev) == 0;
}

/* GemmaCausalLM's head: the reverse call, then with final_logit_soft_cap c the logits
 * tanh(x / c) * c (ReversibleEmbedding's logit_soft_cap) as x times 1 / c (float32: within an
 * ulp of Keras' division), an Activation(tanh) and a product by c. */
static int gemma_head(json_t *ls, const char *bb, const hub_args *a, const char **out)
{
    if (!lm_head(ls, bb, a, out))
        return 0;
    if (!(a->soft_cap > 0.0))
        return 1;
    *out = "soft_cap";
    return times(ls, a, "soft_cap_scaled", "token_embedding", (float)(1.0 / a->soft_cap)) &&
           mw_khub_add(ls, "Activation", 0, "soft_cap_tanh",
                       json_pack("{s:s}", "activation", "tanh"), a->dtype,
                       mw_khub_on("soft_cap_scaled")) &&
           times(ls, a, "soft_cap", "soft_cap_tanh", (float)a->soft_cap);
}

/* A text classifier's head: Dropout and Dense(num_classes, activation) on the pooled output. */
static int classifier_head(json_t *ls, const char *bb, const hub_args *a, const char **out)
{
    *out = "logits";
    json_t *act = a->activation ? json_incref((json_t *)a->activation) : json_string("linear");
    return mw_khub_add(ls, "Dropout", 0, "classifier_dropout",
                       json_pack("{s:f}", "rate", a->head_dropout), a->dtype, mw_khub_on(bb)) &&
           mw_khub_add(ls, "Dense", 0, "logits",
                       json_pack("{s:i, s:o, s:b, s:o}", "units", a->classes, "activation", act,
                                 "use_bias", 1, "kernel_initializer", mw_khub_truncated(0.02)),
                       a->dtype, mw_khub_on("classifier_dropout"));
}

/* ViT's pooling: the class token's features (pooling "token": x[:, 0], Keras' GetItem) or
 * the mean over every position, the class token's too ("gap": ops.mean(x, axis=[1]), Keras'
 * Mean operation, which writes no dtype). */
static int vit_pool(json_t *ls, const char *bb, const hub_args *a, const char **prev)
{
    if (a->gap) {
        *prev = "mean";
        return mw_khub_add(ls, "Mean", 0, "mean",
                           json_pack("{s:[i], s:b}", "axis", 1, "keepdims", 0), NULL,
                           mw_khub_on(bb)) &&
               mw_khub_in_module(ls, "keras.src.ops.numpy");
    }
    json_t *all = json_pack("{s:s, s:{s:n, s:n, s:n}}", "class_name", "__slice__", "config",
                            "start", "stop", "step");
    *prev = "get_item";
    return mw_khub_add(ls, "GetItem", 0, "get_item", json_object(), a->dtype,
                       mw_khub_call(json_pack("[o, [o, i]]", mw_khub_tensor(bb), all, 0), NULL));
}

/* ViTImageClassifier's head: the pooled features, the optional Dense(intermediate_dim, tanh)
 * pre_logits, Dropout, Dense(num_classes). */
static int vit_head(json_t *ls, const char *bb, const hub_args *a, const char **out)
{
    json_t *act = a->activation ? json_incref((json_t *)a->activation) : json_null();
    *out = "predictions";
    const char *prev = NULL;
    int ok = vit_pool(ls, bb, a, &prev);
    if (ok && a->pre_logits) {
        ok = mw_khub_add(ls, "Dense", 0, "pre_logits",
                         json_pack("{s:i, s:s, s:b}", "units", a->pre_logits, "activation", "tanh",
                                   "use_bias", 1),
                         a->dtype, mw_khub_on(prev));
        prev = "pre_logits";
    }
    ok = ok &&
         mw_khub_add(ls, "Dropout", 0, "output_dropout",
                     json_pack("{s:f}", "rate", a->head_dropout), a->dtype, mw_khub_on(prev)) &&
         mw_khub_add(
             ls, "Dense", 0, "predictions",
             json_pack("{s:i, s:o, s:b}", "units", a->classes, "activation", act, "use_bias", 1),
             a->dtype, mw_khub_on("output_dropout"));
    if (!ok)
        json_decref(act);
    return ok;
}

static const mw_kkey vit_task_keys[] = {
    MW_KREAD("backbone"),
    MW_KIGN("preprocessor", "the image converter runs in Python: the data are its output"),
    MW_KREAD("num_classes"),
    MW_KREAD("pooling"),
    MW_KREAD("intermediate_dim"),
    MW_KREAD("activation"),
    MW_KREAD("dropout"),
    MW_KDEF("head_dtype", "null", "a head of another dtype policy"),
    MW_KEND,
};

/* The keys of a task model's config: its backbone, its preprocessor (Python: mwtrain trains on
 * the token ids it produced), its name; a classifier's head. */
static const mw_kkey lm_keys[] = {
    MW_KREAD("backbone"),
    MW_KIGN("preprocessor", "the tokenizer runs in Python: the data are the ids it produced"),
    MW_KEND,
};
static const mw_kkey classifier_keys[] = {
    MW_KREAD("backbone"),
    MW_KIGN("preprocessor", "the tokenizer runs in Python: the data are the ids it produced"),
    MW_KREAD("num_classes"),
    MW_KREAD("activation"),
    MW_KREAD("dropout"),
    MW_KEND,
};

static mw_status classifier_args(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    MW_TRY(mw_kget_int(L, cfg, "num_classes", 0, 1, 1, 1 << 24, &a->classes));
    MW_TRY(mw_kget_num(L, "", cfg, "dropout", 0.1, &a->head_dropout));
    a->activation = json_object_get(cfg, "activation");
    if (a->activation && !json_is_string(a->activation) && !json_is_null(a->activation)) {
        mw_kdbuf d;
        return mw_kfail(L, MW_EUNSUPPORTED, "activation: found %s; expected a Keras name",
                        mw_kdescribe(d, a->activation));
    }
    if (json_is_null(a->activation))
        a->activation = NULL;
    return MW_OK;
}

static mw_status vit_task_args(const mw_klayer *L, const json_t *cfg, hub_args *a)
{
    MW_TRY(classifier_args(L, cfg, a));
    const json_t *pool = json_object_get(cfg, "pooling");
    const char *p = json_string_value(pool);
    mw_kdbuf d;
    if (pool && !(p && (!strcmp(p, "token") || !strcmp(p, "gap"))))
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "pooling: found %s; supported: \"token\" (the class token's features) "
                        "or \"gap\" (the mean over every position)",
                        mw_kdescribe(d, pool));
    a->gap = p && !strcmp(p, "gap");
    const json_t *im = json_object_get(cfg, "intermediate_dim");
    if (im && !json_is_null(im))
        MW_TRY(mw_kget_int(L, cfg, "intermediate_dim", 0, 1, 1, MW_KMAX_DIM, &a->pre_logits));
    return MW_OK;
}

typedef struct {
    const char *task, *backbone, *snake; /* classes; the backbone's group in .weights.h5 */
    mw_status (*args)(const mw_klayer *L, const json_t *cfg, hub_args *a); /* the backbone's */
    json_t *(*layers)(const hub_args *a);
    const char *const *inputs; /* the backbone's, in its input_layers' order */
    const char *output;        /* the backbone's output the task reads: its last layer's */
    const mw_kkey *task_keys;
    mw_status (*task_args)(const mw_klayer *L, const json_t *cfg, hub_args *a); /* or NULL */
    int (*head)(json_t *ls, const char *bb, const hub_args *a, const char **out);
} hub_model;

static const char *const token_inputs[] = {"token_ids", "padding_mask", NULL};
static const char *const bert_inputs[] = {"token_ids", "segment_ids", "padding_mask", NULL};
static const char *const image_inputs[] = {"images", NULL};

static const hub_model models[] = {
    {"GPT2CausalLM", "GPT2Backbone", "gpt2_backbone", gpt2_args, gpt2_layers, token_inputs,
     "layer_norm", lm_keys, NULL, lm_head},
    {"BertTextClassifier", "BertBackbone", "bert_backbone", bert_args, bert_layers, bert_inputs,
     "pooled_dense", classifier_keys, classifier_args, classifier_head},
    {"LlamaCausalLM", "LlamaBackbone", "llama_backbone", llama_args, llama_layers, token_inputs,
     "sequence_output_layernorm", lm_keys, NULL, lm_head},
    {"GemmaCausalLM", "GemmaBackbone", "gemma_backbone", gemma_args, gemma_layers, token_inputs,
     "final_normalization", lm_keys, NULL, gemma_head},
    {"ViTImageClassifier", "ViTBackbone", "vi_t_backbone", vit_args, vit_layers, image_inputs,
     "vit_encoder", vit_task_keys, vit_task_args, vit_head},
};
#define NMODELS (sizeof models / sizeof *models)

const char *mw_keras_hub_tasks(void)
{
    static char list[256];
    if (!list[0])
        for (size_t i = 0; i < NMODELS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     models[i].task);
    return list;
}

/* The task: its inputs, the backbone (a nested Functional) on them, its head on the backbone's
 * output. */
static json_t *task_model(const hub_model *hm, const hub_args *a, const char *task_name,
                          const char *bb_name, json_t *bb_layers)
{
    json_t *ins = json_array(), *refs = json_array(), *ls = json_array();
    for (int k = 0; hm->inputs[k] && ls && ins && refs; k++) {
        json_array_append_new(ins, json_pack("[s, i, i]", hm->inputs[k], 0, 0));
        json_array_append_new(refs, mw_khub_tensor(hm->inputs[k]));
        json_t *own = NULL; /* the task's InputLayer: the backbone's own, copied */
        for (size_t j = 0; j < json_array_size(bb_layers) && !own; j++) {
            const json_t *e = json_array_get(bb_layers, j);
            const char *n = json_string_value(json_object_get(e, "name"));
            if (n && !strcmp(n, hm->inputs[k]))
                own = json_deep_copy(e);
        }
        if (!own || json_array_append_new(ls, own) != 0)
            json_decref(ls), ls = NULL;
    }
    json_t *bb = json_pack("{s:s, s:s, s:{s:s, s:o, s:O, s:[[s, i, i]]}, s:o}", "class_name",
                           "Functional", "name", bb_name, "config", "name", bb_name, "layers",
                           bb_layers, "input_layers", ins, "output_layers", hm->output, 0, 0,
                           "inbound_nodes", mw_khub_call(json_pack("[O]", refs), NULL));
    json_t *out = NULL;
    const char *last = NULL;
    if (ls && bb && json_array_append_new(ls, bb) == 0 && hm->head(ls, bb_name, a, &last))
        out = json_pack("{s:s, s:{s:s, s:O, s:O, s:[[s, i, i]]}}", "class_name", "Functional",
                        "config", "name", task_name, "layers", ls, "input_layers", ins,
                        "output_layers", last, 0, 0);
    json_decref(ls), json_decref(ins), json_decref(refs);
    return out;
}

static mw_status find_task(const char *origin, const char *cls, const hub_model **hm)
{
    mw_kqbuf q;
    for (size_t i = 0; i < NMODELS; i++)
        if (!strcmp(cls, models[i].task)) {
            *hm = &models[i];
            return MW_OK;
        }
    return mw_keras_fail_at(origin, MW_EUNSUPPORTED,
                            "class_name %s: this KerasHub model is not read; supported: the task "
                            "models %s (a backbone alone has no output layer to train)",
                            mw_kquote(q, cls), mw_keras_hub_tasks());
}

mw_status mw_keras_hub_expand(const char *origin, const json_t *model, json_t **out,
                              const char **backbone)
{
    const char *cls = json_string_value(json_object_get(model, "class_name"));
    const json_t *cfg = json_object_get(model, "config");
    const hub_model *hm = NULL;
    MW_TRY(find_task(origin, cls ? cls : "", &hm));
    mw_klayer L = {origin, "", MW_POLICY_FLOAT32, NULL};
    snprintf(L.where, sizeof L.where, "%s", hm->task);
    MW_TRY(mw_kcheck_keys(origin, L.where, hm->task, cfg, hm->task_keys, 1));
    hub_args a = {0};
    if (hm->task_args)
        MW_TRY(hm->task_args(&L, cfg, &a));
    const json_t *bb = json_object_get(cfg, "backbone");
    const char *bcls = json_string_value(json_object_get(bb, "class_name"));
    const json_t *bcfg = json_object_get(bb, "config");
    mw_kqbuf q;
    if (!bcls || strcmp(bcls, hm->backbone) != 0 || !json_is_object(bcfg))
        return mw_kfail(&L, MW_EMODEL, "config.backbone: class_name %s; expected %s with a config",
                        mw_kquote(q, bcls ? bcls : "(none)"), hm->backbone);
    snprintf(L.where, sizeof L.where, "%s: backbone (%s)", hm->task, hm->backbone);
    MW_TRY(hm->args(&L, bcfg, &a));
    a.dtype = json_object_get(bcfg, "dtype");
    const char *tname = json_string_value(json_object_get(cfg, "name"));
    const char *bname = json_string_value(json_object_get(bcfg, "name"));
    json_t *layers = hm->layers(&a);
    *out = layers ? task_model(hm, &a, tname ? tname : hm->snake, bname ? bname : hm->snake, layers)
                  : NULL;
    if (!*out)
        return mw_keras_fail_at(origin, MW_ENOMEM, "%s: out of memory", hm->task);
    *backbone = hm->snake;
    return MW_OK;
}

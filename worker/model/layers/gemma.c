/* KerasHub's GemmaDecoderBlock (keras_hub/src/models/gemma/gemma_decoder_block.py, 0.32), read
 * from its config and built from this program's own layers as KerasHub computes it. On an input
 * (None, T, D), with H = num_query_heads, G = num_key_value_heads:
 *
 *     n = RMSNormalization(x)               pre_attention_norm: x / rms(x) * (1 + scale)
 *     a = CachedGemmaAttention(n)           attention: query (H, D, head_dim), key and value
 *                                           (G, D, head_dim) EinsumDense without biases (kept
 *                                           (D, H, head_dim) here: mw_mha.gemma), query and key
 *                                           rotated per head (RotaryEmbedding, wavelength
 *                                           10000; Gemma then interleaves the two halves of
 *                                           both alike, which leaves their products as they
 *                                           are), query head h on key head h / (H / G), scores
 *                                           times 1 / sqrt(head_dim) (the block always passes
 *                                           query_head_dim_normalize=True to its attention),
 *                                           causal, the padding mask on the keys, a step with
 *                                           every key masked 0, output (H, head_dim, D)
 *     a = RMSNormalization(a)               post_attention_norm (use_post_attention_norm)
 *     s = x + a
 *     f = RMSNormalization(s)               pre_ffw_norm
 *     g = gelu_tanh(f @ ffw_gating)         (D, intermediate_dim / 2), no bias
 *     u = f @ ffw_gating_2                  (D, intermediate_dim / 2)
 *     d = (g * u) @ ffw_linear              (intermediate_dim / 2, D)
 *     d = RMSNormalization(d)               post_ffw_norm (use_post_ffw_norm)
 *     y = s + d
 *
 * The parts keep the block one Keras layer (layers/transformer.h), its weights in Keras' order
 * (part_rank). Gemma 2's logit_soft_cap caps the attention's scores (c tanh(s / c)) and its
 * use_sliding_window_attention masks the keys sliding_window_size or more steps away
 * (mw_attn_geom). Under a mixed policy the attention computes as KerasHub's einsum path does
 * (its path on a CPU, and on a GPU under a soft cap): the scaled query, the scores and the
 * cap's steps 16-bit tensors (mw_attn_geom.half_scores), on every device. Refused: dropout, the
 * padding mask of Embedding(mask_zero=True) reaching it (worker/model/masks.c: Keras' block
 * drops it). */
#include <limits.h>
#include <string.h>

#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/layer.h"
#include "worker/model/layers/activation.h"
#include "worker/model/layers/attention.h"
#include "worker/model/layers/dense.h"
#include "worker/model/layers/merge.h"
#include "worker/model/layers/rmsnorm.h"
#include "worker/model/layers/transformer.h"
#include "worker/model/model.h"

#define CLS "GemmaDecoderBlock"

typedef struct {
    int heads, kv_heads, head_dim, ff, hidden;
    int post_att, post_ffw; /* use_post_attention_norm, use_post_ffw_norm */
    int kmask;              /* 1 + the named input given as padding_mask (mw_mha.kmask); 0: none */
    double epsilon;
    double soft_cap; /* logit_soft_cap; 0: none */
    int window;      /* sliding_window_size with use_sliding_window_attention; 0: none */
    mw_model *m;
    const char *block;
    int head; /* the block's first layer */
} gemma_cfg;

/* The ranks of the parts' weights: Keras' order, its __init__'s (the post norms before the
 * attention and the gates). */
enum { R_PRE_ATT, R_POST_ATT, R_ATT, R_PRE_FFW, R_POST_FFW, R_GATE, R_GATE2, R_LINEAR };

static mw_status norm(const gemma_cfg *c, int in, const char *part, int rank, int *out)
{
    return mw_block_rmsnorm(MW_BLOCK_AT(c, CLS), in, MW_RMS_GEMMA, (float)c->epsilon, part, part,
                            rank, out);
}

/* EinsumDense without bias (Keras' glorot_uniform kernel), then act. */
static mw_status dense(const gemma_cfg *c, int in, int units, mw_activation act, const char *part,
                       int rank, int *out)
{
    static const mw_init glorot = {.kind = MW_INIT_GLOROT_UNIFORM};
    return mw_block_dense(MW_BLOCK_AT(c, CLS), in, units, act, &glorot, part, part, rank, out);
}

static mw_status attention(const gemma_cfg *c, int in, int *out)
{
    static const mw_init glorot = {.kind = MW_INIT_GLOROT_UNIFORM}, zeros = {.kind = MW_INIT_ZEROS};
    const int first = c->m->nlayers, qv[2] = {in, in};
    MW_TRY(mw_model_set_inputs(c->m, qv, 2));
    MW_TRY(mw_model_add_llama_attention(c->m, "attention", c->heads, c->kv_heads, c->head_dim,
                                        10000.0f));
    MW_TRY(mw_model_set_init(c->m, &glorot, &zeros));
    mw_layer *l = &c->m->layers[first];
    l->cls = "CachedGemmaAttention";
    l->mha.gemma = 1;
    /* KerasHub merges the padding mask into the causal one (batch, T, T): keys only */
    l->mha.keys_only = 1;
    l->mha.kmask = c->kmask;
    l->mha.soft_cap = (float)c->soft_cap;
    l->mha.window = c->window;
    mw_block_tag(c->m, first, c->block, CLS, c->head, "attention", "attention", R_ATT);
    *out = c->m->nlayers - 1;
    return MW_OK;
}

/* The block on input x (a layer index, -1 the model's input). */
static mw_status build(const gemma_cfg *c, int x)
{
    int n, a, s, f, g, u, p, d, y;
    MW_TRY(norm(c, x, "pre_attention_norm", R_PRE_ATT, &n));
    MW_TRY(attention(c, n, &a));
    if (c->post_att)
        MW_TRY(norm(c, a, "post_attention_norm", R_POST_ATT, &a));
    MW_TRY(mw_block_merge(MW_BLOCK_AT(c, CLS), x, a, 0, "attention_residual", &s));
    MW_TRY(norm(c, s, "pre_ffw_norm", R_PRE_FFW, &f));
    MW_TRY(dense(c, f, c->ff / 2, MW_ACT_GELU_APPROXIMATE, "gating_ffw", R_GATE, &g));
    MW_TRY(dense(c, f, c->ff / 2, MW_ACT_LINEAR, "gating_ffw_2", R_GATE2, &u));
    MW_TRY(mw_block_merge(MW_BLOCK_AT(c, CLS), g, u, 1, "feedforward_gate", &p));
    MW_TRY(dense(c, p, c->hidden, MW_ACT_LINEAR, "ffw_linear", R_LINEAR, &d));
    if (c->post_ffw)
        MW_TRY(norm(c, d, "post_ffw_norm", R_POST_FFW, &d));
    return mw_block_merge(MW_BLOCK_AT(c, CLS), d, s, 0, "feedforward_residual", &y);
}

/* The keys KerasHub 0.32 writes for GemmaDecoderBlock (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {
    MW_KREAD("hidden_dim"),
    MW_KREAD("intermediate_dim"),
    MW_KREAD("head_dim"),
    MW_KREAD("num_query_heads"),
    MW_KREAD("num_key_value_heads"),
    MW_KREAD("layer_norm_epsilon"),
    MW_KDEF("dropout", "0|0.0", "dropout of the attention's probabilities and output"),
    MW_KREAD("use_post_ffw_norm"),
    MW_KREAD("use_post_attention_norm"),
    MW_KREAD("logit_soft_cap"),
    MW_KREAD("use_sliding_window_attention"),
    MW_KREAD("sliding_window_size"),
    MW_KIGN("query_head_dim_normalize",
            "the block passes True to its attention whatever it holds (KerasHub 0.32)"),
    MW_KEND,
};

static mw_status read_cfg(const mw_klayer *L, const json_t *cfg, gemma_cfg *c)
{
    MW_TRY(mw_kget_int(L, cfg, "hidden_dim", 0, 1, 1, MW_KMAX_DIM, &c->hidden));
    MW_TRY(mw_kget_int(L, cfg, "intermediate_dim", 0, 1, 2, MW_KMAX_DIM, &c->ff));
    MW_TRY(mw_kget_int(L, cfg, "head_dim", 0, 1, 2, MW_KMAX_DIM, &c->head_dim));
    MW_TRY(mw_kget_int(L, cfg, "num_query_heads", 0, 1, 1, 1024, &c->heads));
    MW_TRY(mw_kget_int(L, cfg, "num_key_value_heads", 0, 1, 1, 1024, &c->kv_heads));
    if (c->heads % c->kv_heads)
        return mw_kfail(L, MW_EMODEL,
                        "num_key_value_heads %d does not divide num_query_heads %d (each key "
                        "and value head serves as many query heads)",
                        c->kv_heads, c->heads);
    if (c->head_dim % 2)
        return mw_kfail(L, MW_EMODEL,
                        "head_dim %d: expected an even head_dim (its halves are "
                        "rotated)",
                        c->head_dim);
    MW_TRY(mw_kget_num(L, "", cfg, "layer_norm_epsilon", 1e-6, &c->epsilon));
    if (!(c->epsilon > 0.0 && c->epsilon < 1.0))
        return mw_kfail(L, MW_EMODEL, "layer_norm_epsilon %g: expected 0 < epsilon < 1",
                        c->epsilon);
    MW_TRY(mw_kget_bool(L, cfg, "use_post_ffw_norm", 0, &c->post_ffw));
    MW_TRY(mw_kget_bool(L, cfg, "use_post_attention_norm", 0, &c->post_att));
    MW_TRY(mw_kget_cap(L, cfg, "logit_soft_cap", &c->soft_cap));
    int sliding = 0;
    MW_TRY(mw_kget_bool(L, cfg, "use_sliding_window_attention", 0, &sliding));
    if (sliding)
        MW_TRY(mw_kget_int(L, cfg, "sliding_window_size", 4096, 0, 1, INT_MAX, &c->window));
    return MW_OK;
}

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    mw_model *m = B->m;
    gemma_cfg c = {.m = m, .kmask = B->kmask};
    MW_TRY(mw_block_begin(L, m, cls, cfg, keys));
    MW_TRY(read_cfg(L, cfg, &c));
    int x, s[3];
    MW_TRY(mw_block_call(R, "padding_mask", NULL, &x, s));
    if (s[2] != c.hidden)
        return mw_kfail(L, MW_EMODEL, "hidden_dim %d: its input has %d features; expected the same",
                        c.hidden, s[2]);
    char auto_name[64];
    c.block = mw_block_name(m, CLS, "gemma_decoder_block", name, auto_name);
    c.head = m->nlayers;
    return mw_block_end(m, c.head, B->origin, build(&c, x));
}

/* A row that reads a Keras class into layers of the other rows' kinds: no kind of its own. */
const mw_layer_ops mw_layer_gemma = {
    .keras = {CLS},
    .module = "keras_hub.src.models.gemma.gemma_decoder_block",
    .parse = parse,
};

/* KerasHub's TransformerEncoder and TransformerDecoder (decoder-only: no encoder sequence), read
 * from their configs and built from this program's own layers, as KerasHub 0.32 computes them
 * (keras_hub/src/layers/modeling/transformer_encoder.py, transformer_decoder.py). On an input
 * (None, T, D), with H = num_heads and key_dim = value_dim = D / H, post-norm (the default):
 *
 *     a = MultiHeadAttention(x, x)            _self_attention_layer (the decoder: causal, its
 *                                             padding mask on the keys only, as its attention
 *                                             takes the mask as attention_mask)
 *     s = LayerNorm(x + Dropout(a))           _self_attention_dropout, _self_attention_layer_norm
 *     f = Dense(D)(Dense(ff, activation)(s))  _feedforward_intermediate_dense, _output_dense
 *     y = LayerNorm(s + Dropout(f))           _feedforward_dropout, _feedforward_layer_norm
 *
 * and with normalize_first each LayerNorm moves before its branch (a = MHA(LN(x), LN(x)), y =
 * s + f with f computed from LN(s)). Every layer is a part of the block (mw_layer.block): the
 * block stays one Keras layer in .weights.h5 (its parts' groups under its own), in the summary's
 * names (<block>/<sublayer>), and in the order of its weights (part_rank), which Keras takes
 * from its build(): the encoder's attention, SA-LN, FF-LN, FF1, FF2, the decoder's attention,
 * SA-LN, FF1, FF2, FF-LN. A Dropout with rate 0 is Keras' identity and is not built. */
#include <stdio.h>
#include <string.h>

#include "worker/model/layers/transformer.h"

#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/layer.h"
#include "worker/model/layers/activation.h"
#include "worker/model/layers/attention.h"
#include "worker/model/layers/dense.h"
#include "worker/model/layers/dropout.h"
#include "worker/model/layers/layernorm.h"
#include "worker/model/layers/merge.h"
#include "worker/model/layers/rmsnorm.h"
#include "worker/model/model.h"

typedef struct {
    int decoder, heads, ff, first_norm, causal;
    int kmask; /* 1 + the named input given as its padding mask (mw_mha.kmask); 0: none */
    double dropout, epsilon;
    mw_activation act;
    mw_init kinit, binit;
} block_cfg;

/* Ranks of the weights' parts: attention, SA-LN, FF-LN, FF1, FF2 (the encoder's order). */
enum { R_MHA, R_SALN, R_FFLN, R_FF1, R_FF2 };

void mw_block_tag(mw_model *m, int first, const char *block, const char *cls, int head,
                  const char *part, const char *sub, int rank)
{
    for (int j = first; j < m->nlayers; j++) {
        mw_layer *l = &m->layers[j];
        l->block = head + 1, l->block_first = j == head, l->block_cls = cls;
        snprintf(l->part, sizeof l->part, "%s", part);
        l->part_rank = rank;
        snprintf(l->block_name, sizeof l->block_name, "%s", block);
        if (!l->folded)
            snprintf(l->name, sizeof l->name, "%s/%s", block, sub);
    }
}

/* The decoder's weights come in another order: its feed-forward LayerNorm last. */
static int rank_of(const block_cfg *c, int r)
{
    static const int dec[5] = {0, 1, 4, 2, 3};
    return c->decoder ? dec[r] : r;
}

typedef struct {
    mw_model *m;
    const block_cfg *c;
    const char *block, *cls;
    int head;
} builder;

static mw_status dropout(builder *b, int in, const char *part, int *out)
{
    *out = in;
    if (b->c->dropout <= 0.0)
        return MW_OK;
    const int first = b->m->nlayers;
    MW_TRY(mw_model_set_inputs(b->m, &in, 1));
    MW_TRY(mw_model_add_dropout(b->m, part, (float)b->c->dropout));
    mw_block_tag(b->m, first, b->block, b->cls, b->head, part, part + 1, 0);
    *out = b->m->nlayers - 1;
    return MW_OK;
}

static mw_status norm(builder *b, int in, const char *part, int rank, int *out)
{
    const int first = b->m->nlayers;
    MW_TRY(mw_model_set_inputs(b->m, &in, 1));
    MW_TRY(mw_model_add_layernorm(b->m, part, (float)b->c->epsilon, 1, 1));
    mw_block_tag(b->m, first, b->block, b->cls, b->head, part, part + 1, rank_of(b->c, rank));
    *out = b->m->nlayers - 1;
    return MW_OK;
}

static mw_status residual(builder *b, int x, int y, const char *sub, int *out)
{
    const int first = b->m->nlayers, in[2] = {y, x};
    MW_TRY(mw_model_set_inputs(b->m, in, 2));
    MW_TRY(mw_model_add_add(b->m, sub));
    mw_block_tag(b->m, first, b->block, b->cls, b->head, "", sub, 0);
    *out = b->m->nlayers - 1;
    return MW_OK;
}

static mw_status dense(builder *b, int in, int units, mw_activation act, const char *part, int rank,
                       int *out)
{
    const int first = b->m->nlayers;
    MW_TRY(mw_model_set_inputs(b->m, &in, 1));
    MW_TRY(mw_model_add_dense(b->m, part, units, 1));
    MW_TRY(mw_model_set_init(b->m, &b->c->kinit, &b->c->binit));
    MW_TRY(mw_model_add_act(b->m, NULL, act, mw_act_info_of(act)->param, 1));
    mw_block_tag(b->m, first, b->block, b->cls, b->head, part, part + 1, rank_of(b->c, rank));
    *out = b->m->nlayers - 1;
    return MW_OK;
}

static mw_status attention(builder *b, int in, int width, int *out)
{
    const int first = b->m->nlayers, qv[2] = {in, in}, kd = width / b->c->heads;
    MW_TRY(mw_model_set_inputs(b->m, qv, 2));
    MW_TRY(mw_model_add_mha(b->m, "_self_attention_layer", b->c->heads, kd, kd, 0, 1,
                            (float)b->c->dropout, b->c->causal));
    MW_TRY(mw_model_set_init(b->m, &b->c->kinit, &b->c->binit));
    /* KerasHub merges a padding mask into attention_mask (batch, 1, S): keys only */
    b->m->layers[first].mha.keys_only = b->c->decoder || b->c->kmask;
    b->m->layers[first].mha.kmask = b->c->kmask;
    mw_block_tag(b->m, first, b->block, b->cls, b->head, "_self_attention_layer",
                 b->c->decoder ? "self_attention" : "self_attention_layer", R_MHA);
    *out = b->m->nlayers - 1;
    return MW_OK;
}

/* The block on input x (a layer index, -1 the model's input) of width D. */
static mw_status build(builder *b, int x, int width)
{
    const block_cfg *c = b->c;
    int n = x, a, s, f, y;
    if (c->first_norm)
        MW_TRY(norm(b, x, "_self_attention_layer_norm", R_SALN, &n));
    MW_TRY(attention(b, n, width, &a));
    MW_TRY(dropout(b, a, "_self_attention_dropout", &a));
    MW_TRY(residual(b, x, a, "attention_residual", &s));
    if (!c->first_norm)
        MW_TRY(norm(b, s, "_self_attention_layer_norm", R_SALN, &s));
    n = s;
    if (c->first_norm)
        MW_TRY(norm(b, s, "_feedforward_layer_norm", R_FFLN, &n));
    MW_TRY(dense(b, n, c->ff, c->act, "_feedforward_intermediate_dense", R_FF1, &f));
    MW_TRY(dense(b, f, width, MW_ACT_LINEAR, "_feedforward_output_dense", R_FF2, &f));
    MW_TRY(dropout(b, f, "_feedforward_dropout", &f));
    MW_TRY(residual(b, s, f, "feedforward_residual", &y));
    if (!c->first_norm)
        MW_TRY(norm(b, y, "_feedforward_layer_norm", R_FFLN, &y));
    return MW_OK;
}

mw_status mw_block_read_call(const mw_klayer *L, const json_t *kw, const char *mask_key, int kmask,
                             int *causal)
{
    const int decoder = causal != NULL;
    const char *key;
    const json_t *v;
    mw_kqbuf q;
    mw_kdbuf d;
    json_object_foreach((json_t *)kw, key, v)
    {
        if (decoder && !strcmp(key, "use_causal_mask")) {
            if (!json_is_boolean(v))
                return mw_kfail(L, MW_EMODEL,
                                "inbound_nodes[0].kwargs.use_causal_mask: found %s; expected "
                                "true or false",
                                mw_kdescribe(d, v));
            *causal = json_is_true(v);
        } else if (!strcmp(key, "mask") ||
                   (!strcmp(key, "training") && (json_is_boolean(v) || json_is_null(v))) ||
                   (!strcmp(key, "return_attention_scores") && json_is_false(v)) ||
                   (strstr(key, "_mask") && json_is_null(v)) ||
                   (kmask && !strcmp(key, mask_key) && json_is_object(v)) ||
                   (strstr(key, "_cache") && json_is_null(v)) ||
                   (decoder && !strcmp(key, "encoder_sequence") && json_is_null(v)))
            continue;
        else
            return mw_kfail(L, MW_EUNSUPPORTED,
                            "inbound_nodes[0].kwargs: call argument %s (%s) is not supported; "
                            "supported: %sthe padding mask of Embedding(mask_zero=True), and a "
                            "named input of the model as %s",
                            mw_kquote(q, key), mw_kdescribe(d, v),
                            decoder ? "use_causal_mask, " : "", mask_key);
    }
    return MW_OK;
}

mw_status mw_block_read_ff(const mw_klayer *L, const json_t *cfg, mw_activation def,
                           double *epsilon, mw_activation *act)
{
    MW_TRY(mw_kget_num(L, "", cfg, "layer_norm_epsilon", 1e-5, epsilon));
    if (!(*epsilon > 0.0 && *epsilon < 1.0))
        return mw_kfail(L, MW_EMODEL, "layer_norm_epsilon %g: expected 0 < epsilon < 1", *epsilon);
    *act = def;
    const json_t *a = json_object_get(cfg, "activation");
    if (a && !json_is_null(a))
        MW_TRY(mw_kget_activation(L, cfg, "activation", 0, 1, act));
    if (*act == MW_ACT_SOFTMAX)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "activation \"softmax\" inside the feed-forward network is not "
                        "supported; supported: the element-wise activations");
    return MW_OK;
}

static mw_status read_cfg(const mw_klayer *L, const json_t *cfg, block_cfg *c)
{
    MW_TRY(mw_kget_int(L, cfg, "intermediate_dim", 0, 1, 1, MW_KMAX_DIM, &c->ff));
    MW_TRY(mw_kget_int(L, cfg, "num_heads", 0, 1, 1, 1024, &c->heads));
    MW_TRY(mw_kget_num(L, "", cfg, "dropout", 0.0, &c->dropout));
    if (!(c->dropout >= 0.0 && c->dropout < 1.0))
        return mw_kfail(L, MW_EMODEL, "dropout %g: expected 0 <= dropout < 1", c->dropout);
    MW_TRY(mw_block_read_ff(L, cfg, MW_ACT_RELU, &c->epsilon, &c->act)); /* KerasHub's relu */
    MW_TRY(mw_kget_init(L, cfg, "kernel_initializer", MW_INIT_GLOROT_UNIFORM, &c->kinit));
    MW_TRY(mw_kget_init(L, cfg, "bias_initializer", MW_INIT_ZEROS, &c->binit));
    return mw_kget_bool(L, cfg, "normalize_first", 0, &c->first_norm);
}

/* The keys KerasHub writes for TransformerEncoder and TransformerDecoder
 * (worker/model/keras_keys.h). */
#define BLOCK_KEYS                                                                                 \
    MW_KREAD("intermediate_dim"), MW_KREAD("num_heads"), MW_KREAD("dropout"),                      \
        MW_KREAD("activation"), MW_KREAD("layer_norm_epsilon"), MW_KREAD("kernel_initializer"),    \
        MW_KREAD("bias_initializer"), MW_KREAD("normalize_first")
static const mw_kkey keys[] = {BLOCK_KEYS, MW_KEND};
static const mw_kkey decoder_keys[] = {
    BLOCK_KEYS,
    MW_KIGN("decoder_sequence_shape", "the build shape, which the graph gives"),
    MW_KDEF("encoder_sequence_shape", "null", "cross-attention on an encoder sequence"),
    MW_KEND,
};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    mw_model *m = B->m;
    block_cfg c = {.decoder = !strcmp(cls, "TransformerDecoder")};
    c.causal = c.decoder; /* use_causal_mask defaults to true */
    if (m->next_nin > 1)
        return mw_kfail(L, MW_EUNSUPPORTED, "called on %d tensors; supported: one sequence (%s)",
                        m->next_nin,
                        c.decoder ? "decoder-only use, without an encoder sequence" : "its input");
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg,
                          strcmp(cls, "TransformerDecoder") ? keys : decoder_keys, 1));
    MW_TRY(read_cfg(L, cfg, &c));
    c.kmask = B->kmask;
    int x, s[3];
    MW_TRY(mw_block_call(R, c.decoder ? "decoder_padding_mask" : "padding_mask",
                         c.decoder ? &c.causal : NULL, &x, s));
    if (s[2] < c.heads)
        return mw_kfail(L, MW_EMODEL,
                        "num_heads %d is more than the input's %d features: each head's "
                        "key_dim (features / num_heads) would be 0",
                        c.heads, s[2]);
    char auto_name[64];
    name = mw_block_name(m, cls, c.decoder ? "transformer_decoder" : "transformer_encoder", name,
                         auto_name);
    builder b = {m, &c, name, c.decoder ? "TransformerDecoder" : "TransformerEncoder", m->nlayers};
    const int first = m->nlayers;
    return mw_block_end(m, first, B->origin, build(&b, x, s[2]));
}

const char *mw_block_name(const mw_model *m, const char *cls, const char *base, const char *name,
                          char buf[64])
{
    if (name)
        return name;
    int same = 0;
    for (int j = 0; j < m->nlayers; j++)
        same += m->layers[j].block_first && !strcmp(m->layers[j].block_cls, cls);
    if (same)
        snprintf(buf, 64, "%s_%d", base, same);
    else
        snprintf(buf, 64, "%s", base);
    return buf;
}

mw_status mw_block_rmsnorm(const mw_block_at *b, int in, int rms, float epsilon, const char *part,
                           const char *sub, int rank, int *out)
{
    const int first = b->m->nlayers;
    MW_TRY(mw_model_set_inputs(b->m, &in, 1));
    MW_TRY(mw_model_add_rmsnorm(b->m, part, (mw_rms_class)rms, epsilon));
    mw_block_tag(b->m, first, b->block, b->cls, b->head, part, sub, rank);
    *out = b->m->nlayers - 1;
    return MW_OK;
}

mw_status mw_block_dense(const mw_block_at *b, int in, int units, mw_activation act,
                         const mw_init *kinit, const char *part, const char *sub, int rank,
                         int *out)
{
    const int first = b->m->nlayers;
    static const mw_init zeros = {.kind = MW_INIT_ZEROS};
    MW_TRY(mw_model_set_inputs(b->m, &in, 1));
    MW_TRY(mw_model_add_dense(b->m, part, units, 0));
    MW_TRY(mw_model_set_init(b->m, kinit, &zeros));
    MW_TRY(mw_model_add_act(b->m, NULL, act, mw_act_info_of(act)->param, 1));
    mw_block_tag(b->m, first, b->block, b->cls, b->head, part, sub, rank);
    *out = b->m->nlayers - 1;
    return MW_OK;
}

mw_status mw_block_merge(const mw_block_at *b, int x, int y, int mul, const char *sub, int *out)
{
    const int first = b->m->nlayers, in[2] = {x, y};
    MW_TRY(mw_model_set_inputs(b->m, in, 2));
    MW_TRY(mul ? mw_model_add_multiply(b->m, sub) : mw_model_add_add(b->m, sub));
    mw_block_tag(b->m, first, b->block, b->cls, b->head, "", sub, 0);
    *out = b->m->nlayers - 1;
    return MW_OK;
}

mw_status mw_block_begin(const mw_klayer *L, const mw_model *m, const char *cls, const json_t *cfg,
                         const mw_kkey *table)
{
    if (m->next_nin > 1)
        return mw_kfail(L, MW_EUNSUPPORTED, "called on %d tensors; supported: one sequence",
                        m->next_nin);
    return mw_kcheck_keys(L->origin, L->where, cls, cfg, table, 1);
}

mw_status mw_block_end(mw_model *m, int first, const char *origin, mw_status rc)
{
    if (rc == MW_OK)
        return MW_OK;
    m->nlayers = first; /* nothing of the block stays */
    m->next_nin = 0;
    return mw_kfrom_model(origin, rc);
}

mw_status mw_block_input(const mw_klayer *L, mw_model *m, int *x, int s[3])
{
    *x = m->next_nin ? m->next_in[0] : m->nlayers - 1;
    m->next_nin = 0;
    mw_model_shape_of(m, *x, s);
    const int flat = *x < 0 ? m->flat_input : m->layers[*x].flat;
    if (s[0] != 1 || flat)
        return mw_kfail(L, MW_EMODEL,
                        "its input ('%s') is %s%dx%dx%d; expected a sequence (None, steps, "
                        "features)",
                        mw_model_producer_name(m, *x), flat ? "flat " : "", s[0], s[1], s[2]);
    return MW_OK;
}

mw_status mw_block_call(const struct mw_kread *R, const char *mask_key, int *causal, int *x,
                        int s[3])
{
    if (R->kwargs)
        MW_TRY(mw_block_read_call(R->L, R->kwargs, mask_key, R->B->kmask, causal));
    return mw_block_input(R->L, R->B->m, x, s);
}

/* A row that reads Keras classes into layers of the other rows' kinds: no kind of its own. */
const mw_layer_ops mw_layer_transformer = {
    .keras = {MW_LAYER_KERAS_HUB "TransformerEncoder", MW_LAYER_KERAS_HUB "TransformerDecoder"},
    .parse = parse,
};

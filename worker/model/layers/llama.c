/* KerasHub's LlamaTransformerDecoder (keras_hub/src/models/llama/llama_decoder.py, 0.32), read
 * from its config and built from this program's own layers as KerasHub computes it. On an input
 * (None, T, D), with H = num_query_heads, G = num_key_value_heads and head_dim = D / H:
 *
 *     n = LlamaLayerNorm(x)                 _self_attention_layernorm
 *     a = LlamaAttention(n)                 _self_attention_layer: query (D, H, head_dim), key
 *                                           and value (D, G, head_dim) EinsumDense without
 *                                           biases, query and key rotated per head
 *                                           (LlamaRotaryEmbedding), query head h on key head
 *                                           h / (H / G), scores times 1 / sqrt(head_dim),
 *                                           causal, the padding mask on the keys, output
 *                                           (H, head_dim, D)
 *     s = x + a
 *     f = LlamaLayerNorm(s)                 _feedforward_layernorm
 *     g = activation(Dense(ff)(f))          _feedforward_gate_dense (silu by default)
 *     u = Dense(ff)(f)                      _feedforward_intermediate_dense
 *     y = s + Dense(D)(u * g)               _feedforward_output_dense; no Dense has a bias
 *
 * The parts keep the block one Keras layer (layers/transformer.h), its weights in Keras' order
 * (part_rank): the attention's four kernels, the attention's norm, intermediate, gate, output,
 * the feed-forward's norm. KerasHub 0.32's LlamaRotaryEmbedding computes its inverse frequencies
 * without the position scaling factor (its _get_inverse_freq replaces the base class's, which
 * divides by it): rope_scaling_factor changes nothing there, nor here. Refused: dropout (KerasHub
 * drops the attention's output, not its probabilities), Llama 3.1's frequency-dependent RoPE
 * scaling (rope_low_freq_factor, ...). Under a mixed policy each part computes as its own layer
 * does (docs/mixed-precision.md), the rotation in 16-bit steps as KerasHub's. */
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

#define CLS "LlamaTransformerDecoder"

typedef struct {
    int heads, kv_heads, ff;
    int kmask; /* 1 + the named input given as decoder_padding_mask (mw_mha.kmask); 0: none */
    double wavelength, epsilon;
    mw_activation act;
    mw_init kinit;
    mw_model *m;
    const char *block;
    int head; /* the block's first layer */
} llama_cfg;

/* The ranks of the parts' weights (Keras' order, from its build()). */
enum { R_ATT, R_SALN, R_UP, R_GATE, R_DOWN, R_FFLN };

static mw_status norm(const llama_cfg *c, int in, const char *part, int rank, int *out)
{
    return mw_block_rmsnorm(MW_BLOCK_AT(c, CLS), in, MW_RMS_LLAMA, (float)c->epsilon, part,
                            part + 1, rank, out);
}

static mw_status dense(const llama_cfg *c, int in, int units, mw_activation act, const char *part,
                       int rank, int *out)
{
    return mw_block_dense(MW_BLOCK_AT(c, CLS), in, units, act, &c->kinit, part, part + 1, rank,
                          out);
}

static mw_status attention(const llama_cfg *c, int in, int width, int *out)
{
    static const mw_init zeros = {MW_INIT_ZEROS};
    const int first = c->m->nlayers, qv[2] = {in, in};
    MW_TRY(mw_model_set_inputs(c->m, qv, 2));
    MW_TRY(mw_model_add_llama_attention(c->m, "_self_attention_layer", c->heads, c->kv_heads,
                                        width / c->heads, (float)c->wavelength));
    MW_TRY(mw_model_set_init(c->m, &c->kinit, &zeros));
    /* KerasHub merges the padding mask into the causal one (batch, T, T): keys only */
    c->m->layers[first].mha.keys_only = 1;
    c->m->layers[first].mha.kmask = c->kmask;
    mw_block_tag(c->m, first, c->block, CLS, c->head, "_self_attention_layer", "self_attention",
                 R_ATT);
    *out = c->m->nlayers - 1;
    return MW_OK;
}

/* The block on input x (a layer index, -1 the model's input) of width D. */
static mw_status build(const llama_cfg *c, int x, int width)
{
    int n, a, s, f, g, u, p, d, y;
    MW_TRY(norm(c, x, "_self_attention_layernorm", R_SALN, &n));
    MW_TRY(attention(c, n, width, &a));
    MW_TRY(mw_block_merge(MW_BLOCK_AT(c, CLS), a, x, 0, "attention_residual", &s));
    MW_TRY(norm(c, s, "_feedforward_layernorm", R_FFLN, &f));
    MW_TRY(dense(c, f, c->ff, c->act, "_feedforward_gate_dense", R_GATE, &g));
    MW_TRY(dense(c, f, c->ff, MW_ACT_LINEAR, "_feedforward_intermediate_dense", R_UP, &u));
    MW_TRY(mw_block_merge(MW_BLOCK_AT(c, CLS), u, g, 1, "feedforward_gate", &p));
    MW_TRY(dense(c, p, width, MW_ACT_LINEAR, "_feedforward_output_dense", R_DOWN, &d));
    return mw_block_merge(MW_BLOCK_AT(c, CLS), d, s, 0, "feedforward_residual", &y);
}

#define LLAMA31 "Llama 3.1's frequency-dependent RoPE scaling"

/* The keys KerasHub 0.32 writes for LlamaTransformerDecoder (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {
    MW_KREAD("intermediate_dim"),
    MW_KREAD("num_query_heads"),
    MW_KREAD("num_key_value_heads"),
    MW_KREAD("rope_max_wavelength"),
    MW_KREAD("rope_scaling_factor"),
    MW_KDEF("rope_low_freq_factor", "null", LLAMA31),
    MW_KDEF("rope_high_freq_factor", "null", LLAMA31),
    MW_KDEF("rope_pretraining_sequence_length", "null", LLAMA31),
    MW_KREAD("activation"),
    MW_KREAD("layer_norm_epsilon"),
    MW_KREAD("kernel_initializer"),
    MW_KDEF("dropout", "0|0.0", "dropout of the attention's output and of its residual branch"),
    MW_KEND,
};

static mw_status read_cfg(const mw_klayer *L, const json_t *cfg, llama_cfg *c)
{
    double scale = 1.0;
    MW_TRY(mw_kget_int(L, cfg, "intermediate_dim", 0, 1, 1, MW_KMAX_DIM, &c->ff));
    MW_TRY(mw_kget_int(L, cfg, "num_query_heads", 0, 1, 1, 1024, &c->heads));
    MW_TRY(mw_kget_int(L, cfg, "num_key_value_heads", 0, 1, 1, 1024, &c->kv_heads));
    if (c->heads % c->kv_heads)
        return mw_kfail(L, MW_EMODEL,
                        "num_key_value_heads %d does not divide num_query_heads %d (each key "
                        "and value head serves as many query heads)",
                        c->kv_heads, c->heads);
    MW_TRY(mw_kget_num(L, "", cfg, "rope_max_wavelength", 10000.0, &c->wavelength));
    MW_TRY(mw_kget_num(L, "", cfg, "rope_scaling_factor", 1.0, &scale));
    if (!(c->wavelength > 0.0) || !(scale > 0.0))
        return mw_kfail(L, MW_EMODEL,
                        "rope_max_wavelength %g, rope_scaling_factor %g: expected both > 0",
                        c->wavelength, scale);
    MW_TRY(mw_block_read_ff(L, cfg, MW_ACT_SILU, &c->epsilon, &c->act)); /* KerasHub's silu */
    return mw_kget_init(L, cfg, "kernel_initializer", MW_INIT_GLOROT_UNIFORM, &c->kinit);
}

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    mw_model *m = B->m;
    llama_cfg c = {.m = m, .kmask = B->kmask};
    MW_TRY(mw_block_begin(L, m, cls, cfg, keys));
    MW_TRY(read_cfg(L, cfg, &c));
    int x, s[3];
    MW_TRY(mw_block_call(R, "decoder_padding_mask", NULL, &x, s));
    if (s[2] < c.heads || (s[2] / c.heads) % 2)
        return mw_kfail(L, MW_EMODEL,
                        "its input's %d features over num_query_heads %d give a head_dim of %d; "
                        "expected an even head_dim of at least 2 (its halves are rotated)",
                        s[2], c.heads, s[2] / c.heads);
    char auto_name[64];
    c.block = mw_block_name(m, CLS, "llama_transformer_decoder", name, auto_name);
    c.head = m->nlayers;
    return mw_block_end(m, c.head, B->origin, build(&c, x, s[2]));
}

/* A row that reads a Keras class into layers of the other rows' kinds: no kind of its own. */
const mw_layer_ops mw_layer_llama = {
    .keras = {CLS},
    .module = "keras_hub.src.models.llama.llama_decoder",
    .parse = parse,
};

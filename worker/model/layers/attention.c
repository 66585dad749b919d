/* MultiHeadAttention: the layer table's row (worker/model/layer.h). Keras 3's layer on
 * sequences: query (None, T, Dq), value (None, S, Dv) and key (None, S, Dk; the value when the
 * call gives none) are projected per position (kernels (D, H, dk) and (D, H, dv), biases
 * (H, dk) and (H, dv)), attend per head (kernels.h: mw_attn_geom, with the causal mask, the
 * padding masks of Embedding(mask_zero=True) and dropout of the probabilities), and the heads'
 * outputs are projected back (kernel (H, dv, Do), bias (Do)) to (None, T, Do).
 *
 * The weights: all eight variables in the kernel block, in Keras' order (query kernel, query
 * bias, key kernel, ..., output bias: mw_mha_parts gives where), so the packed parameters of
 * checkpoints and --dump-weights are Keras' model.weights, as for every layer; the bias block
 * is empty, and weight regularizers, which would need the two apart, are refused. The buffer keeps
 * the projections, the heads' outputs and the probabilities (n H T S floats: the attention matrices
 * the memory estimate counts) from the forward for the backward, and the backward's gradients of
 * them; with --attention-memory recompute it keeps one example's probabilities, and the backward
 * runs the attention's forward again for each example before its backward. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "worker/model/layers/attention.h"

#include "kernels/cast.h"
#include "worker/model/activations.h"
#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/activation.h"
#include "worker/model/model.h"
#include "worker/model/weights.h"

void mw_mha_parts(const mw_layer *l, size_t w[4], size_t wn[4], size_t b[4], size_t bn[4])
{
    const mw_mha *a = &l->mha;
    const size_t hk = (size_t)a->heads * a->key_dim, hv = (size_t)a->heads * a->value_dim;
    const size_t gk = (size_t)a->kv_heads * a->key_dim, gv = (size_t)a->kv_heads * a->value_dim;
    wn[0] = (size_t)l->in_c * hk, wn[1] = (size_t)a->key_c * gk, wn[2] = (size_t)a->value_c * gv;
    wn[3] = hv * l->out_c;
    bn[0] = hk, bn[1] = gk, bn[2] = gv, bn[3] = (size_t)l->out_c;
    if (!l->has_bias)
        bn[0] = bn[1] = bn[2] = bn[3] = 0;
    for (int j = 0; j < 4; j++) {
        w[j] = j ? b[j - 1] + bn[j - 1] : 0;
        b[j] = w[j] + wn[j];
    }
}

mw_status mw_model_add_mha(mw_model *m, const char *name, int heads, int key_dim, int value_dim,
                           int out_dim, int use_bias, float dropout, int causal)
{
    mw_layer *l =
        mw_layer_push(m, MW_LAYER_MHA, name, "MultiHeadAttention", "multi_head_attention");
    if (!l)
        return mw_err_status();
    if (l->nin < 2 || l->nin > 3)
        return mw_layer_reject(
            m, mw_err(MW_EMODEL,
                      "layer '%s' (MultiHeadAttention): %d inputs; expected query and value (and "
                      "a key)",
                      l->name, l->nin));
    if (heads < 1 || key_dim < 1 || value_dim < 1 || out_dim < 0)
        return mw_layer_reject(
            m, mw_err(MW_EMODEL,
                      "layer '%s' (MultiHeadAttention): num_heads %d, key_dim %d, value_dim %d: "
                      "expected each > 0",
                      l->name, heads, key_dim, value_dim));
    if (!(dropout >= 0.0f && dropout < 1.0f))
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (MultiHeadAttention): dropout %g: expected 0 "
                                         "<= dropout < 1",
                                         l->name, (double)dropout));
    int s[3][3];
    static const char *const role[3] = {"query", "value", "key"};
    for (int j = 0; j < l->nin; j++) {
        mw_model_shape_of(m, l->in[j], s[j]);
        const int flat = l->in[j] < 0 ? m->flat_input : m->layers[l->in[j]].flat;
        if (s[j][0] != 1 || flat)
            return mw_layer_reject(
                m, mw_err(MW_EMODEL,
                          "layer '%s' (MultiHeadAttention): its %s ('%s') is %s%dx%dx%d; "
                          "expected a sequence (None, steps, features)",
                          l->name, role[j], mw_model_producer_name(m, l->in[j]),
                          flat ? "flat " : "", s[j][0], s[j][1], s[j][2]));
    }
    if (l->nin == 3 && s[2][1] != s[1][1])
        return mw_layer_reject(
            m, mw_err(MW_EMODEL,
                      "layer '%s' (MultiHeadAttention): the key has %d steps, the value %d; "
                      "expected the same",
                      l->name, s[2][1], s[1][1]));
    mw_mha *a = &l->mha;
    a->heads = a->kv_heads = heads, a->key_dim = key_dim, a->value_dim = value_dim;
    a->causal = causal;
    a->steps = s[1][1], a->value_c = s[1][2], a->key_c = s[l->nin == 3 ? 2 : 1][2];
    l->rate = dropout;
    l->out_h = 1, l->out_w = l->in_w, l->out_c = out_dim ? out_dim : l->in_c;
    size_t w[4], wn[4], b[4], bn[4];
    l->has_bias = use_bias;
    mw_mha_parts(l, w, wn, b, bn);
    l->w_count = b[3] + bn[3];
    l->b_count = 0;
    l->kernel_init.kind = MW_INIT_GLOROT_UNIFORM, l->bias_init.kind = MW_INIT_ZEROS;
    return MW_OK;
}

mw_status mw_model_add_llama_attention(mw_model *m, const char *name, int heads, int kv_heads,
                                       int head_dim, float max_wavelength)
{
    const int first = m->nlayers;
    MW_TRY(mw_model_add_mha(m, name, heads, head_dim, head_dim, 0, 0, 0.0f, 1));
    mw_layer *l = &m->layers[first];
    if (kv_heads < 1 || heads % kv_heads || head_dim % 2 || !(max_wavelength > 0.0f))
        return mw_layer_reject(
            m, mw_err(MW_EMODEL,
                      "layer '%s' (LlamaAttention): num_query_heads %d, num_key_value_heads %d, "
                      "head_dim %d, rope_max_wavelength %g: expected key heads dividing the "
                      "query heads, an even head_dim (its halves are rotated) and a wavelength "
                      "> 0",
                      l->name, heads, kv_heads, head_dim, (double)max_wavelength));
    l->cls = "LlamaAttention";
    l->mha.kv_heads = kv_heads, l->mha.rope = 1, l->mha.llama = 1;
    l->rope.max_wavelength = max_wavelength, l->rope.scale = 1.0f;
    l->rope.width = l->rope.denom = head_dim;
    size_t w[4], wn[4], b[4], bn[4];
    mw_mha_parts(l, w, wn, b, bn);
    l->w_count = b[3] + bn[3];
    return MW_OK;
}

/* Floats of each part of the buffer for n examples, in order: the projected query, key and
 * value, the heads' outputs, the probabilities (one example's with recompute), then the
 * gradients of the first four; with the rotation, the gradient of the unrotated query or key
 * (c[5]); with recompute, one example's heads' outputs, which the backward's second forward
 * writes (c[6]). */
static void parts(const mw_layer *l, size_t n, size_t c[7])
{
    const mw_mha *a = &l->mha;
    c[0] = n * l->in_w * a->heads * a->key_dim;
    c[1] = n * a->steps * a->kv_heads * a->key_dim;
    c[2] = n * a->steps * a->kv_heads * a->value_dim;
    c[3] = n * l->in_w * a->heads * a->value_dim;
    c[4] = (a->recompute ? 1 : n) * a->heads * l->in_w * a->steps;
    c[5] = a->rope ? (c[0] > c[1] ? c[0] : c[1]) : 0;
    c[6] = a->recompute ? (size_t)l->in_w * a->heads * a->value_dim : 0;
}

static size_t buf(const mw_layer *l, size_t n)
{
    size_t c[7];
    parts(l, n, c);
    return (2 * (c[0] + c[1] + c[2] + c[3]) + c[4] + c[5] + c[6]) * sizeof(float);
}

static size_t scratch(const mw_layer *l, size_t n)
{
    (void)n;
    return (size_t)MW_ATTN_WS_SLOTS * l->in_w * l->mha.steps;
}

typedef struct {
    float *q, *k, *v, *o, *p, *dq, *dk, *dv, *dout, *dr, *o1;
    const float *xq, *xk, *xv;
    mw_attn_geom g;
} views;

static void carve(const mw_layer_call *c, views *V)
{
    const mw_layer *l = c->l;
    size_t s[7];
    parts(l, (size_t)c->n, s);
    float *f = c->buf;
    V->q = f, f += s[0];
    V->k = f, f += s[1];
    V->v = f, f += s[2];
    V->o = f, f += s[3];
    V->p = f, f += s[4];
    V->dq = f, f += s[0];
    V->dk = f, f += s[1];
    V->dv = f, f += s[2];
    V->dout = f, f += s[3];
    V->dr = f, f += s[5];
    V->o1 = f;
    float *const *act = c->ws->act;
    V->xq = act[l->in[0] + 1], V->xv = act[l->in[1] + 1];
    V->xk = l->nin == 3 ? act[l->in[2] + 1] : V->xv;
    const mw_mha *a = &l->mha;
    mw_attn_geom g = {
        .T = l->in_w,
        .S = a->steps,
        .H = a->heads,
        .kv_heads = a->kv_heads,
        .dk = a->key_dim,
        .dv = a->value_dim,
        .scale = (float)(1.0 / sqrt((double)a->key_dim)),
        .soft_cap = a->soft_cap,
        .causal = a->causal,
        .window = a->window,
        /* an Embedding's padding mask is its ids != 0 (mw_masks_plan: tensor mask_t); a mask
         * given as a tensor (a named input) masks the keys where it is 0 */
        .qids = (l->masked & 1) && !l->mha.keys_only ? act[c->m->mask_t] : NULL,
        .vids = a->kmask          ? act[a->kmask]
                : (l->masked & 6) ? act[c->m->mask_t]
                                  : NULL,
        /* Keras 3.15: its fused attention without dropout, its Softmax(mask) with it */
        .empty_uniform = !(l->rate > 0.0f) && !l->mha.gemma, /* Gemma wipes such a step */
        .rate = c->ws->training ? l->rate : 0.0f,
        .seed = c->ws->dropout_seed,
        .stream = (uint64_t)c->i,
        .ids = c->ws->example_ids,
        /* the probabilities in 16 bits where Keras' fused attention holds them */
        .half = mw_policy_half(l->policy),
    };
    if (l->mha.gemma && g.half) { /* KerasHub's einsum attention: the scores 16-bit too */
        g.half_scores = 1;
        g.scale = 1.0f; /* q scaled by qscale() before */
    }
    V->g = g;
}

/* attn_fwd, and with bwd then attn_bwd, one example at a time (--attention-memory recompute):
 * example e's q, k, v, o (or V->o1: the backward's second forward keeps the forward's heads'
 * outputs) and gradients, its masks' rows and its id, and one example's probabilities in V->p.
 * The same values as the whole batch's calls: each example's rows are computed alone. Dropout
 * (rate > 0) runs only in training, where the replicas always pass the examples' ids, so example
 * e's id is ids[e] here as in the whole batch's call (ids NULL would make every example id 0). */
static void attn_each(const mw_layer_call *c, const views *V, int bwd)
{
    const mw_attn_geom *g = &V->g;
    const size_t kvh = (size_t)mw_attn_kvh(g), T = (size_t)g->T, S = (size_t)g->S, H = (size_t)g->H,
                 dk = (size_t)g->dk, dv = (size_t)g->dv;
    for (size_t e = 0; e < (size_t)c->n; e++) {
        mw_attn_geom ge = *g;
        ge.qids = g->qids ? g->qids + e * T : NULL;
        ge.vids = g->vids ? g->vids + e * S : NULL;
        ge.ids = g->ids ? g->ids + e : NULL;
        const float *q = V->q + e * T * H * dk, *k = V->k + e * S * kvh * dk,
                    *v = V->v + e * S * kvh * dv;
        c->kt->attn_fwd(c->k, bwd ? V->o1 : V->o + e * T * H * dv, V->p, q, k, v, &ge, 1);
        if (bwd)
            c->kt->attn_bwd(c->k, V->dq + e * T * H * dk, V->dk + e * S * kvh * dk,
                            V->dv + e * S * kvh * dv, V->p, V->dout + e * T * H * dv, q, k, v, &ge,
                            1);
    }
}

/* Gemma's query scale under a mixed policy: 1 / sqrt(head_dim) in the compute dtype (KerasHub's
 * q *= ops.cast(query_normalization, q.dtype)), as the float32 value rounded. */
static float qscale(const mw_layer *l)
{
    const float s = (float)(1.0 / sqrt((double)l->mha.key_dim));
    return mw_policy_half(l->policy) == 2 ? mw_f16_round(s) : mw_bf16_round(s);
}

/* x (count floats) times Gemma's query scale, rounded to the compute dtype: the scaled query
 * of the forward, and the query's gradient from the scaled one's (the product's transpose). */
static void times_qscale(const mw_layer_call *c, float *x, size_t count)
{
    const mw_rescale r = {.C = 1, .scale = {qscale(c->l)}};
    c->kt->rescale_fwd(c->k, x, x, count, &r);
    mw_layer_round(c->kt, c->k, c->l->policy, x, count);
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const mw_mha *a = &l->mha;
    views V;
    carve(c, &V);
    size_t w[4], wn[4], b[4], bn[4];
    mw_mha_parts(l, w, wn, b, bn);
    const float *W = c->P + l->w_off, *B = l->has_bias ? W : NULL;
    const int T = l->in_w, S = a->steps, hk = a->heads * a->key_dim, hv = a->heads * a->value_dim;
    const int gk = a->kv_heads * a->key_dim, gv = a->kv_heads * a->value_dim;
    c->kt->dense_fwd(c->k, V.q, V.xq, W + w[0], B ? B + b[0] : NULL, c->n * T, l->in_c, hk);
    c->kt->dense_fwd(c->k, V.k, V.xk, W + w[1], B ? B + b[1] : NULL, c->n * S, a->key_c, gk);
    c->kt->dense_fwd(c->k, V.v, V.xv, W + w[2], B ? B + b[2] : NULL, c->n * S, a->value_c, gv);
    const int half = l->policy != MW_POLICY_FLOAT32;
    size_t s[7];
    parts(l, (size_t)c->n, s);
    float *const qkv[3] = {V.q, V.k, V.v};
    for (int j = 0; j < 3 && half; j++) /* Keras' projections: 16-bit tensors */
        mw_layer_round(c->kt, c->k, l->policy, qkv[j], s[j]);
    if (a->rope) { /* each head's features rotated by the position, in place (in 16 bits so) */
        const mw_rope *r = &l->rope;
        const int h16 = mw_policy_half(l->policy);
        c->kt->rope_fwd(c->k, V.q, V.q, c->n, T, hk, r->width, 0, r->denom, r->max_wavelength,
                        r->scale, h16);
        c->kt->rope_fwd(c->k, V.k, V.k, c->n, S, gk, r->width, 0, r->denom, r->max_wavelength,
                        r->scale, h16);
    }
    if (V.g.half_scores)
        times_qscale(c, V.q, s[0]);
    if (a->recompute)
        attn_each(c, &V, 0);
    else
        c->kt->attn_fwd(c->k, V.o, V.p, V.q, V.k, V.v, &V.g, c->n);
    if (half) /* the heads' outputs: a 16-bit tensor (the product's output dtype) */
        mw_layer_round(c->kt, c->k, l->policy, V.o, s[3]);
    c->kt->dense_fwd(c->k, c->y, V.o, W + w[3], B ? B + b[3] : NULL, c->n * T, hv, l->out_c);
}

/* The gradient of the projection before its rotation (n, steps, D): d itself without one,
 * else the transposed rotation of d in the buffer's last part. */
static const float *unrotate(const mw_layer_call *c, const views *V, const float *d, int steps,
                             int D, size_t count)
{
    const mw_layer *l = c->l;
    if (!l->mha.rope)
        return d;
    const mw_rope *r = &l->rope;
    mw_layer_zero(c->kt, c->k, V->dr, count * sizeof(float));
    /* under a 16-bit policy the rotation's gradient is one of 16-bit values (0 + a rounded sum) */
    c->kt->rope_bwd(c->k, V->dr, d, c->n, steps, D, r->width, 0, r->denom, r->max_wavelength,
                    r->scale, mw_policy_half(l->policy));
    return V->dr;
}

static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const mw_mha *a = &l->mha;
    views V;
    carve(c, &V);
    size_t w[4], wn[4], b[4], bn[4], s[7];
    mw_mha_parts(l, w, wn, b, bn);
    parts(l, (size_t)c->n, s);
    const float *W = c->P + l->w_off;
    float *GW = c->G + l->w_off, *GB = l->has_bias ? GW : NULL;
    const int T = l->in_w, S = a->steps, hk = a->heads * a->key_dim, hv = a->heads * a->value_dim;
    const int gk = a->kv_heads * a->key_dim, gv = a->kv_heads * a->value_dim;
    mw_layer_zero(c->kt, c->k, V.dq, (s[0] + s[1] + s[2] + s[3]) * sizeof(float));
    c->kt->dense_bwd(c->k, V.dout, GW + w[3], GB ? GB + b[3] : NULL, c->dy, V.o, W + w[3], c->n * T,
                     hv, l->out_c);
    const int half = l->policy != MW_POLICY_FLOAT32;
    if (half) /* each 16-bit tensor's gradient is one (mixed-precision.md: the attention) */
        mw_layer_round(c->kt, c->k, l->policy, V.dout, s[3]);
    if (a->recompute)
        attn_each(c, &V, 1);
    else
        c->kt->attn_bwd(c->k, V.dq, V.dk, V.dv, V.p, V.dout, V.q, V.k, V.v, &V.g, c->n);
    float *const dqkv[3] = {V.dq, V.dk, V.dv};
    for (int j = 0; j < 3 && half; j++)
        mw_layer_round(c->kt, c->k, l->policy, dqkv[j], s[j]);
    if (V.g.half_scores)
        times_qscale(c, V.dq, s[0]);
    float *const *grad = c->ws->grad;
    const int iq = l->in[0], iv = l->in[1], ik = l->nin == 3 ? l->in[2] : iv;
    c->kt->dense_bwd(c->k, iq >= 0 ? grad[iq + 1] : NULL, GW + w[0], GB ? GB + b[0] : NULL,
                     unrotate(c, &V, V.dq, T, hk, s[0]), V.xq, W + w[0], c->n * T, l->in_c, hk);
    c->kt->dense_bwd(c->k, ik >= 0 ? grad[ik + 1] : NULL, GW + w[1], GB ? GB + b[1] : NULL,
                     unrotate(c, &V, V.dk, S, gk, s[1]), V.xk, W + w[1], c->n * S, a->key_c, gk);
    c->kt->dense_bwd(c->k, iv >= 0 ? grad[iv + 1] : NULL, GW + w[2], GB ? GB + b[2] : NULL, V.dv,
                     V.xv, W + w[2], c->n * S, a->value_c, gv);
}

static int has_kernels(const mw_layer *l, const mw_kernels *t)
{
    return t->attn_fwd && t->attn_bwd && t->dense_fwd && t->dense_bwd &&
           (!l->mha.rope || (t->rope_fwd && t->rope_bwd)) &&
           (!(l->mha.gemma && l->policy != MW_POLICY_FLOAT32) || t->rescale_fwd);
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    const mw_mha *a = &x->mha, *b = &y->mha;
    return mw_diff_dims(d, n, "num_heads", &a->heads, &b->heads, 1) ||
           mw_diff_dims(d, n, "num_key_value_heads", &a->kv_heads, &b->kv_heads, 1) ||
           mw_diff_flag(d, n, "rotary embedding", a->rope, b->rope) ||
           mw_diff_flag(d, n, "Gemma's attention", a->gemma, b->gemma) ||
           mw_diff_real(d, n, "logit_soft_cap", a->soft_cap, b->soft_cap) ||
           mw_diff_dims(d, n, "sliding window", &a->window, &b->window, 1) ||
           mw_diff_real(d, n, "rope_max_wavelength", x->rope.max_wavelength,
                        y->rope.max_wavelength) ||
           mw_diff_dims(d, n, "key_dim", &a->key_dim, &b->key_dim, 1) ||
           mw_diff_dims(d, n, "value_dim", &a->value_dim, &b->value_dim, 1) ||
           mw_diff_dims(d, n, "output width", &x->out_c, &y->out_c, 1) ||
           mw_diff_flag(d, n, "use_bias", x->has_bias, y->has_bias) ||
           mw_diff_flag(d, n, "use_causal_mask", a->causal, b->causal) ||
           mw_diff_real(d, n, "dropout", x->rate, y->rate);
}

/* ---- Keras ---- */

/* The call's keyword arguments (inbound_nodes[0].kwargs): use_causal_mask; the masks Keras
 * passes from the inputs (query_mask, value_mask, key_mask: this program knows them from the
 * Embedding, mw_masks_plan); training. */
static mw_status read_call(const mw_klayer *L, const json_t *kw, int *causal)
{
    *causal = 0;
    const char *key;
    const json_t *v;
    mw_kqbuf q;
    mw_kdbuf d;
    json_object_foreach((json_t *)kw, key, v)
    {
        if (!strcmp(key, "use_causal_mask")) {
            if (!json_is_boolean(v))
                return mw_kfail(L, MW_EMODEL,
                                "inbound_nodes[0].kwargs.use_causal_mask: found %s; expected true "
                                "or false",
                                mw_kdescribe(d, v));
            *causal = json_is_true(v);
        } else if (!strcmp(key, "query_mask") || !strcmp(key, "value_mask") ||
                   !strcmp(key, "key_mask") || !strcmp(key, "key") || !strcmp(key, "mask")) {
            continue; /* the key is an input (keras.c); the masks are planned */
        } else if ((!strcmp(key, "training") && (json_is_boolean(v) || json_is_null(v))) ||
                   ((!strcmp(key, "attention_mask") && json_is_null(v))) ||
                   (!strcmp(key, "return_attention_scores") && json_is_false(v))) {
            continue;
        } else {
            return mw_kfail(L, MW_EUNSUPPORTED,
                            "inbound_nodes[0].kwargs: call argument %s (%s) is not supported; "
                            "supported: use_causal_mask, and the padding masks of "
                            "Embedding(mask_zero=True)",
                            mw_kquote(q, key), mw_kdescribe(d, v));
        }
    }
    return MW_OK;
}

/* The keys Keras writes for MultiHeadAttention (worker/model/keras_keys.h); Keras 3.15 added
 * use_gate and sliding_window. */
static const mw_kkey keys[] = {
    MW_KREAD("num_heads"),
    MW_KREAD("key_dim"),
    MW_KREAD("value_dim"),
    MW_KREAD("dropout"),
    MW_KREAD("output_shape"),
    MW_KREAD("attention_axes"),
    MW_KREAD("flash_attention"),
    MW_KWEIGHT_KEYS,
    MW_KDEF("use_gate", "false", "a gated attention output (sigmoid gate weights)"),
    MW_KDEF("sliding_window", "null", "attention over a sliding window of keys"),
    MW_KIGN("seed", "the dropout's random stream; mwtrain draws its own from --seed"),
    MW_KEND,
};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    (void)cls;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, keys, 1));
    mw_kdbuf d;
    if (B->m->next_nin < 2)
        return mw_kfail(L, MW_EMODEL,
                        "MultiHeadAttention needs a Functional model's call with a query and a "
                        "value (inbound_nodes)");
    int heads = 0, key_dim = 0, value_dim = 0, out = 0, causal = 0;
    double dropout = 0.0;
    mw_kweights w;
    MW_TRY(mw_kget_int(L, cfg, "num_heads", 0, 1, 1, 1024, &heads));
    MW_TRY(mw_kget_int(L, cfg, "key_dim", 0, 1, 1, MW_KMAX_DIM, &key_dim));
    const json_t *vd = json_object_get(cfg, "value_dim");
    value_dim = key_dim;
    if (vd && !json_is_null(vd))
        MW_TRY(mw_kget_int(L, cfg, "value_dim", 0, 1, 1, MW_KMAX_DIM, &value_dim));
    MW_TRY(mw_kget_num(L, "", cfg, "dropout", 0.0, &dropout));
    if (!(dropout >= 0.0 && dropout < 1.0))
        return mw_kfail(L, MW_EMODEL, "dropout %g: expected 0 <= dropout < 1", dropout);
    const json_t *os = json_object_get(cfg, "output_shape");
    if (os && json_is_array(os) && json_array_size(os) == 1)
        os = json_array_get(os, 0);
    if (os && !json_is_null(os) && !mw_kas_int(os, 1, MW_KMAX_DIM, &out))
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "output_shape: found %s; supported: null, or one width (n or [n])",
                        mw_kdescribe(d, json_object_get(cfg, "output_shape")));
    /* the attention runs over the steps: axis 1 of (None, T, D) */
    const json_t *ax = json_object_get(cfg, "attention_axes");
    if (ax && json_is_array(ax) && json_array_size(ax) == 1)
        ax = json_array_get(ax, 0);
    int axis = 1;
    if (ax && !json_is_null(ax) && (!mw_kas_int(ax, -3, 3, &axis) || (axis != 1 && axis != -2))) {
        if (json_is_integer(ax))
            return mw_kfail(L, MW_EUNSUPPORTED,
                            "attention_axes: found axis %lld; supported: null or [1] (over the "
                            "steps)",
                            (long long)json_integer_value(ax));
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "attention_axes: found %s; supported: null or [1] (over the steps)",
                        mw_kdescribe(d, json_object_get(cfg, "attention_axes")));
    }
    if (json_is_true(json_object_get(cfg, "flash_attention")))
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "flash_attention true: supported: null or false (this program chooses "
                        "its own attention kernels)");
    MW_TRY(mw_kread_weights(L, cfg, 0, &w));
    if (w.kreg.l1 != 0.0 || w.kreg.l2 != 0.0 || w.breg.l1 != 0.0 || w.breg.l2 != 0.0) {
        const char *rk =
            w.kreg.l1 != 0.0 || w.kreg.l2 != 0.0 ? "kernel_regularizer" : "bias_regularizer";
        const json_t *r = json_object_get(cfg, rk);
        const char *rn = json_is_string(r) ? json_string_value(r)
                                           : json_string_value(json_object_get(r, "class_name"));
        mw_kqbuf q;
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "%s: found %s; supported for MultiHeadAttention: null (use the "
                        "optimizer's weight_decay)",
                        rk, mw_kquote(q, rn ? rn : "?"));
    }
    if (R->kwargs)
        MW_TRY(read_call(L, R->kwargs, &causal));
    if ((long long)heads * (key_dim > value_dim ? key_dim : value_dim) > MW_KMAX_DIM)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "num_heads %d x key_dim %d / value_dim %d: more than %d projected "
                        "features",
                        heads, key_dim, value_dim, MW_KMAX_DIM);
    mw_status rc = mw_model_add_mha(B->m, name, heads, key_dim, value_dim, out, w.use_bias,
                                    (float)dropout, causal);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    MW_TRY(mw_kapply_weights(B, &w));
    return mw_model_add_act(B->m, NULL, w.act, mw_act_info_of(w.act)->param,
                            1); /* its folded activation */
}

/* It masks the padded steps it reads. */
static mw_mask_rule attend_rule(const mw_layer *l)
{
    (void)l;
    return MW_MASK_ATTEND;
}

/* MultiHeadAttention's four kernels and biases, each with the fans Keras computes for its
 * shape: (D, H, k) has fan_in H D and fan_out k D (the leading axes are the receptive
 * field), (H, v, D) fan_in v H and fan_out D H; a bias (H, k) fan_in H and fan_out k. Gemma's
 * query, key and value kernels are (H, D, k) in Keras: fan_out k H. */
static void init(const mw_layer *l, float *params, mw_rng *r)
{
    const mw_mha *a = &l->mha;
    size_t w[4], wn[4], b[4], bn[4];
    mw_mha_parts(l, w, wn, b, bn);
    const int in[3] = {l->in_c, a->key_c, a->value_c},
              width[3] = {a->key_dim, a->key_dim, a->value_dim};
    for (int j = 0; j < 4; j++) {
        const int h = j == 0 || j == 3 ? a->heads : a->kv_heads;
        const int fi = j < 3 ? h * in[j] : a->value_dim * a->heads;
        const int fo = j < 3 ? width[j] * (a->gemma ? h : in[j]) : l->out_c * a->heads;
        mw_weights_init_tensor(params + l->w_off + w[j], wn[j], &l->kernel_init, fi, fo, r);
        if (l->has_bias)
            mw_weights_init_tensor(params + l->w_off + b[j], bn[j], &l->bias_init,
                                   j < 3 ? h : (int)bn[j], j < 3 ? width[j] : (int)bn[j], r);
    }
}

/* Keras 3's MultiHeadAttention tracks them in this order; .weights.h5 lists groups by name, so
 * only the names matter */
static const char *const mha_subs[] = {"query_dense",    "key_dense", "value_dense", "output_dense",
                                       "_dropout_layer", "_softmax",  NULL};
/* KerasHub's LlamaAttention: its attributes' names, its rotation without variables */
static const char *const llama_subs[] = {"_query_dense",           "_key_dense", "_value_dense",
                                         "_output_dense",          "_softmax",   "_dropout_layer",
                                         "rotary_embedding_layer", NULL};
/* KerasHub's CachedGemmaAttention's */
static const char *const gemma_subs[] = {"query_dense",   "key_dense", "value_dense",
                                         "output_dense",  "softmax",   "rope_layer",
                                         "dropout_layer", NULL};

static const char *const *keras_subs(const mw_layer *l)
{
    return l->mha.gemma ? gemma_subs : l->mha.llama ? llama_subs : mha_subs;
}

/* Four EinsumDense sublayers (mha_subs' first four), each its kernel and bias. */
static void keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    static const char *const kn[4] = {"query/kernel", "key/kernel", "value/kernel",
                                      "attention_output/kernel"};
    static const char *const bname[4] = {"query/bias", "key/bias", "value/bias",
                                         "attention_output/bias"};
    const mw_mha *a = &l->mha;
    const long long in[3] = {l->in_c, a->key_c, a->value_c},
                    w[3] = {a->key_dim, a->key_dim, a->value_dim},
                    h[3] = {a->heads, a->kv_heads, a->kv_heads};
    const char *const *subs = keras_subs(l);
    size_t wo[4], wn[4], bo[4], bn[4];
    mw_mha_parts(l, wo, wn, bo, bn);
    for (int j = 0; j < 4; j++) {
        const int first = *nv;
        if (j < 3 && a->gemma) /* heads first: "btd,ndh->btnh" */
            mw_kvar_add(v, nv, kn[j], l->w_off + wo[j], wn[j], 3, h[j], in[j], w[j], 0)->swap01 = 1;
        else if (j < 3)
            mw_kvar_add(v, nv, kn[j], l->w_off + wo[j], wn[j], 3, in[j], h[j], w[j], 0);
        else
            mw_kvar_add(v, nv, kn[j], l->w_off + wo[j], wn[j], 3, a->heads, a->value_dim, l->out_c,
                        0);
        if (l->has_bias && j < 3)
            mw_kvar_add(v, nv, bname[j], l->w_off + bo[j], bn[j], 2, h[j], w[j], 0, 0);
        else if (l->has_bias)
            mw_kvar_add(v, nv, bname[j], l->w_off + bo[j], bn[j], 1, l->out_c, 0, 0, 0);
        for (int t = first; t < *nv; t++) {
            snprintf(v[t].sub, sizeof v[t].sub, "%s", subs[j]);
            v[t].idx = t - first;
        }
    }
}

const mw_layer_ops mw_layer_mha = {
    .keras = {"MultiHeadAttention"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .buf_bytes = buf,
    .scratch = scratch,
    .has_kernels = has_kernels,
    .differs = differs,
    .matmul = 1,
    .mask = attend_rule,
    .init = init,
    .keras_vars = keras_vars,
    .keras_subs = keras_subs,
};

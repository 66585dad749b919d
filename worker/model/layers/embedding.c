/* Embedding: the layer table's row (worker/model/layer.h). The model's input (None, T) of
 * token ids, held as floats (exact below 2^24; the session checks every id of the data against
 * input_dim before training), into (None, T, output_dim): (1, T, output_dim) here.
 *
 * KerasHub's TokenAndPositionEmbedding is the same kind with a second table of positions rows
 * (its sequence_length), the kernel block the token table (V, D) then the position table
 * (L, D), the output token + position row. And KerasHub's PositionEmbedding (MW_LAYER_POSEMB)
 * is the position table alone: its output is the table's first T rows for every example,
 * whatever the input's values (only its shape counts), which a model adds with Add. */
#include "worker/model/layers/embedding.h"

#include "worker/model/keras_keys.h"
#include <stdio.h>
#include <string.h>

#include "worker/model/kread.h"

#include "worker/model/diff.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"
#include "worker/model/weights.h"

static mw_status add_embed(mw_model *m, const char *name, const char *cls, const char *base,
                           int input_dim, int output_dim)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_EMBED, name, cls, base);
    if (!l)
        return mw_err_status();
    if (input_dim <= 0 || output_dim <= 0 || input_dim > MW_EMBED_MAX_VOCAB)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (%s): input_dim %d, output_dim %d: "
                                         "expected 1..%d and > 0",
                                         l->name, cls, input_dim, output_dim, MW_EMBED_MAX_VOCAB));
    const int named = l->nin == 1 && l->in[0] >= 0 && m->layers[l->in[0]].kind == MW_LAYER_INPUT;
    if (l->nin != 1 || (l->in[0] != -1 && !named) || !l->flat)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (%s): its input must be the model's "
                                         "input of token ids (None, sequence length), or one of "
                                         "its named inputs",
                                         l->name, cls));
    l->vocab = input_dim;
    l->out_h = 1, l->out_w = l->in_c, l->out_c = output_dim;
    l->flat = 0;
    l->w_count = (size_t)input_dim * output_dim;
    l->fan_in = input_dim, l->fan_out = output_dim;
    l->kernel_init.kind = MW_INIT_RANDOM_UNIFORM;
    l->kernel_init.a = -0.05, l->kernel_init.b = 0.05;
    return MW_OK;
}

mw_status mw_model_add_embedding(mw_model *m, const char *name, int input_dim, int output_dim)
{
    return add_embed(m, name, "Embedding", "embedding", input_dim, output_dim);
}

mw_status mw_model_add_reversible_embedding(mw_model *m, const char *name, int input_dim,
                                            int output_dim, int tie)
{
    MW_TRY(
        add_embed(m, name, "ReversibleEmbedding", "reversible_embedding", input_dim, output_dim));
    mw_layer *l = &m->layers[m->nlayers - 1];
    l->untied = !tie;
    if (!tie)
        l->w_count *= 2; /* the reverse call's (D, V) kernel after the table */
    return MW_OK;
}

mw_status mw_model_add_reverse_embedding(mw_model *m, const char *name, int table)
{
    mw_layer *l =
        mw_layer_push(m, MW_LAYER_REVEMB, name, "ReversibleEmbedding", "reversible_embedding");
    if (!l)
        return mw_err_status();
    const mw_layer *t = table >= 0 && table < m->nlayers - 1 ? &m->layers[table] : NULL;
    if (!t || t->kind != MW_LAYER_EMBED || t->positions || strcmp(t->cls, "ReversibleEmbedding"))
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (ReversibleEmbedding): its reverse call "
                                         "needs the same layer's forward call (its token "
                                         "table) before it",
                                         l->name));
    if (l->nin != 1 || l->in_h != 1 || l->in_c != t->out_c)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (ReversibleEmbedding): the reverse call's "
                                         "input is %dx%dx%d; expected (None, steps, %d) or "
                                         "(None, %d): the table's output_dim features",
                                         l->name, l->in_h, l->in_w, l->in_c, t->out_c, t->out_c));
    l->tied = table + 1;
    l->vocab = t->vocab;
    l->out_h = 1, l->out_w = l->in_w, l->out_c = t->vocab;
    return MW_OK;
}

mw_status mw_model_add_token_position(mw_model *m, const char *name, int vocab, int positions,
                                      int dim)
{
    MW_TRY(add_embed(m, name, "TokenAndPositionEmbedding", "token_and_position_embedding", vocab,
                     dim));
    mw_layer *l = &m->layers[m->nlayers - 1];
    if (positions < l->out_w || positions > MW_KMAX_POSITIONS)
        return mw_layer_reject(
            m, mw_err(MW_EMODEL,
                      "layer '%s' (TokenAndPositionEmbedding): sequence_length %d, but the "
                      "input has %d steps; expected at least as many (and at most %d)",
                      l->name, positions, l->out_w, MW_KMAX_POSITIONS));
    l->positions = positions;
    l->kerashub = 1;
    l->w_count += (size_t)positions * dim;
    return MW_OK;
}

mw_status mw_model_add_position_embedding(mw_model *m, const char *name, int positions)
{
    mw_layer *l =
        mw_layer_push(m, MW_LAYER_POSEMB, name, "PositionEmbedding", "position_embedding");
    if (!l)
        return mw_err_status();
    if (l->flat || l->in_h != 1)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (PositionEmbedding): its input is %dx%dx%d; "
                                         "expected a sequence (None, steps, features)",
                                         l->name, l->in_h, l->in_w, l->in_c));
    if (positions < l->in_w || positions > MW_KMAX_POSITIONS)
        return mw_layer_reject(
            m, mw_err(MW_EMODEL,
                      "layer '%s' (PositionEmbedding): sequence_length %d, but the input has %d "
                      "steps; expected at least as many (and at most %d)",
                      l->name, positions, l->in_w, MW_KMAX_POSITIONS));
    l->out_h = 1, l->out_w = l->in_w, l->out_c = l->in_c;
    l->positions = positions;
    l->w_count = (size_t)positions * l->in_c;
    l->fan_in = positions, l->fan_out = l->in_c;
    l->kernel_init.kind = MW_INIT_GLOROT_UNIFORM;
    return MW_OK;
}

mw_status mw_model_add_sine_position(mw_model *m, const char *name, float max_wavelength)
{
    mw_layer *l =
        mw_layer_push(m, MW_LAYER_POSEMB, name, "SinePositionEncoding", "sine_position_encoding");
    if (!l)
        return mw_err_status();
    if (l->flat || l->in_h != 1 || !(max_wavelength > 0.0f))
        return mw_layer_reject(m,
                               mw_err(MW_EMODEL,
                                      "layer '%s' (SinePositionEncoding): input %dx%dx%d, "
                                      "max_wavelength %g: expected a sequence (None, steps, "
                                      "features) and max_wavelength > 0",
                                      l->name, l->in_h, l->in_w, l->in_c, (double)max_wavelength));
    l->out_h = 1, l->out_w = l->in_w, l->out_c = l->in_c;
    l->alpha = max_wavelength; /* no table: positions stays 0 */
    return MW_OK;
}

/* The position table's rows 0..T-1 added to (add 1) or copied into (0) every example's
 * output; backward, every example's output gradient added into the table's rows. */
static void positions_fwd(const mw_layer_call *c, const float *pos, int add)
{
    const size_t per = (size_t)c->l->out_w * c->l->out_c;
    for (int i = 0; i < c->n; i++)
        if (add)
            c->kt->acc(c->k, c->y + i * per, pos, per);
        else
            mw_layer_copy(c->kt, c->k, c->y + i * per, pos, per);
}

static void positions_bwd(const mw_layer_call *c, float *gpos)
{
    const size_t per = (size_t)c->l->out_w * c->l->out_c;
    for (int i = 0; i < c->n; i++) /* in example order: the same sums on any backend */
        c->kt->acc(c->k, gpos, c->dy + i * per, per);
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->embed_fwd(c->k, c->y, c->x, c->P + l->w_off, c->n, l->out_w, l->out_c, l->vocab);
    if (l->positions) /* TokenAndPositionEmbedding: token + position, as KerasHub adds them */
        positions_fwd(c, c->P + l->w_off + (size_t)l->vocab * l->out_c, 1);
}

/* The ids get no gradient (the model's input): only the table's rows. */
static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->embed_bwd(c->k, c->G + l->w_off, c->dy, c->x, c->n, l->out_w, l->out_c, l->vocab);
    if (l->positions)
        positions_bwd(c, c->G + l->w_off + (size_t)l->vocab * l->out_c);
}

static void pos_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    if (l->positions)
        positions_fwd(c, c->P + l->w_off, 0);
    else /* SinePositionEncoding */
        c->kt->sine_pos(c->k, c->y, c->n, l->out_w, l->out_c, l->alpha);
}

/* The output does not depend on the input's values: no input gradient (and the sinusoid has
 * no weights). */
static void pos_backward(const mw_layer_call *c)
{
    if (c->l->positions)
        positions_bwd(c, c->G + c->l->w_off);
}

/* The reverse call: logits (rows, V) = x (rows, D) E^T of the tied table E (V, D); its
 * gradient goes to the table's slot, where the forward call's adds too. */
static void rev_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l, *t = &c->m->layers[l->tied - 1];
    if (t->untied) { /* its own (D, V) kernel after the table: a Dense without bias */
        const float *w = c->P + t->w_off + t->w_count / 2;
        c->kt->dense_fwd(c->k, c->y, c->x, w, NULL, (int)c->rows, l->in_c, l->out_c);
        return;
    }
    c->kt->dense_t_fwd(c->k, c->y, c->x, c->P + t->w_off, (int)c->rows, l->in_c, l->out_c);
}

static void rev_backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l, *t = &c->m->layers[l->tied - 1];
    if (t->untied) {
        const size_t w = t->w_off + t->w_count / 2;
        c->kt->dense_bwd(c->k, c->dx, c->G + w, NULL, c->dy, c->x, c->P + w, (int)c->rows, l->in_c,
                         l->out_c);
        return;
    }
    c->kt->dense_t_bwd(c->k, c->dx, c->G + t->w_off, c->dy, c->x, c->P + t->w_off, (int)c->rows,
                       l->in_c, l->out_c);
}

static int rev_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->dense_t_fwd && t->dense_t_bwd && t->dense_fwd && t->dense_bwd;
}

static int rev_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_dims(d, n, "the tied table's layer", &x->tied, &y->tied, 1);
}

static int has_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->embed_fwd && t->embed_bwd;
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    const int a[2] = {x->vocab, x->out_c}, b[2] = {y->vocab, y->out_c};
    return mw_diff_dims(d, n, "input_dim x output_dim", a, b, 2) ||
           mw_diff_flag(d, n, "tie_weights", !x->untied, !y->untied) ||
           mw_diff_dims(d, n, "sequence_length", &x->positions, &y->positions, 1) ||
           mw_diff_flag(d, n, "mask_zero", x->mask_zero, y->mask_zero);
}

static int pos_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_dims(d, n, "sequence_length", &x->positions, &y->positions, 1) ||
           mw_diff_real(d, n, "max_wavelength", x->alpha, y->alpha);
}

static int pos_kernels(const mw_layer *l, const mw_kernels *t)
{
    return l->positions ? t->acc != NULL : t->sine_pos != NULL;
}

/* ---- Keras ---- */

/* KerasHub's TokenAndPositionEmbedding (vocabulary_size, sequence_length, embedding_dim,
 * embeddings_initializer for both tables, mask_zero; tie_weights only matters to a reverse
 * call of the token table, which no layer here makes). */
static mw_status parse_token_position(mw_kread *R, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    int vocab = 0, dim = 0, len = 0, mask = 0, tie = 1;
    mw_init init;
    MW_TRY(mw_kget_int(L, cfg, "vocabulary_size", 0, 1, 1, MW_EMBED_MAX_VOCAB, &vocab));
    MW_TRY(mw_kget_int(L, cfg, "sequence_length", 0, 1, 1, MW_KMAX_POSITIONS, &len));
    MW_TRY(mw_kget_int(L, cfg, "embedding_dim", 0, 1, 1, MW_KMAX_DIM, &dim));
    MW_TRY(mw_kget_bool(L, cfg, "mask_zero", 0, &mask));
    MW_TRY(mw_kget_bool(L, cfg, "tie_weights", 1, &tie));
    MW_TRY(mw_kget_init(L, cfg, "embeddings_initializer", MW_INIT_RANDOM_UNIFORM, &init));
    const json_t *given = json_object_get(cfg, "embeddings_initializer");
    if (!given || json_is_null(given)) /* KerasHub's default, "uniform" */
        init.a = -0.05, init.b = 0.05;
    if ((long long)(vocab + len) * dim > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "%d + %d rows of %d values are more than the %d supported per tensor",
                        vocab, len, dim, MW_KMAX_TENSOR);
    mw_status rc = mw_model_add_token_position(B->m, name, vocab, len, dim);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    B->m->layers[B->m->nlayers - 1].kernel_init = init;
    B->m->layers[B->m->nlayers - 1].mask_zero = mask;
    return MW_OK;
}

/* The keys Keras writes for Embedding (Keras 2: input_length) and KerasHub's
 * TokenAndPositionEmbedding (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {
    MW_KREAD("input_dim"),
    MW_KREAD("output_dim"),
    MW_KREAD("mask_zero"),
    MW_KREAD("embeddings_initializer"),
    MW_KREAD("embeddings_regularizer"),
    MW_KREAD("activity_regularizer"),
    MW_KREAD("embeddings_constraint"),
    MW_KREAD("lora_rank"),
    MW_KIGN("lora_alpha", "LoRA's scale, used only with a lora_rank, which must be null"),
    MW_KDEF("quantization_config", "null", "quantized weights"),
    MW_KIGN("input_length", "Keras 2's sequence length, which the model's input shape gives"),
    MW_KEND,
};
static const mw_kkey token_keys[] = {
    MW_KREAD("vocabulary_size"),
    MW_KREAD("sequence_length"),
    MW_KREAD("embedding_dim"),
    MW_KREAD("mask_zero"),
    MW_KREAD("embeddings_initializer"),
    MW_KREAD("tie_weights"),
    MW_KEND,
};

/* KerasHub's ReversibleEmbedding: Embedding's keys, and how its reverse call (logits from the
 * table, a model's output projection) computes. */
static const mw_kkey rev_keys[] = {
    MW_KREAD("input_dim"),
    MW_KREAD("output_dim"),
    MW_KREAD("mask_zero"),
    MW_KREAD("embeddings_initializer"),
    MW_KREAD("embeddings_regularizer"),
    MW_KREAD("activity_regularizer"),
    MW_KREAD("embeddings_constraint"),
    MW_KDEF("quantization_config", "null", "quantized weights"),
    MW_KREAD("tie_weights"),
    MW_KDEF("reverse_dtype", "null", "the reverse call in another dtype"),
    MW_KDEF("logit_soft_cap", "null", "the reverse call's logits soft-capped (tanh)"),
    MW_KEND,
};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    const int rev = !strcmp(cls, "ReversibleEmbedding");
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg,
                          rev                                        ? rev_keys
                          : strcmp(cls, "TokenAndPositionEmbedding") ? keys
                                                                     : token_keys,
                          1));
    if (!strcmp(cls, "TokenAndPositionEmbedding"))
        return parse_token_position(R, cfg, name);
    int vocab = 0, dim = 0, mask = 0;
    mw_init init;
    MW_TRY(mw_kget_int(L, cfg, "input_dim", 0, 1, 1, MW_EMBED_MAX_VOCAB, &vocab));
    MW_TRY(mw_kget_int(L, cfg, "output_dim", 0, 1, 1, MW_KMAX_DIM, &dim));
    MW_TRY(mw_kget_bool(L, cfg, "mask_zero", 0, &mask));
    MW_TRY(mw_kneed_null(L, cfg, "embeddings_regularizer", "a penalty on the embeddings"));
    MW_TRY(mw_kneed_null(L, cfg, "activity_regularizer", "a penalty on the output"));
    MW_TRY(mw_kneed_null(L, cfg, "embeddings_constraint", "a constraint on the embeddings"));
    if (!rev)
        MW_TRY(mw_kneed_null(L, cfg, "lora_rank", "LoRA"));
    MW_TRY(mw_kget_init(L, cfg, "embeddings_initializer", MW_INIT_RANDOM_UNIFORM, &init));
    const json_t *given = json_object_get(cfg, "embeddings_initializer");
    if (!given || json_is_null(given)) /* Keras' default, "uniform" */
        init.a = -0.05, init.b = 0.05;
    if ((long long)vocab * dim > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "a %dx%d embedding table is larger than the %d values supported per "
                        "tensor",
                        vocab, dim, MW_KMAX_TENSOR);
    int tie = 1;
    if (rev)
        MW_TRY(mw_kget_bool(L, cfg, "tie_weights", 1, &tie));
    mw_status rc = rev ? mw_model_add_reversible_embedding(B->m, name, vocab, dim, tie)
                       : mw_model_add_embedding(B->m, name, vocab, dim);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    B->m->layers[B->m->nlayers - 1].kernel_init = init;
    B->m->layers[B->m->nlayers - 1].mask_zero = mask;
    return MW_OK;
}

/* The keys KerasHub writes for PositionEmbedding and SinePositionEncoding
 * (worker/model/keras_keys.h). */
static const mw_kkey pos_keys[] = {MW_KREAD("sequence_length"), MW_KREAD("initializer"), MW_KEND},
                     sine_keys[] = {MW_KREAD("max_wavelength"), MW_KEND};

/* KerasHub's PositionEmbedding (sequence_length, initializer). */
static mw_status parse_position(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg,
                          strcmp(cls, "SinePositionEncoding") ? pos_keys : sine_keys, 1));
    if (!strcmp(cls, "SinePositionEncoding")) { /* KerasHub's (max_wavelength) */
        double wl = 10000.0;
        MW_TRY(mw_kget_num(L, "", cfg, "max_wavelength", 10000.0, &wl));
        mw_status rc = mw_model_add_sine_position(B->m, name, (float)wl);
        return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
    }
    int len = 0;
    mw_init init;
    MW_TRY(mw_kget_int(L, cfg, "sequence_length", 0, 1, 1, MW_KMAX_POSITIONS, &len));
    MW_TRY(mw_kget_init(L, cfg, "initializer", MW_INIT_GLOROT_UNIFORM, &init));
    if ((long long)len * mw_kcur_c(B->m) > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "a %dx%d position table (sequence_length x the input's features) is "
                        "larger than the %d values supported per tensor",
                        len, mw_kcur_c(B->m), MW_KMAX_TENSOR);
    mw_status rc = mw_model_add_position_embedding(B->m, name, len);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    B->m->layers[B->m->nlayers - 1].kernel_init = init;
    return MW_OK;
}

/* mask_zero: ids 0 are padding; KerasHub's layer (a position table) sets the mask on its
 * output only. */
static mw_mask_rule make_rule(const mw_layer *l)
{
    return !l->mask_zero ? MW_MASK_REFUSE : l->kerashub ? MW_MASK_MAKE_AT_RUN : MW_MASK_MAKE;
}

/* TokenAndPositionEmbedding's two tables, each with its own fans; an Embedding's one. */
static void init(const mw_layer *l, float *params, mw_rng *r)
{
    if (l->untied) { /* the table, then the reverse kernel (D, V), each with its own fans */
        const size_t tok = l->w_count / 2;
        mw_weights_init_tensor(params + l->w_off, tok, &l->kernel_init, l->vocab, l->out_c, r);
        mw_weights_init_tensor(params + l->w_off + tok, tok, &l->kernel_init, l->out_c, l->vocab,
                               r);
        return;
    }
    if (!l->positions) {
        mw_weights_init_tensor(params + l->w_off, l->w_count, &l->kernel_init, l->fan_in,
                               l->fan_out, r);
        return;
    }
    const size_t tok = (size_t)l->vocab * l->out_c;
    mw_weights_init_tensor(params + l->w_off, tok, &l->kernel_init, l->vocab, l->out_c, r);
    mw_weights_init_tensor(params + l->w_off + tok, l->w_count - tok, &l->kernel_init, l->positions,
                           l->out_c, r);
}

/* An Embedding's table; TokenAndPositionEmbedding's two sublayers' tables. */
static void keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    if (!l->positions) {
        const size_t tok = (size_t)l->vocab * l->out_c;
        mw_kvar_add(v, nv, "embeddings", l->w_off, tok, 2, l->vocab, l->out_c, 0, 0);
        if (l->untied) /* Keras' build() adds it after the table */
            mw_kvar_add(v, nv, "reverse_embeddings", l->w_off + tok, tok, 2, l->out_c, l->vocab, 0,
                        0);
        return;
    }
    const size_t tok = (size_t)l->vocab * l->out_c;
    mw_keras_var *t = mw_kvar_add(v, nv, "token_embedding/embeddings", l->w_off, tok, 2, l->vocab,
                                  l->out_c, 0, 0);
    snprintf(t->sub, sizeof t->sub, "token_embedding");
    mw_keras_var *p = mw_kvar_add(v, nv, "position_embedding/embeddings", l->w_off + tok,
                                  l->w_count - tok, 2, l->positions, l->out_c, 0, 0);
    snprintf(p->sub, sizeof p->sub, "position_embedding");
    p->idx = 0;
}

/* TokenAndPositionEmbedding's sublayers in .weights.h5. */
static const char *const *keras_subs(const mw_layer *l)
{
    static const char *const tpe[] = {"token_embedding", "position_embedding", NULL};
    return l->positions ? tpe : NULL;
}

/* A PositionEmbedding's table; SinePositionEncoding has none. */
static void pos_keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    if (l->w_count)
        mw_kvar_add(v, nv, "embeddings", l->w_off, l->w_count, 2, l->positions, l->out_c, 0, 0);
}

const mw_layer_ops mw_layer_embed = {
    .keras = {"Embedding", MW_LAYER_KERAS_HUB "TokenAndPositionEmbedding",
              MW_LAYER_KERAS_HUB "ReversibleEmbedding"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .has_kernels = has_kernels,
    .ids = 1,
    .differs = differs,
    .mask = make_rule,
    .init = init,
    .keras_vars = keras_vars,
    .keras_subs = keras_subs,
};

const mw_layer_ops mw_layer_posemb = {
    .keras = {MW_LAYER_KERAS_HUB "PositionEmbedding", MW_LAYER_KERAS_HUB "SinePositionEncoding"},
    .parse = parse_position,
    .forward = pos_forward,
    .backward = pos_backward,
    .has_kernels = pos_kernels,
    .differs = pos_differs,
    .mask = mw_mask_drop,
    .keras_vars = pos_keras_vars,
};

/* No Keras class of its own: the reader makes it from a ReversibleEmbedding's reverse call
 * (worker/keras/keras_graph.c), and its table's variables are the forward call's layer's. */
const mw_layer_ops mw_layer_revemb = {
    .tied16 = 1,
    .forward = rev_forward,
    .backward = rev_backward,
    .has_kernels = rev_kernels,
    .differs = rev_differs,
    .mask = mw_mask_drop,
};

/* The per-layer Keras variable table; see keras_vars.h. */
#include "worker/keras/keras_vars.h"
#include "worker/model/layers/attention.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static void add(mw_keras_var *v, int *nv, const char *name, size_t off, size_t count, int rank,
                long long d0, long long d1, long long d2, long long d3)
{
    mw_keras_var *x = &v[(*nv)++];
    x->name = name;
    x->sub[0] = '\0';
    x->l = NULL;
    x->idx = *nv - 1;
    x->off = off;
    x->count = count;
    x->rank = rank;
    x->shape[0] = d0, x->shape[1] = d1, x->shape[2] = d2, x->shape[3] = d3;
    x->trainable = 1;
}

/* Keras 3's MultiHeadAttention tracks them in this order; .weights.h5 lists groups by name, so
 * only the names matter */
static const char *const mha_subs[] = {"query_dense",    "key_dense", "value_dense", "output_dense",
                                       "_dropout_layer", "_softmax",  NULL};

/* MultiHeadAttention's: four EinsumDense sublayers (mha_subs' first four), each its kernel and
 * bias. */
static void mha_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    static const char *const kn[4] = {"query/kernel", "key/kernel", "value/kernel",
                                      "attention_output/kernel"};
    static const char *const bname[4] = {"query/bias", "key/bias", "value/bias",
                                         "attention_output/bias"};
    const mw_mha *a = &l->mha;
    const long long in[3] = {l->in_c, a->key_c, a->value_c},
                    w[3] = {a->key_dim, a->key_dim, a->value_dim};
    size_t wo[4], wn[4], bo[4], bn[4];
    mw_mha_parts(l, wo, wn, bo, bn);
    for (int j = 0; j < 4; j++) {
        const int first = *nv;
        if (j < 3)
            add(v, nv, kn[j], l->w_off + wo[j], wn[j], 3, in[j], a->heads, w[j], 0);
        else
            add(v, nv, kn[j], l->w_off + wo[j], wn[j], 3, a->heads, a->value_dim, l->out_c, 0);
        if (l->has_bias && j < 3)
            add(v, nv, bname[j], l->w_off + bo[j], bn[j], 2, a->heads, w[j], 0, 0);
        else if (l->has_bias)
            add(v, nv, bname[j], l->w_off + bo[j], bn[j], 1, l->out_c, 0, 0, 0);
        for (int t = first; t < *nv; t++) {
            snprintf(v[t].sub, sizeof v[t].sub, "%s", mha_subs[j]);
            v[t].idx = t - first;
        }
    }
}

/* HOW TO ADD A LAYER KIND: one case below, appending its variables with add() in the order
 * Keras creates them in the layer's build() (that order is the index i of
 * layers/<name>/vars/<i> in .weights.h5 and the order of layer.weights), skipping the ones
 * the config turns off, with their Keras names and shapes and their offset in the arena.
 * BatchNormalization (axis -1, C channels) is, in this order:
 *     if (scale)  add(v, nv, "gamma", <gamma off>, C, 1, C, 0, 0, 0);
 *     if (center) add(v, nv, "beta", <beta off>, C, 1, C, 0, 0, 0);
 *     add(v, nv, "moving_mean", <mean off>, C, 1, C, 0, 0, 0);
 *     add(v, nv, "moving_variance", <var off>, C, 1, C, 0, 0, 0);
 * (moving statistics are non-trainable but still Keras variables of the layer: they go in
 * the files; set v[*nv - 1].trainable = 0 after adding each, so the optimizer's state in
 * .weights.h5 skips them as Keras' does). Raise MW_KERAS_MAX_VARS if a kind needs more. If some
 * variables come to live outside the parameter arena, give mw_keras_var a field saying which buffer
 * `off` is in, and teach the two readers of `off` (worker/keras/keras_h5.c, worker/keras/export.c)
 * about it. */
static mw_status layer_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    *nv = 0;
    switch (l->kind) {
    case MW_LAYER_CONV2D:
        if (!strcmp(l->cls, "Conv1D")) /* (k, C, O): KH is 1 */
            add(v, nv, "kernel", l->w_off, l->w_count, 3, l->conv.KW, l->conv.C, l->conv.O, 0);
        else
            add(v, nv, "kernel", l->w_off, l->w_count, 4, l->conv.KH, l->conv.KW, l->conv.C,
                l->conv.O);
        break;
    case MW_LAYER_DENSE:
        add(v, nv, "kernel", l->w_off, l->w_count, 2, l->in_c, l->out_c, 0, 0); /* last axis */
        break;
    case MW_LAYER_LAYERNORM: /* gamma (scale), beta (center), as Keras builds them */
        if (l->w_count)
            add(v, nv, "gamma", l->w_off, l->w_count, 1, l->out_c, 0, 0, 0);
        if (l->b_count)
            add(v, nv, "beta", l->b_off, l->b_count, 1, l->out_c, 0, 0, 0);
        return MW_OK;
    case MW_LAYER_EMBED:
        if (l->pad[1]) { /* TokenAndPositionEmbedding: two sublayers' tables */
            const size_t tok = (size_t)l->pad[0] * l->out_c;
            add(v, nv, "token_embedding/embeddings", l->w_off, tok, 2, l->pad[0], l->out_c, 0, 0);
            add(v, nv, "position_embedding/embeddings", l->w_off + tok, l->w_count - tok, 2,
                l->pad[1], l->out_c, 0, 0);
            snprintf(v[0].sub, sizeof v[0].sub, "token_embedding");
            snprintf(v[1].sub, sizeof v[1].sub, "position_embedding");
            v[1].idx = 0;
            break;
        }
        add(v, nv, "embeddings", l->w_off, l->w_count, 2, l->pad[0], l->out_c, 0, 0);
        return MW_OK;
    case MW_LAYER_POSEMB: /* SinePositionEncoding has none */
        if (l->w_count)
            add(v, nv, "embeddings", l->w_off, l->w_count, 2, l->pad[1], l->out_c, 0, 0);
        return MW_OK;
    case MW_LAYER_MHA:
        mha_vars(l, v, nv);
        break;
    case MW_LAYER_BATCHNORM: /* gamma, beta, then the non-trainable moving statistics */
        if (l->w_count)
            add(v, nv, "gamma", l->w_off, l->w_count, 1, l->out_c, 0, 0, 0);
        if (l->b_count)
            add(v, nv, "beta", l->b_off, l->b_count, 1, l->out_c, 0, 0, 0);
        add(v, nv, "moving_mean", l->s_off, (size_t)l->out_c, 1, l->out_c, 0, 0, 0);
        v[*nv - 1].trainable = 0;
        add(v, nv, "moving_variance", l->s_off + (size_t)l->out_c, (size_t)l->out_c, 1, l->out_c, 0,
            0, 0);
        v[*nv - 1].trainable = 0;
        return MW_OK;
    default:
        if (l->w_count || l->b_count)
            return mw_err(MW_EUNSUPPORTED,
                          "layer '%s' (%s) has parameters, but the Keras variable table "
                          "(worker/keras/keras_vars.c) does not know its kind",
                          l->name, l->cls);
        return MW_OK;
    }
    if (l->has_bias && l->kind != MW_LAYER_MHA && l->kind != MW_LAYER_EMBED)
        add(v, nv, "bias", l->b_off, l->b_count, 1, l->out_c, 0, 0, 0);
    for (int i = 0; i < *nv; i++) {
        long long n = 1;
        for (int d = 0; d < v[i].rank; d++)
            n *= v[i].shape[d];
        if ((size_t)n != v[i].count)
            return mw_err(MW_EINTERNAL, "layer '%s': variable %s holds %zu values, its shape %lld",
                          l->name, v[i].name, v[i].count, n);
    }
    return MW_OK;
}

mw_status mw_keras_layer_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    const mw_status rc = layer_vars(l, v, nv);
    for (int i = 0; i < *nv; i++)
        v[i].l = l;
    return rc;
}

/* A part's variables: sub becomes "<part>" or "<part>/<sub>". */
static void prefix_part(const mw_layer *l, mw_keras_var *v, int nv)
{
    for (int i = 0; i < nv; i++) {
        char sub[MW_KERAS_SUB_MAX];
        snprintf(sub, sizeof sub, "%s", v[i].sub);
        if (sub[0]) /* the longest: "_self_attention_layer/query_dense" */
            snprintf(v[i].sub, sizeof v[i].sub, "%.31s/%.24s", l->part, sub);
        else
            snprintf(v[i].sub, sizeof v[i].sub, "%s", l->part);
    }
}

mw_status mw_keras_vars(const mw_model *m, int i, mw_keras_var *v, int *nv)
{
    const mw_layer *l = &m->layers[i];
    if (!l->block)
        return mw_keras_layer_vars(l, v, nv);
    *nv = 0;
    for (int k = 0; k < m->nlayers; k++) { /* the block's layers in Keras' order */
        const mw_layer *p = &m->layers[m->worder[k]];
        if (p->block != l->block)
            continue;
        mw_keras_var pv[MW_KERAS_MAX_VARS];
        int np = 0;
        MW_TRY(mw_keras_layer_vars(p, pv, &np));
        if (*nv + np > MW_KERAS_MAX_VARS)
            return mw_err(MW_EINTERNAL, "layer '%s': more than %d Keras variables", l->block_name,
                          MW_KERAS_MAX_VARS);
        prefix_part(p, pv, np);
        memcpy(v + *nv, pv, (size_t)np * sizeof *pv);
        *nv += np;
    }
    return MW_OK;
}

/* Layer l's sublayers, with prefix (a part's path, or ""), appended to out at *n. */
static void add_subs(const mw_layer *l, const char *prefix, char (*out)[MW_KERAS_SUB_MAX], int *n,
                     int max)
{
    static const char *const tpe[] = {"token_embedding", "position_embedding", NULL};
    const char *const *s = l->kind == MW_LAYER_MHA                  ? mha_subs
                           : l->kind == MW_LAYER_EMBED && l->pad[1] ? tpe
                                                                    : NULL;
    for (int j = 0; s && s[j] && *n < max; j++)
        snprintf(out[(*n)++], MW_KERAS_SUB_MAX, "%s%s%s", prefix, *prefix ? "/" : "", s[j]);
}

int mw_keras_layer_subs(const mw_model *m, int i, char (*out)[MW_KERAS_SUB_MAX], int max)
{
    const mw_layer *l = &m->layers[i];
    int n = 0;
    if (!l->block) {
        add_subs(l, "", out, &n, max);
        return n;
    }
    for (int k = i; k < m->nlayers && m->layers[k].block == l->block; k++) {
        const mw_layer *p = &m->layers[k];
        if (!p->part || !*p->part || p->folded || n >= max)
            continue; /* an Add (the block's own arithmetic), or a Dense's activation */
        snprintf(out[n++], MW_KERAS_SUB_MAX, "%s", p->part);
        add_subs(p, p->part, out, &n, max);
    }
    return n;
}

const char *mw_keras_class(const mw_layer *l)
{
    return l->block ? l->block_cls : l->cls;
}

int mw_keras_layer_is_own(const mw_layer *l)
{
    return !l->folded && (!l->block || l->block_first);
}

/* The three re.sub steps of to_snake_case, in order, on ASCII. */
void mw_keras_snake_case(const char *cls, char *out, size_t len)
{
    char a[128], b[256];
    size_t n = 0, m = 0;
    for (const char *p = cls; *p && n + 1 < sizeof a; p++) /* re.sub(r"\W+", "", name) */
        if (isalnum((unsigned char)*p) || *p == '_')
            a[n++] = *p;
    a[n] = '\0';
    /* re.sub("(.)([A-Z][a-z]+)", r"\1_\2"): matches do not overlap */
    for (size_t i = 0; i < n && m + 4 < sizeof b;) {
        if (i + 2 < n + 1 && isupper((unsigned char)a[i + 1]) && islower((unsigned char)a[i + 2])) {
            b[m++] = a[i], b[m++] = '_', b[m++] = a[i + 1];
            i += 2;
            while (i < n && islower((unsigned char)a[i]) && m + 2 < sizeof b)
                b[m++] = a[i++];
        } else {
            b[m++] = a[i++];
        }
    }
    b[m] = '\0';
    /* re.sub("([a-z])([A-Z])", r"\1_\2").lower() */
    size_t k = 0;
    for (size_t i = 0; i < m && k + 3 < len;) {
        if (islower((unsigned char)b[i]) && isupper((unsigned char)b[i + 1])) {
            out[k++] = b[i], out[k++] = '_', out[k++] = (char)tolower((unsigned char)b[i + 1]);
            i += 2;
        } else {
            out[k++] = (char)tolower((unsigned char)b[i++]);
        }
    }
    if (len)
        out[k < len ? k : len - 1] = '\0';
}

void mw_keras_layer_key(const mw_model *m, int i, char *out, size_t len)
{
    char mine[128], other[128];
    mw_keras_snake_case(mw_keras_class(&m->layers[i]), mine, sizeof mine);
    int before = 0;
    for (int j = 0; j < i; j++) {
        if (!mw_keras_layer_is_own(&m->layers[j]))
            continue;
        mw_keras_snake_case(mw_keras_class(&m->layers[j]), other, sizeof other);
        before += !strcmp(mine, other);
    }
    if (before)
        snprintf(out, len, "%s_%d", mine, before);
    else
        snprintf(out, len, "%s", mine);
}

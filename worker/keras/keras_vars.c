/* The per-layer Keras variable table; see keras_vars.h. */
#include "worker/keras/keras_vars.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/model/layer.h"

/* The row lists l's variables (layer.h: keras_vars); their counts must agree with their shapes. */
static mw_status layer_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    *nv = 0;
    const mw_layer_ops *row = mw_layer_row(l->kind);
    if (row->keras_vars)
        row->keras_vars(l, v, nv);
    else if (l->w_count || l->b_count)
        return mw_err(MW_EUNSUPPORTED,
                      "layer '%s' (%s) has parameters, but its row in the layer table lists no "
                      "Keras variables",
                      l->name, l->cls);
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
        if (sub[0]) /* "encoder_layers/vi_t_encoder_block_11/mha/query_dense" */
            snprintf(v[i].sub, sizeof v[i].sub, "%.63s/%.31s", l->part, sub);
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
        mw_keras_var pv[MW_KERAS_LAYER_VARS];
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
    const mw_layer_ops *row = mw_layer_row(l->kind);
    const char *const *s = row->keras_subs ? row->keras_subs(l) : NULL;
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
        if (!*p->part || p->folded || n >= max)
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
    return !l->folded && !l->tied && (!l->block || l->block_first);
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

/* Layer i's key from its snake-case class and the count of own layers of its model with the
 * same one before it. */
static void format_key(const mw_model *m, int i, const char *snake, int before, char *out,
                       size_t len)
{
    const int nest = m->layers[i].nest;
    char scope[sizeof m->nests[0].path + 8] = "";
    if (nest > 0)
        snprintf(scope, sizeof scope, "%s/layers/", m->nests[nest - 1].path);
    if (before)
        snprintf(out, len, "%s%s_%d", scope, snake, before);
    else
        snprintf(out, len, "%s%s", scope, snake);
}

void mw_keras_layer_key(const mw_model *m, int i, char *out, size_t len)
{
    char mine[128], other[128];
    const int nest = m->layers[i].nest;
    mw_keras_snake_case(mw_keras_class(&m->layers[i]), mine, sizeof mine);
    int before = 0;
    for (int j = 0; j < i; j++) { /* numbered within its own model */
        if (!mw_keras_layer_is_own(&m->layers[j]) || m->layers[j].nest != nest)
            continue;
        mw_keras_snake_case(mw_keras_class(&m->layers[j]), other, sizeof other);
        before += !strcmp(mine, other);
    }
    format_key(m, i, mine, before, out, len);
}

mw_status mw_keras_layer_keys(const mw_model *m, char **keys)
{
    const size_t n = m->nlayers > 0 ? (size_t)m->nlayers : 1;
    char(*snake)[128] = malloc(n * sizeof *snake);
    char *out = malloc(n * MW_KERAS_KEY_MAX);
    if (!snake || !out) {
        free(snake), free(out);
        return mw_err(MW_ENOMEM, "the .weights.h5 keys of %d layers (%zu bytes)", m->nlayers,
                      n * (MW_KERAS_KEY_MAX + sizeof *snake));
    }
    for (int i = 0; i < m->nlayers; i++)
        mw_keras_snake_case(mw_keras_class(&m->layers[i]), snake[i], sizeof snake[i]);
    for (int i = 0; i < m->nlayers; i++) {
        int before = 0;
        for (int j = 0; j < i; j++)
            before += mw_keras_layer_is_own(&m->layers[j]) &&
                      m->layers[j].nest == m->layers[i].nest && !strcmp(snake[i], snake[j]);
        format_key(m, i, snake[i], before, out + (size_t)i * MW_KERAS_KEY_MAX, MW_KERAS_KEY_MAX);
    }
    free(snake);
    *keys = out;
    return MW_OK;
}

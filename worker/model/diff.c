/* Comparing two models (mw_model_diff, model.h): layer by layer as the summary shows them,
 * each layer's own settings through its row (layer.h). */
#include <stdio.h>
#include <string.h>

#include "worker/model/activations.h"
#include "worker/model/diff.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"
#include "worker/model/weights.h"

/* Conv2D, Dense: an activation folded after it is its activation. */
static int weighted(const mw_layer *l)
{
    return mw_layer_row(l->kind)->matmul;
}

/* The first layer from i on that the summary shows (not a folded activation); nlayers when
 * none is left. */
static int next_shown(const mw_model *m, int i)
{
    while (i < m->nlayers && m->layers[i].folded)
        i++;
    return i;
}

static int count_shown(const mw_model *m)
{
    int n = 0;
    for (int i = next_shown(m, 0); i < m->nlayers; i = next_shown(m, i + 1))
        n++;
    return n;
}

/* The activation of shown layer i. A folded one belongs to the nearest Conv2D or Dense before
 * it: right after it, or after the MaxPool that finalize moved before it (pool_before_relu). */
static const char *act_name(const mw_layer *l)
{
    if (l->kind == MW_LAYER_ACT)
        return mw_act_kernel_name(l->act);
    return l->kind == MW_LAYER_RELU ? "relu" : l->softmax ? "softmax" : "linear";
}

static const char *activation_of(const mw_model *m, int i)
{
    const mw_layer *l = &m->layers[i];
    if (!weighted(l))
        return act_name(l);
    for (int j = i + 1; j < m->nlayers && !weighted(&m->layers[j]); j++)
        if (m->layers[j].folded)
            return act_name(&m->layers[j]);
    return "linear";
}

/* What a layer computes: Activation, ReLU and Softmax layers are all activations. */
static int role(const mw_layer *l)
{
    return l->kind == MW_LAYER_IDENTITY || l->kind == MW_LAYER_ACT || l->kind == MW_LAYER_SOFTMAX
               ? (int)MW_LAYER_RELU
               : (int)l->kind;
}

int mw_diff_text(char *d, size_t n, const char *what, const char *x, const char *y)
{
    snprintf(d, n, "%s%s%s in the checkpoint, %s in --model", what, *what ? " " : "", x, y);
    return 1;
}

static void dims_str(char *s, size_t n, const int *v, int k)
{
    size_t used = 0;
    s[0] = '\0';
    for (int i = 0; i < k && used < n; i++)
        used += (size_t)snprintf(s + used, n - used, i ? "x%d" : "%d", v[i]);
}

int mw_diff_dims(char *d, size_t n, const char *what, const int *x, const int *y, int k)
{
    if (memcmp(x, y, (size_t)k * sizeof *x) == 0)
        return 0;
    char sx[64], sy[64];
    dims_str(sx, sizeof sx, x, k);
    dims_str(sy, sizeof sy, y, k);
    return mw_diff_text(d, n, what, sx, sy);
}

/* v as text, with all its digits when the short form would read like other's. */
static void real_str(char *s, size_t n, double v, double other)
{
    char t[40];
    snprintf(s, n, "%g", v);
    snprintf(t, sizeof t, "%g", other);
    if (!strcmp(s, t))
        snprintf(s, n, "%.17g", v);
}

/* Keras' name for r (NULL: none), its values told apart from o's. */
static void reg_str(char *s, size_t n, const mw_regularizer *r, const mw_regularizer *o)
{
    static const mw_regularizer none = {0.0, 0.0};
    char l1[40], l2[40];
    if (!r) {
        snprintf(s, n, "none");
        return;
    }
    o = o ? o : &none;
    real_str(l1, sizeof l1, r->l1, o->l1);
    real_str(l2, sizeof l2, r->l2, o->l2);
    if (r->l1 == 0.0)
        snprintf(s, n, "L2(%s)", l2);
    else if (r->l2 == 0.0)
        snprintf(s, n, "L1(%s)", l1);
    else
        snprintf(s, n, "L1L2(l1=%s, l2=%s)", l1, l2);
}

/* Conv2D and Dense: use_bias, the activation and the regularizers. */
static int weights_differ(char *d, size_t n, const mw_model *a, int i, const mw_model *b, int j)
{
    const mw_layer *x = &a->layers[i], *y = &b->layers[j];
    if (x->has_bias != y->has_bias)
        return mw_diff_text(d, n, "use_bias", x->has_bias ? "true" : "false",
                            y->has_bias ? "true" : "false");
    const char *ax = activation_of(a, i), *ay = activation_of(b, j);
    if (strcmp(ax, ay) != 0)
        return mw_diff_text(d, n, "activation", ax, ay);
    for (int t = 0; t < 2; t++) {
        const mw_regularizer *rx = mw_layer_regularizer(x, t), *ry = mw_layer_regularizer(y, t);
        if ((!rx && !ry) || (rx && ry && rx->l1 == ry->l1 && rx->l2 == ry->l2))
            continue;
        char sx[96], sy[96];
        reg_str(sx, sizeof sx, rx, ry);
        reg_str(sy, sizeof sy, ry, rx);
        return mw_diff_text(d, n, t ? "bias regularizer" : "kernel regularizer", sx, sy);
    }
    return 0;
}

int mw_diff_padding(char *d, size_t n, int same_x, int same_y, const int *px, const int *py)
{
    if (memcmp(px, py, 4 * sizeof *px) == 0)
        return 0;
    return mw_diff_text(d, n, "padding", same_x ? "same" : "valid", same_y ? "same" : "valid");
}

int mw_diff_real(char *d, size_t n, const char *what, double x, double y)
{
    if (x == y)
        return 0;
    char sx[40], sy[40];
    real_str(sx, sizeof sx, x, y);
    real_str(sy, sizeof sy, y, x);
    return mw_diff_text(d, n, what, sx, sy);
}

int mw_diff_flag(char *d, size_t n, const char *what, int x, int y)
{
    return x != y && mw_diff_text(d, n, what, x ? "true" : "false", y ? "true" : "false");
}

/* The settings of x and y (of the same role) past their input shapes: x's row says. */
static int config_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    const mw_layer_ops *r = mw_layer_row(x->kind);
    return r->differs && r->differs(d, n, x, y);
}

/* The shown-layer number of output idx (-1: the model input; a folded activation counts as its
 * layer). */
static int shown_ordinal(const mw_model *m, int idx)
{
    while (idx >= 0 && m->layers[idx].folded)
        idx--;
    int k = -1;
    for (int i = 0; i <= idx; i++)
        k += !m->layers[i].folded;
    return idx < 0 ? -1 : k;
}

/* The inputs of layer i as shown-layer numbers ("input" for the model's), into s. */
static void inputs_str(char *s, size_t n, const mw_model *m, int i)
{
    const mw_layer *l = &m->layers[i];
    size_t used = 0;
    s[0] = '\0';
    for (int j = 0; j < l->nin && used < n; j++) {
        int o = shown_ordinal(m, l->in[j]);
        if (o < 0)
            used += (size_t)snprintf(s + used, n - used, "%sthe input", j ? ", " : "");
        else
            used += (size_t)snprintf(s + used, n - used, "%slayer %d", j ? ", " : "", o);
    }
}

/* The first difference between shown layer i of a and shown layer j of b into d; 0: none. */
static int layer_differs(char *d, size_t n, const mw_model *a, int i, const mw_model *b, int j)
{
    const mw_layer *x = &a->layers[i], *y = &b->layers[j];
    if (role(x) != role(y))
        return mw_diff_text(d, n, "", x->cls, y->cls);
    char ix[160], iy[160];
    inputs_str(ix, sizeof ix, a, i);
    inputs_str(iy, sizeof iy, b, j);
    if (strcmp(ix, iy) != 0)
        return mw_diff_text(d, n, "inputs", ix, iy);
    if (mw_diff_dims(d, n, "input", (const int[]){x->in_h, x->in_w, x->in_c},
                     (const int[]){y->in_h, y->in_w, y->in_c}, 3) ||
        config_differs(d, n, x, y))
        return 1;
    if (weighted(x) && weights_differ(d, n, a, i, b, j))
        return 1;
    if (role(x) == MW_LAYER_RELU) {
        const char *ax = activation_of(a, i), *ay = activation_of(b, j);
        if (strcmp(ax, ay) != 0)
            return mw_diff_text(d, n, "activation", ax, ay);
        if (x->kind == MW_LAYER_ACT && mw_diff_real(d, n, "alpha", x->alpha, y->alpha))
            return 1;
    }
    return mw_diff_dims(d, n, "output", (const int[]){x->out_h, x->out_w, x->out_c},
                        (const int[]){y->out_h, y->out_w, y->out_c}, 3);
}

int mw_model_diff(const mw_model *a, const mw_model *b, char *what, size_t len)
{
    const int na = count_shown(a), nb = count_shown(b);
    char d[400], head[96] = "";
    if (na != nb)
        snprintf(head, sizeof head, "the checkpoint has %d layers, --model %d", na, nb);
    int k = 0;
    for (int i = next_shown(a, 0), j = next_shown(b, 0); i < a->nlayers && j < b->nlayers;
         i = next_shown(a, i + 1), j = next_shown(b, j + 1), k++) {
        if (!layer_differs(d, sizeof d, a, i, b, j))
            continue;
        const char *nx = a->layers[i].name, *ny = b->layers[j].name;
        char where[280];
        if (!strcmp(nx, ny))
            snprintf(where, sizeof where, "layer %d (%s)", k, nx);
        else
            snprintf(where, sizeof where, "layer %d (%s; %s in --model)", k, nx, ny);
        if (na != nb)
            snprintf(what, len, "%s; the first difference is %s: %s", head, where, d);
        else
            snprintf(what, len, "%s: %s", where, d);
        return 1;
    }
    if (na != nb) {
        snprintf(what, len, "%s (the first %d are alike)", head, k);
        return 1;
    }
    if (len)
        what[0] = '\0';
    return 0;
}

/* Add, Multiply and Concatenate: the merges of a Functional graph's tensors, Add and Multiply
 * with Keras' broadcasting (kernels.h: mw_bcast_geom). The layer table's rows
 * (worker/model/layer.h). */
#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include <string.h>

#include "kernels/cast.h"
#include "worker/model/layer.h"
#include "worker/model/layers/merge.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"

/* Concatenate's inputs: every input's height, width and flatness equal to the first's; out_c
 * gets the channel total. */
static mw_status concat_layer(mw_model *m, mw_layer *l)
{
    int s0[3], s[3];
    mw_model_shape_of(m, l->in[0], s0);
    l->out_h = s0[0], l->out_w = s0[1], l->out_c = 0;
    for (int j = 0; j < l->nin; j++) {
        mw_model_shape_of(m, l->in[j], s);
        int flat = l->in[j] < 0 ? m->flat_input : m->layers[l->in[j]].flat;
        if (s[0] != s0[0] || s[1] != s0[1] || flat != l->flat)
            return mw_layer_reject(
                m, mw_err(MW_EMODEL,
                          "layer '%s' (%s): input %d ('%s') is %dx%dx%d but input 0 ('%s') is "
                          "%dx%dx%d; expected the same height and width",
                          l->name, l->cls, j, mw_model_producer_name(m, l->in[j]), s[0], s[1], s[2],
                          mw_model_producer_name(m, l->in[0]), s0[0], s0[1], s0[2]));
        l->out_c += s[2];
    }
    return MW_OK;
}

/* Add's and Multiply's inputs broadcast as Keras' elementwise merges do: the shapes aligned on
 * the right (a flat (None, C) is (1, 1, C) here, as Keras expands it to (None, 1, 1, C)), each
 * axis of one size or 1 in every input; the output takes the larger size, flat only when
 * every input is. */
static mw_status broadcast_layer(mw_model *m, mw_layer *l)
{
    int s[3], o[3] = {1, 1, 1}, flat = 1;
    for (int j = 0; j < l->nin; j++) {
        mw_model_shape_of(m, l->in[j], s);
        flat &= l->in[j] < 0 ? m->flat_input : m->layers[l->in[j]].flat;
        for (int a = 0; a < 3; a++)
            o[a] = s[a] > o[a] ? s[a] : o[a];
    }
    for (int j = 0; j < l->nin; j++) {
        mw_model_shape_of(m, l->in[j], s);
        for (int a = 0; a < 3; a++)
            if (s[a] != o[a] && s[a] != 1)
                return mw_layer_reject(
                    m, mw_err(MW_EMODEL,
                              "layer '%s' (%s): input %d ('%s') is %dx%dx%d, which does not "
                              "broadcast to %dx%dx%d; expected equal shapes, or sizes of 1 on "
                              "the axes where they differ",
                              l->name, l->cls, j, mw_model_producer_name(m, l->in[j]), s[0], s[1],
                              s[2], o[0], o[1], o[2]));
        l->bcast |= s[0] != o[0] || s[1] != o[1] || s[2] != o[2];
    }
    l->out_h = o[0], l->out_w = o[1], l->out_c = o[2], l->flat = flat;
    return MW_OK;
}

mw_status mw_model_add_add(mw_model *m, const char *name)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_ADD, name, "Add", "add");
    if (!l)
        return mw_err_status();
    l->kscale = 1.0f;
    return broadcast_layer(m, l);
}

/* Two inputs exactly (Multiply, CustomScaleLayer). */
static mw_status need_two(mw_model *m, const mw_layer *l)
{
    if (l->nin != 2)
        return mw_layer_reject(m, mw_err(MW_EUNSUPPORTED,
                                         "layer '%s' (%s): %d inputs; supported: exactly 2",
                                         l->name, l->cls, l->nin));
    return MW_OK;
}

mw_status mw_model_add_multiply(mw_model *m, const char *name)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_MULTIPLY, name, "Multiply", "multiply");
    if (!l)
        return mw_err_status();
    l->kscale = 1.0f;
    MW_TRY(need_two(m, l));
    return broadcast_layer(m, l);
}

mw_status mw_model_add_scaled_sum(mw_model *m, const char *name, float scale)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_ADD, name, "CustomScaleLayer", "custom_scale_layer");
    if (!l)
        return mw_err_status();
    l->kscale = scale;
    MW_TRY(need_two(m, l));
    return broadcast_layer(m, l);
}

mw_status mw_model_add_const(mw_model *m, const char *name, int mul, float c)
{
    mw_layer *l = mw_layer_push(m, mul ? MW_LAYER_MULTIPLY : MW_LAYER_ADD, name,
                                mul ? "Multiply" : "Add", mul ? "multiply" : "add");
    if (!l)
        return mw_err_status();
    if (l->nin != 1)
        return mw_layer_reject(m, mw_err(MW_EINTERNAL,
                                         "layer '%s' (%s): a constant beside %d "
                                         "inputs",
                                         l->name, l->cls, l->nin));
    l->konst = 1, l->kscale = c;
    return broadcast_layer(m, l);
}

mw_status mw_model_add_concat(mw_model *m, const char *name)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_CONCAT, name, "Concatenate", "concatenate");
    return l ? concat_layer(m, l) : mw_err_status();
}

/* The broadcast of output tensor a's and tensor b's shapes onto l's output, n examples. */
static mw_bcast_geom bcast_geom(const mw_layer_call *c, int ta, int tb)
{
    const mw_layer *l = c->l;
    mw_bcast_geom g = {{c->n, l->out_h, l->out_w, l->out_c}, {0}, {0}};
    const int t[2] = {ta, tb};
    for (int k = 0; k < 2; k++) {
        int s[3];
        size_t *st = k ? g.sb : g.sa;
        if (t[k] == 0)
            s[0] = c->m->in_h, s[1] = c->m->in_w, s[2] = c->m->in_c;
        else
            mw_model_shape_of(c->m, t[k] - 1, s);
        st[3] = s[2] > 1;
        st[2] = s[1] > 1 ? (size_t)s[2] : 0;
        st[1] = s[0] > 1 ? (size_t)s[1] * s[2] : 0;
        st[0] = (size_t)s[0] * s[1] * s[2];
    }
    return g;
}

/* The output's own tensor index, as the inputs' (act[i + 1]). */
#define SELF(c) ((c)->i + 1)

/* Whether l runs on the plain kernels (equal shapes, no factor, no constant): acc, mul_*. */
static int plain(const mw_layer *l)
{
    return !l->bcast && !l->konst && l->kscale == 1.0f;
}

/* The factor of a product, or the constant of x + c, x * c as the layer computes with it:
 * under a mixed policy the constant rounded to the 16-bit dtype (JAX casts a Python number, or
 * a scalar of the tensor's dtype, to it: the reader gives a float32 scalar's product float32). */
static float scale_of(const mw_layer *l)
{
    if (!l->konst)
        return l->kscale;
    return l->policy == MW_POLICY_MIXED_BFLOAT16  ? mw_bf16_round(l->kscale)
           : l->policy == MW_POLICY_MIXED_FLOAT16 ? mw_f16_round(l->kscale)
                                                  : l->kscale;
}

static void add_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    if (l->konst) { /* x + c */
        const mw_bcast_geom g = bcast_geom(c, SELF(c), l->in[0] + 1);
        c->kt->bcast_fwd(c->k, c->y, c->x, NULL, &g, 0, scale_of(l));
        return;
    }
    int j = 0;
    if (plain(l) && l->nin >= 2) { /* (0 + x_0) + x_1 in one pass, as the loop below sums */
        c->kt->add2(c->k, c->y, c->ws->act[l->in[0] + 1], c->ws->act[l->in[1] + 1], c->cnt);
        j = 2;
    } else {
        mw_layer_zero(c->kt, c->k, c->y, c->cnt * sizeof *c->y);
    }
    for (; j < l->nin; j++) {
        const int t = l->in[j] + 1;
        if (plain(l)) {
            c->kt->acc(c->k, c->y, c->ws->act[t], c->cnt);
        } else { /* y = y + x_j (times kscale after the first), as Keras sums them in order */
            const mw_bcast_geom g = bcast_geom(c, SELF(c), t);
            c->kt->bcast_fwd(c->k, c->y, c->y, c->ws->act[t], &g, 0, j ? l->kscale : 1.0f);
        }
    }
}

/* Each input's gradient plus dy; where c->dx_set has its bit (the first to add into it), dy
 * written: 0 + dy in one pass, the bits of zeroing then adding. */
static void add_backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    for (int j = 0; j < l->nin; j++) {
        const int t = l->in[j] + 1;
        if (t == 0)
            continue;
        const int set = c->dx_set >> j & 1u;
        if (plain(l) && set) {
            c->kt->add2(c->k, c->ws->grad[t], c->dy, NULL, c->cnt);
            continue;
        }
        if (plain(l)) {
            c->kt->acc(c->k, c->ws->grad[t], c->dy, c->cnt);
            continue;
        }
        if (set) /* the broadcast's backward adds: zeroed first */
            mw_layer_zero(c->kt, c->k, c->ws->grad[t],
                          mw_model_tensor_count(c->m, t) * (size_t)c->n * sizeof(float));
        const mw_bcast_geom g = bcast_geom(c, SELF(c), t);
        const float s = j && !l->konst ? l->kscale : 1.0f;
        c->kt->bcast_bwd(c->k, NULL, c->ws->grad[t], c->dy, NULL, NULL, &g, 0, s);
    }
}

static int add_kernels(const mw_layer *l, const mw_kernels *t)
{
    return plain(l) ? t->add2 != NULL : t->bcast_fwd && t->bcast_bwd;
}

static void mul_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const int u = l->konst ? 0 : l->in[1] + 1;
    if (plain(l)) {
        c->kt->mul_fwd(c->k, c->y, c->x, c->ws->act[u], c->cnt);
    } else {
        const mw_bcast_geom g = bcast_geom(c, l->in[0] + 1, l->konst ? SELF(c) : u);
        c->kt->bcast_fwd(c->k, c->y, c->x, l->konst ? NULL : c->ws->act[u], &g, 1, scale_of(l));
    }
}

static void mul_backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const int u = l->konst ? 0 : l->in[1] + 1;
    float *du = u > 0 ? c->ws->grad[u] : NULL;
    if (plain(l)) {
        c->kt->mul_bwd(c->k, c->dx, du, c->dy, c->x, c->ws->act[u], c->cnt);
    } else {
        const mw_bcast_geom g = bcast_geom(c, l->in[0] + 1, l->konst ? SELF(c) : u);
        c->kt->bcast_bwd(c->k, c->dx, du, c->dy, c->x, l->konst ? NULL : c->ws->act[u], &g, 1,
                         scale_of(l));
    }
}

static int mul_kernels(const mw_layer *l, const mw_kernels *t)
{
    return plain(l) ? t->mul_fwd && t->mul_bwd : t->bcast_fwd && t->bcast_bwd;
}

/* The channels of input j. */
static int channels(const mw_layer_call *c, int j)
{
    const mw_layer *l = c->l;
    return (int)mw_model_tensor_count(c->m, l->in[j] + 1) / (l->out_h * l->out_w);
}

static void concat_forward(const mw_layer_call *c)
{
    for (int j = 0, off = 0; j < c->l->nin; j++) {
        const int cj = channels(c, j);
        c->kt->concat_fwd(c->k, c->y, c->ws->act[c->l->in[j] + 1], c->rows, cj, c->l->out_c, off);
        off += cj;
    }
}

static void concat_backward(const mw_layer_call *c)
{
    for (int j = 0, off = 0; j < c->l->nin; j++) {
        const int tj = c->l->in[j] + 1, cj = channels(c, j);
        if (tj > 0)
            c->kt->concat_bwd(c->k, c->ws->grad[tj], c->dy, c->rows, cj, c->l->out_c, off);
        off += cj;
    }
}

static int concat_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->concat_fwd && t->concat_bwd;
}

/* ---- Keras ---- */

/* Add, Multiply, Concatenate: inputs from the graph (a Sequential model has none to merge). */
static mw_status add_merge(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg, const char *name,
                           const char *cls)
{
    if (B->m->next_nin < 1)
        return mw_kfail(L, MW_EMODEL, "a merge layer needs a Functional model's inbound_nodes");
    mw_status rc;
    if (!strcmp(cls, "Concatenate")) {
        int p = B->m->next_in[0], flat = p >= 0 ? B->m->layers[p].flat : B->m->flat_input;
        MW_TRY(mw_kget_bn_axis(L, cfg, flat));
        rc = mw_model_add_concat(B->m, name);
    } else if (B->has_konst) { /* x + c, x * c */
        rc = mw_model_add_const(B->m, name, !strcmp(cls, "Multiply"), (float)B->konst);
    } else if (!strcmp(cls, "Add")) {
        rc = mw_model_add_add(B->m, name);
    } else {
        rc = mw_model_add_multiply(B->m, name);
    }
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

/* The keys Keras writes for Add and Multiply (none of their own) and Concatenate (axis)
 * (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {MW_KEND}, concat_keys[] = {MW_KREAD("axis"), MW_KEND};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg,
                          strcmp(cls, "Concatenate") ? keys : concat_keys, 1));
    return add_merge(R->B, R->L, cfg, name, cls);
}

/* CustomScaleLayer's factor, an operation's constant. */
static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_flag(d, n, "constant", x->konst, y->konst) ||
           mw_diff_real(d, n, x->konst ? "constant" : "scale", x->kscale, y->kscale);
}

const mw_layer_ops mw_layer_add = {
    .keras = {"Add"},
    .parse = parse,
    .forward = add_forward,
    .backward = add_backward,
    .sets_dx = 2,
    .has_kernels = add_kernels,
    .differs = differs,
    .mask = mw_mask_pass,
};

const mw_layer_ops mw_layer_multiply = {
    .keras = {"Multiply"},
    .parse = parse,
    .forward = mul_forward,
    .backward = mul_backward,
    .has_kernels = mul_kernels,
    .differs = differs,
    .mask = mw_mask_pass,
};

const mw_layer_ops mw_layer_concat = {
    .keras = {"Concatenate"},
    .parse = parse,
    .forward = concat_forward,
    .backward = concat_backward,
    .stays_16bit = mw_layer_stays_16bit_always,
    .has_kernels = concat_kernels,
};

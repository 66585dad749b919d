/* The activations: ReLU, the identity (linear, and the final softmax folded into the loss),
 * the other activation functions, and a softmax computed as a layer. The layer table's rows
 * (worker/model/layer.h). */
#include <math.h>
#include <stdio.h>

#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include <string.h>

#include "worker/model/activations.h"
#include "worker/model/layer.h"
#include "worker/model/layers/activation.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"

mw_status mw_model_add_relu(mw_model *m, const char *name, int folded)
{
    char nm[96] = "";
    if (folded && m->nlayers > 0)
        snprintf(nm, sizeof nm, "%.80s/relu", m->layers[m->nlayers - 1].name);
    mw_layer *l = mw_layer_push_same(m, MW_LAYER_RELU, folded ? nm : name, "ReLU", "re_lu");
    if (!l)
        return mw_err_status();
    l->folded = folded;
    return MW_OK;
}

mw_status mw_model_add_relux(mw_model *m, const char *name, float max_value, float slope,
                             float threshold)
{
    if (!(max_value >= 0.0f && slope >= 0.0f && threshold >= 0.0f))
        return mw_err(MW_EMODEL,
                      "ReLU '%s': max_value %g, negative_slope %g, threshold %g: expected "
                      "max_value >= 0 (or none), negative_slope >= 0 and threshold >= 0",
                      name ? name : "re_lu", (double)max_value, (double)slope, (double)threshold);
    mw_layer *l = mw_layer_push(m, MW_LAYER_RELUX, name, "ReLU", "re_lu");
    if (!l)
        return mw_err_status();
    l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
    l->relu_max = max_value, l->alpha = slope, l->relu_threshold = threshold;
    /* Without a slope or threshold its output y is 0 < y < max_value exactly where its input is
     * (y = x there, 0 or max_value elsewhere), so the backward's mask reads the same from y, and
     * it may write y over x (the model's plan_in_place decides). */
    l->in_place = slope == 0.0f && threshold == 0.0f;
    return MW_OK;
}

mw_status mw_model_add_activation(mw_model *m, const char *name, mw_activation act)
{
    mw_layer *l = mw_layer_push_same(m, act == MW_ACT_RELU ? MW_LAYER_RELU : MW_LAYER_IDENTITY,
                                     name, "Activation", "activation");
    if (!l)
        return mw_err_status();
    l->softmax = act == MW_ACT_SOFTMAX;
    return MW_OK;
}

mw_status mw_model_add_softmax(mw_model *m, const char *name, int folded)
{
    char nm[96] = "";
    if (folded && m->nlayers > 0)
        snprintf(nm, sizeof nm, "%.80s/softmax", m->layers[m->nlayers - 1].name);
    mw_layer *l =
        mw_layer_push_same(m, MW_LAYER_IDENTITY, folded ? nm : name, "Softmax", "softmax");
    if (!l)
        return mw_err_status();
    l->softmax = 1;
    l->folded = folded;
    return MW_OK;
}

mw_status mw_model_add_act(mw_model *m, const char *name, mw_activation act, float alpha,
                           int folded)
{
    const mw_act_info *info = mw_act_info_of(act);
    if (act == MW_ACT_RELU)
        return folded ? mw_model_add_relu(m, NULL, 1) : mw_model_add_activation(m, name, act);
    if (act == MW_ACT_SOFTMAX)
        return folded ? mw_model_add_softmax(m, NULL, 1) : mw_model_add_activation(m, name, act);
    if (act == MW_ACT_LINEAR)
        return folded ? MW_OK : mw_model_add_activation(m, name, act);
    char nm[96] = "";
    if (folded && m->nlayers > 0)
        snprintf(nm, sizeof nm, "%.80s/%.12s", m->layers[m->nlayers - 1].name, info->name);
    mw_layer *l = mw_layer_push(m, MW_LAYER_ACT, folded ? nm : name, "Activation", "activation");
    if (!l)
        return mw_err_status();
    l->act = (mw_act_kind)info->kernel;
    l->alpha = alpha;
    l->folded = folded;
    l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
    return MW_OK;
}

static void relu_forward(const mw_layer_call *c)
{
    c->kt->relu_fwd(c->k, c->y, c->x, c->cnt);
}

static void relu_backward(const mw_layer_call *c)
{
    if (!c->dx)
        return;
    c->kt->relu_bwd(c->k, mw_layer_bwd_out(c), c->dy, c->y, c->cnt);
    mw_layer_pass_bwd(c);
}

static void relux_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->relux_fwd(c->k, c->y, c->x, c->cnt, l->relu_max, l->alpha, l->relu_threshold);
}

static void relux_backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    if (c->dx) /* in place: dx is dy, written over */
        c->kt->relux_bwd(c->k, c->dx, c->dy, c->x, c->cnt, l->relu_max, l->alpha, l->relu_threshold,
                         c->dx_set || l->in_place);
}

static int relux_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->relux_fwd && t->relux_bwd;
}

static int relux_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_real(d, n, "max_value", x->relu_max, y->relu_max) ||
           mw_diff_real(d, n, "negative_slope", x->alpha, y->alpha) ||
           mw_diff_real(d, n, "threshold", x->relu_threshold, y->relu_threshold);
}

static void act_forward(const mw_layer_call *c)
{
    c->kt->act_fwd(c->k, c->y, c->x, c->cnt, c->l->act, c->l->alpha);
}

static void act_backward(const mw_layer_call *c)
{
    if (c->dx)
        c->kt->act_bwd(c->k, c->dx, c->dy, c->x, c->y, c->cnt, c->l->act, c->l->alpha);
}

static int act_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->act_fwd && t->act_bwd;
}

static void softmax_forward(const mw_layer_call *c)
{
    c->kt->softmax_fwd(c->k, c->y, c->x, c->rows, c->l->out_c);
}

static void softmax_backward(const mw_layer_call *c)
{
    if (c->dx)
        c->kt->softmax_bwd(c->k, c->dx, c->dy, c->y, c->rows, c->l->out_c);
}

static int softmax_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->softmax_fwd && t->softmax_bwd;
}

/* ---- Keras ---- */

/* ReLU(max_value, negative_slope, threshold): the plain one when all three are the defaults
 * (null, 0, 0), else MW_LAYER_RELUX; Keras' constructor refuses a negative one. */
static mw_status add_relu_layer(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg,
                                const char *name)
{
    static const char *const keys[] = {"max_value", "negative_slope", "threshold"};
    double v[3] = {INFINITY, 0.0, 0.0};
    mw_kdbuf d;
    for (int i = 0; i < 3; i++) {
        const json_t *j = json_object_get(cfg, keys[i]);
        if (i == 0 && (!j || json_is_null(j)))
            continue;
        MW_TRY(mw_kget_num(L, "", cfg, keys[i], v[i], &v[i]));
        if (!(v[i] >= 0.0))
            return mw_kfail(L, MW_EMODEL, "%s: found %s; expected a number >= 0%s", keys[i],
                            mw_kdescribe(d, j), i == 0 ? " or null" : "");
    }
    mw_status rc = v[0] == INFINITY && v[1] == 0.0 && v[2] == 0.0
                       ? mw_model_add_relu(B->m, name, 0)
                       : mw_model_add_relux(B->m, name, (float)v[0], (float)v[1], (float)v[2]);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

static mw_status add_activation_layer(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg,
                                      const char *name, int is_last)
{
    mw_activation act;
    MW_TRY(mw_kget_activation(L, cfg, "activation", is_last, 1, &act));
    mw_status rc = mw_model_add_act(B->m, name, act, mw_act_info_of(act)->param, 0);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

static mw_status add_softmax_layer(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg,
                                   const char *name, int is_last)
{
    const json_t *axis = json_object_get(cfg, "axis");
    mw_kdbuf d;
    int a = -1;
    if (axis && json_is_array(axis) && json_array_size(axis) == 1)
        axis = json_array_get(axis, 0);
    if (axis && !json_is_null(axis) && (!mw_kas_int(axis, -8, 8, &a) || a != -1))
        return mw_kfail(L, MW_EUNSUPPORTED, "axis: found %s; supported: -1 (the class axis)",
                        mw_kdescribe(d, axis));
    (void)is_last; /* before the end it is computed as a layer */
    mw_status rc = mw_model_add_softmax(B->m, name, 0);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

/* LeakyReLU (negative_slope; Keras 2: alpha; default 0.3) and ELU (alpha, default 1). */
static mw_status add_param_act(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg,
                               const char *name, int elu)
{
    double a = elu ? 1.0 : 0.3;
    if (!elu && json_object_get(cfg, "negative_slope"))
        MW_TRY(mw_kget_num(L, "", cfg, "negative_slope", 0.3, &a));
    else
        MW_TRY(mw_kget_num(L, "", cfg, "alpha", a, &a));
    mw_status rc = mw_model_add_act(B->m, name, elu ? MW_ACT_ELU : MW_ACT_LEAKY_RELU, (float)a, 0);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    B->m->layers[B->m->nlayers - 1].cls = elu ? "ELU" : "LeakyReLU";
    return MW_OK;
}

/* The keys Keras writes for ReLU, Activation, Softmax, LeakyReLU (Keras 2: alpha) and ELU
 * (worker/model/keras_keys.h). */
static const mw_kkey relu_keys[] = {MW_KREAD("max_value"), MW_KREAD("negative_slope"),
                                    MW_KREAD("threshold"), MW_KEND},
                     act_keys[] = {MW_KREAD("activation"), MW_KEND},
                     softmax_keys[] = {MW_KREAD("axis"), MW_KEND},
                     param_keys[] = {MW_KREAD("negative_slope"), MW_KREAD("alpha"), MW_KEND};

static mw_status parse_relu(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg, relu_keys, 1));
    return add_relu_layer(R->B, R->L, cfg, name);
}

/* Activation and Softmax layers. */
static mw_status parse_identity(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg,
                          strcmp(cls, "Softmax") ? act_keys : softmax_keys, 1));
    if (!strcmp(cls, "Softmax"))
        return add_softmax_layer(R->B, R->L, cfg, name, R->is_last);
    return add_activation_layer(R->B, R->L, cfg, name, R->is_last);
}

static mw_status parse_act(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg, param_keys, 1));
    return add_param_act(R->B, R->L, cfg, name, !strcmp(cls, "ELU"));
}

/* ReLU, Activation (relu, linear, softmax) and Softmax layers as their own class. */
static const char *to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    if (!strcmp(l->cls, "Activation"))
        json_object_set_new(c, "activation",
                            json_string(l->kind == MW_LAYER_RELU ? "relu"
                                        : l->softmax             ? "softmax"
                                                                 : "linear"));
    else if (!strcmp(l->cls, "Softmax"))
        json_object_set_new(c, "axis", json_integer(-1));
    else if (strcmp(l->cls, "ReLU") != 0)
        return NULL;
    else if (l->kind == MW_LAYER_RELUX) {
        json_object_set_new(c, "max_value",
                            l->relu_max == INFINITY ? json_null() : json_real(l->relu_max));
        json_object_set_new(c, "negative_slope", json_real(l->alpha));
        json_object_set_new(c, "threshold", json_real(l->relu_threshold));
    }
    return l->cls;
}

const mw_layer_ops mw_layer_relu = {
    .keras = {"ReLU"},
    .parse = parse_relu,
    .forward = relu_forward,
    .backward = relu_backward,
    .stays_16bit = mw_layer_stays_16bit_always,
    .to_keras = to_keras,
    .mask = mw_mask_pass,
};

/* Read by the ReLU row's parse (not a class of its own): it computes from its input. */
const mw_layer_ops mw_layer_relux = {
    .forward = relux_forward,
    .backward = relux_backward,
    .sets_dx = 1,
    .has_kernels = relux_kernels,
    .differs = relux_differs,
    .to_keras = to_keras,
    .mask = mw_mask_pass,
};

const mw_layer_ops mw_layer_identity = {
    .keras = {"Activation", "Softmax"},
    .parse = parse_identity,
    .forward = mw_layer_pass_fwd,
    .backward = mw_layer_pass_bwd,
    .stays_16bit = mw_layer_stays_16bit_always,
    .to_keras = to_keras,
    .mask = mw_mask_pass,
};

const mw_layer_ops mw_layer_act = {
    .keras = {"LeakyReLU", "ELU"},
    .parse = parse_act,
    .forward = act_forward,
    .backward = act_backward,
    .has_kernels = act_kernels,
    .mask = mw_mask_pass,
};

/* Made by finalize from a softmax before the last layer (not read from Keras itself). */
const mw_layer_ops mw_layer_softmax = {
    .forward = softmax_forward,
    .backward = softmax_backward,
    .has_kernels = softmax_kernels,
};

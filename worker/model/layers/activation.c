/* The activations: ReLU, the identity (linear, and the final softmax folded into the loss),
 * the other activation functions, and a softmax computed as a layer. The layer table's rows
 * (worker/model/layer.h). */
#include <stdio.h>

#include "worker/model/layer.h"
#include "worker/model/model.h"

mw_status mw_model_add_relu(mw_model *m, const char *name, int folded)
{
    char nm[80] = "";
    if (folded && m->nlayers > 0)
        snprintf(nm, sizeof nm, "%s/relu", m->layers[m->nlayers - 1].name);
    mw_layer *l = mw_layer_push_same(m, MW_LAYER_RELU, folded ? nm : name, "ReLU", "re_lu");
    if (!l)
        return mw_err_status();
    l->folded = folded;
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
    char nm[80] = "";
    if (folded && m->nlayers > 0)
        snprintf(nm, sizeof nm, "%s/softmax", m->layers[m->nlayers - 1].name);
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
    static const char *const names[] = {"linear", "relu", "softmax", "sigmoid",   "tanh",
                                        "gelu",   "silu", "elu",     "leaky_relu"};
    if (act == MW_ACT_RELU)
        return folded ? mw_model_add_relu(m, NULL, 1) : mw_model_add_activation(m, name, act);
    if (act == MW_ACT_SOFTMAX)
        return folded ? mw_model_add_softmax(m, NULL, 1) : mw_model_add_activation(m, name, act);
    if (act == MW_ACT_LINEAR)
        return folded ? MW_OK : mw_model_add_activation(m, name, act);
    char nm[80] = "";
    if (folded && m->nlayers > 0)
        snprintf(nm, sizeof nm, "%s/%s", m->layers[m->nlayers - 1].name, names[act]);
    mw_layer *l = mw_layer_push(m, MW_LAYER_ACT, folded ? nm : name, "Activation", "activation");
    if (!l)
        return mw_err_status();
    static const mw_act_kind kinds[] = {0,
                                        0,
                                        0,
                                        MW_ACTK_SIGMOID,
                                        MW_ACTK_TANH,
                                        MW_ACTK_GELU,
                                        MW_ACTK_SILU,
                                        MW_ACTK_ELU,
                                        MW_ACTK_LEAKY_RELU};
    l->act = kinds[act];
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

/* Selects, copies or zeroes: 16-bit values stay 16-bit both ways. */
static int always(const mw_layer *l, int backward)
{
    (void)l, (void)backward;
    return 1;
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

const mw_layer_ops mw_layer_relu = {
    .keras = {"ReLU"},
    .forward = relu_forward,
    .backward = relu_backward,
    .exact = always,
};

const mw_layer_ops mw_layer_identity = {
    .keras = {"Activation", "Softmax"},
    .forward = mw_layer_pass_fwd,
    .backward = mw_layer_pass_bwd,
    .exact = always,
};

const mw_layer_ops mw_layer_act = {
    .keras = {"LeakyReLU", "ELU"},
    .forward = act_forward,
    .backward = act_backward,
    .has_kernels = act_kernels,
};

/* Made by finalize from a softmax before the last layer (not read from Keras itself). */
const mw_layer_ops mw_layer_softmax = {
    .forward = softmax_forward,
    .backward = softmax_backward,
    .has_kernels = softmax_kernels,
};

/* Add, Multiply and Concatenate: the merges of a Functional graph's tensors. The layer
 * table's rows (worker/model/layer.h). */
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include <string.h>

#include "worker/model/layer.h"
#include "worker/model/layers/merge.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"

/* A merge of l's inputs: every input's shape equal to the first's, or (concat) the same
 * height and width; out_c gets the channel total. */
static mw_status merge_layer(mw_model *m, mw_layer *l, int concat)
{
    int s0[3], s[3];
    mw_model_shape_of(m, l->in[0], s0);
    l->out_h = s0[0], l->out_w = s0[1], l->out_c = 0;
    for (int j = 0; j < l->nin; j++) {
        mw_model_shape_of(m, l->in[j], s);
        int flat = l->in[j] < 0 ? m->flat_input : m->layers[l->in[j]].flat;
        if (s[0] != s0[0] || s[1] != s0[1] || (!concat && s[2] != s0[2]) || flat != l->flat)
            return mw_layer_reject(
                m, mw_err(MW_EMODEL,
                          "layer '%s' (%s): input %d ('%s') is %dx%dx%d but input 0 ('%s') is "
                          "%dx%dx%d; expected %s",
                          l->name, l->cls, j, mw_model_producer_name(m, l->in[j]), s[0], s[1], s[2],
                          mw_model_producer_name(m, l->in[0]), s0[0], s0[1], s0[2],
                          concat ? "the same height and width" : "equal shapes"));
        l->out_c += s[2];
    }
    if (!concat)
        l->out_c = s0[2];
    return MW_OK;
}

mw_status mw_model_add_add(mw_model *m, const char *name)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_ADD, name, "Add", "add");
    return l ? merge_layer(m, l, 0) : mw_err_status();
}

mw_status mw_model_add_multiply(mw_model *m, const char *name)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_MULTIPLY, name, "Multiply", "multiply");
    if (!l)
        return mw_err_status();
    if (l->nin != 2)
        return mw_layer_reject(m, mw_err(MW_EUNSUPPORTED,
                                         "layer '%s' (Multiply): %d inputs; supported: exactly 2",
                                         l->name, l->nin));
    return merge_layer(m, l, 0);
}

mw_status mw_model_add_concat(mw_model *m, const char *name)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_CONCAT, name, "Concatenate", "concatenate");
    return l ? merge_layer(m, l, 1) : mw_err_status();
}

static void add_forward(const mw_layer_call *c)
{
    mw_layer_zero(c->kt, c->k, c->y, c->cnt * sizeof *c->y);
    for (int j = 0; j < c->l->nin; j++)
        c->kt->acc(c->k, c->y, c->ws->act[c->l->in[j] + 1], c->cnt);
}

static void add_backward(const mw_layer_call *c)
{
    for (int j = 0; j < c->l->nin; j++)
        if (c->l->in[j] >= 0)
            c->kt->acc(c->k, c->ws->grad[c->l->in[j] + 1], c->dy, c->cnt);
}

static void mul_forward(const mw_layer_call *c)
{
    c->kt->mul_fwd(c->k, c->y, c->x, c->ws->act[c->l->in[1] + 1], c->cnt);
}

static void mul_backward(const mw_layer_call *c)
{
    const int u = c->l->in[1] + 1;
    c->kt->mul_bwd(c->k, c->dx, u > 0 ? c->ws->grad[u] : NULL, c->dy, c->x, c->ws->act[u], c->cnt);
}

static int mul_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->mul_fwd && t->mul_bwd;
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

const mw_layer_ops mw_layer_add = {
    .keras = {"Add"},
    .parse = parse,
    .forward = add_forward,
    .backward = add_backward,
    .mask = mw_mask_pass,
};

const mw_layer_ops mw_layer_multiply = {
    .keras = {"Multiply"},
    .parse = parse,
    .forward = mul_forward,
    .backward = mul_backward,
    .has_kernels = mul_kernels,
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

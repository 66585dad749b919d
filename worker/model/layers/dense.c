/* Dense: the layer table's row (worker/model/layer.h). */
#include "worker/model/layers/dense.h"
#include "worker/model/activations.h"
#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/activation.h"
#include "worker/model/model.h"

mw_status mw_model_add_dense(mw_model *m, const char *name, int units, int use_bias)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_DENSE, name, "Dense", "dense");
    if (!l)
        return mw_err_status();
    if (units <= 0)
        return mw_layer_reject(
            m, mw_err(MW_EMODEL, "layer '%s' (Dense): units %d: expected > 0", l->name, units));
    /* a flat input, or a sequence (None, T, C) (here 1 x T x C) or an image (None, H, W, C):
     * the same kernel on each of the positions, as Keras' Dense on the last axis */
    l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = units;
    l->w_count = (size_t)l->in_c * units;
    l->has_bias = use_bias;
    l->b_count = use_bias ? (size_t)units : 0;
    l->fan_in = l->in_c, l->fan_out = units;
    l->kernel_init.kind = MW_INIT_GLOROT_UNIFORM, l->bias_init.kind = MW_INIT_ZEROS;
    return MW_OK;
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->dense_fwd(c->k, c->y, c->x, c->P + l->w_off, l->has_bias ? c->P + l->b_off : NULL,
                     c->n * l->in_h * l->in_w, l->in_c, l->out_c); /* n x H x W rows */
}

/* Fused with its activation (layer.h: act_forward): dense_act_fwd, the bias and the activation
 * in the GEMM's epilogue on the GPU. */
static int act_forward(const mw_layer_call *c, float *y, mw_act_kind kind, float alpha)
{
    const mw_layer *l = c->l;
    if (!c->kt->dense_act_fwd)
        return 0;
    c->kt->dense_act_fwd(c->k, y, c->y, c->x, c->P + l->w_off, l->has_bias ? c->P + l->b_off : NULL,
                         c->n * l->in_h * l->in_w, l->in_c, l->out_c, kind, alpha);
    return 1;
}

static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->dense_bwd(c->k, c->dx, c->G + l->w_off, l->has_bias ? c->G + l->b_off : NULL, c->dy,
                     c->x, c->P + l->w_off, c->n * l->in_h * l->in_w, l->in_c, l->out_c);
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_dims(d, n, "units", &x->out_c, &y->out_c, 1);
}

/* ---- Keras ---- */

/* The keys Keras writes for Dense (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {
    MW_KREAD("units"),
    MW_KWEIGHT_KEYS,
    MW_KDEF("quantization_config", "null", "quantized weights"),
    MW_KEND,
};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, keys, 1));
    int units = 0;
    mw_kweights w;
    MW_TRY(mw_kget_int(L, cfg, "units", 0, 1, 1, MW_KMAX_DIM, &units));
    MW_TRY(mw_kread_weights(L, cfg, R->is_last, &w));
    if ((long long)mw_kcur_c(B->m) * units > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "a %dx%d kernel is larger than the %d values supported "
                        "per tensor",
                        mw_kcur_c(B->m), units, MW_KMAX_TENSOR);
    mw_status rc = mw_model_add_dense(B->m, name, units, w.use_bias);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    MW_TRY(mw_kapply_weights(B, &w));
    return mw_model_add_act(B->m, NULL, w.act, mw_act_info_of(w.act)->param,
                            1); /* its folded activation */
}

static const char *to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    json_object_set_new(c, "units", json_integer(l->out_c));
    json_object_set_new(c, "activation", json_string(mw_kw_folded_activation(m, i)));
    mw_kw_weights(c, l);
    return "Dense";
}

mw_mask_rule mw_dense_mask_rule(const mw_layer *l)
{
    return l->flat ? MW_MASK_REFUSE : MW_MASK_PASS;
}

void mw_dense_keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    mw_kvar_add(v, nv, "kernel", l->w_off, l->w_count, 2, l->in_c, l->out_c, 0, 0);
    if (l->has_bias)
        mw_kvar_add(v, nv, "bias", l->b_off, l->b_count, 1, l->out_c, 0, 0, 0);
}

const mw_layer_ops mw_layer_dense = {
    .keras = {"Dense"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .act_forward = act_forward,
    .matmul = 1,
    .differs = differs,
    .to_keras = to_keras,
    .mask = mw_dense_mask_rule,
    .keras_vars = mw_dense_keras_vars,
};

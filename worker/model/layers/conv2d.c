/* Conv2D: the layer table's row (worker/model/layer.h). */
#include <string.h>

#include "kernels/geom.h"
#include "worker/model/activations.h"
#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/activation.h"
#include "worker/model/layers/conv2d.h"
#include "worker/model/layers/dwconv.h"
#include "worker/model/model.h"

mw_status mw_model_add_conv2d(mw_model *m, const char *name, int filters, int kh, int kw, int sh,
                              int sw, int same, int use_bias)
{
    return mw_model_add_conv2d_dilated(m, name, filters, 1, kh, kw, sh, sw, 1, 1, same, use_bias);
}

mw_status mw_model_add_conv2d_dilated(mw_model *m, const char *name, int filters, int groups,
                                      int kh, int kw, int sh, int sw, int dh, int dw, int same,
                                      int use_bias)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_CONV2D, name, "Conv2D", "conv2d");
    if (!l)
        return mw_err_status();
    if (filters <= 0 || kh <= 0 || kw <= 0 || sh <= 0 || sw <= 0)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (Conv2D): filters %d, kernel %dx%d, strides "
                                         "%dx%d: expected positive values",
                                         l->name, filters, kh, kw, sh, sw));
    const int win[7] = {kh, kw, sh, sw, dh, dw, same};
    if (mw_dwconv_fit(l, filters, win) != MW_OK)
        return mw_layer_reject(m, mw_err_status());
    if (mw_conv2d_geom_group(&l->conv, groups) != 0)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (Conv2D): groups %d with %d input channels "
                                         "and %d filters: expected a positive number of groups "
                                         "that divides both",
                                         l->name, groups, l->in_c, filters));
    l->out_h = l->conv.OH, l->out_w = l->conv.OW, l->out_c = filters;
    l->same = same;
    l->flat = 0;
    l->w_count = mw_conv2d_w_count(&l->conv);
    l->has_bias = use_bias;
    l->b_count = use_bias ? (size_t)filters : 0;
    /* Keras' fans of the (kh, kw, channels / groups, filters) kernel */
    l->fan_in = kh * kw * (l->in_c / groups), l->fan_out = kh * kw * filters;
    l->kernel_init.kind = MW_INIT_GLOROT_UNIFORM, l->bias_init.kind = MW_INIT_ZEROS;
    return MW_OK;
}

static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->conv2d_fwd(c->k, c->y, c->x, c->P + l->w_off, l->has_bias ? c->P + l->b_off : NULL,
                      &l->conv, c->n);
}

static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->conv2d_bwd(c->k, c->dx, c->G + l->w_off, l->has_bias ? c->G + l->b_off : NULL, c->dy,
                      c->x, c->P + l->w_off, &l->conv, c->n, c->dx_set);
}

static size_t scratch(const mw_layer *l, size_t n)
{
    return mw_conv2d_ws_count(&l->conv, (int)n);
}

/* Filters, kernel, strides, and the padding by its effect: the zero rows and columns before
 * the input and the output size ('same' and 'valid' that pad alike are equal). */
static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    const mw_conv2d_geom *cx = &x->conv, *cy = &y->conv;
    return mw_diff_dims(d, n, "filters", &cx->O, &cy->O, 1) ||
           mw_diff_dims(d, n, "groups", &cx->G, &cy->G, 1) ||
           mw_diff_dims(d, n, "kernel", (const int[]){cx->KH, cx->KW},
                        (const int[]){cy->KH, cy->KW}, 2) ||
           mw_dwconv_window_differs(d, n, x, y);
}

/* ---- Keras ---- */

/* The keys Keras writes for Conv2D and Conv1D (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {
    MW_KREAD("filters"), MW_KREAD("kernel_size"), MW_KREAD("strides"),
    MW_KREAD("padding"), MW_KREAD("data_format"), MW_KREAD("dilation_rate"),
    MW_KREAD("groups"),  MW_KWEIGHT_KEYS,         MW_KEND,
};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, keys, 1));
    /* Conv1D on (None, T, C), here 1 x T x C: a Conv2D with a 1 x k kernel */
    const int one_d = !strcmp(cls, "Conv1D");
    int filters = 0, groups = 0, same = 0;
    int ks[2] = {0, 0}, st[2] = {0, 0}, dil[2] = {0, 0};
    mw_kweights w;
    MW_TRY(mw_kget_int(L, cfg, "filters", 0, 1, 1, MW_KMAX_DIM, &filters));
    MW_TRY(mw_kget_dims(L, cfg, "kernel_size", 0, 1, MW_KMAX_WINDOW, one_d, ks));
    MW_TRY(mw_kget_dims(L, cfg, "strides", 1, 1, MW_KMAX_WINDOW, one_d, st));
    /* Conv1D's "causal": the k - 1 zeros all before the sequence (step t sees t - k + 1 .. t) */
    static const char *const pads[] = {"valid", "same", "causal"};
    MW_TRY(mw_kget_choice(L, cfg, "padding", pads, one_d ? 3 : 2, 0,
                          one_d ? "\"valid\", \"same\", \"causal\"" : "\"valid\", \"same\"",
                          &same));
    const int causal = same == 2;
    if (causal && st[1] != 1)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "padding \"causal\" with strides %d is not supported; supported: 1", st[1]);
    same = same != 0;
    MW_TRY(mw_kcheck_data_format(L, cfg));
    MW_TRY(mw_kget_dims(L, cfg, "dilation_rate", 1, 1, MW_KMAX_WINDOW, one_d, dil));
    MW_TRY(mw_kget_int(L, cfg, "groups", 1, 0, 1, MW_KMAX_DIM, &groups));
    MW_TRY(mw_kread_weights(L, cfg, R->is_last, &w));
    MW_TRY(mw_kneed_channels(B, L));
    const int in_c = mw_kcur_c(B->m);
    if (groups != 1 && groups == in_c && filters % in_c == 0) /* one group per input channel: */
        return mw_dwconv_parse_grouped(R, name, filters, groups, ks, st, dil, same, &w); /* dw */
    if (in_c % groups || filters % groups)
        return mw_kfail(L, MW_EMODEL,
                        "groups %d with %d input channels and %d filters: expected groups that "
                        "divide both the input channels and the filters (as Keras requires)",
                        groups, in_c, filters);
    if ((long long)ks[0] * ks[1] * (in_c / groups) * filters > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "a %dx%dx%dx%d kernel is larger than the %d values "
                        "supported per tensor",
                        ks[0], ks[1], in_c / groups, filters, MW_KMAX_TENSOR);
    const mw_layer *in = mw_kprev(B->m);
    if (one_d && (!in || in->out_h != 1 || in->flat))
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "needs a sequence (None, steps, channels) from the layer before it "
                        "(an Embedding, Conv1D or the like)");
    mw_status rc = mw_model_add_conv2d_dilated(B->m, name, filters, groups, ks[0], ks[1], st[0],
                                               st[1], dil[0], dil[1], same, w.use_bias);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    if (one_d)
        B->m->layers[B->m->nlayers - 1].cls = "Conv1D";
    if (causal) /* 'same''s output length (stride 1), every zero before */
        B->m->layers[B->m->nlayers - 1].conv.PL = (ks[1] - 1) * dil[1];
    if (mw_klast_out(B->m) > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "its output has %zu values per example; at most %d are "
                        "supported",
                        mw_klast_out(B->m), MW_KMAX_TENSOR);
    MW_TRY(mw_kapply_weights(B, &w));
    return mw_model_add_act(B->m, NULL, w.act, mw_act_info_of(w.act)->param,
                            1); /* its folded activation */
}

static const char *to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    json_object_set_new(c, "filters", json_integer(l->conv.O));
    json_object_set_new(c, "kernel_size", mw_kw_pair(l->conv.KH, l->conv.KW));
    json_object_set_new(c, "strides", mw_kw_pair(l->conv.SH, l->conv.SW));
    json_object_set_new(c, "padding", json_string(l->same ? "same" : "valid"));
    json_object_set_new(c, "data_format", json_string("channels_last"));
    json_object_set_new(c, "dilation_rate", mw_kw_pair(l->conv.DH, l->conv.DW));
    json_object_set_new(c, "groups", json_integer(l->conv.G));
    json_object_set_new(c, "activation", json_string(mw_kw_folded_activation(m, i)));
    mw_kw_weights(c, l);
    return "Conv2D";
}

/* Keras' kernel (KH, KW, C / groups, O), a Conv1D's (k, C / groups, O), then the bias. */
static void keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    const int cg = l->conv.C / l->conv.G;
    if (!strcmp(l->cls, "Conv1D")) /* KH is 1 */
        mw_kvar_add(v, nv, "kernel", l->w_off, l->w_count, 3, l->conv.KW, cg, l->conv.O, 0);
    else
        mw_kvar_add(v, nv, "kernel", l->w_off, l->w_count, 4, l->conv.KH, l->conv.KW, cg,
                    l->conv.O);
    if (l->has_bias)
        mw_kvar_add(v, nv, "bias", l->b_off, l->b_count, 1, l->out_c, 0, 0, 0);
}

const mw_layer_ops mw_layer_conv2d = {
    .keras = {"Conv2D", "Conv1D"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .sets_dx = 1,
    .scratch = scratch,
    .matmul = 1,
    .differs = differs,
    .to_keras = to_keras,
    .keras_vars = keras_vars,
};

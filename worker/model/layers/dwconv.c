/* DepthwiseConv2D, Conv2D(groups = its input channels) and SeparableConv2D: the layer table's
 * rows of the depthwise family (worker/model/layer.h), on the depthwise kernels
 * (kernels/kernel_list.h: dwconv2d_fwd, dwconv2d_bwd).
 *
 * Output channel c*M + m of a depthwise convolution with multiplier M is input channel c under
 * its own KH x KW filter: Keras' depthwise kernel (KH, KW, C, M), and a grouped Conv2D's
 * (KH, KW, 1, C*M) with groups = C, are the same floats. SeparableConv2D is one Keras layer
 * made of two: the depthwise convolution into an intermediate t (N, OH, OW, C*M), kept in the
 * layer's buffer for the backward, then a 1x1 convolution of t (a Dense over every pixel) to
 * its filters with the bias. Its weights are the depthwise kernel, then the pointwise kernel
 * (C*M, filters), then the bias, as Keras orders them. */
#include <stdio.h>
#include <string.h>

#include "kernels/geom.h"
#include "worker/model/activations.h"
#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/activation.h"
#include "worker/model/layers/dwconv.h"
#include "worker/model/model.h"
#include "worker/model/weights.h"

/* The multiplier M of a depthwise layer's geometry (O = C*M). */
static int mult_of(const mw_layer *l)
{
    return l->conv.O / l->conv.C;
}

mw_status mw_dwconv_fit(mw_layer *l, int O, const int win[7])
{
    const int kh = win[0], kw = win[1], dh = win[4], dw = win[5], same = win[6];
    if (mw_conv2d_geom_init(&l->conv, l->in_h, l->in_w, l->in_c, O, kh, kw, win[2], win[3], same) ==
            0 &&
        mw_conv2d_geom_dilate(&l->conv, dh, dw, same) == 0)
        return MW_OK;
    char dil[48] = "";
    if (dh != 1 || dw != 1)
        snprintf(dil, sizeof dil, " dilated by %dx%d", dh, dw);
    return mw_err(MW_EMODEL,
                  "layer '%s' (%s): a %dx%d kernel%s with padding '%s' does not fit its %dx%dx%d "
                  "input",
                  l->name, l->cls, kh, kw, dil, same ? "same" : "valid", l->in_h, l->in_w, l->in_c);
}

int mw_dwconv_window_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    const mw_conv2d_geom *cx = &x->conv, *cy = &y->conv;
    return mw_diff_dims(d, n, "strides", (const int[]){cx->SH, cx->SW},
                        (const int[]){cy->SH, cy->SW}, 2) ||
           mw_diff_dims(d, n, "dilation_rate", (const int[]){cx->DH, cx->DW},
                        (const int[]){cy->DH, cy->DW}, 2) ||
           mw_diff_padding(d, n, x->same, y->same, (const int[]){cx->PT, cx->PL, cx->OH, cx->OW},
                           (const int[]){cy->PT, cy->PL, cy->OH, cy->OW});
}

/* Push a layer of kind whose depthwise part has multiplier mult and window win, its geometry
 * set; NULL (mw_err set, the layer taken back) when it does not fit. */
static mw_layer *push_depthwise(mw_model *m, int kind, const char *name, const char *cls,
                                const char *base, int mult, const mw_dwconv_win *win)
{
    mw_layer *l = mw_layer_push(m, kind, name, cls, base);
    if (!l)
        return NULL;
    if (mult <= 0 || win->kh <= 0 || win->kw <= 0 || win->sh <= 0 || win->sw <= 0 || win->dh <= 0 ||
        win->dw <= 0) {
        mw_layer_reject(m, mw_err(MW_EMODEL,
                                  "layer '%s' (%s): depth_multiplier %d, kernel %dx%d, strides "
                                  "%dx%d, dilation %dx%d: expected positive values",
                                  l->name, cls, mult, win->kh, win->kw, win->sh, win->sw, win->dh,
                                  win->dw));
        return NULL;
    }
    if (mw_dwconv_fit(l, l->in_c * mult,
                      (const int[7]){win->kh, win->kw, win->sh, win->sw, win->dh, win->dw,
                                     win->same}) != MW_OK) {
        mw_layer_reject(m, mw_err_status());
        return NULL;
    }
    l->out_h = l->conv.OH, l->out_w = l->conv.OW, l->out_c = l->conv.O;
    l->same = win->same;
    l->flat = 0;
    l->w_count = (size_t)win->kh * win->kw * l->conv.O;
    /* Keras' fans of the (KH, KW, C, M) kernel */
    l->fan_in = win->kh * win->kw * l->in_c, l->fan_out = win->kh * win->kw * mult;
    l->kernel_init.kind = MW_INIT_GLOROT_UNIFORM, l->bias_init.kind = MW_INIT_ZEROS;
    return l;
}

mw_status mw_model_add_dwconv2d(mw_model *m, const char *name, int mult, const mw_dwconv_win *win,
                                int use_bias)
{
    mw_layer *l =
        push_depthwise(m, MW_LAYER_DWCONV, name, "DepthwiseConv2D", "depthwise_conv2d", mult, win);
    if (!l)
        return mw_err_status();
    l->has_bias = use_bias;
    l->b_count = use_bias ? (size_t)l->out_c : 0;
    return MW_OK;
}

mw_status mw_model_add_sepconv2d(mw_model *m, const char *name, int filters, int mult,
                                 const mw_dwconv_win *win, int use_bias)
{
    mw_layer *l =
        push_depthwise(m, MW_LAYER_SEPCONV, name, "SeparableConv2D", "separable_conv2d", mult, win);
    if (!l)
        return mw_err_status();
    if (filters <= 0)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (SeparableConv2D): filters %d: expected a "
                                         "positive value",
                                         l->name, filters));
    l->out_c = filters;
    l->w_count += (size_t)l->conv.O * filters; /* the pointwise kernel after the depthwise one */
    l->has_bias = use_bias;
    l->b_count = use_bias ? (size_t)filters : 0;
    return MW_OK;
}

/* ---- DepthwiseConv2D, and Conv2D(groups = C) ---- */

static void dw_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->dwconv2d_fwd(c->k, c->y, c->x, c->P + l->w_off, l->has_bias ? c->P + l->b_off : NULL,
                        &l->conv, c->n);
}

static void dw_backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->dwconv2d_bwd(c->k, c->dx, c->G + l->w_off, l->has_bias ? c->G + l->b_off : NULL, c->dy,
                        c->x, c->P + l->w_off, &l->conv, c->n, c->dx_set);
}

/* Multiplier (filters for a grouped Conv2D), kernel, strides, dilation and padding. */
static int dw_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    const mw_conv2d_geom *cx = &x->conv, *cy = &y->conv;
    const int mx = mult_of(x), my = mult_of(y);
    return mw_diff_dims(d, n, "depth_multiplier", &mx, &my, 1) ||
           mw_diff_dims(d, n, "filters", &x->out_c, &y->out_c, 1) ||
           mw_diff_dims(d, n, "kernel", (const int[]){cx->KH, cx->KW},
                        (const int[]){cy->KH, cy->KW}, 2) ||
           mw_dwconv_window_differs(d, n, x, y);
}

/* ---- SeparableConv2D ---- */

/* Floats of the intermediate t for n examples (the buffer holds t, then its gradient). */
static size_t sep_t_count(const mw_layer *l, size_t n)
{
    return n * l->conv.OH * l->conv.OW * l->conv.O;
}

static size_t sep_buf_bytes(const mw_layer *l, size_t n)
{
    return 2 * sep_t_count(l, n) * sizeof(float);
}

/* Floats of the depthwise kernel, where the pointwise one starts. */
static size_t sep_dw_count(const mw_layer *l)
{
    return (size_t)l->conv.KH * l->conv.KW * l->conv.O;
}

static void sep_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    float *t = c->buf;
    const float *w = c->P + l->w_off;
    c->kt->dwconv2d_fwd(c->k, t, c->x, w, NULL, &l->conv, c->n);
    if (l->policy != MW_POLICY_FLOAT32) /* Keras' t is a tensor of the compute dtype */
        mw_layer_round(c->kt, c->k, l->policy, t, sep_t_count(l, (size_t)c->n));
    c->kt->dense_fwd(c->k, c->y, t, w + sep_dw_count(l), l->has_bias ? c->P + l->b_off : NULL,
                     (int)c->rows, l->conv.O, l->out_c);
}

static void sep_backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const size_t nt = sep_t_count(l, (size_t)c->n), dwn = sep_dw_count(l);
    float *t = c->buf, *dt = t + nt;
    mw_layer_zero(c->kt, c->k, dt, nt * sizeof(float));
    c->kt->dense_bwd(c->k, dt, c->G + l->w_off + dwn, l->has_bias ? c->G + l->b_off : NULL, c->dy,
                     t, c->P + l->w_off + dwn, (int)c->rows, l->conv.O, l->out_c);
    if (l->policy != MW_POLICY_FLOAT32)
        mw_layer_round(c->kt, c->k, l->policy, dt, nt);
    c->kt->dwconv2d_bwd(c->k, c->dx, c->G + l->w_off, NULL, dt, c->x, c->P + l->w_off, &l->conv,
                        c->n, c->dx_set);
}

/* The depthwise kernel with the fans of (KH, KW, C, M), the pointwise one with those of
 * (1, 1, C*M, filters), the bias with its length's, as Keras draws them. */
static void sep_init(const mw_layer *l, float *params, mw_rng *r)
{
    const int kk = l->conv.KH * l->conv.KW, cm = l->conv.O;
    const size_t dwn = sep_dw_count(l);
    mw_weights_init_tensor(params + l->w_off, dwn, &l->kernel_init, kk * l->conv.C, kk * mult_of(l),
                           r);
    mw_weights_init_tensor(params + l->w_off + dwn, (size_t)cm * l->out_c, &l->kernel_init, cm,
                           l->out_c, r);
    if (l->b_count)
        mw_weights_init_tensor(params + l->b_off, l->b_count, &l->bias_init, (int)l->b_count,
                               (int)l->b_count, r);
}

/* ---- Keras ---- */

static const mw_kkey dw_keys[] = {
    MW_KREAD("depth_multiplier"),
    MW_KREAD("kernel_size"),
    MW_KREAD("strides"),
    MW_KREAD("padding"),
    MW_KREAD("data_format"),
    MW_KREAD("dilation_rate"),
    MW_KREAD("activation"),
    MW_KREAD("use_bias"),
    MW_KREAD("depthwise_initializer"),
    MW_KREAD("bias_initializer"),
    MW_KREAD("depthwise_regularizer"),
    MW_KREAD("bias_regularizer"),
    MW_KREAD("activity_regularizer"),
    MW_KREAD("depthwise_constraint"),
    MW_KREAD("bias_constraint"),
    MW_KEND,
};

static const mw_kkey sep_keys[] = {
    MW_KREAD("filters"),
    MW_KREAD("depth_multiplier"),
    MW_KREAD("kernel_size"),
    MW_KREAD("strides"),
    MW_KREAD("padding"),
    MW_KREAD("data_format"),
    MW_KREAD("dilation_rate"),
    MW_KREAD("activation"),
    MW_KREAD("use_bias"),
    MW_KREAD("depthwise_initializer"),
    MW_KREAD("pointwise_initializer"),
    MW_KREAD("bias_initializer"),
    MW_KREAD("depthwise_regularizer"),
    MW_KREAD("pointwise_regularizer"),
    MW_KREAD("bias_regularizer"),
    MW_KREAD("activity_regularizer"),
    MW_KREAD("depthwise_constraint"),
    MW_KREAD("pointwise_constraint"),
    MW_KREAD("bias_constraint"),
    MW_KEND,
};

/* depth_multiplier, kernel_size, strides, padding, data_format and dilation_rate. */
static mw_status read_window(const mw_klayer *L, const json_t *cfg, int *mult, mw_dwconv_win *win)
{
    static const char *const pads[] = {"valid", "same"};
    int ks[2] = {0, 0}, st[2] = {0, 0}, dil[2] = {0, 0};
    MW_TRY(mw_kget_int(L, cfg, "depth_multiplier", 1, 0, 1, MW_KMAX_DIM, mult));
    MW_TRY(mw_kget_dims(L, cfg, "kernel_size", 0, 1, MW_KMAX_WINDOW, 0, ks));
    MW_TRY(mw_kget_dims(L, cfg, "strides", 1, 1, MW_KMAX_WINDOW, 0, st));
    MW_TRY(mw_kget_choice(L, cfg, "padding", pads, 2, 0, "\"valid\", \"same\"", &win->same));
    MW_TRY(mw_kcheck_data_format(L, cfg));
    MW_TRY(mw_kget_dims(L, cfg, "dilation_rate", 1, 1, MW_KMAX_WINDOW, 0, dil));
    *win = (mw_dwconv_win){ks[0], ks[1], st[0], st[1], dil[0], dil[1], win->same};
    return MW_OK;
}

/* The depthwise kernel's size against the per-tensor limit, before the layer is built. */
static mw_status check_kernel(const mw_klayer *L, const mw_kbuilder *B, int mult,
                              const mw_dwconv_win *win)
{
    MW_TRY(mw_kneed_channels(B, L));
    if ((long long)win->kh * win->kw * mw_kcur_c(B->m) * mult > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "a %dx%dx%dx%d depthwise kernel is larger than the %d values supported "
                        "per tensor",
                        win->kh, win->kw, mw_kcur_c(B->m), mult, MW_KMAX_TENSOR);
    return MW_OK;
}

/* After the layer was added: its output's size, its weights' settings, its activation. */
static mw_status finish(mw_kread *R, mw_status rc, const mw_kweights *w)
{
    mw_kbuilder *B = R->B;
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    if (mw_klast_out(B->m) > MW_KMAX_TENSOR)
        return mw_kfail(R->L, MW_EUNSUPPORTED,
                        "its output has %zu values per example; at most %d are supported",
                        mw_klast_out(B->m), MW_KMAX_TENSOR);
    MW_TRY(mw_kapply_weights(B, w));
    return mw_model_add_act(B->m, NULL, w->act, mw_act_info_of(w->act)->param, 1);
}

static mw_status dw_parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const mw_klayer *L = R->L;
    int mult = 0;
    mw_dwconv_win win;
    mw_kweights w;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, dw_keys, 1));
    MW_TRY(read_window(L, cfg, &mult, &win));
    MW_TRY(mw_kread_weights_as(L, cfg, R->is_last, "depthwise", &w));
    MW_TRY(check_kernel(L, R->B, mult, &win));
    return finish(R, mw_model_add_dwconv2d(R->B->m, name, mult, &win, w.use_bias), &w);
}

mw_status mw_dwconv_parse_grouped(mw_kread *R, const char *name, int filters, int groups,
                                  const int ks[2], const int st[2], const int dil[2], int same,
                                  const mw_kweights *w)
{
    const mw_klayer *L = R->L;
    const int c = groups; /* the input channels (layers/conv2d.c sends only these here) */
    const mw_dwconv_win win = {ks[0], ks[1], st[0], st[1], dil[0], dil[1], same};
    MW_TRY(check_kernel(L, R->B, filters / c, &win));
    mw_status rc = mw_model_add_dwconv2d(R->B->m, name, filters / c, &win, w->use_bias);
    if (rc == MW_OK) {
        mw_layer *l = &R->B->m->layers[R->B->m->nlayers - 1];
        l->cls = "Conv2D";
        l->fan_in = ks[0] * ks[1], l->fan_out = ks[0] * ks[1] * filters; /* (KH, KW, 1, O) */
    }
    return finish(R, rc, w);
}

static int init_equal(const mw_init *a, const mw_init *b)
{
    return a->kind == b->kind && a->scale == b->scale && a->mode == b->mode && a->dist == b->dist &&
           a->a == b->a && a->b == b->b;
}

static mw_status sep_parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const mw_klayer *L = R->L;
    int mult = 0, filters = 0;
    mw_dwconv_win win;
    mw_kweights w;
    mw_init pinit;
    mw_regularizer preg;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, sep_keys, 1));
    MW_TRY(mw_kget_int(L, cfg, "filters", 0, 1, 1, MW_KMAX_DIM, &filters));
    MW_TRY(read_window(L, cfg, &mult, &win));
    MW_TRY(mw_kread_weights_as(L, cfg, R->is_last, "depthwise", &w));
    MW_TRY(mw_kget_init(L, cfg, "pointwise_initializer", MW_INIT_GLOROT_UNIFORM, &pinit));
    MW_TRY(mw_kget_regularizer(L, cfg, "pointwise_regularizer", &preg));
    MW_TRY(mw_kneed_null(L, cfg, "pointwise_constraint", "weight constraints"));
    const int init_differs = !init_equal(&pinit, &w.kinit);
    if (init_differs || preg.l1 != w.kreg.l1 || preg.l2 != w.kreg.l2) {
        const char *what = init_differs ? "initializer" : "regularizer";
        char pk[32], dk[32];
        snprintf(pk, sizeof pk, "pointwise_%s", what);
        snprintf(dk, sizeof dk, "depthwise_%s", what);
        mw_kdbuf p, d;
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "%s: found %s, but %s %s: different ones are not supported (supported: "
                        "the same for both kernels)",
                        pk, mw_kdescribe(p, json_object_get(cfg, pk)), dk,
                        mw_kdescribe(d, json_object_get(cfg, dk)));
    }
    MW_TRY(check_kernel(L, R->B, mult, &win));
    if ((long long)mw_kcur_c(R->B->m) * mult * filters > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "a %dx%d pointwise kernel is larger than the %d values supported per "
                        "tensor",
                        mw_kcur_c(R->B->m) * mult, filters, MW_KMAX_TENSOR);
    return finish(R, mw_model_add_sepconv2d(R->B->m, name, filters, mult, &win, w.use_bias), &w);
}

/* The window's keys, as Keras writes them. */
static void window_keys(json_t *c, const mw_layer *l)
{
    json_object_set_new(c, "kernel_size", mw_kw_pair(l->conv.KH, l->conv.KW));
    json_object_set_new(c, "strides", mw_kw_pair(l->conv.SH, l->conv.SW));
    json_object_set_new(c, "padding", json_string(l->same ? "same" : "valid"));
    json_object_set_new(c, "data_format", json_string("channels_last"));
    json_object_set_new(c, "dilation_rate", mw_kw_pair(l->conv.DH, l->conv.DW));
}

/* use_bias, the depthwise kernel's initializer and regularizer (the pointwise one's too for
 * SeparableConv2D: the reader took them alike), the bias's. */
static void depthwise_weights(json_t *c, const mw_layer *l, int pointwise)
{
    json_object_set_new(c, "use_bias", json_boolean(l->has_bias));
    json_object_set_new(c, "depthwise_initializer", mw_kw_initializer(&l->kernel_init));
    json_object_set_new(c, "depthwise_regularizer", mw_kw_regularizer(&l->kernel_reg));
    if (pointwise) {
        json_object_set_new(c, "pointwise_initializer", mw_kw_initializer(&l->kernel_init));
        json_object_set_new(c, "pointwise_regularizer", mw_kw_regularizer(&l->kernel_reg));
    }
    json_object_set_new(c, "bias_initializer", mw_kw_initializer(&l->bias_init));
    json_object_set_new(c, "bias_regularizer", mw_kw_regularizer(&l->bias_reg));
}

static const char *dw_to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    const int grouped = !strcmp(l->cls, "Conv2D");
    if (grouped)
        json_object_set_new(c, "filters", json_integer(l->out_c));
    else
        json_object_set_new(c, "depth_multiplier", json_integer(mult_of(l)));
    window_keys(c, l);
    if (grouped)
        json_object_set_new(c, "groups", json_integer(l->conv.C));
    json_object_set_new(c, "activation", json_string(mw_kw_folded_activation(m, i)));
    if (grouped)
        mw_kw_weights(c, l);
    else
        depthwise_weights(c, l, 0);
    return grouped ? "Conv2D" : "DepthwiseConv2D";
}

static const char *sep_to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    json_object_set_new(c, "filters", json_integer(l->out_c));
    json_object_set_new(c, "depth_multiplier", json_integer(mult_of(l)));
    window_keys(c, l);
    json_object_set_new(c, "activation", json_string(mw_kw_folded_activation(m, i)));
    depthwise_weights(c, l, 1);
    return "SeparableConv2D";
}

/* DepthwiseConv2D's kernel (KH, KW, C, M), a grouped Conv2D's (KH, KW, 1, O): the same floats. */
static void dw_keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    const mw_conv2d_geom *g = &l->conv;
    if (!strcmp(l->cls, "Conv2D"))
        mw_kvar_add(v, nv, "kernel", l->w_off, l->w_count, 4, g->KH, g->KW, 1, g->O);
    else
        mw_kvar_add(v, nv, "kernel", l->w_off, l->w_count, 4, g->KH, g->KW, g->C, mult_of(l));
    if (l->has_bias)
        mw_kvar_add(v, nv, "bias", l->b_off, l->b_count, 1, l->out_c, 0, 0, 0);
}

static void sep_keras_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    const mw_conv2d_geom *g = &l->conv;
    const size_t dwn = sep_dw_count(l);
    mw_kvar_add(v, nv, "depthwise_kernel", l->w_off, dwn, 4, g->KH, g->KW, g->C, mult_of(l));
    mw_kvar_add(v, nv, "pointwise_kernel", l->w_off + dwn, l->w_count - dwn, 4, 1, 1, g->O,
                l->out_c);
    if (l->has_bias)
        mw_kvar_add(v, nv, "bias", l->b_off, l->b_count, 1, l->out_c, 0, 0, 0);
}

const mw_layer_ops mw_layer_dwconv = {
    .keras = {"DepthwiseConv2D"},
    .parse = dw_parse,
    .forward = dw_forward,
    .backward = dw_backward,
    .sets_dx = 1,
    .matmul = 1,
    .differs = dw_differs,
    .to_keras = dw_to_keras,
    .keras_vars = dw_keras_vars,
};

const mw_layer_ops mw_layer_sepconv = {
    .keras = {"SeparableConv2D"},
    .parse = sep_parse,
    .forward = sep_forward,
    .backward = sep_backward,
    .sets_dx = 1,
    .buf_bytes = sep_buf_bytes,
    .matmul = 1,
    .differs = dw_differs,
    .init = sep_init,
    .to_keras = sep_to_keras,
    .keras_vars = sep_keras_vars,
};

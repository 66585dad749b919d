/* Conv2DTranspose and UpSampling2D: the layer table's rows (worker/model/layer.h) of the layers
 * that make images larger, a segmentation model's decoder (a U-Net's way up). Conv2DTranspose
 * keeps in l->conv the Conv2D whose input gradient it is (kernels/geom.h), so its kernels are
 * that Conv2D's run backwards; its kernel is Keras' (kh, kw, filters, input channels).
 * UpSampling2D's factors are l->pool's strides. */
#include "worker/model/layers/upsample.h"
#include "kernels/geom.h"
#include "worker/model/activations.h"
#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/activation.h"
#include "worker/model/model.h"

static mw_status need_image(mw_model *m, const mw_layer *l)
{
    if (!l->flat)
        return MW_OK;
    return mw_layer_reject(m, mw_err(MW_EMODEL,
                                     "layer '%s' (%s): input is flat (None, %d); expected "
                                     "(None, height, width, channels)",
                                     l->name, l->cls, l->in_c));
}

mw_status mw_model_add_conv2d_tr(mw_model *m, const char *name, int filters, int kh, int kw, int sh,
                                 int sw, int same, int oph, int opw, int use_bias)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_CONV2DT, name, "Conv2DTranspose", "conv2d_transpose");
    if (!l)
        return mw_err_status();
    MW_TRY(need_image(m, l));
    if (filters <= 0 || kh <= 0 || kw <= 0 || sh <= 0 || sw <= 0 || oph >= sh || opw >= sw ||
        mw_conv2d_tr_geom_init(&l->conv, l->in_h, l->in_w, l->in_c, filters, kh, kw, sh, sw, same,
                               oph, opw) != 0)
        return mw_layer_reject(
            m, mw_err(MW_EMODEL,
                      "layer '%s' (Conv2DTranspose): filters %d, kernel %dx%d, strides %dx%d, "
                      "output_padding %d,%d on its %dx%dx%d input: expected positive sizes and "
                      "an output_padding below the strides",
                      l->name, filters, kh, kw, sh, sw, oph, opw, l->in_h, l->in_w, l->in_c));
    l->out_h = l->conv.H, l->out_w = l->conv.W, l->out_c = filters;
    l->same = same;
    l->out_pad[0] = oph, l->out_pad[1] = opw;
    l->w_count = (size_t)kh * kw * filters * l->in_c;
    l->has_bias = use_bias;
    l->b_count = use_bias ? (size_t)filters : 0;
    /* Keras' fans of a (kh, kw, filters, in) kernel: shape[-2] and shape[-1] times kh kw */
    l->fan_in = kh * kw * filters, l->fan_out = kh * kw * l->in_c;
    l->kernel_init.kind = MW_INIT_GLOROT_UNIFORM, l->bias_init.kind = MW_INIT_ZEROS;
    return MW_OK;
}

static void tr_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->conv2d_tr_fwd(c->k, c->y, c->x, c->P + l->w_off, l->has_bias ? c->P + l->b_off : NULL,
                         &l->conv, c->n);
}

static void tr_backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->conv2d_tr_bwd(c->k, c->dx, c->G + l->w_off, l->has_bias ? c->G + l->b_off : NULL, c->dy,
                         c->x, c->P + l->w_off, &l->conv, c->n);
}

static size_t tr_scratch(const mw_layer *l, size_t n)
{
    return mw_conv2d_ws_count(&l->conv, (int)n);
}

static int tr_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->conv2d_tr_fwd && t->conv2d_tr_bwd;
}

static int tr_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    const mw_conv2d_geom *cx = &x->conv, *cy = &y->conv;
    return mw_diff_dims(d, n, "filters", &cx->C, &cy->C, 1) ||
           mw_diff_dims(d, n, "kernel", (const int[]){cx->KH, cx->KW},
                        (const int[]){cy->KH, cy->KW}, 2) ||
           mw_diff_dims(d, n, "strides", (const int[]){cx->SH, cx->SW},
                        (const int[]){cy->SH, cy->SW}, 2) ||
           mw_diff_padding(d, n, x->same, y->same, (const int[]){cx->PT, cx->PL, cx->H, cx->W},
                           (const int[]){cy->PT, cy->PL, cy->H, cy->W});
}

/* The keys Keras writes for Conv2DTranspose (worker/model/keras_keys.h). */
static const mw_kkey tr_keys[] = {
    MW_KREAD("filters"),
    MW_KREAD("kernel_size"),
    MW_KREAD("strides"),
    MW_KREAD("padding"),
    MW_KREAD("output_padding"),
    MW_KREAD("data_format"),
    MW_KREAD("dilation_rate"),
    MW_KWEIGHT_KEYS,
    MW_KEND,
};

static mw_status tr_parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, tr_keys, 1));
    int filters = 0, same = 0, ks[2], st[2], op[2], dil[2];
    mw_kweights w;
    MW_TRY(mw_kget_int(L, cfg, "filters", 0, 1, 1, MW_KMAX_DIM, &filters));
    MW_TRY(mw_kget_pair(L, cfg, "kernel_size", 0, 1, MW_KMAX_WINDOW, ks));
    MW_TRY(mw_kget_pair(L, cfg, "strides", 1, 1, MW_KMAX_WINDOW, st));
    MW_TRY(mw_kget_padding(L, cfg, &same));
    MW_TRY(mw_kget_pair(L, cfg, "output_padding", -1, 0, MW_KMAX_WINDOW, op));
    if (op[0] >= st[0] || op[1] >= st[1])
        return mw_kfail(L, MW_EMODEL,
                        "output_padding [%d, %d] must be below the strides [%d, %d], as Keras "
                        "requires",
                        op[0], op[1], st[0], st[1]);
    MW_TRY(mw_kcheck_data_format(L, cfg));
    MW_TRY(mw_kget_pair(L, cfg, "dilation_rate", 1, 1, MW_KMAX_WINDOW, dil));
    if (dil[0] != 1 || dil[1] != 1)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "dilation_rate [%d, %d] is not supported; supported: 1 (no dilation)",
                        dil[0], dil[1]);
    MW_TRY(mw_kread_weights(L, cfg, R->is_last, &w));
    MW_TRY(mw_kneed_channels(B, L));
    if ((long long)ks[0] * ks[1] * mw_kcur_c(B->m) * filters > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "a %dx%dx%dx%d kernel is larger than the %d values supported per tensor",
                        ks[0], ks[1], filters, mw_kcur_c(B->m), MW_KMAX_TENSOR);
    mw_status rc = mw_model_add_conv2d_tr(B->m, name, filters, ks[0], ks[1], st[0], st[1], same,
                                          op[0], op[1], w.use_bias);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    if (mw_klast_out(B->m) > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "its output has %zu values per example; at most %d are supported",
                        mw_klast_out(B->m), MW_KMAX_TENSOR);
    MW_TRY(mw_kapply_weights(B, &w));
    return mw_model_add_act(B->m, NULL, w.act, mw_act_info_of(w.act)->param, 1);
}

static json_t *kw_out_pad(const mw_layer *l)
{
    return l->out_pad[0] < 0 ? json_null() : mw_kw_pair(l->out_pad[0], l->out_pad[1]);
}

static const char *tr_to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    json_object_set_new(c, "filters", json_integer(l->conv.C));
    json_object_set_new(c, "kernel_size", mw_kw_pair(l->conv.KH, l->conv.KW));
    json_object_set_new(c, "strides", mw_kw_pair(l->conv.SH, l->conv.SW));
    json_object_set_new(c, "padding", json_string(l->same ? "same" : "valid"));
    json_object_set_new(c, "output_padding", kw_out_pad(l));
    json_object_set_new(c, "data_format", json_string("channels_last"));
    json_object_set_new(c, "dilation_rate", mw_kw_pair(1, 1));
    json_object_set_new(c, "activation", json_string(mw_kw_folded_activation(m, i)));
    mw_kw_weights(c, l);
    return "Conv2DTranspose";
}

/* Keras' kernel (KH, KW, filters, input channels), then the bias. */
static void tr_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    mw_kvar_add(v, nv, "kernel", l->w_off, l->w_count, 4, l->conv.KH, l->conv.KW, l->conv.C,
                l->conv.O);
    if (l->has_bias)
        mw_kvar_add(v, nv, "bias", l->b_off, l->b_count, 1, l->out_c, 0, 0, 0);
}

const mw_layer_ops mw_layer_conv2d_tr = {
    .keras = {"Conv2DTranspose"},
    .parse = tr_parse,
    .forward = tr_forward,
    .backward = tr_backward,
    .scratch = tr_scratch,
    .matmul = 1,
    .has_kernels = tr_kernels,
    .differs = tr_differs,
    .to_keras = tr_to_keras,
    .keras_vars = tr_vars,
};

/* ---- UpSampling2D ---- */

mw_status mw_model_add_upsample(mw_model *m, const char *name, int sh, int sw, int bilinear)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_UPSAMPLE, name, "UpSampling2D", "up_sampling2d");
    if (!l)
        return mw_err_status();
    MW_TRY(need_image(m, l));
    if (sh <= 0 || sw <= 0 || (long long)l->in_h * sh * l->in_w * sw * l->in_c > MW_KMAX_TENSOR)
        return mw_layer_reject(m,
                               mw_err(MW_EMODEL,
                                      "layer '%s' (UpSampling2D): size %dx%d of its %dx%dx%d "
                                      "input: expected positive factors and at most %d "
                                      "output values",
                                      l->name, sh, sw, l->in_h, l->in_w, l->in_c, MW_KMAX_TENSOR));
    l->pool.H = l->in_h, l->pool.W = l->in_w, l->pool.C = l->in_c;
    l->pool.SH = sh, l->pool.SW = sw;
    l->out_h = l->in_h * sh, l->out_w = l->in_w * sw, l->out_c = l->in_c;
    l->bilinear = bilinear;
    return MW_OK;
}

static void up_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->upsample_fwd(c->k, c->y, c->x, l->in_h, l->in_w, l->in_c, l->pool.SH, l->pool.SW,
                        l->bilinear, c->n);
}

static void up_backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    if (c->dx)
        c->kt->upsample_bwd(c->k, c->dx, c->dy, l->in_h, l->in_w, l->in_c, l->pool.SH, l->pool.SW,
                            l->bilinear, c->n);
}

static int up_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->upsample_fwd && t->upsample_bwd;
}

/* nearest copies values (16-bit ones stay 16-bit); bilinear computes new ones. The backward
 * sums several gradients into one either way. */
static int up_16bit(const mw_layer *l, int backward)
{
    return !backward && !l->bilinear;
}

static int up_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_dims(d, n, "size", (const int[]){x->pool.SH, x->pool.SW},
                        (const int[]){y->pool.SH, y->pool.SW}, 2) ||
           mw_diff_dims(d, n, "bilinear", &x->bilinear, &y->bilinear, 1);
}

static const mw_kkey up_keys[] = {MW_KREAD("size"), MW_KREAD("data_format"),
                                  MW_KREAD("interpolation"), MW_KEND};

static mw_status up_parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, up_keys, 1));
    int size[2], bilinear = 0;
    MW_TRY(mw_kget_pair(L, cfg, "size", 2, 1, MW_KMAX_WINDOW, size));
    MW_TRY(mw_kcheck_data_format(L, cfg));
    /* Keras' other methods (ops.image.resize's): valid, not implemented */
    static const char *const interp[] = {"nearest", "bilinear", "bicubic", "lanczos3", "lanczos5"};
    MW_TRY(mw_kget_choice(L, cfg, "interpolation", interp, 5, 0,
                          "\"nearest\", \"bilinear\", \"bicubic\", \"lanczos3\", \"lanczos5\"",
                          &bilinear));
    if (bilinear > 1)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "interpolation \"%s\" is not supported; supported: \"nearest\", "
                        "\"bilinear\"",
                        interp[bilinear]);
    MW_TRY(mw_kneed_channels(R->B, L));
    mw_status rc = mw_model_add_upsample(R->B->m, name, size[0], size[1], bilinear);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(R->B->origin, rc);
}

static const char *up_to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    json_object_set_new(c, "size", mw_kw_pair(l->pool.SH, l->pool.SW));
    json_object_set_new(c, "data_format", json_string("channels_last"));
    json_object_set_new(c, "interpolation", json_string(l->bilinear ? "bilinear" : "nearest"));
    return "UpSampling2D";
}

const mw_layer_ops mw_layer_upsample = {
    .keras = {"UpSampling2D"},
    .parse = up_parse,
    .forward = up_forward,
    .backward = up_backward,
    .stays_16bit = up_16bit,
    .has_kernels = up_kernels,
    .differs = up_differs,
    .to_keras = up_to_keras,
};

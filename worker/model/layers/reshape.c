/* Flatten and ZeroPadding2D: the layer table's rows (worker/model/layer.h). */
#include "worker/keras/keras_layer.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"

mw_status mw_model_add_flatten(mw_model *m, const char *name)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_FLATTEN, name, "Flatten", "flatten");
    if (!l)
        return mw_err_status();
    l->out_h = 1, l->out_w = 1, l->out_c = l->in_h * l->in_w * l->in_c;
    l->in_place = 1;
    l->flat = 1;
    return MW_OK;
}

mw_status mw_model_add_zeropad(mw_model *m, const char *name, int top, int bottom, int left,
                               int right)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_ZEROPAD, name, "ZeroPadding2D", "zero_padding2d");
    if (!l)
        return mw_err_status();
    if (top < 0 || bottom < 0 || left < 0 || right < 0 || l->flat)
        return mw_layer_reject(m,
                               mw_err(MW_EMODEL,
                                      "layer '%s' (ZeroPadding2D): padding %d,%d,%d,%d on a "
                                      "%s input: expected padding >= 0 on (None, height, "
                                      "width, channels)",
                                      l->name, top, bottom, left, right, l->flat ? "flat" : "4-D"));
    l->pad[0] = top, l->pad[1] = bottom, l->pad[2] = left, l->pad[3] = right;
    l->out_h = l->in_h + top + bottom, l->out_w = l->in_w + left + right, l->out_c = l->in_c;
    return MW_OK;
}

static void pad_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    c->kt->pad2d_fwd(c->k, c->y, c->x, l->in_h, l->in_w, l->in_c, l->pad[0], l->pad[1], l->pad[2],
                     l->pad[3], c->n);
}

static void pad_backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    if (c->dx)
        c->kt->pad2d_bwd(c->k, c->dx, c->dy, l->in_h, l->in_w, l->in_c, l->pad[0], l->pad[1],
                         l->pad[2], l->pad[3], c->n);
}

static int pad_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->pad2d_fwd && t->pad2d_bwd;
}

static int pad_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_dims(d, n, "padding", x->pad, y->pad, 4);
}

/* ---- Keras ---- */

static mw_status parse_flatten(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    (void)cls;
    mw_status rc = mw_kcheck_data_format(R->L, cfg);
    if (rc == MW_OK && (rc = mw_model_add_flatten(R->B->m, name)) != MW_OK)
        rc = mw_kfrom_model(R->B->origin, rc);
    R->B->no_channels = 0;
    return rc;
}

static mw_status add_zeropad(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg,
                             const char *name)
{
    int p[4];
    MW_TRY(mw_kcheck_data_format(L, cfg));
    MW_TRY(mw_kget_sides(L, cfg, "padding", 1, p));
    MW_TRY(mw_kneed_channels(B, L));
    mw_status rc = mw_model_add_zeropad(B->m, name, p[0], p[1], p[2], p[3]);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

static mw_status parse_zeropad(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    (void)cls;
    return add_zeropad(R->B, R->L, cfg, name);
}

static const char *to_keras(const mw_model *m, int i, json_t *c)
{
    json_object_set_new(c, "data_format", json_string("channels_last"));
    return m->layers[i].cls;
}

const mw_layer_ops mw_layer_flatten = {
    .keras = {"Flatten"},
    .parse = parse_flatten,
    .forward = mw_layer_pass_fwd,
    .backward = mw_layer_pass_bwd,
    .exact = mw_layer_exact_always,
    .to_keras = to_keras,
};

const mw_layer_ops mw_layer_zeropad = {
    .keras = {"ZeroPadding2D"},
    .parse = parse_zeropad,
    .forward = pad_forward,
    .backward = pad_backward,
    .exact = mw_layer_exact_always,
    .has_kernels = pad_kernels,
    .differs = pad_differs,
};

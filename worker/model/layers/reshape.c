/* Flatten, Reshape and ZeroPadding2D: the layer table's rows (worker/model/layer.h). Reshape
 * is Flatten's kind with another output shape: the values stay in place (channels_last is
 * row-major), only their shape changes. */
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include <string.h>

#include "worker/model/diff.h"
#include "worker/model/layer.h"
#include "worker/model/layers/reshape.h"
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

mw_status mw_model_add_reshape(mw_model *m, const char *name, const int *dims, int nd)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_FLATTEN, name, "Reshape", "reshape");
    if (!l)
        return mw_err_status();
    const long long total = (long long)l->in_h * l->in_w * l->in_c;
    long long known = 1;
    int d[3], free_at = -1;
    for (int j = 0; j < nd; j++) {
        d[j] = dims[j];
        if (dims[j] == -1 && free_at < 0)
            free_at = j;
        else if (dims[j] < 1)
            return mw_layer_reject(
                m, mw_err(MW_EMODEL,
                          "layer '%s' (Reshape): target_shape has %d; expected sizes > 0 and "
                          "at most one -1",
                          l->name, dims[j]));
        else
            known *= dims[j];
    }
    if (free_at >= 0 && known > 0 && total % known == 0)
        d[free_at] = (int)(total / known), known = total;
    if (nd < 1 || nd > 3 || known != total)
        return mw_layer_reject(
            m, mw_err(MW_EMODEL,
                      "layer '%s' (Reshape): %lld values per example (%dx%dx%d) cannot take %d "
                      "dimension(s) of %lld values; expected 1 to 3 dimensions of as many",
                      l->name, total, l->in_h, l->in_w, l->in_c, nd, known));
    l->out_h = nd == 3 ? d[0] : 1, l->out_w = nd == 1 ? 1 : d[nd - 2], l->out_c = d[nd - 1];
    l->pad[0] = nd; /* the target's rank, for the export */
    l->flat = nd == 1;
    l->in_place = 1;
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

static mw_status parse_reshape(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg,
                               const char *name)
{
    mw_kdbuf d;
    const json_t *t = json_object_get(cfg, "target_shape");
    int dims[3];
    if (!json_is_array(t) || json_array_size(t) < 1 || json_array_size(t) > 3)
        return mw_kfail(L, MW_EMODEL,
                        "target_shape: found %s; expected a list of 1 to 3 sizes (without the "
                        "batch)",
                        mw_kdescribe(d, t));
    for (size_t j = 0; j < json_array_size(t); j++)
        if (!mw_kas_int(json_array_get(t, j), -1, MW_KMAX_TENSOR, &dims[j]) || dims[j] == 0)
            return mw_kfail(L, MW_EMODEL, "target_shape[%zu]: found %s; expected a size > 0 or -1",
                            j, mw_kdescribe(d, json_array_get(t, j)));
    mw_status rc = mw_model_add_reshape(B->m, name, dims, (int)json_array_size(t));
    B->no_channels = 0;
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

/* The keys Keras writes for Flatten, Reshape and ZeroPadding2D (worker/model/keras_keys.h). */
static const mw_kkey flatten_keys[] = {MW_KREAD("data_format"), MW_KEND},
                     reshape_keys[] = {MW_KREAD("target_shape"), MW_KEND},
                     zeropad_keys[] = {MW_KREAD("padding"), MW_KREAD("data_format"), MW_KEND};

static mw_status parse_flatten(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg,
                          strcmp(cls, "Reshape") ? flatten_keys : reshape_keys, 1));
    if (!strcmp(cls, "Reshape"))
        return parse_reshape(R->B, R->L, cfg, name);
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
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg, zeropad_keys, 1));
    return add_zeropad(R->B, R->L, cfg, name);
}

static const char *to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    if (!strcmp(l->cls, "Reshape")) {
        const int all[3] = {l->out_h, l->out_w, l->out_c};
        json_t *t = json_array();
        for (int j = 3 - l->pad[0]; j < 3; j++)
            json_array_append_new(t, json_integer(all[j]));
        json_object_set_new(c, "target_shape", t);
        return l->cls;
    }
    json_object_set_new(c, "data_format", json_string("channels_last"));
    return l->cls;
}

const mw_layer_ops mw_layer_flatten = {
    .keras = {"Flatten", "Reshape"},
    .parse = parse_flatten,
    .forward = mw_layer_pass_fwd,
    .backward = mw_layer_pass_bwd,
    .stays_16bit = mw_layer_stays_16bit_always,
    .to_keras = to_keras,
};

const mw_layer_ops mw_layer_zeropad = {
    .keras = {"ZeroPadding2D"},
    .parse = parse_zeropad,
    .forward = pad_forward,
    .backward = pad_backward,
    .stays_16bit = mw_layer_stays_16bit_always,
    .has_kernels = pad_kernels,
    .differs = pad_differs,
};

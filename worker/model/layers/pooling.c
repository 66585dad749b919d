/* MaxPooling2D, AveragePooling2D and their global forms: the layer table's rows
 * (worker/model/layer.h). Keras' ops.mean over a sequence's steps (axis 1) or an image's pixels
 * (axes 1 and 2), a Mean operation node (module keras.src.ops.numpy) in a Functional graph
 * (KerasHub's ViTImageClassifier with pooling "gap"), is the global average pooling. */
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include <string.h>

#include "kernels/geom.h"
#include "worker/model/diff.h"
#include "worker/model/layer.h"
#include "worker/model/layers/pooling.h"
#include "worker/model/model.h"

static mw_status pool_layer(mw_model *m, mw_layer *l, int ph, int pw, int sh, int sw, int same)
{
    if (mw_pool_geom_init(&l->pool, l->in_h, l->in_w, l->in_c, ph, pw, sh, sw, same) != 0)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (%s): pool %dx%d, strides %dx%d, padding "
                                         "'%s' does not fit its %dx%dx%d input",
                                         l->name, l->cls, ph, pw, sh, sw, same ? "same" : "valid",
                                         l->in_h, l->in_w, l->in_c));
    l->out_h = l->pool.OH, l->out_w = l->pool.OW, l->out_c = l->in_c;
    l->same = same;
    l->flat = 0;
    return MW_OK;
}

mw_status mw_model_add_maxpool(mw_model *m, const char *name, int ph, int pw, int sh, int sw,
                               int same)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_MAXPOOL, name, "MaxPooling2D", "max_pooling2d");
    return l ? pool_layer(m, l, ph, pw, sh, sw, same) : mw_err_status();
}

mw_status mw_model_add_avgpool(mw_model *m, const char *name, int ph, int pw, int sh, int sw,
                               int same)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_AVGPOOL, name, "AveragePooling2D", "average_pooling2d");
    return l ? pool_layer(m, l, ph, pw, sh, sw, same) : mw_err_status();
}

mw_status mw_model_add_global_pool(mw_model *m, const char *name, int max, int one_d)
{
    static const char *const cls[2][2] = {{"GlobalAveragePooling2D", "GlobalMaxPooling2D"},
                                          {"GlobalAveragePooling1D", "GlobalMaxPooling1D"}};
    static const char *const base[2][2] = {{"global_average_pooling2d", "global_max_pooling2d"},
                                           {"global_average_pooling1d", "global_max_pooling1d"}};
    /* 1-D: (None, steps, features) is (1, steps, features) here, pooled the same way */
    mw_layer *l = mw_layer_push(m, max ? MW_LAYER_MAXPOOL : MW_LAYER_AVGPOOL, name,
                                cls[!!one_d][!!max], base[!!one_d][!!max]);
    if (!l)
        return mw_err_status();
    if (l->flat)
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (%s): input is flat (None, %d); expected "
                                         "(None, height, width, channels)",
                                         l->name, l->cls, l->in_c));
    MW_TRY(pool_layer(m, l, l->in_h, l->in_w, 1, 1, 0));
    l->global = 1;
    l->flat = 1;
    return MW_OK;
}

static void max_forward(const mw_layer_call *c)
{
    c->kt->maxpool_fwd(c->k, c->y, c->buf, c->x, &c->l->pool, c->n);
}

static void max_backward(const mw_layer_call *c)
{
    if (c->dx)
        c->kt->maxpool_bwd(c->k, c->dx, c->dy, c->buf, &c->l->pool, c->n);
}

/* The argmax of each output value. */
static size_t max_buf(const mw_layer *l, size_t n)
{
    return n * mw_layer_out_count(l) * sizeof(int32_t);
}

/* Max pooling selects; its backward routes each dy to one input, exact unless windows overlap
 * (overlapping ones add). */
static int max_stays_16bit(const mw_layer *l, int backward)
{
    return !backward || (l->pool.SH >= l->pool.PH && l->pool.SW >= l->pool.PW);
}

/* Masked (GlobalAveragePooling1D after Embedding(mask_zero=True)): the mean over the steps
 * whose id, in the model's input (or the named input the Embedding reads), is not 0. */
static void avg_forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    if (l->masked)
        c->kt->masked_mean_fwd(c->k, c->y, c->x, c->ws->act[c->m->mask_t], c->n, l->in_w, l->in_c);
    else
        c->kt->avgpool_fwd(c->k, c->y, c->x, &l->pool, c->n);
}

static void avg_backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    if (c->dx && l->masked)
        c->kt->masked_mean_bwd(c->k, c->dx, c->dy, c->ws->act[c->m->mask_t], c->n, l->in_w,
                               l->in_c);
    else if (c->dx)
        c->kt->avgpool_bwd(c->k, c->dx, c->dy, &l->pool, c->n);
}

static int avg_kernels(const mw_layer *l, const mw_kernels *t)
{
    return l->masked ? t->masked_mean_fwd && t->masked_mean_bwd : t->avgpool_fwd && t->avgpool_bwd;
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    const mw_pool_geom *qx = &x->pool, *qy = &y->pool;
    return mw_diff_dims(d, n, "pool size", (const int[]){qx->PH, qx->PW},
                        (const int[]){qy->PH, qy->PW}, 2) ||
           mw_diff_dims(d, n, "strides", (const int[]){qx->SH, qx->SW},
                        (const int[]){qy->SH, qy->SW}, 2) ||
           mw_diff_padding(d, n, x->same, y->same, (const int[]){qx->PT, qx->PL, qx->OH, qx->OW},
                           (const int[]){qy->PT, qy->PL, qy->OH, qy->OW});
}

/* ---- Keras ---- */

static mw_status add_maxpool(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg,
                             const char *name, int one_d)
{
    int ps[2] = {0, 0}, st[2] = {0, 0}, same = 0;
    const json_t *strides = json_object_get(cfg, "strides");
    MW_TRY(mw_kget_dims(L, cfg, "pool_size", 2, 1, MW_KMAX_WINDOW, one_d, ps));
    st[0] = ps[0], st[1] = ps[1]; /* strides absent or null: the pool size */
    if (strides && !json_is_null(strides))
        MW_TRY(mw_kget_dims(L, cfg, "strides", 1, 1, MW_KMAX_WINDOW, one_d, st));
    MW_TRY(mw_kget_padding(L, cfg, &same));
    MW_TRY(mw_kcheck_data_format(L, cfg));
    MW_TRY(mw_kneed_channels(B, L));
    mw_status rc = mw_model_add_maxpool(B->m, name, ps[0], ps[1], st[0], st[1], same);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

static mw_status add_avgpool(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg,
                             const char *name, int one_d)
{
    int ps[2] = {0, 0}, st[2] = {0, 0}, same = 0;
    const json_t *strides = json_object_get(cfg, "strides");
    MW_TRY(mw_kget_dims(L, cfg, "pool_size", 2, 1, MW_KMAX_WINDOW, one_d, ps));
    st[0] = ps[0], st[1] = ps[1];
    if (strides && !json_is_null(strides))
        MW_TRY(mw_kget_dims(L, cfg, "strides", 1, 1, MW_KMAX_WINDOW, one_d, st));
    MW_TRY(mw_kget_padding(L, cfg, &same));
    MW_TRY(mw_kcheck_data_format(L, cfg));
    MW_TRY(mw_kneed_channels(B, L));
    mw_status rc = mw_model_add_avgpool(B->m, name, ps[0], ps[1], st[0], st[1], same);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

static mw_status add_global_pool(mw_kbuilder *B, const mw_klayer *L, const json_t *cfg,
                                 const char *name, int max, int one_d)
{
    int keep = 0;
    MW_TRY(mw_kcheck_data_format(L, cfg));
    MW_TRY(mw_kget_bool(L, cfg, "keepdims", 0, &keep));
    MW_TRY(mw_kneed_channels(B, L));
    mw_status rc = mw_model_add_global_pool(B->m, name, max, one_d);
    if (rc != MW_OK)
        return mw_kfrom_model(B->origin, rc);
    /* keepdims: (None, 1, 1, C) (1-D: (None, 1, C)), the same values unflattened */
    B->m->layers[B->m->nlayers - 1].flat = !keep;
    return MW_OK;
}

/* The keys Keras writes for the windowed and the global poolings (worker/model/keras_keys.h). */
/* MaxPooling2D, AveragePooling2D, their 1-D forms (a 1 x p window over the 1 x T sequence)
 * and their Global forms (cls says which). */
static const mw_kkey window_keys[] = {MW_KREAD("pool_size"), MW_KREAD("strides"),
                                      MW_KREAD("padding"), MW_KREAD("data_format"), MW_KEND},
                     global_keys[] = {MW_KREAD("data_format"), MW_KREAD("keepdims"), MW_KEND};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const int max = strstr(cls, "Max") != NULL, one_d = strstr(cls, "1D") != NULL;
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg,
                          strncmp(cls, "Global", 6) ? window_keys : global_keys, 1));
    if (!strncmp(cls, "Global", 6))
        return add_global_pool(R->B, R->L, cfg, name, max, one_d);
    const mw_layer *in = mw_kprev(R->B->m);
    if (one_d && (!in || in->out_h != 1 || in->flat))
        return mw_kfail(R->L, MW_EUNSUPPORTED,
                        "needs a sequence (None, steps, channels) from the layer before it");
    mw_status rc =
        max ? add_maxpool(R->B, R->L, cfg, name, one_d) : add_avgpool(R->B, R->L, cfg, name, one_d);
    if (rc == MW_OK && one_d)
        R->B->m->layers[R->B->m->nlayers - 1].cls = max ? "MaxPooling1D" : "AveragePooling1D";
    return rc;
}

/* ops.mean's axis: 1 (or [1]) on a sequence, [1, 2] on an image: the positions. */
static mw_status mean_axis(const mw_klayer *L, const json_t *cfg, const mw_layer *in, int *one_d)
{
    const json_t *a = json_object_get(cfg, "axis");
    const size_t n = json_is_array(a) ? json_array_size(a) : 1;
    const json_t *a0 = json_is_array(a) ? json_array_get(a, 0) : a;
    int x0 = 0, x1 = 0;
    mw_kdbuf d;
    *one_d = in && in->out_h == 1 && !in->flat;
    const int ok = mw_kas_int(a0, 1, 1, &x0) &&
                   (*one_d ? n == 1 : n == 2 && mw_kas_int(json_array_get(a, 1), 2, 2, &x1));
    if (ok && !(in && in->flat))
        return MW_OK;
    return mw_kfail(L, MW_EUNSUPPORTED,
                    "axis: found %s on a %s input; supported: the mean over a sequence's steps "
                    "(axis 1) or an image's pixels (axis [1, 2])",
                    mw_kdescribe(d, a),
                    in && in->flat ? "flat"
                    : *one_d       ? "sequence"
                                   : "image");
}

static const mw_kkey mean_keys[] = {MW_KREAD("axis"), MW_KREAD("keepdims"), MW_KEND};

static mw_status parse_mean(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    int one_d = 0, keep = 0;
    MW_TRY(mw_kcheck_keys(R->L->origin, R->L->where, cls, cfg, mean_keys, 1));
    MW_TRY(mw_kget_bool(R->L, cfg, "keepdims", 0, &keep));
    const mw_model *m = R->B->m;
    MW_TRY(mean_axis(R->L, cfg,
                     m->next_nin ? (m->next_in[0] < 0 ? NULL : &m->layers[m->next_in[0]])
                                 : mw_kprev(m),
                     &one_d));
    mw_status rc = mw_model_add_global_pool(R->B->m, name, 0, one_d);
    if (rc != MW_OK)
        return mw_kfrom_model(R->B->origin, rc);
    mw_layer *l = &R->B->m->layers[R->B->m->nlayers - 1];
    l->cls = "Mean";
    l->flat = !keep; /* keepdims: (None, 1, C) or (None, 1, 1, C) */
    return MW_OK;
}

/* Max pooling, as MaxPooling2D (a global one too: the same pooling over the whole image). */
static const char *to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    json_object_set_new(c, "pool_size", mw_kw_pair(l->pool.PH, l->pool.PW));
    json_object_set_new(c, "strides", mw_kw_pair(l->pool.SH, l->pool.SW));
    json_object_set_new(c, "padding", json_string(l->same ? "same" : "valid"));
    json_object_set_new(c, "data_format", json_string("channels_last"));
    return "MaxPooling2D";
}

/* GlobalAveragePooling1D takes the mean over the steps that are not padding (ops.mean, an
 * operation, knows no mask: refused). */
static mw_mask_rule avg_mask(const mw_layer *l)
{
    return l->global && l->in_h == 1 && strcmp(l->cls, "Mean") != 0 ? MW_MASK_TAKE : MW_MASK_REFUSE;
}

const mw_layer_ops mw_layer_maxpool = {
    .keras = {"MaxPooling2D", "MaxPool2D", "GlobalMaxPooling2D", "GlobalMaxPool2D",
              "GlobalMaxPooling1D", "MaxPooling1D"},
    .parse = parse,
    .forward = max_forward,
    .backward = max_backward,
    .buf_bytes = max_buf,
    .stays_16bit = max_stays_16bit,
    .differs = differs,
    .to_keras = to_keras,
};

const mw_layer_ops mw_layer_avgpool = {
    .keras = {"AveragePooling2D", "AvgPool2D", "GlobalAveragePooling2D", "GlobalAvgPool2D",
              "GlobalAveragePooling1D", "AveragePooling1D"},
    .parse = parse,
    .forward = avg_forward,
    .backward = avg_backward,
    .has_kernels = avg_kernels,
    .differs = differs,
    .mask = avg_mask,
};

/* Keras' Mean operation (ops.mean over the positions): layers of the average pooling's kind. */
const mw_layer_ops mw_layer_mean = {
    .keras = {"Mean"},
    .module = "keras.src.ops.numpy",
    .parse = parse_mean,
};

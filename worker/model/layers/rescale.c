/* Rescaling and an adapted Normalization as model layers: the layer table's rows
 * (worker/model/layer.h). Leading ones, before any other layer, stay the input pipeline's
 * (worker/data/preprocess.h: the keras reader sends them there), except a Normalization whose
 * statistics are weights (adapted: mean and variance null in its config), which is always a
 * layer. Both are fixed maps, as Keras 3.15 computes them: x * scale + offset, and
 * (x - mean) / max(sqrt(variance), epsilon) per channel with Keras' backend epsilon 1e-7; the
 * gradient passes through to the input, the statistics (mean, variance and Keras' count) are
 * non-trainable weights kept with the model's state, never updated. */
#include <math.h>
#include <string.h>

#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/kvars.h"
#include "worker/model/layer.h"
#include "worker/model/layers/rescale.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"

/* keras.backend.epsilon(), Normalization's floor on the standard deviation */
#define MW_KERAS_EPSILON 1e-7f

mw_status mw_model_add_rescale(mw_model *m, const char *name, const mw_rescale *r)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_RESCALE, name, "Rescaling", "rescaling");
    if (!l)
        return mw_err_status();
    if (r->C != 1 && (r->C != l->in_c || r->C > MW_RESCALE_MAX_C))
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (Rescaling): %d scales for %d channels: "
                                         "expected 1, or one per channel (at most %d)",
                                         l->name, r->C, l->in_c, MW_RESCALE_MAX_C));
    l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
    l->rescale = *r;
    return MW_OK;
}

mw_status mw_model_add_normalize(mw_model *m, const char *name)
{
    mw_layer *l = mw_layer_push(m, MW_LAYER_NORMALIZE, name, "Normalization", "normalization");
    if (!l)
        return mw_err_status();
    l->out_h = l->in_h, l->out_w = l->in_w, l->out_c = l->in_c;
    l->stats_count = 2 * (size_t)l->in_c + 1; /* mean, variance, count */
    return MW_OK;
}

static void rescale_forward(const mw_layer_call *c)
{
    c->kt->rescale_fwd(c->k, c->y, c->x, c->cnt, &c->l->rescale);
}

static void rescale_backward(const mw_layer_call *c)
{
    if (c->dx)
        c->kt->rescale_bwd(c->k, c->dx, c->dy, c->cnt, &c->l->rescale);
}

static int rescale_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->rescale_fwd && t->rescale_bwd;
}

static int rescale_differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    const mw_rescale *a = &x->rescale, *b = &y->rescale;
    if (mw_diff_dims(d, n, "channels of scale", &a->C, &b->C, 1))
        return 1;
    for (int c = 0; c < a->C; c++)
        if (mw_diff_real(d, n, "scale", a->scale[c], b->scale[c]) ||
            mw_diff_real(d, n, "offset", a->offset[c], b->offset[c]))
            return 1;
    return 0;
}

static void normalize_forward(const mw_layer_call *c)
{
    const float *st = c->P + c->l->stats_off;
    c->kt->normalize_fwd(c->k, c->y, c->x, st, st + c->l->out_c, c->cnt / (size_t)c->l->out_c,
                         c->l->out_c, MW_KERAS_EPSILON);
}

static void normalize_backward(const mw_layer_call *c)
{
    const float *var = c->P + c->l->stats_off + c->l->out_c;
    if (c->dx)
        c->kt->normalize_bwd(c->k, c->dx, c->dy, var, c->cnt / (size_t)c->l->out_c, c->l->out_c,
                             MW_KERAS_EPSILON);
}

static int normalize_kernels(const mw_layer *l, const mw_kernels *t)
{
    (void)l;
    return t->normalize_fwd && t->normalize_bwd;
}

/* Keras' initial state before adapt(): mean 0, variance 1, count 0. */
static void normalize_init(const mw_layer *l, float *params, mw_rng *r)
{
    (void)r;
    float *st = params + l->stats_off;
    for (int c = 0; c < l->out_c; c++)
        st[c] = 0.0f, st[l->out_c + c] = 1.0f;
    st[2 * l->out_c] = 0.0f;
}

/* adapt_mean, adapt_variance (named mean and variance) and the integer count, non-trainable. */
static void normalize_vars(const mw_layer *l, mw_keras_var *v, int *nv)
{
    const size_t C = (size_t)l->out_c;
    mw_kvar_add(v, nv, "mean", l->stats_off, C, 1, l->out_c, 0, 0, 0)->trainable = 0;
    mw_kvar_add(v, nv, "variance", l->stats_off + C, C, 1, l->out_c, 0, 0, 0)->trainable = 0;
    mw_keras_var *n = mw_kvar_add(v, nv, "count", l->stats_off + 2 * C, 1, 0, 0, 0, 0, 0);
    n->trainable = 0, n->integer = 1;
}

/* ---- Keras ---- */

static const mw_kkey rescale_keys[] = {MW_KREAD("scale"), MW_KREAD("offset"), MW_KEND},
                     normalize_keys[] = {MW_KREAD("axis"), MW_KREAD("invert"), MW_KREAD("mean"),
                                         MW_KREAD("variance"), MW_KEND};

/* Rescaling's scale or offset: a number, or a list of 1 or C numbers (Keras broadcasts it on
 * the channels) into out[0 .. n), *n 1 or C. */
static mw_status rescale_values(const mw_klayer *L, const json_t *cfg, const char *key, double dflt,
                                int C, float *out, int *n)
{
    const json_t *j = json_object_get(cfg, key);
    mw_kdbuf d;
    if (!j || json_is_number(j)) {
        double v = dflt;
        MW_TRY(mw_kget_num(L, "", cfg, key, dflt, &v));
        out[0] = (float)v, *n = 1;
        return MW_OK;
    }
    const size_t len = json_array_size(j);
    if (!json_is_array(j) || (len != 1 && len != (size_t)C) || len > MW_RESCALE_MAX_C)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "%s: found %s; supported: a number, or a list of 1 or %d numbers (one "
                        "per channel of its input; per-channel values for at most %d channels)",
                        key, mw_kdescribe(d, j), C, MW_RESCALE_MAX_C);
    for (size_t i = 0; i < len; i++) {
        const json_t *e = json_array_get(j, i);
        if (!json_is_number(e) || !isfinite(json_number_value(e)))
            return mw_kfail(L, MW_EMODEL, "%s[%zu]: found %s; expected a finite number", key, i,
                            mw_kdescribe(d, e));
        out[i] = (float)json_number_value(e);
    }
    *n = (int)len;
    return MW_OK;
}

static mw_status parse_rescale(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, rescale_keys, 1));
    const int C = mw_kcur_c(R->B->m);
    mw_rescale r = {.C = 1};
    int ns = 0, no = 0;
    MW_TRY(rescale_values(L, cfg, "scale", 1.0, C, r.scale, &ns));
    MW_TRY(rescale_values(L, cfg, "offset", 0.0, C, r.offset, &no));
    r.C = ns > no ? ns : no; /* a single value of the other broadcast to every channel */
    for (int c = r.C - 1; c >= 0; c--) {
        r.scale[c] = r.scale[ns == 1 ? 0 : c];
        r.offset[c] = r.offset[no == 1 ? 0 : c];
    }
    mw_status rc = mw_model_add_rescale(R->B->m, name, &r);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(R->B->origin, rc);
}

/* Only an adapted one reaches here before any layer (the keras reader sends the others to the
 * input pipeline); after a layer, one whose statistics are in its config is refused. */
static mw_status parse_normalize(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, normalize_keys, 1));
    MW_TRY(mw_kget_last_axis(L, cfg, R->B));
    int invert = 0;
    MW_TRY(mw_kget_bool(L, cfg, "invert", 0, &invert));
    if (invert)
        return mw_kfail(L, MW_EUNSUPPORTED, "invert: found true; supported: false");
    MW_TRY(mw_kneed_null(L, cfg, "mean",
                         "a Normalization after other layers with its mean "
                         "in the config (an adapted one's is in its weights)"));
    MW_TRY(mw_kneed_null(L, cfg, "variance",
                         "a Normalization after other layers with its "
                         "variance in the config"));
    mw_status rc = mw_model_add_normalize(R->B->m, name);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(R->B->origin, rc);
}

static const char *to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    if (l->kind == MW_LAYER_RESCALE) {
        const mw_rescale *r = &l->rescale;
        json_t *scale = r->C == 1 ? json_real(r->scale[0]) : json_array();
        json_t *offset = r->C == 1 ? json_real(r->offset[0]) : json_array();
        for (int k = 0; r->C > 1 && k < r->C; k++) {
            json_array_append_new(scale, json_real(r->scale[k]));
            json_array_append_new(offset, json_real(r->offset[k]));
        }
        json_object_set_new(c, "scale", scale);
        json_object_set_new(c, "offset", offset);
    } else {
        json_object_set_new(c, "axis", json_pack("[i]", -1));
        json_object_set_new(c, "invert", json_false());
        json_object_set_new(c, "mean", json_null());
        json_object_set_new(c, "variance", json_null());
    }
    return l->cls;
}

const mw_layer_ops mw_layer_rescale = {
    .keras = {"Rescaling"},
    .parse = parse_rescale,
    .forward = rescale_forward,
    .backward = rescale_backward,
    .has_kernels = rescale_kernels,
    .differs = rescale_differs,
    .to_keras = to_keras,
    .mask = mw_mask_pass,
};

const mw_layer_ops mw_layer_normalize = {
    .keras = {"Normalization"},
    .parse = parse_normalize,
    .forward = normalize_forward,
    .backward = normalize_backward,
    .has_kernels = normalize_kernels,
    .to_keras = to_keras,
    .mask = mw_mask_pass,
    .init = normalize_init,
    .keras_vars = normalize_vars,
};

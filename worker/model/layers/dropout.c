/* Dropout: the layer table's row (worker/model/layer.h). */
#include "worker/model/layers/dropout.h"
#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/layer.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"

mw_status mw_model_add_dropout(mw_model *m, const char *name, float rate)
{
    mw_layer *l = mw_layer_push_same(m, MW_LAYER_DROPOUT, name, "Dropout", "dropout");
    if (!l)
        return mw_err_status();
    if (!(rate >= 0.0f && rate < 1.0f))
        return mw_layer_reject(m, mw_err(MW_EMODEL,
                                         "layer '%s' (Dropout): rate %g: expected 0 <= rate < 1",
                                         l->name, (double)rate));
    l->rate = rate;
    return MW_OK;
}

/* Inverted dropout while training; the layer index keys the mask (model.h). */
static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    if (c->ws->training && l->rate > 0.0f)
        c->kt->dropout_fwd(c->k, c->y, c->buf, c->x, c->ws->example_ids, c->ws->dropout_seed,
                           (uint64_t)c->i, l->rate, c->n, mw_layer_out_count(l));
    else
        mw_layer_pass_fwd(c);
}

static void backward(const mw_layer_call *c)
{
    if (!c->dx)
        return;
    if (c->ws->training && c->l->rate > 0.0f)
        c->kt->dropout_bwd(c->k, mw_layer_bwd_out(c), c->dy, c->buf, c->cnt);
    mw_layer_pass_bwd(c);
}

/* The mask of each output value. */
static size_t buf(const mw_layer *l, size_t n)
{
    return n * mw_layer_out_count(l) * sizeof(float);
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    return mw_diff_real(d, n, "rate", x->rate, y->rate);
}

/* ---- Keras ---- */

/* The keys Keras writes for Dropout (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {
    MW_KREAD("rate"),
    MW_KREAD("noise_shape"),
    MW_KREAD("seed"), /* checked to be an integer or null; the masks come from --seed */
    MW_KEND,
};

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, keys, 1));
    double rate = 0.0;
    mw_kdbuf d;
    if (!json_object_get(cfg, "rate"))
        return mw_kfail(L, MW_EMODEL, "rate is missing; expected a number from 0 up to 1");
    MW_TRY(mw_kget_num(L, "", cfg, "rate", 0.0, &rate));
    if (!(rate >= 0.0 && rate < 1.0))
        return mw_kfail(L, MW_EMODEL, "rate %g: expected 0 <= rate < 1", rate);
    MW_TRY(mw_kneed_null(L, cfg, "noise_shape", "noise shapes (masks shared across axes)"));
    const json_t *seed = json_object_get(cfg, "seed");
    if (seed && !json_is_null(seed) && !json_is_integer(seed))
        return mw_kfail(L, MW_EMODEL, "seed: found %s; expected an integer or null",
                        mw_kdescribe(d, seed));
    mw_status rc = mw_model_add_dropout(B->m, name, (float)rate);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

static const char *to_keras(const mw_model *m, int i, json_t *c)
{
    json_object_set_new(c, "rate", json_real(m->layers[i].rate));
    json_object_set_new(c, "seed", json_null());
    json_object_set_new(c, "noise_shape", json_null());
    return m->layers[i].cls;
}

const mw_layer_ops mw_layer_dropout = {
    .keras = {"Dropout"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .buf_bytes = buf,
    .differs = differs,
    .to_keras = to_keras,
    .mask = mw_mask_pass,
};

/* Dropout and SpatialDropout2D / 1D: the layer table's row (worker/model/layer.h). */
#include "worker/model/layers/dropout.h"

#include <stdio.h>
#include <string.h>

#include "worker/model/diff.h"
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/layer.h"
#include "worker/model/masks.h"
#include "worker/model/model.h"

static mw_status add(mw_model *m, const char *name, float rate, const char *cls, const char *base)
{
    mw_layer *l = mw_layer_push_same(m, MW_LAYER_DROPOUT, name, cls, base);
    if (!l)
        return mw_err_status();
    if (!(rate >= 0.0f && rate < 1.0f))
        return mw_layer_reject(m,
                               mw_err(MW_EMODEL, "layer '%s' (%s): rate %g: expected 0 <= rate < 1",
                                      l->name, cls, (double)rate));
    l->rate = rate;
    return MW_OK;
}

mw_status mw_model_add_dropout(mw_model *m, const char *name, float rate)
{
    return add(m, name, rate, "Dropout", "dropout");
}

mw_status mw_model_add_dropout_noise(mw_model *m, const char *name, float rate,
                                     mw_dropout_noise noise, int rank, const char *cls)
{
    static const char *const cl[] = {"Dropout", "SpatialDropout1D", "SpatialDropout2D",
                                     "StochasticDepth"};
    static const char *const base[] = {"dropout", "spatial_dropout1d", "spatial_dropout2d",
                                       "stochastic_depth"};
    int k = 0;
    for (int j = 1; cls && j < 4; j++)
        k = strcmp(cls, cl[j]) ? k : j;
    MW_TRY(add(m, name, rate, cl[k], base[k]));
    mw_layer *l = &m->layers[m->nlayers - 1];
    l->noise = (int)noise, l->noise_rank = rank;
    return MW_OK;
}

/* The mask values drawn per example: 1 (per example), C (per channel), 0 (per value). */
static size_t draws(const mw_layer *l)
{
    return l->noise == MW_NOISE_EXAMPLE ? 1 : l->noise == MW_NOISE_CHANNEL ? (size_t)l->out_c : 0;
}

/* Inverted dropout while training; the layer index keys the mask (model.h). A shared mask:
 * its K values per example drawn by dropout_fwd into the buffer's tail (over zeros, its output
 * discarded), then applied per example (scale_rows) or spread over the positions (one
 * concat_fwd per position) into the full mask. */
static void forward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    const size_t D = mw_layer_out_count(l), K = draws(l);
    if (!c->ws->training || !(l->rate > 0.0f)) {
        mw_layer_pass_fwd(c);
        return;
    }
    float *full = c->buf, *drawn = full + c->cnt;
    if (!K) {
        c->kt->dropout_fwd(c->k, c->y, full, c->x, c->ws->example_ids, c->ws->dropout_seed,
                           (uint64_t)c->i, l->rate, c->n, D);
        return;
    }
    c->kt->zero(c->k, full, (size_t)c->n * K * sizeof *full);
    c->kt->dropout_fwd(c->k, full, drawn, full, c->ws->example_ids, c->ws->dropout_seed,
                       (uint64_t)c->i, l->rate, c->n, K);
    if (l->noise == MW_NOISE_EXAMPLE) {
        mw_layer_pass_fwd(c);
        c->kt->scale_rows(c->k, c->y, drawn, c->n, (int)D);
        return;
    }
    for (size_t p = 0; p < D / K; p++)
        c->kt->concat_fwd(c->k, full, drawn, (size_t)c->n, (int)K, (int)D, (int)(p * K));
    c->kt->dropout_bwd(c->k, c->y, c->x, full, c->cnt);
}

/* dy times the mask (an in-place layer's dy is its dx). */
static void backward(const mw_layer_call *c)
{
    const mw_layer *l = c->l;
    if (!c->dx)
        return;
    if (c->ws->training && l->rate > 0.0f && l->noise == MW_NOISE_EXAMPLE)
        c->kt->scale_rows(c->k, c->dy, (float *)c->buf + c->cnt, c->n, (int)mw_layer_out_count(l));
    else if (c->ws->training && l->rate > 0.0f)
        c->kt->dropout_bwd(c->k, mw_layer_bwd_out(c), c->dy, c->buf, c->cnt);
    mw_layer_pass_bwd(c);
}

/* The mask of each output value, then a shared mask's draws. */
static size_t buf(const mw_layer *l, size_t n)
{
    return n * (mw_layer_out_count(l) + draws(l)) * sizeof(float);
}

static int differs(char *d, size_t n, const mw_layer *x, const mw_layer *y)
{
    static const char *const how[] = {"per value", "per example", "per channel"};
    return mw_diff_real(d, n, "rate", x->rate, y->rate) ||
           (x->noise != y->noise && mw_diff_text(d, n, "mask", how[x->noise], how[y->noise]));
}

/* ---- Keras ---- */

/* The keys Keras writes for Dropout (worker/model/keras_keys.h). */
static const mw_kkey keys[] = {
    MW_KREAD("rate"),
    MW_KREAD("noise_shape"),
    MW_KREAD("seed"), /* checked to be an integer or null; the masks come from --seed */
    MW_KEND,
};

/* SpatialDropout2D's and SpatialDropout1D's (no noise_shape: theirs is (None, 1, 1, C)). */
static const mw_kkey spatial_keys[] = {
    MW_KREAD("rate"),
    MW_KREAD("data_format"),
    MW_KREAD("seed"), /* as Dropout's */
    MW_KEND,
};

/* The input of the layer being read: (h, w, c) and whether it is flat. */
static void input_shape(const mw_model *m, int s[3], int *flat)
{
    const int in = m->next_nin > 0 ? m->next_in[0] : m->nlayers - 1;
    const mw_layer *p = in >= 0 ? &m->layers[in] : NULL;
    s[0] = p ? p->out_h : m->in_h, s[1] = p ? p->out_w : m->in_w, s[2] = p ? p->out_c : m->in_c;
    *flat = p ? p->flat : m->flat_input;
}

static void shape_str(char *d, size_t n, const int s[3], int flat)
{
    if (flat)
        snprintf(d, n, "(None, %d)", s[2]);
    else
        snprintf(d, n, "(None, %d, %d, %d)", s[0], s[1], s[2]);
}

/* noise_shape: null, or per axis after the batch null or the axis' size (a draw per index) or
 * 1 (one draw across it), as its input (None, C), (None, T, C) or (None, H, W, C). */
static mw_status get_noise(const mw_klayer *L, const mw_model *m, const json_t *ns,
                           mw_dropout_noise *noise, int *rank)
{
    int s[3], flat, shared = 0, kept = 0; /* bit j: axis j of (h, w, c) */
    mw_kdbuf d;
    input_shape(m, s, &flat);
    *noise = MW_NOISE_VALUE, *rank = flat ? 1 : s[0] == 1 ? 2 : 3;
    if (!ns || json_is_null(ns))
        return MW_OK;
    const int n = json_is_array(ns) ? (int)json_array_size(ns) - 1 : -1;
    if (n != *rank && !(n == 3 && !flat)) {
        char in[64];
        shape_str(in, sizeof in, s, flat);
        return mw_kfail(L, MW_EMODEL,
                        "noise_shape: found %s; expected the batch and %d axes, as its input %s",
                        mw_kdescribe(d, ns), *rank, in);
    }
    *rank = n;
    for (int j = 0; j < n; j++) {
        const int axis = 3 - n + j, size = s[axis];
        const json_t *v = json_array_get(ns, (size_t)j + 1);
        int one = json_is_integer(v) && json_integer_value(v) == 1;
        if (!one && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == size))
            return mw_kfail(L, MW_EMODEL,
                            "noise_shape: found %s; expected null, 1 or the "
                            "input's size (%d) at axis %d",
                            mw_kdescribe(d, ns), size, j + 1);
        shared |= (one && size > 1) << axis, kept |= (size > 1) << axis;
    }
    if (shared && shared == kept)
        *noise = MW_NOISE_EXAMPLE;
    else if (shared && !(shared & 4) && (shared | 4) == (kept | 4))
        *noise = MW_NOISE_CHANNEL;
    else if (shared)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "noise_shape: found %s; supported: null, 1 on "
                        "every axis (a mask per example) or on every axis but the last (per "
                        "channel)",
                        mw_kdescribe(d, ns));
    return MW_OK;
}

static mw_status parse(mw_kread *R, const char *cls, const json_t *cfg, const char *name)
{
    mw_kbuilder *B = R->B;
    const mw_klayer *L = R->L;
    const int spatial = strcmp(cls, "Dropout") != 0;
    MW_TRY(mw_kcheck_keys(L->origin, L->where, cls, cfg, spatial ? spatial_keys : keys, 1));
    double rate = 0.0;
    mw_kdbuf d;
    if (!json_object_get(cfg, "rate"))
        return mw_kfail(L, MW_EMODEL, "rate is missing; expected a number from 0 up to 1");
    MW_TRY(mw_kget_num(L, "", cfg, "rate", 0.0, &rate));
    if (!(rate >= 0.0 && rate < 1.0))
        return mw_kfail(L, MW_EMODEL, "rate %g: expected 0 <= rate < 1", rate);
    const json_t *seed = json_object_get(cfg, "seed");
    if (seed && !json_is_null(seed) && !json_is_integer(seed))
        return mw_kfail(L, MW_EMODEL, "seed: found %s; expected an integer or null",
                        mw_kdescribe(d, seed));
    mw_dropout_noise noise = MW_NOISE_CHANNEL;
    int rank = strcmp(cls, "SpatialDropout1D") ? 3 : 2, s[3], flat;
    input_shape(B->m, s, &flat);
    if (spatial) {
        MW_TRY(mw_kcheck_data_format(L, cfg));
        char in[64];
        shape_str(in, sizeof in, s, flat);
        if (flat || (rank == 2 && s[0] != 1))
            return mw_kfail(L, MW_EMODEL, "input %s: expected %s", in,
                            rank == 2 ? "a sequence (None, steps, channels)"
                                      : "an image (None, height, width, channels)");
    } else {
        MW_TRY(get_noise(L, B->m, json_object_get(cfg, "noise_shape"), &noise, &rank));
    }
    mw_status rc = mw_model_add_dropout_noise(B->m, name, (float)rate, noise, rank, cls);
    return rc == MW_OK ? MW_OK : mw_kfrom_model(B->origin, rc);
}

static const char *to_keras(const mw_model *m, int i, json_t *c)
{
    const mw_layer *l = &m->layers[i];
    if (!strcmp(l->cls, "StochasticDepth")) /* keras.applications': not keras.layers */
        return NULL;
    json_object_set_new(c, "rate", json_real(l->rate));
    json_object_set_new(c, "seed", json_null());
    if (strcmp(l->cls, "Dropout") != 0) {
        if (!strcmp(l->cls, "SpatialDropout2D"))
            json_object_set_new(c, "data_format", json_string("channels_last"));
        return l->cls;
    }
    json_t *ns = json_null();
    if (l->noise) { /* (None, 1, ..., 1) or (None, 1, ..., C) */
        ns = json_array();
        json_array_append_new(ns, json_null());
        for (int j = 0; j < l->noise_rank; j++)
            json_array_append_new(ns, l->noise == MW_NOISE_CHANNEL && j == l->noise_rank - 1
                                          ? json_integer(l->out_c)
                                          : json_integer(1));
    }
    json_object_set_new(c, "noise_shape", ns);
    return l->cls;
}

const mw_layer_ops mw_layer_dropout = {
    .keras = {"Dropout", "SpatialDropout2D", "SpatialDropout1D"},
    .parse = parse,
    .forward = forward,
    .backward = backward,
    .buf_bytes = buf,
    .differs = differs,
    .to_keras = to_keras,
    .mask = mw_mask_pass,
};

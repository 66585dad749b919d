/* The typed readers a layer row's Keras reader uses; see kread.h. */
#include "worker/model/kread.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/strfmt.h"
#include "worker/model/activations.h"
#include "worker/model/keras_keys.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"

const char *mw_kquote(mw_kqbuf q, const char *s)
{
    return mw_str_quote(q, sizeof(mw_kqbuf), s, MW_KQUOTE_MAX);
}

const char *mw_kdescribe(mw_kdbuf buf, const json_t *v)
{
    const size_t n = sizeof(mw_kdbuf);
    mw_kqbuf q;
    if (!v) {
        snprintf(buf, n, "nothing");
        return buf;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        snprintf(buf, n, "an object");
        break;
    case JSON_ARRAY:
        snprintf(buf, n, "an array of %zu", json_array_size(v));
        break;
    case JSON_STRING:
        snprintf(buf, n, "a string (%s)", mw_kquote(q, json_string_value(v)));
        break;
    case JSON_INTEGER:
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL:
        snprintf(buf, n, "%g", json_real_value(v));
        break;
    case JSON_TRUE:
        snprintf(buf, n, "true");
        break;
    case JSON_FALSE:
        snprintf(buf, n, "false");
        break;
    default:
        snprintf(buf, n, "null");
        break;
    }
    return buf;
}

mw_status mw_kfail(const mw_klayer *L, mw_status s, const char *fmt, ...)
{
    char where[600];
    snprintf(where, sizeof where, "%s: %s", L->origin, L->where);
    va_list ap;
    va_start(ap, fmt);
    mw_status rc = mw_verr_at(s, where, fmt, ap);
    va_end(ap);
    return rc;
}

mw_status mw_kfrom_model(const char *origin, mw_status rc)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mw_err_msg());
    mw_err_clear();
    return mw_err(rc, "%s: %s", origin, msg);
}

int mw_kas_int(const json_t *v, long long lo, long long hi, int *out)
{
    double d;
    if (json_is_integer(v))
        d = (double)json_integer_value(v);
    else if (json_is_real(v))
        d = json_real_value(v);
    else
        return 0;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d))
        return 0;
    *out = (int)d;
    return 1;
}

mw_status mw_kget_int(const mw_klayer *L, const json_t *cfg, const char *key, int def, int required,
                      int lo, int hi, int *out)
{
    const json_t *v = json_object_get(cfg, key);
    mw_kdbuf d;
    if (!v) {
        if (required)
            return mw_kfail(L, MW_EMODEL, "%s is missing; expected an integer from %d to %d", key,
                            lo, hi);
        *out = def;
        return MW_OK;
    }
    if (!mw_kas_int(v, lo, hi, out))
        return mw_kfail(L, MW_EMODEL, "%s: found %s; expected an integer from %d to %d", key,
                        mw_kdescribe(d, v), lo, hi);
    return MW_OK;
}

mw_status mw_kget_dims(const mw_klayer *L, const json_t *cfg, const char *key, int def, int lo,
                       int hi, int one_d, int out[2])
{
    if (!one_d)
        return mw_kget_pair(L, cfg, key, def, lo, hi, out);
    const json_t *v = json_object_get(cfg, key);
    mw_kdbuf d;
    out[0] = 1; /* the sequence is 1 x T here: the window spans one row */
    if (!v || json_is_null(v)) {
        if (!def)
            return mw_kfail(L, MW_EMODEL, "%s is missing; expected an integer from %d to %d", key,
                            lo, hi);
        out[1] = def;
        return MW_OK;
    }
    if (json_is_array(v) && json_array_size(v) == 1)
        v = json_array_get(v, 0);
    if (mw_kas_int(v, lo, hi, &out[1]))
        return MW_OK;
    return mw_kfail(L, MW_EMODEL,
                    "%s: found %s; expected an integer (or a list of 1) from %d to %d", key,
                    mw_kdescribe(d, json_object_get(cfg, key)), lo, hi);
}

mw_status mw_kget_pair(const mw_klayer *L, const json_t *cfg, const char *key, int def, int lo,
                       int hi, int out[2])
{
    const json_t *v = json_object_get(cfg, key);
    mw_kdbuf d;
    if (!v || json_is_null(v)) {
        if (!def)
            return mw_kfail(L, MW_EMODEL,
                            "%s is missing; expected an integer or a list of 2 "
                            "integers from %d to %d",
                            key, lo, hi);
        out[0] = out[1] = def;
        return MW_OK;
    }
    if (mw_kas_int(v, lo, hi, &out[0])) {
        out[1] = out[0];
        return MW_OK;
    }
    if (json_is_array(v) && json_array_size(v) == 2 &&
        mw_kas_int(json_array_get(v, 0), lo, hi, &out[0]) &&
        mw_kas_int(json_array_get(v, 1), lo, hi, &out[1]))
        return MW_OK;
    if (json_is_array(v) && json_array_size(v) == 2) {
        const json_t *bad = mw_kas_int(json_array_get(v, 0), lo, hi, &out[0])
                                ? json_array_get(v, 1)
                                : json_array_get(v, 0);
        return mw_kfail(L, MW_EMODEL, "%s: found %s in the list; expected integers from %d to %d",
                        key, mw_kdescribe(d, bad), lo, hi);
    }
    return mw_kfail(L, MW_EMODEL,
                    "%s: found %s; expected an integer or a list of 2 integers from "
                    "%d to %d",
                    key, mw_kdescribe(d, v), lo, hi);
}

mw_status mw_kget_bool(const mw_klayer *L, const json_t *cfg, const char *key, int def, int *out)
{
    const json_t *v = json_object_get(cfg, key);
    mw_kdbuf d;
    if (!v) {
        *out = def;
        return MW_OK;
    }
    if (!json_is_boolean(v))
        return mw_kfail(L, MW_EMODEL, "%s: found %s; expected true or false", key,
                        mw_kdescribe(d, v));
    *out = json_is_true(v);
    return MW_OK;
}

mw_status mw_kget_num(const mw_klayer *L, const char *path, const json_t *obj, const char *key,
                      double def, double *out)
{
    const json_t *v = json_object_get(obj, key);
    mw_kdbuf d;
    if (!v) {
        *out = def;
        return MW_OK;
    }
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return mw_kfail(L, MW_EMODEL, "%s%s: found %s; expected a number", path, key,
                        mw_kdescribe(d, v));
    *out = json_number_value(v);
    return MW_OK;
}

mw_status mw_kget_cap(const mw_klayer *L, const json_t *cfg, const char *key, double *out)
{
    const json_t *v = json_object_get(cfg, key);
    mw_kdbuf d;
    *out = 0.0;
    if (!v || json_is_null(v))
        return MW_OK;
    if (!json_is_number(v) || !(json_number_value(v) > 0.0 && json_number_value(v) < 1e30))
        return mw_kfail(L, MW_EMODEL, "%s: found %s; expected null or a number > 0", key,
                        mw_kdescribe(d, v));
    *out = json_number_value(v);
    return MW_OK;
}

mw_status mw_kneed_null(const mw_klayer *L, const json_t *cfg, const char *key, const char *why)
{
    const json_t *v = json_object_get(cfg, key);
    mw_kdbuf d;
    if (v && !json_is_null(v))
        return mw_kfail(L, MW_EUNSUPPORTED, "%s: found %s; %s are not supported (supported: null)",
                        key, mw_kdescribe(d, v), why);
    return MW_OK;
}

mw_status mw_kget_choice(const mw_klayer *L, const json_t *cfg, const char *key,
                         const char *const *names, int n, int def, const char *supported, int *out)
{
    const json_t *v = json_object_get(cfg, key);
    mw_kdbuf d;
    mw_kqbuf q;
    if (!v || json_is_null(v)) {
        *out = def;
        return MW_OK;
    }
    if (!json_is_string(v))
        return mw_kfail(L, MW_EMODEL, "%s: found %s; expected one of %s", key, mw_kdescribe(d, v),
                        supported);
    for (int i = 0; i < n; i++)
        if (strcasecmp(json_string_value(v), names[i]) == 0) {
            *out = i;
            return MW_OK;
        }
    return mw_kfail(L, MW_EUNSUPPORTED, "%s %s is not supported; supported: %s", key,
                    mw_kquote(q, json_string_value(v)), supported);
}

mw_status mw_kget_padding(const mw_klayer *L, const json_t *cfg, int *same)
{
    static const char *const names[] = {"valid", "same"};
    return mw_kget_choice(L, cfg, "padding", names, 2, 0, "\"valid\", \"same\"", same);
}

mw_status mw_kcheck_data_format(const mw_klayer *L, const json_t *cfg)
{
    static const char *const names[] = {"channels_last"};
    int dummy;
    return mw_kget_choice(L, cfg, "data_format", names, 1, 0, "\"channels_last\"", &dummy);
}

mw_status mw_kget_activation(const mw_klayer *L, const json_t *cfg, const char *key, int is_last,
                             int required, mw_activation *out)
{
    const json_t *v = json_object_get(cfg, key);
    mw_kdbuf d;
    mw_kqbuf q;
    *out = MW_ACT_LINEAR;
    if (!v && required)
        return mw_kfail(L, MW_EMODEL, "%s is missing; expected one of %s", key, mw_act_supported());
    if (!v || json_is_null(v))
        return MW_OK;
    const char *s = json_string_value(v);
    /* a function serialized as an object: KerasHub's gelu_approximate, {"class_name":
     * "function", "config": "keras_hub>gelu_approximate"} (or the name in registered_name) */
    const char *fn = json_string_value(json_object_get(v, "config"));
    const char *reg = json_string_value(json_object_get(v, "registered_name"));
    if (json_is_object(v) && json_is_string(json_object_get(v, "class_name")) &&
        !strcmp(json_string_value(json_object_get(v, "class_name")), "function") && fn) {
        s = !strncmp(fn, "keras_hub>", 10) ? fn + 10 : fn;
        if (strcmp(s, "gelu_approximate") != 0 ||
            (reg && strcmp(reg, "keras_hub>gelu_approximate") != 0))
            return mw_kfail(L, MW_EUNSUPPORTED,
                            "%s: the function %s; supported as a function: KerasHub's "
                            "gelu_approximate, and by name: %s",
                            key, mw_kquote(q, fn), mw_act_supported());
    }
    if (!s)
        return mw_kfail(L, MW_EUNSUPPORTED, "%s: found %s (a custom activation?); supported: %s",
                        key, mw_kdescribe(d, v), mw_act_supported());
    (void)is_last; /* a softmax before the end is computed as a layer */
    if (mw_act_find(s, out) == 0)
        return MW_OK;
    return mw_kfail(L, MW_EUNSUPPORTED, "%s %s is not supported; supported: %s", key,
                    mw_kquote(q, s), mw_act_supported());
}

/* VarianceScaling's mode and distribution by mw_fan_mode and mw_dist; the reader also takes
 * Keras 2's "normal" (the last name) for truncated_normal. */
static const char *const fan_modes[] = {"fan_in", "fan_out", "fan_avg"};
static const char *const dist_names[] = {"truncated_normal", "untruncated_normal", "uniform",
                                         "normal"};
_Static_assert(sizeof fan_modes / sizeof *fan_modes == MW_FAN_AVG + 1, "a name per mw_fan_mode");
_Static_assert(sizeof dist_names / sizeof *dist_names == MW_DIST_UNIFORM + 2,
               "a name per mw_dist, and Keras 2's alias");

typedef struct {
    const char *cls, *id; /* Keras class name and its string identifier */
    mw_init_kind kind;
    double scale;
    mw_fan_mode mode;
    mw_dist dist;
    double a, b;
} init_entry;

static const init_entry init_table[] = {
    {"GlorotUniform", "glorot_uniform", MW_INIT_GLOROT_UNIFORM, 0, 0, 0, 0, 0},
    {"GlorotNormal", "glorot_normal", MW_INIT_GLOROT_NORMAL, 0, 0, 0, 0, 0},
    {"HeNormal", "he_normal", MW_INIT_HE_NORMAL, 0, 0, 0, 0, 0},
    {"HeUniform", "he_uniform", MW_INIT_HE_UNIFORM, 0, 0, 0, 0, 0},
    {"LecunNormal", "lecun_normal", MW_INIT_VARIANCE_SCALING, 1, MW_FAN_IN,
     MW_DIST_TRUNCATED_NORMAL, 0, 0},
    {"LecunUniform", "lecun_uniform", MW_INIT_VARIANCE_SCALING, 1, MW_FAN_IN, MW_DIST_UNIFORM, 0,
     0},
    {"VarianceScaling", "variance_scaling", MW_INIT_VARIANCE_SCALING, 1, MW_FAN_IN,
     MW_DIST_TRUNCATED_NORMAL, 0, 0},
    {"RandomUniform", "random_uniform", MW_INIT_RANDOM_UNIFORM, 0, 0, 0, -0.05, 0.05},
    {"RandomNormal", "random_normal", MW_INIT_RANDOM_NORMAL, 0, 0, 0, 0.0, 0.05},
    {"TruncatedNormal", "truncated_normal", MW_INIT_TRUNCATED_NORMAL, 0, 0, 0, 0.0, 0.05},
    {"Zeros", "zeros", MW_INIT_ZEROS, 0, 0, 0, 0, 0},
    {"Ones", "ones", MW_INIT_ONES, 0, 0, 0, 0, 0},
    {"Constant", "constant", MW_INIT_CONSTANT, 0, 0, 0, 0, 0},
};

static const char *const init_list =
    "GlorotUniform, GlorotNormal, HeNormal, HeUniform, LecunNormal, LecunUniform, "
    "VarianceScaling, RandomUniform, RandomNormal, TruncatedNormal, Zeros, Ones, Constant";

/* The keys Keras writes in an initializer's config, by kind (worker/model/keras_keys.h); Keras
 * 3.15 added input_axes and output_axes (the fans over other axes). */
#define AXES_KEYS                                                                                  \
    MW_KREAD("seed"), MW_KDEF("input_axes", "null", "fans over chosen axes"),                      \
        MW_KDEF("output_axes", "null", "fans over chosen axes")
static const mw_kkey fan_keys[] = {AXES_KEYS, MW_KEND},
                     scaling_keys[] = {AXES_KEYS, MW_KREAD("scale"), MW_KREAD("mode"),
                                       MW_KREAD("distribution"), MW_KEND},
                     uniform_keys[] = {MW_KREAD("seed"), MW_KREAD("minval"), MW_KREAD("maxval"),
                                       MW_KEND},
                     normal_keys[] = {MW_KREAD("seed"), MW_KREAD("mean"), MW_KREAD("stddev"),
                                      MW_KEND},
                     constant_keys[] = {MW_KREAD("value"), MW_KEND}, no_keys[] = {MW_KEND};

/* The arguments in an initializer's config c (an object) for its kind, out->kind, over the
 * class defaults already in *out. */
static mw_status get_init_config(const mw_klayer *L, const json_t *c, const char *key, mw_init *out)
{
    mw_kdbuf d;
    char path[96];
    mw_klayer at = *L;
    snprintf(at.where + strlen(at.where), sizeof at.where - strlen(at.where), ": %s.config", key);
    const mw_init_kind k = out->kind;
    MW_TRY(mw_kcheck_keys(at.origin, at.where, "this initializer", c,
                          k == MW_INIT_VARIANCE_SCALING ? scaling_keys
                          : k == MW_INIT_RANDOM_UNIFORM ? uniform_keys
                          : k == MW_INIT_RANDOM_NORMAL || k == MW_INIT_TRUNCATED_NORMAL
                              ? normal_keys
                          : k == MW_INIT_CONSTANT                   ? constant_keys
                          : k == MW_INIT_ZEROS || k == MW_INIT_ONES ? no_keys
                                                                    : fan_keys,
                          0));
    snprintf(path, sizeof path, "%s.config.", key);
    const json_t *seed = json_object_get(c, "seed");
    if (seed && !json_is_null(seed) && !json_is_integer(seed))
        return mw_kfail(L, MW_EMODEL, "%sseed: found %s; expected an integer or null", path,
                        mw_kdescribe(d, seed));
    switch (out->kind) {
    case MW_INIT_VARIANCE_SCALING: {
        int mode = (int)out->mode, dist = (int)out->dist;
        mw_klayer sub = *L;
        snprintf(sub.where + strlen(sub.where), sizeof sub.where - strlen(sub.where), ": %s", key);
        MW_TRY(mw_kget_num(L, path, c, "scale", out->scale, &out->scale));
        if (!(out->scale > 0.0))
            return mw_kfail(L, MW_EMODEL, "%sscale: %g; expected a number > 0", path, out->scale);
        MW_TRY(mw_kget_choice(&sub, c, "mode", fan_modes, 3, mode,
                              "\"fan_in\", \"fan_out\", \"fan_avg\"", &mode));
        MW_TRY(mw_kget_choice(&sub, c, "distribution", dist_names, 4, dist,
                              "\"truncated_normal\", \"untruncated_normal\", \"uniform\"", &dist));
        out->mode = (mw_fan_mode)mode;
        out->dist = dist == 3 ? MW_DIST_TRUNCATED_NORMAL : (mw_dist)dist; /* Keras 2: "normal" */
        break;
    }
    case MW_INIT_RANDOM_UNIFORM:
        MW_TRY(mw_kget_num(L, path, c, "minval", out->a, &out->a));
        MW_TRY(mw_kget_num(L, path, c, "maxval", out->b, &out->b));
        break;
    case MW_INIT_RANDOM_NORMAL:
    case MW_INIT_TRUNCATED_NORMAL:
        MW_TRY(mw_kget_num(L, path, c, "mean", out->a, &out->a));
        MW_TRY(mw_kget_num(L, path, c, "stddev", out->b, &out->b));
        if (!(out->b >= 0.0))
            return mw_kfail(L, MW_EMODEL, "%sstddev: %g; expected a number >= 0", path, out->b);
        break;
    case MW_INIT_CONSTANT:
        MW_TRY(mw_kget_num(L, path, c, "value", out->a, &out->a));
        break;
    default:
        break;
    }
    return MW_OK;
}

/* cfg[key] as Keras writes initializers and regularizers: a bare name ("l2"), or
 * {"class_name": ..., "config": {...}}. *cls gets the class (NULL when cfg[key] is absent or
 * null), *c its config (NULL when none); what names the expected classes in messages. */
static mw_status class_and_config(const mw_klayer *L, const json_t *v, const char *key,
                                  const char *what, const char **cls, const json_t **c)
{
    mw_kdbuf d;
    *cls = NULL, *c = NULL;
    if (!v || json_is_null(v))
        return MW_OK;
    if (json_is_string(v)) {
        *cls = json_string_value(v);
        return MW_OK;
    }
    if (!json_is_object(v))
        return mw_kfail(L, MW_EMODEL, "%s: found %s; expected %s object or null", key,
                        mw_kdescribe(d, v), what);
    *cls = json_string_value(json_object_get(v, "class_name"));
    *c = json_object_get(v, "config");
    if (!*cls)
        return mw_kfail(L, MW_EMODEL, "%s.class_name: found %s; expected %s class name", key,
                        mw_kdescribe(d, json_object_get(v, "class_name")), what);
    if (*c && !json_is_null(*c) && !json_is_object(*c))
        return mw_kfail(L, MW_EMODEL, "%s.config: found %s; expected an object", key,
                        mw_kdescribe(d, *c));
    return MW_OK;
}

mw_status mw_kget_init(const mw_klayer *L, const json_t *cfg, const char *key, mw_init_kind def,
                       mw_init *out)
{
    const json_t *v = json_object_get(cfg, key), *c = NULL;
    const char *cls = NULL;
    mw_kqbuf q;
    memset(out, 0, sizeof *out);
    out->kind = def;
    MW_TRY(class_and_config(L, v, key, "an initializer", &cls, &c));
    if (!cls)
        return MW_OK;
    const init_entry *e = NULL;
    for (size_t i = 0; i < sizeof init_table / sizeof *init_table; i++)
        if (!strcmp(cls, init_table[i].cls) || !strcmp(cls, init_table[i].id))
            e = &init_table[i];
    if (!e)
        return mw_kfail(L, MW_EUNSUPPORTED, "%s %s is not supported; supported: %s", key,
                        mw_kquote(q, cls), init_list);
    out->kind = e->kind, out->scale = e->scale, out->mode = e->mode, out->dist = e->dist;
    out->a = e->a, out->b = e->b;
    if (!json_is_object(c))
        return MW_OK;
    return get_init_config(L, c, key, out);
}

/* cfg[key]: null, {"class_name": "L2" | "L1" | "L1L2", "config": {...}} or "l2" / "l1" /
 * "l1_l2". Missing config values take Keras' defaults. */
static mw_status get_reg(const mw_klayer *L, const json_t *cfg, const char *key,
                         mw_regularizer *out)
{
    const json_t *v = json_object_get(cfg, key), *c = NULL;
    const char *cls = NULL;
    char path[96];
    mw_kqbuf q;
    memset(out, 0, sizeof *out);
    MW_TRY(class_and_config(L, v, key, "a regularizer (L2, L1 or L1L2)", &cls, &c));
    if (!cls)
        return MW_OK;
    int has1, has2;
    if (!strcmp(cls, "L2") || !strcmp(cls, "l2"))
        has1 = 0, has2 = 1, out->l2 = 0.01;
    else if (!strcmp(cls, "L1") || !strcmp(cls, "l1"))
        has1 = 1, has2 = 0, out->l1 = 0.01;
    else if (!strcmp(cls, "L1L2"))
        has1 = has2 = 1;
    else if (!strcmp(cls, "l1_l2"))
        has1 = has2 = 1, out->l1 = out->l2 = 0.01;
    else
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "%s %s is not supported; supported: L2, L1, L1L2 or "
                        "null",
                        key, mw_kquote(q, cls));
    if (json_is_object(c)) {
        static const mw_kkey reg_keys[] = {MW_KREAD("l1"), MW_KREAD("l2"), MW_KEND};
        mw_klayer at = *L;
        snprintf(at.where + strlen(at.where), sizeof at.where - strlen(at.where), ": %s.config",
                 key);
        MW_TRY(mw_kcheck_keys(at.origin, at.where, "this regularizer", c, reg_keys, 0));
        snprintf(path, sizeof path, "%s.config.", key);
        if (has1)
            MW_TRY(mw_kget_num(L, path, c, "l1", out->l1, &out->l1));
        if (has2)
            MW_TRY(mw_kget_num(L, path, c, "l2", out->l2, &out->l2));
    }
    if (!(out->l1 >= 0.0 && out->l2 >= 0.0))
        return mw_kfail(L, MW_EMODEL, "%s: l1 %g, l2 %g; expected factors >= 0", key, out->l1,
                        out->l2);
    return MW_OK;
}

size_t mw_klast_out(const mw_model *m)
{
    const mw_layer *l = &m->layers[m->nlayers - 1];
    return (size_t)l->out_h * l->out_w * l->out_c;
}

const mw_layer *mw_kprev(const mw_model *m)
{
    const int p = m->next_nin > 0 ? m->next_in[0] : m->nlayers - 1;
    return p >= 0 ? &m->layers[p] : NULL;
}

int mw_kcur_c(const mw_model *m)
{
    int p = m->next_nin > 0 ? m->next_in[0] : m->nlayers - 1;
    return p >= 0 ? m->layers[p].out_c : m->in_c;
}

mw_status mw_kget_regularizer(const mw_klayer *L, const json_t *cfg, const char *key,
                              mw_regularizer *out)
{
    return get_reg(L, cfg, key, out);
}

mw_status mw_kread_weights_as(const mw_klayer *L, const json_t *cfg, int is_last,
                              const char *kernel, mw_kweights *w)
{
    char key[64];
    MW_TRY(mw_kget_activation(L, cfg, "activation", is_last, 0, &w->act));
    MW_TRY(mw_kget_bool(L, cfg, "use_bias", 1, &w->use_bias));
    snprintf(key, sizeof key, "%s_initializer", kernel);
    MW_TRY(mw_kget_init(L, cfg, key, MW_INIT_GLOROT_UNIFORM, &w->kinit));
    MW_TRY(mw_kget_init(L, cfg, "bias_initializer", MW_INIT_ZEROS, &w->binit));
    snprintf(key, sizeof key, "%s_regularizer", kernel);
    MW_TRY(get_reg(L, cfg, key, &w->kreg));
    MW_TRY(get_reg(L, cfg, "bias_regularizer", &w->breg));
    MW_TRY(mw_kneed_null(L, cfg, "activity_regularizer", "activity regularizers"));
    snprintf(key, sizeof key, "%s_constraint", kernel);
    MW_TRY(mw_kneed_null(L, cfg, key, "weight constraints"));
    return mw_kneed_null(L, cfg, "bias_constraint", "weight constraints");
}

mw_status mw_kread_weights(const mw_klayer *L, const json_t *cfg, int is_last, mw_kweights *w)
{
    MW_TRY(mw_kread_weights_as(L, cfg, is_last, "kernel", w));
    return mw_kneed_null(L, cfg, "lora_rank", "LoRA adapters");
}

mw_status mw_kapply_weights(mw_kbuilder *B, const mw_kweights *w)
{
    MW_TRY(mw_model_set_init(B->m, &w->kinit, &w->binit));
    return mw_model_set_regularizer(B->m, &w->kreg, &w->breg);
}

mw_status mw_kneed_channels(const mw_kbuilder *B, const mw_klayer *L)
{
    if (!B->no_channels)
        return MW_OK;
    const mw_model *m = B->m;
    return mw_kfail(L, MW_EMODEL,
                    "needs a 4-D input (batch, height, width, channels), but the "
                    "model's input is (None, %d, %d); give the input shape as (None, %d, %d, 1)",
                    m->in_h, m->in_w, m->in_h, m->in_w);
}

mw_status mw_kneed_init(const mw_klayer *L, const json_t *cfg, const char *key, mw_init_kind kind)
{
    mw_init in;
    MW_TRY(mw_kget_init(L, cfg, key, kind, &in));
    if (in.kind != kind) {
        const json_t *v = json_object_get(cfg, key);
        const char *cls = json_is_string(v) ? json_string_value(v)
                                            : json_string_value(json_object_get(v, "class_name"));
        mw_kqbuf q;
        return mw_kfail(L, MW_EUNSUPPORTED, "%s: found %s; only the default (%s) is supported", key,
                        mw_kquote(q, cls ? cls : "?"), kind == MW_INIT_ZEROS ? "Zeros" : "Ones");
    }
    return MW_OK;
}

mw_status mw_kget_bn_axis(const mw_klayer *L, const json_t *cfg, int flat)
{
    const json_t *v = json_object_get(cfg, "axis");
    mw_kdbuf d;
    int a = -1, last = flat ? 1 : 3;
    if (v && json_is_array(v) && json_array_size(v) == 1)
        v = json_array_get(v, 0);
    if (v && !json_is_null(v) && (!mw_kas_int(v, -8, 8, &a) || (a != -1 && a != last)))
        return mw_kfail(L, MW_EUNSUPPORTED, "axis: found %s; supported: -1 (the channels)",
                        mw_kdescribe(d, v));
    return MW_OK;
}

mw_status mw_kget_last_axis(const mw_klayer *L, const json_t *cfg, const mw_kbuilder *B)
{
    const int p = B->m->next_nin > 0 ? B->m->next_in[0] : B->m->nlayers - 1;
    const mw_layer *in = p >= 0 ? &B->m->layers[p] : NULL;
    const int last = in                 ? (in->flat                          ? 1
                                           : in->out_h == 1 && in->out_w > 1 ? 2
                                                                             : 3)
                     : B->m->flat_input ? 1
                                        : 3;
    const json_t *v = json_object_get(cfg, "axis");
    if (v && json_is_array(v) && json_array_size(v) == 1)
        v = json_array_get(v, 0);
    int a = -1;
    mw_kdbuf d;
    if (v && !json_is_null(v) && (!mw_kas_int(v, -8, 8, &a) || (a != -1 && a != last)))
        return mw_kfail(L, MW_EUNSUPPORTED, "axis: found %s; supported: -1 (the last axis)",
                        mw_kdescribe(d, v));
    return MW_OK;
}

mw_status mw_kread_norm(const mw_klayer *L, const json_t *cfg, const mw_kbuilder *B, mw_knorm *out)
{
    MW_TRY(mw_kget_last_axis(L, cfg, B));
    MW_TRY(mw_kget_num(L, "", cfg, "epsilon", 1e-3, &out->epsilon));
    MW_TRY(mw_kget_bool(L, cfg, "center", 1, &out->center));
    MW_TRY(mw_kget_bool(L, cfg, "scale", 1, &out->scale));
    MW_TRY(mw_kget_init(L, cfg, "beta_initializer", MW_INIT_ZEROS, &out->beta));
    MW_TRY(mw_kget_init(L, cfg, "gamma_initializer", MW_INIT_ONES, &out->gamma));
    static const char *const nulls[] = {"beta_regularizer", "gamma_regularizer", "beta_constraint",
                                        "gamma_constraint"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        MW_TRY(mw_kneed_null(L, cfg, nulls[i], "a normalization's regularizers and constraints"));
    return MW_OK;
}

mw_status mw_kget_sides(const mw_klayer *L, const json_t *cfg, const char *key, int def, int out[4])
{
    const json_t *v = json_object_get(cfg, key);
    int hw[2];
    mw_kdbuf d;
    out[0] = out[1] = out[2] = out[3] = def;
    if (json_is_array(v) && json_array_size(v) == 2 && json_is_array(json_array_get(v, 0))) {
        /* the first bad entry, by its place and value (not "an array of 2") */
        static const char *const side[2][2] = {{"top", "bottom"}, {"left", "right"}};
        for (int i = 0; i < 2; i++) {
            const json_t *q = json_array_get(v, (size_t)i);
            if (!json_is_array(q) || json_array_size(q) != 2)
                return mw_kfail(L, MW_EMODEL,
                                "%s[%d]: found %s; expected [%s, %s] with integers from 0 to %d "
                                "(%s is n, [h, w] or [[top, bottom], [left, right]])",
                                key, i, mw_kdescribe(d, q), side[i][0], side[i][1], MW_KMAX_WINDOW,
                                key);
            for (int j = 0; j < 2; j++)
                if (!mw_kas_int(json_array_get(q, (size_t)j), 0, MW_KMAX_WINDOW, &out[2 * i + j]))
                    return mw_kfail(L, MW_EMODEL,
                                    "%s[%d][%d] (%s): found %s; expected an integer from 0 to %d",
                                    key, i, j, side[i][j], mw_kdescribe(d, json_array_get(q, j)),
                                    MW_KMAX_WINDOW);
        }
    } else if (v && !json_is_null(v)) {
        MW_TRY(mw_kget_pair(L, cfg, key, 1, 0, MW_KMAX_WINDOW, hw));
        out[0] = out[1] = hw[0], out[2] = out[3] = hw[1];
    }
    return MW_OK;
}

/* ---- writing a layer back to Keras 3 ---- */

json_t *mw_kw_pair(int a, int b)
{
    return json_pack("[i, i]", a, b);
}

json_t *mw_kw_initializer(const mw_init *in)
{
    const char *cls = "GlorotUniform";
    json_t *c = json_object();
    switch (in->kind) {
    case MW_INIT_ZEROS:
        cls = "Zeros";
        break;
    case MW_INIT_ONES:
        cls = "Ones";
        break;
    case MW_INIT_GLOROT_UNIFORM:
        cls = "GlorotUniform";
        break;
    case MW_INIT_GLOROT_NORMAL:
        cls = "GlorotNormal";
        break;
    case MW_INIT_HE_UNIFORM:
        cls = "HeUniform";
        break;
    case MW_INIT_HE_NORMAL:
        cls = "HeNormal";
        break;
    case MW_INIT_VARIANCE_SCALING:
        cls = "VarianceScaling";
        json_object_set_new(c, "scale", json_real(in->scale));
        json_object_set_new(c, "mode", json_string(fan_modes[in->mode]));
        json_object_set_new(c, "distribution", json_string(dist_names[in->dist]));
        break;
    case MW_INIT_RANDOM_UNIFORM:
        cls = "RandomUniform";
        json_object_set_new(c, "minval", json_real(in->a));
        json_object_set_new(c, "maxval", json_real(in->b));
        break;
    case MW_INIT_RANDOM_NORMAL:
    case MW_INIT_TRUNCATED_NORMAL:
        cls = in->kind == MW_INIT_RANDOM_NORMAL ? "RandomNormal" : "TruncatedNormal";
        json_object_set_new(c, "mean", json_real(in->a));
        json_object_set_new(c, "stddev", json_real(in->b));
        break;
    case MW_INIT_CONSTANT:
        cls = "Constant";
        json_object_set_new(c, "value", json_real(in->a));
        break;
    }
    if (in->kind != MW_INIT_ZEROS && in->kind != MW_INIT_ONES && in->kind != MW_INIT_CONSTANT)
        json_object_set_new(c, "seed", json_null());
    return json_pack("{s:s, s:s, s:o, s:n}", "module", "keras.initializers", "class_name", cls,
                     "config", c, "registered_name");
}

json_t *mw_kw_regularizer(const mw_regularizer *r)
{
    if (r->l1 == 0 && r->l2 == 0)
        return json_null();
    return json_pack("{s:s, s:s, s:o, s:n}", "module", "keras.regularizers", "class_name", "L1L2",
                     "config", json_pack("{s:f, s:f}", "l1", (double)r->l1, "l2", (double)r->l2),
                     "registered_name");
}

/* The activation Keras keeps inside Conv2D or Dense layer i: a folded layer after it and
 * before the next Conv2D or Dense (the model may have moved it past a MaxPooling2D, with
 * which a ReLU commutes). */
const char *mw_kw_folded_activation(const mw_model *m, int i)
{
    for (int j = i + 1; j < m->nlayers; j++) {
        const mw_layer *l = &m->layers[j];
        if (mw_layer_row(l->kind)->matmul)
            break;
        if (l->folded)
            return l->kind == MW_LAYER_RELU  ? "relu"
                   : l->kind == MW_LAYER_ACT ? mw_act_kernel_name((int)l->act)
                                             : "softmax";
    }
    return "linear";
}

/* conv2d and dense: the weights' part of the config. */
void mw_kw_weights(json_t *c, const mw_layer *l)
{
    json_object_set_new(c, "use_bias", json_boolean(l->has_bias));
    json_object_set_new(c, "kernel_initializer", mw_kw_initializer(&l->kernel_init));
    json_object_set_new(c, "bias_initializer", mw_kw_initializer(&l->bias_init));
    json_object_set_new(c, "kernel_regularizer", mw_kw_regularizer(&l->kernel_reg));
    json_object_set_new(c, "bias_regularizer", mw_kw_regularizer(&l->bias_reg));
}

/* Keras Sequential JSON -> mw_model; see keras.h.
 *
 * Steps: parse with jansson (JSON_REJECT_DUPLICATES, so a key written twice is an error, not
 * a silent choice), unwrap the TensorFlow.js wrapper, find the layer list and the input shape,
 * then one pass over the layers: read every config field that changes what the layer
 * computes, reject the values this program does not implement, and call mw_model_add_* (the
 * model checks the shapes). Fields that do not change the math (a seed, "module", build
 * configs) are ignored. User text that reaches a message is escaped and shortened first, so
 * odd bytes cannot garble a terminal or overflow the message slot. */
#include "worker/keras/keras.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "common/fs.h"
#include "common/strfmt.h"
#include "worker/data/preprocess.h"

#define QUOTE_MAX 48    /* longest piece of user text quoted in a message */
#define NAME_MAX_LEN 55 /* layer names: room for "/softmax" in mw_layer.name */
#define MAX_LAYERS 1000
#define MAX_DIM 65536        /* an input dimension, filters, units */
#define MAX_WINDOW 1024      /* kernel, pool and stride sizes */
#define MAX_TENSOR (1 << 28) /* floats in one weight tensor or one example's activation */

static const char *const layer_list =
    "InputLayer, Conv2D, MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D, "
    "GlobalMaxPooling2D, ZeroPadding2D, Flatten, Dense, Dropout, BatchNormalization, Add, "
    "Multiply, Concatenate, Activation, ReLU, LeakyReLU, ELU, Softmax";
static const char *const act_list = "\"relu\", \"linear\", \"softmax\", \"sigmoid\", \"tanh\", "
                                    "\"gelu\", \"silu\", \"swish\", \"elu\", \"leaky_relu\"";

/* ---- messages ------------------------------------------------------------------------- */

typedef char qbuf[QUOTE_MAX * 4 + 8];

/* "s", escaped and shortened. */
static const char *quote(qbuf q, const char *s)
{
    return mw_str_quote(q, sizeof(qbuf), s, QUOTE_MAX);
}

/* What a JSON value is, for "found ...". */
static const char *describe(char *buf, size_t n, const json_t *v)
{
    qbuf q;
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
        snprintf(buf, n, "a string (%s)", quote(q, json_string_value(v)));
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

/* "origin: message" */
static mw_status gfail(const char *origin, mw_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mw_status gfail(const char *origin, mw_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mw_status rc = mw_verr_at(s, origin, fmt, ap);
    va_end(ap);
    return rc;
}

/* The layer being read, for messages: "layer 'conv2d' (Conv2D)" or "layers[3] (Conv2D)". */
typedef struct {
    const char *origin;
    char where[QUOTE_MAX * 8 + 96]; /* holds an escaped name and class */
    mw_policy policy;               /* the layer's dtype policy (read_layer) */
} lctx;

static mw_status lfail(const lctx *L, mw_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mw_status lfail(const lctx *L, mw_status s, const char *fmt, ...)
{
    char where[600];
    snprintf(where, sizeof where, "%s: %s", L->origin, L->where);
    va_list ap;
    va_start(ap, fmt);
    mw_status rc = mw_verr_at(s, where, fmt, ap);
    va_end(ap);
    return rc;
}

/* A failed mw_model_add_* recorded its own message; give it the origin prefix. */
static mw_status from_model(const char *origin, mw_status rc)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mw_err_msg());
    mw_err_clear();
    return mw_err(rc, "%s: %s", origin, msg);
}

/* ---- typed fields ------------------------------------------------------------------------ */

/* An integral JSON number in [lo, hi] (reals such as 3.0 too); 0 when it is not one. */
static int as_int(const json_t *v, long long lo, long long hi, int *out)
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

/* cfg[key]: an integer in [lo, hi]; absent gives def, unless required. */
static mw_status get_int(const lctx *L, const json_t *cfg, const char *key, int def, int required,
                         int lo, int hi, int *out)
{
    const json_t *v = json_object_get(cfg, key);
    char d[QUOTE_MAX * 4 + 64];
    if (!v) {
        if (required)
            return lfail(L, MW_EMODEL, "%s is missing; expected an integer from %d to %d", key, lo,
                         hi);
        *out = def;
        return MW_OK;
    }
    if (!as_int(v, lo, hi, out))
        return lfail(L, MW_EMODEL, "%s: found %s; expected an integer from %d to %d", key,
                     describe(d, sizeof d, v), lo, hi);
    return MW_OK;
}

/* cfg[key]: n or [a, b] (Keras normalizes both to a pair), each in [lo, hi]. Absent (or
 * null) gives (def, def); def 0 makes it required. */
static mw_status get_pair(const lctx *L, const json_t *cfg, const char *key, int def, int lo,
                          int hi, int out[2])
{
    const json_t *v = json_object_get(cfg, key);
    char d[QUOTE_MAX * 4 + 64];
    if (!v || json_is_null(v)) {
        if (!def)
            return lfail(L, MW_EMODEL,
                         "%s is missing; expected an integer or a list of 2 "
                         "integers from %d to %d",
                         key, lo, hi);
        out[0] = out[1] = def;
        return MW_OK;
    }
    if (as_int(v, lo, hi, &out[0])) {
        out[1] = out[0];
        return MW_OK;
    }
    if (json_is_array(v) && json_array_size(v) == 2 &&
        as_int(json_array_get(v, 0), lo, hi, &out[0]) &&
        as_int(json_array_get(v, 1), lo, hi, &out[1]))
        return MW_OK;
    if (json_is_array(v) && json_array_size(v) == 2) {
        const json_t *bad = as_int(json_array_get(v, 0), lo, hi, &out[0]) ? json_array_get(v, 1)
                                                                          : json_array_get(v, 0);
        return lfail(L, MW_EMODEL, "%s: found %s in the list; expected integers from %d to %d", key,
                     describe(d, sizeof d, bad), lo, hi);
    }
    return lfail(L, MW_EMODEL,
                 "%s: found %s; expected an integer or a list of 2 integers from "
                 "%d to %d",
                 key, describe(d, sizeof d, v), lo, hi);
}

static mw_status get_bool(const lctx *L, const json_t *cfg, const char *key, int def, int *out)
{
    const json_t *v = json_object_get(cfg, key);
    char d[QUOTE_MAX * 4 + 64];
    if (!v) {
        *out = def;
        return MW_OK;
    }
    if (!json_is_boolean(v))
        return lfail(L, MW_EMODEL, "%s: found %s; expected true or false", key,
                     describe(d, sizeof d, v));
    *out = json_is_true(v);
    return MW_OK;
}

/* obj[key]: a finite number; absent gives def. */
static mw_status get_num(const lctx *L, const char *path, const json_t *obj, const char *key,
                         double def, double *out)
{
    const json_t *v = json_object_get(obj, key);
    char d[QUOTE_MAX * 4 + 64];
    if (!v) {
        *out = def;
        return MW_OK;
    }
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return lfail(L, MW_EMODEL, "%s%s: found %s; expected a number", path, key,
                     describe(d, sizeof d, v));
    *out = json_number_value(v);
    return MW_OK;
}

/* cfg[key] absent or null: the fields this program does not implement. */
static mw_status need_null(const lctx *L, const json_t *cfg, const char *key, const char *why)
{
    const json_t *v = json_object_get(cfg, key);
    char d[QUOTE_MAX * 4 + 64];
    if (v && !json_is_null(v))
        return lfail(L, MW_EUNSUPPORTED, "%s: found %s; %s are not supported (supported: null)",
                     key, describe(d, sizeof d, v), why);
    return MW_OK;
}

/* cfg[key]: one of names[] (case-insensitive, as Keras lower-cases these); absent or null
 * gives def. */
static mw_status get_choice(const lctx *L, const json_t *cfg, const char *key,
                            const char *const *names, int n, int def, const char *supported,
                            int *out)
{
    const json_t *v = json_object_get(cfg, key);
    char d[QUOTE_MAX * 4 + 64];
    qbuf q;
    if (!v || json_is_null(v)) {
        *out = def;
        return MW_OK;
    }
    if (!json_is_string(v))
        return lfail(L, MW_EMODEL, "%s: found %s; expected one of %s", key,
                     describe(d, sizeof d, v), supported);
    for (int i = 0; i < n; i++)
        if (strcasecmp(json_string_value(v), names[i]) == 0) {
            *out = i;
            return MW_OK;
        }
    return lfail(L, MW_EUNSUPPORTED, "%s %s is not supported; supported: %s", key,
                 quote(q, json_string_value(v)), supported);
}

static mw_status get_padding(const lctx *L, const json_t *cfg, int *same)
{
    static const char *const names[] = {"valid", "same"};
    return get_choice(L, cfg, "padding", names, 2, 0, "\"valid\", \"same\"", same);
}

static mw_status check_data_format(const lctx *L, const json_t *cfg)
{
    static const char *const names[] = {"channels_last"};
    int dummy;
    return get_choice(L, cfg, "data_format", names, 1, 0, "\"channels_last\"", &dummy);
}

/* "float32", "mixed_bfloat16", "mixed_float16", or a policy object with that name
 * ({"class_name": "DTypePolicy", "config": {"name": ...}} in Keras 3, Policy in Keras 2), or
 * absent / null (float32). 16-bit variables ("bfloat16", "float16") are refused: training
 * keeps float32 weights. */
static mw_status check_dtype(const lctx *L, const json_t *cfg, mw_policy *policy)
{
    const json_t *v = json_object_get(cfg, "dtype");
    const char *name = NULL;
    char d[QUOTE_MAX * 4 + 64];
    qbuf q;
    *policy = MW_POLICY_FLOAT32;
    if (!v || json_is_null(v))
        return MW_OK;
    if (json_is_string(v))
        name = json_string_value(v);
    else if (json_is_object(v))
        name = json_string_value(json_object_get(json_object_get(v, "config"), "name"));
    if (!name)
        return lfail(L, MW_EMODEL,
                     "dtype: found %s; expected \"float32\" or a dtype policy "
                     "object",
                     describe(d, sizeof d, v));
    if (mw_policy_parse(name, policy) == 0)
        return MW_OK;
    if (!strcmp(name, "bfloat16") || !strcmp(name, "float16"))
        return lfail(L, MW_EUNSUPPORTED,
                     "dtype %s keeps the weights in 16 bits, which training does not support; "
                     "supported: \"float32\", \"mixed_bfloat16\", \"mixed_float16\" (float32 "
                     "weights, 16-bit compute)",
                     quote(q, name));
    return lfail(L, MW_EUNSUPPORTED,
                 "dtype %s is not supported; supported: \"float32\", \"mixed_bfloat16\", "
                 "\"mixed_float16\"",
                 quote(q, name));
}

/* A layer or model name: 1..max printable ASCII bytes without '/'. */
static int name_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '/')
            return 0;
    return 1;
}

/* ---- activations, initializers, regularizers --------------------------------------------- */

static mw_status get_activation(const lctx *L, const json_t *cfg, const char *key, int is_last,
                                int required, mw_activation *out)
{
    const json_t *v = json_object_get(cfg, key);
    char d[QUOTE_MAX * 4 + 64];
    qbuf q;
    *out = MW_ACT_LINEAR;
    if (!v && required)
        return lfail(L, MW_EMODEL, "%s is missing; expected one of %s", key, act_list);
    if (!v || json_is_null(v))
        return MW_OK;
    if (!json_is_string(v))
        return lfail(L, MW_EUNSUPPORTED, "%s: found %s (a custom activation?); supported: %s", key,
                     describe(d, sizeof d, v), act_list);
    static const struct {
        const char *id;
        mw_activation act;
    } acts[] = {{"linear", MW_ACT_LINEAR},   {"relu", MW_ACT_RELU},
                {"softmax", MW_ACT_SOFTMAX}, {"sigmoid", MW_ACT_SIGMOID},
                {"tanh", MW_ACT_TANH},       {"gelu", MW_ACT_GELU},
                {"silu", MW_ACT_SILU},       {"swish", MW_ACT_SILU},
                {"elu", MW_ACT_ELU},         {"leaky_relu", MW_ACT_LEAKY_RELU}};
    (void)is_last; /* a softmax before the end is computed as a layer */
    const char *s = json_string_value(v);
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (!strcmp(s, acts[i].id)) {
            *out = acts[i].act;
            return MW_OK;
        }
    return lfail(L, MW_EUNSUPPORTED, "%s %s is not supported; supported: %s", key, quote(q, s),
                 act_list);
}

/* The parameter of an activation named by its string identifier: Keras 3's defaults
 * (elu alpha 1, leaky_relu negative_slope 0.2). */
static float act_alpha(mw_activation a)
{
    return a == MW_ACT_ELU ? 1.0f : a == MW_ACT_LEAKY_RELU ? 0.2f : 0.0f;
}

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

/* The arguments in an initializer's config c (an object) for its kind, out->kind, over the
 * class defaults already in *out. */
static mw_status get_init_config(const lctx *L, const json_t *c, const char *key, mw_init *out)
{
    char d[QUOTE_MAX * 4 + 64], path[96];
    snprintf(path, sizeof path, "%s.config.", key);
    const json_t *seed = json_object_get(c, "seed");
    if (seed && !json_is_null(seed) && !json_is_integer(seed))
        return lfail(L, MW_EMODEL, "%sseed: found %s; expected an integer or null", path,
                     describe(d, sizeof d, seed));
    switch (out->kind) {
    case MW_INIT_VARIANCE_SCALING: {
        static const char *const modes[] = {"fan_in", "fan_out", "fan_avg"};
        static const char *const dists[] = {"truncated_normal", "untruncated_normal", "uniform",
                                            "normal"};
        int mode = (int)out->mode, dist = (int)out->dist;
        lctx sub = *L;
        snprintf(sub.where + strlen(sub.where), sizeof sub.where - strlen(sub.where), ": %s", key);
        MW_TRY(get_num(L, path, c, "scale", out->scale, &out->scale));
        if (!(out->scale > 0.0))
            return lfail(L, MW_EMODEL, "%sscale: %g; expected a number > 0", path, out->scale);
        MW_TRY(get_choice(&sub, c, "mode", modes, 3, mode, "\"fan_in\", \"fan_out\", \"fan_avg\"",
                          &mode));
        MW_TRY(get_choice(&sub, c, "distribution", dists, 4, dist,
                          "\"truncated_normal\", \"untruncated_normal\", \"uniform\"", &dist));
        out->mode = (mw_fan_mode)mode;
        out->dist = dist == 3 ? MW_DIST_TRUNCATED_NORMAL : (mw_dist)dist; /* Keras 2: "normal" */
        break;
    }
    case MW_INIT_RANDOM_UNIFORM:
        MW_TRY(get_num(L, path, c, "minval", out->a, &out->a));
        MW_TRY(get_num(L, path, c, "maxval", out->b, &out->b));
        break;
    case MW_INIT_RANDOM_NORMAL:
    case MW_INIT_TRUNCATED_NORMAL:
        MW_TRY(get_num(L, path, c, "mean", out->a, &out->a));
        MW_TRY(get_num(L, path, c, "stddev", out->b, &out->b));
        if (!(out->b >= 0.0))
            return lfail(L, MW_EMODEL, "%sstddev: %g; expected a number >= 0", path, out->b);
        break;
    case MW_INIT_CONSTANT:
        MW_TRY(get_num(L, path, c, "value", out->a, &out->a));
        break;
    default:
        break;
    }
    return MW_OK;
}

/* cfg[key] as Keras writes initializers and regularizers: a bare name ("l2"), or
 * {"class_name": ..., "config": {...}}. *cls gets the class (NULL when cfg[key] is absent or
 * null), *c its config (NULL when none); what names the expected classes in messages. */
static mw_status class_and_config(const lctx *L, const json_t *v, const char *key, const char *what,
                                  const char **cls, const json_t **c)
{
    char d[QUOTE_MAX * 4 + 64];
    *cls = NULL, *c = NULL;
    if (!v || json_is_null(v))
        return MW_OK;
    if (json_is_string(v)) {
        *cls = json_string_value(v);
        return MW_OK;
    }
    if (!json_is_object(v))
        return lfail(L, MW_EMODEL, "%s: found %s; expected %s object or null", key,
                     describe(d, sizeof d, v), what);
    *cls = json_string_value(json_object_get(v, "class_name"));
    *c = json_object_get(v, "config");
    if (!*cls)
        return lfail(L, MW_EMODEL, "%s.class_name: found %s; expected %s class name", key,
                     describe(d, sizeof d, json_object_get(v, "class_name")), what);
    if (*c && !json_is_null(*c) && !json_is_object(*c))
        return lfail(L, MW_EMODEL, "%s.config: found %s; expected an object", key,
                     describe(d, sizeof d, *c));
    return MW_OK;
}

/* cfg[key]: {"class_name": ..., "config": {...}}, a string identifier ("he_normal"), or
 * absent / null for the default. */
static mw_status get_init(const lctx *L, const json_t *cfg, const char *key, mw_init_kind def,
                          mw_init *out)
{
    const json_t *v = json_object_get(cfg, key), *c = NULL;
    const char *cls = NULL;
    qbuf q;
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
        return lfail(L, MW_EUNSUPPORTED, "%s %s is not supported; supported: %s", key,
                     quote(q, cls), init_list);
    out->kind = e->kind, out->scale = e->scale, out->mode = e->mode, out->dist = e->dist;
    out->a = e->a, out->b = e->b;
    if (!json_is_object(c))
        return MW_OK;
    return get_init_config(L, c, key, out);
}

/* cfg[key]: null, {"class_name": "L2" | "L1" | "L1L2", "config": {...}} or "l2" / "l1" /
 * "l1_l2". Missing config values take Keras' defaults. */
static mw_status get_reg(const lctx *L, const json_t *cfg, const char *key, mw_regularizer *out)
{
    const json_t *v = json_object_get(cfg, key), *c = NULL;
    const char *cls = NULL;
    char path[96];
    qbuf q;
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
        return lfail(L, MW_EUNSUPPORTED,
                     "%s %s is not supported; supported: L2, L1, L1L2 or "
                     "null",
                     key, quote(q, cls));
    if (json_is_object(c)) {
        snprintf(path, sizeof path, "%s.config.", key);
        if (has1)
            MW_TRY(get_num(L, path, c, "l1", out->l1, &out->l1));
        if (has2)
            MW_TRY(get_num(L, path, c, "l2", out->l2, &out->l2));
    }
    if (!(out->l1 >= 0.0 && out->l2 >= 0.0))
        return lfail(L, MW_EMODEL, "%s: l1 %g, l2 %g; expected factors >= 0", key, out->l1,
                     out->l2);
    return MW_OK;
}

/* ---- input shape ------------------------------------------------------------------------- */

typedef struct {
    int rank; /* 3: (H, W, C); 2: (H, W); 1: (D); 0: none given */
    int d[3];
    char from[QUOTE_MAX * 8 + 160]; /* where it was found, for messages */
} kshape;

static void shape_str(char *buf, size_t n, const kshape *s)
{
    if (s->rank == 3)
        snprintf(buf, n, "(None, %d, %d, %d)", s->d[0], s->d[1], s->d[2]);
    else if (s->rank == 2)
        snprintf(buf, n, "(None, %d, %d)", s->d[0], s->d[1]);
    else
        snprintf(buf, n, "(None, %d)", s->d[0]);
}

/* [batch, dims...] with batch null or a positive integer (ignored), 1 to 3 dims. */
static mw_status parse_shape(const lctx *L, const json_t *v, const char *key, kshape *s)
{
    char d[QUOTE_MAX * 4 + 64];
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n < 2 || n > 4)
        return lfail(L, n > 4 ? MW_EUNSUPPORTED : MW_EMODEL,
                     "%s: found %s; expected [null, height, width, channels], [null, height, "
                     "width] or [null, features]",
                     key, describe(d, sizeof d, v));
    const json_t *b = json_array_get(v, 0);
    int bv;
    if (!json_is_null(b) && !as_int(b, 1, INT32_MAX, &bv))
        return lfail(L, MW_EMODEL,
                     "%s[0] (the batch size): found %s; expected null or a "
                     "positive integer",
                     key, describe(d, sizeof d, b));
    s->rank = (int)n - 1;
    for (size_t i = 1; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (json_is_null(e))
            return lfail(L, MW_EUNSUPPORTED,
                         "%s[%zu] is null: inputs of variable size are not "
                         "supported; give every dimension",
                         key, i);
        if (!as_int(e, 1, MAX_DIM, &s->d[i - 1]))
            return lfail(L, MW_EMODEL, "%s[%zu]: found %s; expected an integer from 1 to %d", key,
                         i, describe(d, sizeof d, e), MAX_DIM);
    }
    long long total = 1;
    for (int i = 0; i < s->rank; i++)
        total *= s->d[i];
    if (total > MAX_TENSOR)
        return lfail(L, MW_EUNSUPPORTED,
                     "%s: %lld values per example; at most %d are "
                     "supported",
                     key, total, MAX_TENSOR);
    snprintf(s->from, sizeof s->from, "%s %s", L->where, key);
    return MW_OK;
}

/* ---- the layers -------------------------------------------------------------------------- */

typedef struct {
    const char *origin;
    mw_model *m;
    int no_channels; /* (None, H, W) input not yet flattened: no Conv2D / MaxPooling2D */
} builder;

static size_t last_out(const mw_model *m)
{
    const mw_layer *l = &m->layers[m->nlayers - 1];
    return (size_t)l->out_h * l->out_w * l->out_c;
}

/* Channels of the next layer's input: its first graph input, else the last layer. */
static int cur_c(const mw_model *m)
{
    int p = m->next_nin > 0 ? m->next_in[0] : m->nlayers - 1;
    return p >= 0 ? m->layers[p].out_c : m->in_c;
}

/* Regularizers and constraints common to Conv2D and Dense; adds the layer's weights'
 * settings after the layer itself was added. */
typedef struct {
    mw_init kinit, binit;
    mw_regularizer kreg, breg;
    mw_activation act;
    int use_bias;
} weights_cfg;

static mw_status read_weights(const lctx *L, const json_t *cfg, int is_last, weights_cfg *w)
{
    MW_TRY(get_activation(L, cfg, "activation", is_last, 0, &w->act));
    MW_TRY(get_bool(L, cfg, "use_bias", 1, &w->use_bias));
    MW_TRY(get_init(L, cfg, "kernel_initializer", MW_INIT_GLOROT_UNIFORM, &w->kinit));
    MW_TRY(get_init(L, cfg, "bias_initializer", MW_INIT_ZEROS, &w->binit));
    MW_TRY(get_reg(L, cfg, "kernel_regularizer", &w->kreg));
    MW_TRY(get_reg(L, cfg, "bias_regularizer", &w->breg));
    MW_TRY(need_null(L, cfg, "activity_regularizer", "activity regularizers"));
    MW_TRY(need_null(L, cfg, "kernel_constraint", "weight constraints"));
    MW_TRY(need_null(L, cfg, "bias_constraint", "weight constraints"));
    MW_TRY(need_null(L, cfg, "lora_rank", "LoRA adapters"));
    return MW_OK;
}

static mw_status apply_weights(builder *B, const weights_cfg *w)
{
    MW_TRY(mw_model_set_init(B->m, &w->kinit, &w->binit));
    MW_TRY(mw_model_set_regularizer(B->m, &w->kreg, &w->breg));
    return mw_model_add_act(B->m, NULL, w->act, act_alpha(w->act), 1);
}

static mw_status need_channels(const builder *B, const lctx *L)
{
    if (!B->no_channels)
        return MW_OK;
    const mw_model *m = B->m;
    return lfail(L, MW_EMODEL,
                 "needs a 4-D input (batch, height, width, channels), but the "
                 "model's input is (None, %d, %d); give the input shape as (None, %d, %d, 1)",
                 m->in_h, m->in_w, m->in_h, m->in_w);
}

static mw_status add_conv2d(builder *B, const lctx *L, const json_t *cfg, const char *name,
                            int is_last)
{
    int filters = 0, groups = 0, same = 0;
    int ks[2] = {0, 0}, st[2] = {0, 0}, dil[2] = {0, 0};
    weights_cfg w;
    MW_TRY(get_int(L, cfg, "filters", 0, 1, 1, MAX_DIM, &filters));
    MW_TRY(get_pair(L, cfg, "kernel_size", 0, 1, MAX_WINDOW, ks));
    MW_TRY(get_pair(L, cfg, "strides", 1, 1, MAX_WINDOW, st));
    MW_TRY(get_padding(L, cfg, &same));
    MW_TRY(check_data_format(L, cfg));
    MW_TRY(get_pair(L, cfg, "dilation_rate", 1, 1, MAX_WINDOW, dil));
    if (dil[0] != 1 || dil[1] != 1)
        return lfail(L, MW_EUNSUPPORTED,
                     "dilation_rate [%d, %d] is not supported; supported: "
                     "1 (no dilation)",
                     dil[0], dil[1]);
    MW_TRY(get_int(L, cfg, "groups", 1, 0, 1, MAX_DIM, &groups));
    if (groups != 1)
        return lfail(L, MW_EUNSUPPORTED, "groups %d is not supported; supported: 1", groups);
    MW_TRY(read_weights(L, cfg, is_last, &w));
    MW_TRY(need_channels(B, L));
    if ((long long)ks[0] * ks[1] * cur_c(B->m) * filters > MAX_TENSOR)
        return lfail(L, MW_EUNSUPPORTED,
                     "a %dx%dx%dx%d kernel is larger than the %d values "
                     "supported per tensor",
                     ks[0], ks[1], cur_c(B->m), filters, MAX_TENSOR);
    mw_status rc =
        mw_model_add_conv2d(B->m, name, filters, ks[0], ks[1], st[0], st[1], same, w.use_bias);
    if (rc != MW_OK)
        return from_model(B->origin, rc);
    if (last_out(B->m) > MAX_TENSOR)
        return lfail(L, MW_EUNSUPPORTED,
                     "its output has %zu values per example; at most %d are "
                     "supported",
                     last_out(B->m), MAX_TENSOR);
    return apply_weights(B, &w);
}

static mw_status add_dense(builder *B, const lctx *L, const json_t *cfg, const char *name,
                           int is_last)
{
    int units = 0;
    weights_cfg w;
    MW_TRY(get_int(L, cfg, "units", 0, 1, 1, MAX_DIM, &units));
    MW_TRY(read_weights(L, cfg, is_last, &w));
    if ((long long)cur_c(B->m) * units > MAX_TENSOR)
        return lfail(L, MW_EUNSUPPORTED,
                     "a %dx%d kernel is larger than the %d values supported "
                     "per tensor",
                     cur_c(B->m), units, MAX_TENSOR);
    mw_status rc = mw_model_add_dense(B->m, name, units, w.use_bias);
    if (rc != MW_OK)
        return from_model(B->origin, rc);
    return apply_weights(B, &w);
}

static mw_status add_maxpool(builder *B, const lctx *L, const json_t *cfg, const char *name)
{
    int ps[2] = {0, 0}, st[2] = {0, 0}, same = 0;
    const json_t *strides = json_object_get(cfg, "strides");
    MW_TRY(get_pair(L, cfg, "pool_size", 2, 1, MAX_WINDOW, ps));
    st[0] = ps[0], st[1] = ps[1]; /* strides absent or null: the pool size */
    if (strides && !json_is_null(strides))
        MW_TRY(get_pair(L, cfg, "strides", 1, 1, MAX_WINDOW, st));
    MW_TRY(get_padding(L, cfg, &same));
    MW_TRY(check_data_format(L, cfg));
    MW_TRY(need_channels(B, L));
    mw_status rc = mw_model_add_maxpool(B->m, name, ps[0], ps[1], st[0], st[1], same);
    return rc == MW_OK ? MW_OK : from_model(B->origin, rc);
}

static mw_status add_dropout(builder *B, const lctx *L, const json_t *cfg, const char *name)
{
    double rate = 0.0;
    char d[QUOTE_MAX * 4 + 64];
    if (!json_object_get(cfg, "rate"))
        return lfail(L, MW_EMODEL, "rate is missing; expected a number from 0 up to 1");
    MW_TRY(get_num(L, "", cfg, "rate", 0.0, &rate));
    if (!(rate >= 0.0 && rate < 1.0))
        return lfail(L, MW_EMODEL, "rate %g: expected 0 <= rate < 1", rate);
    MW_TRY(need_null(L, cfg, "noise_shape", "noise shapes (masks shared across axes)"));
    const json_t *seed = json_object_get(cfg, "seed");
    if (seed && !json_is_null(seed) && !json_is_integer(seed))
        return lfail(L, MW_EMODEL, "seed: found %s; expected an integer or null",
                     describe(d, sizeof d, seed));
    mw_status rc = mw_model_add_dropout(B->m, name, (float)rate);
    return rc == MW_OK ? MW_OK : from_model(B->origin, rc);
}

static mw_status add_relu_layer(builder *B, const lctx *L, const json_t *cfg, const char *name)
{
    static const char *const keys[] = {"max_value", "negative_slope", "threshold"};
    char d[QUOTE_MAX * 4 + 64];
    for (int i = 0; i < 3; i++) {
        const json_t *v = json_object_get(cfg, keys[i]);
        if (!v || json_is_null(v) || (i > 0 && json_is_number(v) && json_number_value(v) == 0.0))
            continue;
        return lfail(L, MW_EUNSUPPORTED,
                     "%s: found %s; supported: the plain ReLU (max_value "
                     "null, negative_slope 0, threshold 0)",
                     keys[i], describe(d, sizeof d, v));
    }
    mw_status rc = mw_model_add_relu(B->m, name, 0);
    return rc == MW_OK ? MW_OK : from_model(B->origin, rc);
}

static mw_status add_activation_layer(builder *B, const lctx *L, const json_t *cfg,
                                      const char *name, int is_last)
{
    mw_activation act;
    MW_TRY(get_activation(L, cfg, "activation", is_last, 1, &act));
    mw_status rc = mw_model_add_act(B->m, name, act, act_alpha(act), 0);
    return rc == MW_OK ? MW_OK : from_model(B->origin, rc);
}

static mw_status add_softmax_layer(builder *B, const lctx *L, const json_t *cfg, const char *name,
                                   int is_last)
{
    const json_t *axis = json_object_get(cfg, "axis");
    char d[QUOTE_MAX * 4 + 64];
    int a = -1;
    if (axis && json_is_array(axis) && json_array_size(axis) == 1)
        axis = json_array_get(axis, 0);
    if (axis && !json_is_null(axis) && (!as_int(axis, -8, 8, &a) || a != -1))
        return lfail(L, MW_EUNSUPPORTED, "axis: found %s; supported: -1 (the class axis)",
                     describe(d, sizeof d, axis));
    (void)is_last; /* before the end it is computed as a layer */
    mw_status rc = mw_model_add_softmax(B->m, name, 0);
    return rc == MW_OK ? MW_OK : from_model(B->origin, rc);
}

/* The initializer at cfg[key] must be the default kind (the moving statistics start at
 * zeros and ones: restored weights replace them, but a different start is a different
 * model). */
static mw_status need_init(const lctx *L, const json_t *cfg, const char *key, mw_init_kind kind)
{
    mw_init in;
    MW_TRY(get_init(L, cfg, key, kind, &in));
    if (in.kind != kind)
        return lfail(L, MW_EUNSUPPORTED, "%s: only the default (%s) is supported", key,
                     kind == MW_INIT_ZEROS ? "Zeros" : "Ones");
    return MW_OK;
}

/* BatchNormalization's axis: -1, or the last axis written out (3 on images, 1 on flat). */
static mw_status get_bn_axis(const lctx *L, const json_t *cfg, int flat)
{
    const json_t *v = json_object_get(cfg, "axis");
    char d[QUOTE_MAX * 4 + 64];
    int a = -1, last = flat ? 1 : 3;
    if (v && json_is_array(v) && json_array_size(v) == 1)
        v = json_array_get(v, 0);
    if (v && !json_is_null(v) && (!as_int(v, -8, 8, &a) || (a != -1 && a != last)))
        return lfail(L, MW_EUNSUPPORTED, "axis: found %s; supported: -1 (the channels)",
                     describe(d, sizeof d, v));
    return MW_OK;
}

static mw_status add_batchnorm(builder *B, const lctx *L, const json_t *cfg, const char *name)
{
    double mom = 0.99, eps = 1e-3;
    int center = 1, scale = 1, sync = 0, renorm = 0;
    mw_init beta, gamma;
    int p = B->m->next_nin > 0 ? B->m->next_in[0] : B->m->nlayers - 1;
    MW_TRY(get_bn_axis(L, cfg, p >= 0 ? B->m->layers[p].flat : B->m->flat_input));
    MW_TRY(get_num(L, "", cfg, "momentum", 0.99, &mom));
    MW_TRY(get_num(L, "", cfg, "epsilon", 1e-3, &eps));
    MW_TRY(get_bool(L, cfg, "center", 1, &center));
    MW_TRY(get_bool(L, cfg, "scale", 1, &scale));
    MW_TRY(get_bool(L, cfg, "synchronized", 0, &sync));
    MW_TRY(get_bool(L, cfg, "renorm", 0, &renorm));
    if (renorm)
        return lfail(L, MW_EUNSUPPORTED, "renorm true is not supported; supported: false");
    MW_TRY(get_init(L, cfg, "beta_initializer", MW_INIT_ZEROS, &beta));
    MW_TRY(get_init(L, cfg, "gamma_initializer", MW_INIT_ONES, &gamma));
    MW_TRY(need_init(L, cfg, "moving_mean_initializer", MW_INIT_ZEROS));
    MW_TRY(need_init(L, cfg, "moving_variance_initializer", MW_INIT_ONES));
    static const char *const nulls[] = {"beta_regularizer", "gamma_regularizer",  "beta_constraint",
                                        "gamma_constraint", "virtual_batch_size", "adjustment"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        MW_TRY(need_null(L, cfg, nulls[i],
                         "BatchNormalization regularizers, constraints, "
                         "virtual batches and adjustments"));
    mw_status rc = mw_model_add_batchnorm(B->m, name, (float)mom, (float)eps, center, scale, sync);
    if (rc != MW_OK)
        return from_model(B->origin, rc);
    mw_layer *l = &B->m->layers[B->m->nlayers - 1];
    l->kernel_init = gamma, l->bias_init = beta;
    return MW_OK;
}

static mw_status add_avgpool(builder *B, const lctx *L, const json_t *cfg, const char *name)
{
    int ps[2] = {0, 0}, st[2] = {0, 0}, same = 0;
    const json_t *strides = json_object_get(cfg, "strides");
    MW_TRY(get_pair(L, cfg, "pool_size", 2, 1, MAX_WINDOW, ps));
    st[0] = ps[0], st[1] = ps[1];
    if (strides && !json_is_null(strides))
        MW_TRY(get_pair(L, cfg, "strides", 1, 1, MAX_WINDOW, st));
    MW_TRY(get_padding(L, cfg, &same));
    MW_TRY(check_data_format(L, cfg));
    MW_TRY(need_channels(B, L));
    mw_status rc = mw_model_add_avgpool(B->m, name, ps[0], ps[1], st[0], st[1], same);
    return rc == MW_OK ? MW_OK : from_model(B->origin, rc);
}

static mw_status add_global_pool(builder *B, const lctx *L, const json_t *cfg, const char *name,
                                 int max)
{
    int keep = 0;
    MW_TRY(check_data_format(L, cfg));
    MW_TRY(get_bool(L, cfg, "keepdims", 0, &keep));
    if (keep)
        return lfail(L, MW_EUNSUPPORTED, "keepdims true is not supported; supported: false");
    MW_TRY(need_channels(B, L));
    mw_status rc = mw_model_add_global_pool(B->m, name, max);
    return rc == MW_OK ? MW_OK : from_model(B->origin, rc);
}

/* ZeroPadding2D's padding: n, [h, w] or [[top, bottom], [left, right]]. */
static mw_status add_zeropad(builder *B, const lctx *L, const json_t *cfg, const char *name)
{
    const json_t *v = json_object_get(cfg, "padding");
    int p[4] = {1, 1, 1, 1}, hw[2];
    char d[QUOTE_MAX * 4 + 64];
    MW_TRY(check_data_format(L, cfg));
    if (json_is_array(v) && json_array_size(v) == 2 && json_is_array(json_array_get(v, 0))) {
        /* the first bad entry, by its place and value (not "an array of 2") */
        static const char *const side[2][2] = {{"top", "bottom"}, {"left", "right"}};
        for (int i = 0; i < 2; i++) {
            const json_t *q = json_array_get(v, (size_t)i);
            if (!json_is_array(q) || json_array_size(q) != 2)
                return lfail(L, MW_EMODEL,
                             "padding[%d]: found %s; expected [%s, %s] with integers from 0 to "
                             "%d (padding is n, [h, w] or [[top, bottom], [left, right]])",
                             i, describe(d, sizeof d, q), side[i][0], side[i][1], MAX_WINDOW);
            for (int j = 0; j < 2; j++)
                if (!as_int(json_array_get(q, (size_t)j), 0, MAX_WINDOW, &p[2 * i + j]))
                    return lfail(L, MW_EMODEL,
                                 "padding[%d][%d] (%s): found %s; expected an integer from 0 "
                                 "to %d",
                                 i, j, side[i][j], describe(d, sizeof d, json_array_get(q, j)),
                                 MAX_WINDOW);
        }
    } else if (v) {
        MW_TRY(get_pair(L, cfg, "padding", 1, 0, MAX_WINDOW, hw));
        p[0] = p[1] = hw[0], p[2] = p[3] = hw[1];
    }
    MW_TRY(need_channels(B, L));
    mw_status rc = mw_model_add_zeropad(B->m, name, p[0], p[1], p[2], p[3]);
    return rc == MW_OK ? MW_OK : from_model(B->origin, rc);
}

/* Add, Multiply, Concatenate: inputs from the graph (a Sequential model has none to merge). */
static mw_status add_merge(builder *B, const lctx *L, const json_t *cfg, const char *name,
                           const char *cls)
{
    if (B->m->next_nin < 1)
        return lfail(L, MW_EMODEL, "a merge layer needs a Functional model's inbound_nodes");
    mw_status rc;
    if (!strcmp(cls, "Concatenate")) {
        int p = B->m->next_in[0], flat = p >= 0 ? B->m->layers[p].flat : B->m->flat_input;
        MW_TRY(get_bn_axis(L, cfg, flat));
        rc = mw_model_add_concat(B->m, name);
    } else if (!strcmp(cls, "Add")) {
        rc = mw_model_add_add(B->m, name);
    } else {
        rc = mw_model_add_multiply(B->m, name);
    }
    return rc == MW_OK ? MW_OK : from_model(B->origin, rc);
}

/* LeakyReLU (negative_slope; Keras 2: alpha; default 0.3) and ELU (alpha, default 1). */
static mw_status add_param_act(builder *B, const lctx *L, const json_t *cfg, const char *name,
                               int elu)
{
    double a = elu ? 1.0 : 0.3;
    if (!elu && json_object_get(cfg, "negative_slope"))
        MW_TRY(get_num(L, "", cfg, "negative_slope", 0.3, &a));
    else
        MW_TRY(get_num(L, "", cfg, "alpha", a, &a));
    mw_status rc = mw_model_add_act(B->m, name, elu ? MW_ACT_ELU : MW_ACT_LEAKY_RELU, (float)a, 0);
    if (rc != MW_OK)
        return from_model(B->origin, rc);
    B->m->layers[B->m->nlayers - 1].cls = elu ? "ELU" : "LeakyReLU";
    return MW_OK;
}

/* Classes added after Keras 2's Sequential set (the graph layers). 0: not one of them. */
static int add_graph_layer(builder *B, const lctx *L, const char *cls, const json_t *cfg,
                           const char *name, mw_status *rc)
{
    if (!strcmp(cls, "BatchNormalization"))
        *rc = add_batchnorm(B, L, cfg, name);
    else if (!strcmp(cls, "AveragePooling2D") || !strcmp(cls, "AvgPool2D"))
        *rc = add_avgpool(B, L, cfg, name);
    else if (!strcmp(cls, "GlobalAveragePooling2D") || !strcmp(cls, "GlobalAvgPool2D"))
        *rc = add_global_pool(B, L, cfg, name, 0);
    else if (!strcmp(cls, "GlobalMaxPooling2D") || !strcmp(cls, "GlobalMaxPool2D"))
        *rc = add_global_pool(B, L, cfg, name, 1);
    else if (!strcmp(cls, "ZeroPadding2D"))
        *rc = add_zeropad(B, L, cfg, name);
    else if (!strcmp(cls, "Add") || !strcmp(cls, "Multiply") || !strcmp(cls, "Concatenate"))
        *rc = add_merge(B, L, cfg, name, cls);
    else if (!strcmp(cls, "LeakyReLU") || !strcmp(cls, "ELU"))
        *rc = add_param_act(B, L, cfg, name, !strcmp(cls, "ELU"));
    else
        return 0;
    return 1;
}

/* ---- the model --------------------------------------------------------------------------- */

/* The model config: the document itself, or a TensorFlow.js wrapper's modelTopology (its
 * model_config member, or modelTopology itself). */
static mw_status find_model(const char *origin, const json_t *root, const json_t **out,
                            int *functional)
{
    char d[QUOTE_MAX * 4 + 64];
    qbuf q;
    const json_t *cfg = root;
    if (!json_is_object(root))
        return gfail(origin, MW_EMODEL,
                     "found %s; expected a Keras model object "
                     "({\"class_name\": \"Sequential\", ...})",
                     describe(d, sizeof d, root));
    const json_t *topo = json_object_get(root, "modelTopology");
    if (topo) {
        if (!json_is_object(topo))
            return gfail(origin, MW_EMODEL, "modelTopology: found %s; expected an object",
                         describe(d, sizeof d, topo));
        const json_t *mc = json_object_get(topo, "model_config");
        cfg = mc ? mc : topo;
        if (!json_is_object(cfg))
            return gfail(origin, MW_EMODEL,
                         "modelTopology.model_config: found %s; expected an "
                         "object",
                         describe(d, sizeof d, cfg));
    }
    const json_t *cls = json_object_get(cfg, "class_name");
    if (!json_is_string(cls))
        return gfail(origin, MW_EMODEL,
                     "class_name: found %s; expected \"Sequential\" (a Keras "
                     "model from model.to_json())",
                     describe(d, sizeof d, cls));
    const char *c = json_string_value(cls);
    *functional = !strcmp(c, "Functional") || !strcmp(c, "Model");
    if (strcmp(c, "Sequential") != 0 && !*functional)
        return gfail(origin, MW_EUNSUPPORTED,
                     "class_name %s is not supported; supported: \"Sequential\", "
                     "\"Functional\" (subclassed models are not)",
                     quote(q, c));
    *out = cfg;
    return MW_OK;
}

/* The input shape, from the first layer (an InputLayer's batch_input_shape or batch_shape,
 * or another layer's batch_input_shape) or the model's build_input_shape / build_config. */
static mw_status find_input(const char *origin, const json_t *model, const json_t *conf,
                            const json_t *layers, kshape *s)
{
    lctx L = {origin, "", MW_POLICY_FLOAT32};
    memset(s, 0, sizeof *s);
    const json_t *first = json_array_get(layers, 0);
    const json_t *fcfg = json_object_get(first, "config");
    const char *fcls = json_string_value(json_object_get(first, "class_name"));
    const char *fname = json_string_value(json_object_get(fcfg, "name"));
    static const char *const keys[] = {"batch_input_shape", "batch_shape"};
    if (json_is_object(fcfg)) {
        char en[QUOTE_MAX * 4 + 8], ec[QUOTE_MAX * 2 + 8];
        mw_str_escape(en, sizeof en, fname ? fname : "", QUOTE_MAX, 0);
        mw_str_escape(ec, sizeof ec, fcls ? fcls : "?", QUOTE_MAX, 0);
        if (fname)
            snprintf(L.where, sizeof L.where, "layer '%s' (%s)", en, ec);
        else
            snprintf(L.where, sizeof L.where, "layers[0] (%s)", ec);
        for (int k = 0; k < 2; k++) {
            const json_t *v = json_object_get(fcfg, keys[k]);
            if (v && !json_is_null(v))
                return parse_shape(&L, v, keys[k], s);
        }
        if (fcls && !strcmp(fcls, "InputLayer"))
            return lfail(&L, MW_EMODEL,
                         "has no batch_input_shape or batch_shape; expected "
                         "[null, height, width, channels]");
    }
    const json_t *v = json_object_get(conf, "build_input_shape");
    snprintf(L.where, sizeof L.where, "model config");
    if (v && !json_is_null(v))
        return parse_shape(&L, v, "build_input_shape", s);
    v = json_object_get(json_object_get(model, "build_config"), "input_shape");
    if (v && !json_is_null(v))
        return parse_shape(&L, v, "build_config.input_shape", s);
    return MW_OK;
}

/* Check the Keras input shape against the data (h, w, c; all 0: take the file's) and start
 * the model with the matching per-example layout. */
static mw_status start_model(builder *B, const kshape *s, int h, int w, int c)
{
    char ks[96];
    const char *origin = B->origin;
    if (s->rank == 0) {
        if (h == 0)
            return gfail(origin, MW_EMODEL,
                         "the model has no input shape (no InputLayer or "
                         "batch_input_shape) and no data set gives one");
        mw_model_init(B->m, h, w, c);
        return MW_OK;
    }
    shape_str(ks, sizeof ks, s);
    if (h == 0) { /* from the file */
        h = s->rank == 1 ? 1 : s->d[0];
        w = s->rank == 1 ? 1 : s->d[1];
        c = s->rank == 3 ? s->d[2] : s->rank == 2 ? 1 : s->d[0];
    }
    int ok;
    if (s->rank == 3)
        ok = s->d[0] == h && s->d[1] == w && s->d[2] == c;
    else if (s->rank == 2)
        ok = s->d[0] == h && s->d[1] == w && c == 1;
    else
        ok = (long long)s->d[0] == (long long)h * w * c;
    if (!ok) {
        char alt[64] = "";
        if (c == 1)
            snprintf(alt, sizeof alt, ", (None, %d, %d)", h, w);
        return gfail(origin, MW_EMODEL,
                     "the model's input is %s (%s) but the data are %dx%dx%d "
                     "images; expected (None, %d, %d, %d)%s or (None, %lld)",
                     ks, s->from, h, w, c, h, w, c, alt, (long long)h * w * c);
    }
    if (s->rank == 1) {
        mw_model_init(B->m, 1, 1, s->d[0]);
        B->m->flat_input = 1;
    } else {
        mw_model_init(B->m, h, w, c);
        B->no_channels = s->rank == 2;
    }
    return MW_OK;
}

/* The layer list: config.layers, or config itself in older Keras 2 files. */
static mw_status find_layers(const char *origin, const json_t *model, const json_t **conf_out,
                             const json_t **layers_out)
{
    char d[QUOTE_MAX * 4 + 64];
    const json_t *conf = json_object_get(model, "config"), *layers;
    if (json_is_array(conf)) { /* older Keras 2: config is the layer list */
        layers = conf;
    } else if (json_is_object(conf)) {
        layers = json_object_get(conf, "layers");
        if (!json_is_array(layers))
            return gfail(origin, MW_EMODEL,
                         "config.layers: found %s; expected the list of "
                         "layers",
                         describe(d, sizeof d, layers));
    } else {
        return gfail(origin, MW_EMODEL, "config: found %s; expected an object with \"layers\"",
                     describe(d, sizeof d, conf));
    }
    *conf_out = conf;
    *layers_out = layers;
    return MW_OK;
}

/* config.name, when given, becomes the model's name. */
static mw_status set_model_name(builder *B, const json_t *conf)
{
    char d[QUOTE_MAX * 4 + 64];
    const json_t *mname = json_object_get(conf, "name");
    if (mname && !json_is_null(mname)) {
        if (!json_is_string(mname) || !name_ok(json_string_value(mname), sizeof B->m->name - 1))
            return gfail(B->origin, MW_EMODEL,
                         "config.name: found %s; expected 1 to %zu "
                         "printable characters without '/'",
                         describe(d, sizeof d, mname), sizeof B->m->name - 1);
        snprintf(B->m->name, sizeof B->m->name, "%s", json_string_value(mname));
    }
    return MW_OK;
}

/* What every layers[i] entry needs whatever its class: an object with a built-in class_name,
 * a config object, an optional valid name, trainable, float32. Sets L->where to name the
 * layer and returns its class, config and name (NULL when it has none), all borrowed. */
static mw_status read_layer(lctx *L, const json_t *e, size_t i, const char **cls_out,
                            const json_t **cfg_out, const char **name_out)
{
    char d[QUOTE_MAX * 4 + 64];
    qbuf q;
    snprintf(L->where, sizeof L->where, "layers[%zu]", i);
    if (!json_is_object(e))
        return lfail(L, MW_EMODEL,
                     "found %s; expected a layer object with class_name and "
                     "config",
                     describe(d, sizeof d, e));
    const json_t *jc = json_object_get(e, "class_name");
    if (!json_is_string(jc))
        return lfail(L, MW_EMODEL, "class_name: found %s; expected a layer class name",
                     describe(d, sizeof d, jc));
    const char *cls = json_string_value(jc);
    char ecls[QUOTE_MAX * 4 + 8];
    mw_str_escape(ecls, sizeof ecls, cls, QUOTE_MAX, 0);
    snprintf(L->where, sizeof L->where, "layers[%zu] (%s)", i, ecls);
    const json_t *cfg = json_object_get(e, "config");
    if (!json_is_object(cfg))
        return lfail(L, MW_EMODEL, "config: found %s; expected an object",
                     describe(d, sizeof d, cfg));
    const json_t *jn = json_object_get(cfg, "name");
    const char *name = NULL;
    if (jn && !json_is_null(jn)) {
        if (!json_is_string(jn) || !name_ok(json_string_value(jn), NAME_MAX_LEN))
            return lfail(L, MW_EMODEL,
                         "name: found %s; expected 1 to %d printable "
                         "characters without '/'",
                         describe(d, sizeof d, jn), NAME_MAX_LEN);
        name = json_string_value(jn);
        snprintf(L->where, sizeof L->where, "layer '%s' (%s)", name, ecls);
    }
    const json_t *reg = json_object_get(e, "registered_name");
    if (json_is_string(reg) && strcmp(json_string_value(reg), cls) != 0)
        return lfail(L, MW_EUNSUPPORTED,
                     "registered_name %s names a custom layer; "
                     "supported: the built-in layers %s",
                     quote(q, json_string_value(reg)), layer_list);
    int trainable = 1;
    MW_TRY(get_bool(L, cfg, "trainable", 1, &trainable));
    if (!trainable)
        return lfail(L, MW_EUNSUPPORTED,
                     "trainable false (a frozen layer) is not "
                     "supported; supported: true");
    MW_TRY(check_dtype(L, cfg, &L->policy));
    *cls_out = cls;
    *cfg_out = cfg;
    *name_out = name;
    return MW_OK;
}

/* An InputLayer (layers[i]) adds nothing: it must come first and take dense inputs. */
static mw_status check_input_layer(const lctx *L, const json_t *cfg, size_t i)
{
    if (i != 0)
        return lfail(L, MW_EMODEL, "an InputLayer must be the first layer");
    if (L->policy != MW_POLICY_FLOAT32)
        return lfail(L, MW_EUNSUPPORTED,
                     "dtype %s: the input is float32 (a layer's dtype policy says how it "
                     "computes); supported: \"float32\"",
                     mw_policy_name(L->policy));
    int sparse = 0, ragged = 0;
    MW_TRY(get_bool(L, cfg, "sparse", 0, &sparse));
    MW_TRY(get_bool(L, cfg, "ragged", 0, &ragged));
    if (sparse || ragged)
        return lfail(L, MW_EUNSUPPORTED,
                     "%s inputs are not supported; supported: "
                     "dense float32 inputs",
                     sparse ? "sparse" : "ragged");
    return MW_OK;
}

/* Add a layer of Keras class cls (not InputLayer) to the model, once its name is known to be
 * unique. */
static mw_status add_layer(builder *B, const lctx *L, const char *cls, const json_t *cfg,
                           const char *name, int is_last)
{
    qbuf q;
    if (name) /* Keras needs unique names; the summary and checkpoints do too */
        for (int j = 0; j < B->m->nlayers; j++)
            if (!B->m->layers[j].folded && !strcmp(B->m->layers[j].name, name))
                return lfail(L, MW_EMODEL,
                             "the name is already used by an earlier layer; "
                             "expected unique layer names");
    mw_status rc;
    const int first = B->m->nlayers;
    if (!strcmp(cls, "Conv2D"))
        rc = add_conv2d(B, L, cfg, name, is_last);
    else if (!strcmp(cls, "Dense"))
        rc = add_dense(B, L, cfg, name, is_last);
    else if (!strcmp(cls, "MaxPooling2D") || !strcmp(cls, "MaxPool2D"))
        rc = add_maxpool(B, L, cfg, name);
    else if (!strcmp(cls, "Flatten")) {
        rc = check_data_format(L, cfg);
        if (rc == MW_OK && (rc = mw_model_add_flatten(B->m, name)) != MW_OK)
            rc = from_model(B->origin, rc);
        B->no_channels = 0;
    } else if (!strcmp(cls, "Dropout"))
        rc = add_dropout(B, L, cfg, name);
    else if (!strcmp(cls, "Activation"))
        rc = add_activation_layer(B, L, cfg, name, is_last);
    else if (!strcmp(cls, "ReLU"))
        rc = add_relu_layer(B, L, cfg, name);
    else if (!strcmp(cls, "Softmax"))
        rc = add_softmax_layer(B, L, cfg, name, is_last);
    else if (mw_preprocess_is_layer(cls)) /* the input pipeline (worker/data/preprocess.h) */
        rc = mw_preprocess_add(&B->m->pre, &B->m->in_h, &B->m->in_w, &B->m->in_c, B->m->nlayers,
                               B->m->flat_input, is_last, cls, cfg, name, B->origin);
    else if (add_graph_layer(B, L, cls, cfg, name, &rc))
        ;
    else
        rc = lfail(L, MW_EUNSUPPORTED, "layer class %s is not supported; supported: %s",
                   quote(q, cls), layer_list);
    for (int j = first; rc == MW_OK && j < B->m->nlayers; j++) /* and its folded activation */
        B->m->layers[j].policy = L->policy;
    return rc;
}

/* The model must end in (None, classes) logits, and match the data's class count when known
 * (nclasses > 0). */
static mw_status check_output(const builder *B, int nclasses)
{
    const char *origin = B->origin;
    const mw_model *m = B->m;
    const mw_layer *last = &m->layers[m->nlayers - 1], *shown = last;
    while (shown->folded && shown > m->layers) /* name the Keras layer, not "dense/softmax" */
        shown--;
    char want[32] = "classes";
    if (nclasses > 0)
        snprintf(want, sizeof want, "%d", nclasses);
    if (!last->flat)
        return gfail(origin, MW_EMODEL,
                     "the model's output is (None, %d, %d, %d) after layer "
                     "'%s'; expected (None, %s) logits: end with Flatten and Dense(%s)",
                     last->out_h, last->out_w, last->out_c, shown->name, want, want);
    if (nclasses > 0 && last->out_c != nclasses)
        return gfail(origin, MW_EMODEL,
                     "the model's output has %d units (layer '%s') but the "
                     "data set has %d classes; expected a last Dense(%d)",
                     last->out_c, shown->name, nclasses, nclasses);
    return MW_OK;
}

/* ---- Functional graphs -------------------------------------------------------------------- */

/* Keras layer names in list order and the model layer that holds each one's output (its
 * folded activation when it has one); -1 for the InputLayer. */
typedef struct {
    const char **name; /* borrowed from the JSON */
    int *idx;
    size_t n;
} knames;

/* The producer named s for layer i: its model index, or a message naming the problem. */
static mw_status resolve(const lctx *L, const knames *K, const json_t *layers, size_t i,
                         const char *s, int *out)
{
    qbuf q;
    for (size_t j = 0; j < i; j++)
        if (K->name[j] && !strcmp(K->name[j], s)) {
            *out = K->idx[j];
            return MW_OK;
        }
    for (size_t j = i; j < json_array_size(layers); j++) {
        const json_t *c = json_object_get(json_array_get(layers, j), "config");
        const char *nm = json_string_value(json_object_get(c, "name"));
        if (nm && !strcmp(nm, s))
            return lfail(L, MW_EMODEL,
                         "inbound_nodes: input %s comes at or after this layer (a cycle, or "
                         "layers out of order); expected the layers in topological order",
                         quote(q, s));
    }
    return lfail(L, MW_EMODEL,
                 "inbound_nodes: input %s is not a layer of the model; expected the name of an "
                 "earlier layer",
                 quote(q, s));
}

/* One input reference: Keras 3's {"class_name": "__keras_tensor__", "config":
 * {"keras_history": [layer, node, tensor]}} or Keras 2's [layer, node, tensor, kwargs]. */
static mw_status read_ref(const lctx *L, const json_t *t, const char **name)
{
    char d[QUOTE_MAX * 4 + 64];
    const json_t *h = t;
    int node = 0, idx = 0;
    if (json_is_object(t))
        h = json_object_get(json_object_get(t, "config"), "keras_history");
    if (!json_is_array(h) || json_array_size(h) < 3 || !json_is_string(json_array_get(h, 0)) ||
        !as_int(json_array_get(h, 1), 0, 1 << 20, &node) ||
        !as_int(json_array_get(h, 2), 0, 1 << 20, &idx))
        return lfail(L, MW_EMODEL,
                     "inbound_nodes: found %s as an input; expected a keras tensor with "
                     "keras_history [layer, node, tensor] (Keras 3) or [layer, node, tensor, "
                     "{}] (Keras 2)",
                     describe(d, sizeof d, t));
    if (node != 0 || idx != 0)
        return lfail(L, MW_EUNSUPPORTED,
                     "inbound_nodes: input node %d, tensor %d of a layer (a shared layer or "
                     "a layer with several outputs); supported: node 0, tensor 0",
                     node, idx);
    *name = json_string_value(json_array_get(h, 0));
    return MW_OK;
}

/* Keras 3 call arguments besides the inputs: only mask null and training are allowed. */
static mw_status check_kwargs(const lctx *L, const json_t *kw)
{
    const char *key;
    const json_t *v;
    qbuf q;
    json_object_foreach((json_t *)kw, key, v)
    {
        if ((!strcmp(key, "mask") && json_is_null(v)) ||
            (!strcmp(key, "training") && (json_is_boolean(v) || json_is_null(v))))
            continue;
        return lfail(L, MW_EUNSUPPORTED,
                     "inbound_nodes: call argument %s is not supported; supported: the "
                     "inputs alone",
                     quote(q, key));
    }
    return MW_OK;
}

/* The input references of layers[i]'s only node: refs[0..*n), borrowed. */
static mw_status read_node(const lctx *L, const json_t *e, const json_t **refs, int *n)
{
    char d[QUOTE_MAX * 4 + 64];
    const json_t *nodes = json_object_get(e, "inbound_nodes"), *list;
    if (!json_is_array(nodes) || json_array_size(nodes) != 1)
        return lfail(
            L, json_is_array(nodes) && json_array_size(nodes) > 1 ? MW_EUNSUPPORTED : MW_EMODEL,
            "inbound_nodes: found %s; expected one node (a layer called once)",
            describe(d, sizeof d, nodes));
    const json_t *node = json_array_get(nodes, 0);
    if (json_is_object(node)) { /* Keras 3 */
        const json_t *args = json_object_get(node, "args"), *kw = json_object_get(node, "kwargs");
        if (!json_is_array(args) || json_array_size(args) != 1)
            return lfail(L, MW_EMODEL, "inbound_nodes[0].args: found %s; expected one argument",
                         describe(d, sizeof d, args));
        if (kw && json_is_object(kw))
            MW_TRY(check_kwargs(L, kw));
        list = json_array_get(args, 0);
        if (!json_is_array(list)) {
            refs[0] = list, *n = 1;
            return MW_OK;
        }
    } else if (json_is_array(node)) { /* Keras 2 */
        list = node;
    } else {
        return lfail(L, MW_EMODEL, "inbound_nodes[0]: found %s; expected a node",
                     describe(d, sizeof d, node));
    }
    if (json_array_size(list) < 1 || json_array_size(list) > MW_MAX_INPUTS)
        return lfail(L, MW_EUNSUPPORTED, "inbound_nodes: %zu inputs; supported: 1 to %d",
                     json_array_size(list), MW_MAX_INPUTS);
    *n = (int)json_array_size(list);
    for (int j = 0; j < *n; j++)
        refs[j] = json_array_get(list, (size_t)j);
    return MW_OK;
}

/* The graph's only InputLayer is layers[0]; input_layers names it. */
static mw_status check_graph_input(const char *origin, const json_t *conf, const json_t *layers)
{
    const json_t *il = json_object_get(conf, "input_layers");
    size_t ni = json_is_array(il) && json_is_array(json_array_get(il, 0)) ? json_array_size(il) : 1;
    if (ni != 1)
        return gfail(origin, MW_EUNSUPPORTED,
                     "input_layers: the model has %zu inputs; supported: one input", ni);
    for (size_t i = 0; i < json_array_size(layers); i++) {
        const json_t *e = json_array_get(layers, i);
        const char *cls = json_string_value(json_object_get(e, "class_name"));
        const char *nm = json_string_value(json_object_get(json_object_get(e, "config"), "name"));
        qbuf q;
        if (cls && !strcmp(cls, "InputLayer") && i > 0)
            return gfail(origin, MW_EUNSUPPORTED,
                         "layer %s (InputLayer): a second input; supported: one input",
                         quote(q, nm ? nm : "?"));
        if (i == 0 && (!cls || strcmp(cls, "InputLayer") != 0))
            return gfail(origin, MW_EMODEL,
                         "layers[0]: a Functional model starts with its InputLayer");
    }
    return MW_OK;
}

/* output_layers names the last layer, the model's only output. */
static mw_status check_graph_output(const char *origin, const json_t *conf, const char *last)
{
    const json_t *ol = json_object_get(conf, "output_layers");
    qbuf q, r;
    if (json_is_array(ol) && json_is_array(json_array_get(ol, 0))) {
        if (json_array_size(ol) != 1)
            return gfail(origin, MW_EUNSUPPORTED,
                         "output_layers: the model has %zu outputs; supported: one output",
                         json_array_size(ol));
        ol = json_array_get(ol, 0);
    }
    const char *nm = json_string_value(json_array_get(ol, 0));
    if (!nm || !last || strcmp(nm, last) != 0)
        return gfail(origin, MW_EMODEL,
                     "output_layers: names %s; expected the last layer of the list, %s",
                     quote(q, nm ? nm : "nothing"), quote(r, last ? last : "?"));
    return MW_OK;
}

static mw_status graph_layers(builder *B, const json_t *layers, knames *K, int nclasses)
{
    const size_t n = json_array_size(layers);
    for (size_t i = 1; i < n; i++) {
        lctx L = {B->origin, "", MW_POLICY_FLOAT32};
        const char *cls = NULL, *name = NULL, *src = NULL;
        const json_t *cfg = NULL, *refs[MW_MAX_INPUTS];
        int in[MW_MAX_INPUTS], nin = 0;
        MW_TRY(read_layer(&L, json_array_get(layers, i), i, &cls, &cfg, &name));
        if (!name)
            return lfail(&L, MW_EMODEL, "name is missing; a Functional model names its layers");
        MW_TRY(read_node(&L, json_array_get(layers, i), refs, &nin));
        for (int j = 0; j < nin; j++) {
            MW_TRY(read_ref(&L, refs[j], &src));
            MW_TRY(resolve(&L, K, layers, i, src, &in[j]));
        }
        mw_status rc = mw_model_set_inputs(B->m, in, nin);
        if (rc != MW_OK)
            return from_model(B->origin, rc);
        MW_TRY(add_layer(B, &L, cls, cfg, name, i + 1 == n));
        K->name[i] = name;
        K->idx[i] = B->m->nlayers - 1;
    }
    if (n < 2)
        return gfail(B->origin, MW_EMODEL, "the model has no layers besides its input");
    (void)nclasses;
    const mw_model *m = B->m;
    for (int i = 0; i + 1 < m->nlayers; i++) { /* every layer leads to the output */
        int used = 0;
        for (int j = i + 1; j < m->nlayers && !used; j++)
            for (int t = 0; t < m->layers[j].nin; t++)
                used |= m->layers[j].in[t] == i;
        if (!used)
            return gfail(B->origin, MW_EMODEL,
                         "layer '%s' (%s): its output is not used; expected every layer to lead "
                         "to the model's output (the last layer)",
                         m->layers[i].name, m->layers[i].cls);
    }
    return MW_OK;
}

static mw_status build_graph(builder *B, const json_t *model, const json_t *conf,
                             const json_t *layers, const int shape[3], int nclasses)
{
    const char *origin = B->origin;
    const size_t n = json_array_size(layers);
    if (n > MAX_LAYERS)
        return gfail(origin, MW_EUNSUPPORTED, "%zu layers; at most %d are supported", n,
                     MAX_LAYERS);
    MW_TRY(check_graph_input(origin, conf, layers));
    kshape s;
    MW_TRY(find_input(origin, model, conf, layers, &s));
    MW_TRY(start_model(B, &s, shape[0], shape[1], shape[2]));
    MW_TRY(set_model_name(B, conf));
    B->m->graph = 1;
    const char *in_name = json_string_value(
        json_object_get(json_object_get(json_array_get(layers, 0), "config"), "name"));
    snprintf(B->m->input_name, sizeof B->m->input_name, "%s", in_name ? in_name : "input_layer");
    knames K = {calloc(n, sizeof(char *)), calloc(n, sizeof(int)), n};
    mw_status rc = K.name && K.idx ? MW_OK : gfail(origin, MW_ENOMEM, "out of memory");
    if (rc == MW_OK) {
        K.name[0] = in_name ? in_name : "", K.idx[0] = -1;
        rc = graph_layers(B, layers, &K, nclasses);
    }
    if (rc == MW_OK)
        rc = check_graph_output(origin, conf, K.name[n - 1]);
    free(K.name);
    free(K.idx);
    MW_TRY(rc);
    return check_output(B, nclasses);
}

static mw_status build(builder *B, const json_t *root, int h, int w, int c, int nclasses)
{
    const char *origin = B->origin;
    const json_t *model = NULL, *conf = NULL, *layers = NULL;
    int functional = 0;
    MW_TRY(find_model(origin, root, &model, &functional));
    MW_TRY(find_layers(origin, model, &conf, &layers));
    if (functional)
        return build_graph(B, model, conf, layers, (const int[]){h, w, c}, nclasses);
    size_t n = json_array_size(layers);
    if (n > MAX_LAYERS)
        return gfail(origin, MW_EUNSUPPORTED, "%zu layers; at most %d are supported", n,
                     MAX_LAYERS);
    kshape s;
    MW_TRY(find_input(origin, model, conf, layers, &s));
    MW_TRY(start_model(B, &s, h, w, c));
    MW_TRY(set_model_name(B, conf));

    size_t nreal = 0;
    for (size_t i = 0; i < n; i++) {
        lctx L = {origin, "", MW_POLICY_FLOAT32};
        const char *cls = NULL, *name = NULL;
        const json_t *cfg = NULL;
        MW_TRY(read_layer(&L, json_array_get(layers, i), i, &cls, &cfg, &name));
        if (!strcmp(cls, "InputLayer")) {
            MW_TRY(check_input_layer(&L, cfg, i));
            continue;
        }
        MW_TRY(add_layer(B, &L, cls, cfg, name, i + 1 == n));
        nreal++;
    }
    if (nreal == 0)
        return gfail(origin, MW_EMODEL, "the model has no layers besides its input");
    return check_output(B, nclasses);
}

mw_status mw_keras_load(mw_model *m, const char *json_text, size_t nbytes, const char *origin,
                        int in_h, int in_w, int in_c, int nclasses)
{
    mw_model_init(m, 0, 0, 0);
    if (!origin || !*origin)
        origin = "model";
    if (in_h < 0 || in_w < 0 || in_c < 0 || nclasses < 0 ||
        ((in_h == 0) != (in_w == 0) || (in_h == 0) != (in_c == 0)))
        return gfail(origin, MW_EINVAL,
                     "data shape %dx%dx%d, %d classes: expected positive "
                     "sizes (or all 0)",
                     in_h, in_w, in_c, nclasses);
    if (!json_text || nbytes == 0)
        return gfail(origin, MW_EMODEL, "empty; expected a Keras model JSON (model.to_json())");
    if (nbytes > MW_KERAS_MAX_BYTES)
        return gfail(origin, MW_EMODEL, "%zu bytes; expected at most %u (4 MiB)", nbytes,
                     MW_KERAS_MAX_BYTES);
    json_error_t je;
    json_t *root = json_loadb(json_text, nbytes, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        char t[sizeof je.text * 4 + 8];
        mw_str_escape(t, sizeof t, je.text, sizeof je.text, 0);
        return gfail(origin, MW_EMODEL, "line %d, column %d: %s (not valid JSON)", je.line,
                     je.column, t);
    }
    builder B = {origin, m, 0};
    mw_status rc = build(&B, root, in_h, in_w, in_c, nclasses);
    json_decref(root);
    if (rc == MW_OK) {
        m->source = malloc(nbytes + 1);
        if (!m->source) {
            rc = gfail(origin, MW_ENOMEM, "out of memory");
        } else {
            memcpy(m->source, json_text, nbytes);
            m->source[nbytes] = '\0';
            m->source_nbytes = nbytes;
        }
    }
    if (rc != MW_OK) {
        mw_model_free(m);
        mw_model_init(m, 0, 0, 0);
    }
    return rc;
}

mw_status mw_keras_load_file(mw_model *m, const char *path, int in_h, int in_w, int in_c,
                             int nclasses)
{
    mw_model_init(m, 0, 0, 0);
    char *buf = NULL;
    size_t n = 0;
    /* a regular file, never blocking, its size checked before it is read (common/fs.h) */
    MW_TRY(mw_fs_read_input(path, "a Keras model: JSON or a .keras archive", MW_KERAS_MAX_BYTES,
                            MW_EMODEL, &buf, &n));
    mw_status rc = mw_keras_load(m, buf, n, path, in_h, in_w, in_c, nclasses);
    free(buf);
    return rc;
}

mw_status mw_keras_build_tutorial(mw_model *m, int h, int w, int c, int nclasses)
{
    return mw_keras_load(m, mw_keras_tutorial_json, mw_keras_tutorial_json_nbytes,
                         "built-in model (worker/models/tutorial_cnn.json)", h, w, c, nclasses);
}

/* The per-layer reading of a Keras model JSON, shared by the Sequential reader (keras.c) and
 * the Functional-graph reader (keras_graph.c); see keras_read.h.
 *
 * Why a file of its own: both readers take a layer the same way (its class, config, name,
 * dtype policy; the InputLayer; the input shape; the output check), and neither reader calls
 * the other, so these helpers sit below both. */
#include "worker/keras/keras_read.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/strfmt.h"
#include "worker/data/preprocess.h"
#include "worker/model/keras_keys.h"
#include "worker/model/layer.h"
#include "worker/model/masks.h"

#define NAME_MAX_LEN 55 /* layer names: room for "/softmax" in mw_layer.name */

/* "InputLayer, " and the classes of the layer table, for messages. */
static const char *layer_list(void)
{
    static char list[2200];
    if (!list[0])
        snprintf(list, sizeof list, "InputLayer, %s", mw_layer_keras_list());
    return list;
}

/* ---- messages ------------------------------------------------------------------------- */

/* "origin: message" */
mw_status mw_keras_fail_at(const char *origin, mw_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mw_status rc = mw_verr_at(s, origin, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- typed fields ------------------------------------------------------------------------ */

/* "float32", "mixed_bfloat16", "mixed_float16", or a policy object with that name
 * ({"class_name": "DTypePolicy", "config": {"name": ...}} in Keras 3, Policy in Keras 2), or
 * absent / null (float32). 16-bit variables ("bfloat16", "float16") are refused: training
 * keeps float32 weights. */
static mw_status check_dtype(const mw_klayer *L, const json_t *cfg, mw_policy *policy)
{
    const json_t *v = json_object_get(cfg, "dtype");
    const char *name = NULL;
    mw_kdbuf d;
    mw_kqbuf q;
    *policy = MW_POLICY_FLOAT32;
    if (!v || json_is_null(v))
        return MW_OK;
    if (json_is_string(v))
        name = json_string_value(v);
    else if (json_is_object(v))
        name = json_string_value(json_object_get(json_object_get(v, "config"), "name"));
    if (!name)
        return mw_kfail(L, MW_EMODEL,
                        "dtype: found %s; expected \"float32\" or a dtype policy "
                        "object",
                        mw_kdescribe(d, v));
    if (mw_policy_parse(name, policy) == 0)
        return MW_OK;
    if (!strcmp(name, "bfloat16") || !strcmp(name, "float16"))
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "dtype %s keeps the weights in 16 bits, which training does not support; "
                        "supported: \"float32\", \"mixed_bfloat16\", \"mixed_float16\" (float32 "
                        "weights, 16-bit compute)",
                        mw_kquote(q, name));
    return mw_kfail(L, MW_EUNSUPPORTED,
                    "dtype %s is not supported; supported: \"float32\", \"mixed_bfloat16\", "
                    "\"mixed_float16\"",
                    mw_kquote(q, name));
}

/* An integer dtype ("int32", "int64", "uint8", ...): an InputLayer of token ids, which travel
 * as floats (worker/model/layers/embedding.c); "bool": a padding mask (KerasHub's), 0 and 1. */
static int int_dtype(const json_t *v)
{
    static const char *const ints[] = {"int8",   "int16",  "int32",  "int64", "uint8",
                                       "uint16", "uint32", "uint64", "bool"};
    const char *name = json_string_value(v);
    for (size_t i = 0; name && i < sizeof ints / sizeof *ints; i++)
        if (!strcmp(name, ints[i]))
            return 1;
    return 0;
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

/* ---- input shape ------------------------------------------------------------------------- */

static void shape_str(char *buf, size_t n, const mw_kshape *s)
{
    if (s->rank == 3)
        snprintf(buf, n, "(None, %d, %d, %d)", s->d[0], s->d[1], s->d[2]);
    else if (s->rank == 2)
        snprintf(buf, n, "(None, %d, %d)", s->d[0], s->d[1]);
    else
        snprintf(buf, n, "(None, %d)", s->d[0]);
}

/* [batch, dims...] with batch null or a positive integer (ignored), 1 to 3 dims. */
static mw_status parse_shape(const mw_klayer *L, const json_t *v, const char *key, mw_kshape *s)
{
    mw_kdbuf d;
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n < 2 || n > 4)
        return mw_kfail(L, n > 4 ? MW_EUNSUPPORTED : MW_EMODEL,
                        "%s: found %s; expected [null, height, width, channels], [null, height, "
                        "width] or [null, features]",
                        key, mw_kdescribe(d, v));
    const json_t *b = json_array_get(v, 0);
    int bv;
    if (!json_is_null(b) && !mw_kas_int(b, 1, INT32_MAX, &bv))
        return mw_kfail(L, MW_EMODEL,
                        "%s[0] (the batch size): found %s; expected null or a "
                        "positive integer",
                        key, mw_kdescribe(d, b));
    s->rank = (int)n - 1;
    for (size_t i = 1; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (json_is_null(e))
            return mw_kfail(L, MW_EUNSUPPORTED,
                            "%s[%zu] is null: inputs of variable size are not "
                            "supported; give every dimension",
                            key, i);
        if (!mw_kas_int(e, 1, MW_KMAX_DIM, &s->d[i - 1]))
            return mw_kfail(L, MW_EMODEL, "%s[%zu]: found %s; expected an integer from 1 to %d",
                            key, i, mw_kdescribe(d, e), MW_KMAX_DIM);
    }
    long long total = 1;
    for (int i = 0; i < s->rank; i++)
        total *= s->d[i];
    if (total > MW_KMAX_TENSOR)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "%s: %lld values per example; at most %d are "
                        "supported",
                        key, total, MW_KMAX_TENSOR);
    snprintf(s->from, sizeof s->from, "%s %s", L->where, key);
    return MW_OK;
}

/* The input shape, from the first layer (an InputLayer's batch_input_shape or batch_shape,
 * or another layer's batch_input_shape) or the model's build_input_shape / build_config. */
mw_status mw_keras_find_input(const char *origin, const json_t *model, const json_t *conf,
                              const json_t *layers, mw_kshape *s)
{
    mw_klayer L = {origin, "", MW_POLICY_FLOAT32};
    memset(s, 0, sizeof *s);
    const json_t *first = json_array_get(layers, 0);
    const json_t *fcfg = json_object_get(first, "config");
    const char *fcls = json_string_value(json_object_get(first, "class_name"));
    const char *fname = json_string_value(json_object_get(fcfg, "name"));
    static const char *const keys[] = {"batch_input_shape", "batch_shape"};
    if (json_is_object(fcfg)) {
        mw_kqbuf en;
        char ec[MW_KQUOTE_MAX * 2 + 8];
        mw_str_escape(en, sizeof en, fname ? fname : "", MW_KQUOTE_MAX, 0);
        mw_str_escape(ec, sizeof ec, fcls ? fcls : "?", MW_KQUOTE_MAX, 0);
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
            return mw_kfail(&L, MW_EMODEL,
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
mw_status mw_keras_start_model(mw_kbuilder *B, const mw_kshape *s, int h, int w, int c)
{
    char ks[96];
    const char *origin = B->origin;
    if (s->rank == 0) {
        if (h == 0)
            return mw_keras_fail_at(origin, MW_EMODEL,
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
    if (!ok && h == 1 && w == 1) /* features or token ids (N, F) */
        return mw_keras_fail_at(
            origin, MW_EMODEL,
            "the model's input is %s (%s) but the data hold %d values per example "
            "(features or token ids (N, %d)); expected (None, %d)",
            ks, s->from, c, c, c);
    if (!ok) {
        char alt[64] = "";
        if (c == 1)
            snprintf(alt, sizeof alt, ", (None, %d, %d)", h, w);
        return mw_keras_fail_at(origin, MW_EMODEL,
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

/* config.name, when given, becomes the model's name. */
mw_status mw_keras_set_model_name(mw_kbuilder *B, const json_t *conf)
{
    mw_kdbuf d;
    const json_t *mname = json_object_get(conf, "name");
    if (mname && !json_is_null(mname)) {
        if (!json_is_string(mname) || !name_ok(json_string_value(mname), sizeof B->m->name - 1))
            return mw_keras_fail_at(B->origin, MW_EMODEL,
                                    "config.name: found %s; expected 1 to %zu "
                                    "printable characters without '/'",
                                    mw_kdescribe(d, mname), sizeof B->m->name - 1);
        snprintf(B->m->name, sizeof B->m->name, "%s", json_string_value(mname));
    }
    return MW_OK;
}

/* A class of keras.applications' own (the layer table's row names its module) is read from
 * that module alone: another class of the same name is someone's custom layer. */
static mw_status check_module(const mw_klayer *L, const json_t *e, const char *cls)
{
    const mw_layer_ops *row = mw_layer_row_keras(cls);
    const char *mod = json_string_value(json_object_get(e, "module"));
    mw_kqbuf q, r;
    if (!row || !row->module || (mod && !strcmp(mod, row->module)))
        return MW_OK;
    return mw_kfail(L, MW_EUNSUPPORTED,
                    "module %s: a custom layer of that name; supported: %s from %s "
                    "(keras.applications' own)",
                    mw_kquote(q, mod ? mod : "(none)"), cls, mw_kquote(r, row->module));
}

/* What every layers[i] entry needs whatever its class: an object with a built-in class_name,
 * a config object, an optional valid name, trainable, float32. Sets L->where to name the
 * layer and returns its class, config and name (NULL when it has none), all borrowed. */
mw_status mw_keras_read_layer(mw_klayer *L, const json_t *e, size_t i, const char **cls_out,
                              const json_t **cfg_out, const char **name_out)
{
    mw_kdbuf d;
    mw_kqbuf q;
    snprintf(L->where, sizeof L->where, "layers[%zu]", i);
    if (!json_is_object(e))
        return mw_kfail(L, MW_EMODEL,
                        "found %s; expected a layer object with class_name and "
                        "config",
                        mw_kdescribe(d, e));
    const json_t *jc = json_object_get(e, "class_name");
    if (!json_is_string(jc))
        return mw_kfail(L, MW_EMODEL, "class_name: found %s; expected a layer class name",
                        mw_kdescribe(d, jc));
    const char *cls = json_string_value(jc);
    mw_kqbuf ecls;
    mw_str_escape(ecls, sizeof ecls, cls, MW_KQUOTE_MAX, 0);
    snprintf(L->where, sizeof L->where, "layers[%zu] (%s)", i, ecls);
    const json_t *cfg = json_object_get(e, "config");
    if (!json_is_object(cfg))
        return mw_kfail(L, MW_EMODEL, "config: found %s; expected an object", mw_kdescribe(d, cfg));
    const json_t *jn = json_object_get(cfg, "name");
    const char *name = NULL;
    if (jn && !json_is_null(jn)) {
        if (!json_is_string(jn) || !name_ok(json_string_value(jn), NAME_MAX_LEN))
            return mw_kfail(L, MW_EMODEL,
                            "name: found %s; expected 1 to %d printable "
                            "characters without '/'",
                            mw_kdescribe(d, jn), NAME_MAX_LEN);
        name = json_string_value(jn);
        snprintf(L->where, sizeof L->where, "layer '%s' (%s)", name, ecls);
    }
    const json_t *reg = json_object_get(e, "registered_name");
    char hub[MW_KQUOTE_MAX * 2];
    snprintf(hub, sizeof hub, MW_LAYER_KERAS_HUB "%s", cls); /* a KerasHub registered_name */
    const int hub_ok = mw_layer_keras_hub(cls);
    if (json_is_string(reg) && !strcmp(json_string_value(reg), hub) && !hub_ok)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "KerasHub's %s is not supported yet; supported from KerasHub: %s",
                        mw_kquote(q, cls), mw_layer_keras_hub_list());
    if (json_is_string(reg) && strcmp(json_string_value(reg), cls) != 0 &&
        !(strcmp(json_string_value(reg), hub) == 0 && hub_ok))
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "registered_name %s names a custom layer; "
                        "supported: the built-in layers %s",
                        mw_kquote(q, json_string_value(reg)), layer_list());
    MW_TRY(check_module(L, e, cls));
    int trainable = 1;
    MW_TRY(mw_kget_bool(L, cfg, "trainable", 1, &trainable));
    if (!trainable)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "trainable false (a frozen layer) is not "
                        "supported; supported: true");
    if (!strcmp(cls, "InputLayer") && int_dtype(json_object_get(cfg, "dtype")))
        L->policy = MW_POLICY_FLOAT32; /* token ids: an Embedding reads them */
    else
        MW_TRY(check_dtype(L, cfg, &L->policy));
    *cls_out = cls;
    *cfg_out = cfg;
    *name_out = name;
    return MW_OK;
}

/* The keys Keras writes for InputLayer besides the common ones (worker/model/keras_keys.h). */
static const mw_kkey input_keys[] = {
    MW_KREAD("sparse"),
    MW_KREAD("ragged"),
    MW_KDEF("optional", "false", "an optional input (None when not given)"),
    MW_KEND,
};

/* An InputLayer (layers[i]) adds nothing: it must come first and take dense inputs. */
mw_status mw_keras_check_input_layer(const mw_klayer *L, const json_t *cfg, size_t i)
{
    MW_TRY(mw_kcheck_keys(L->origin, L->where, "InputLayer", cfg, input_keys, 1));
    if (i != 0)
        return mw_kfail(L, MW_EMODEL, "an InputLayer must be the first layer");
    if (L->policy != MW_POLICY_FLOAT32)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "dtype %s: the input is float32 (a layer's dtype policy says how it "
                        "computes); supported: \"float32\"",
                        mw_policy_name(L->policy));
    int sparse = 0, ragged = 0;
    MW_TRY(mw_kget_bool(L, cfg, "sparse", 0, &sparse));
    MW_TRY(mw_kget_bool(L, cfg, "ragged", 0, &ragged));
    if (sparse || ragged)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "%s: found true; %s inputs are not supported; supported: false "
                        "(dense float32 inputs)",
                        sparse ? "sparse" : "ragged", sparse ? "sparse" : "ragged");
    return MW_OK;
}

/* Rescaling and Normalization before any model layer are the input pipeline's, except a
 * Normalization whose statistics are weights (adapted: no mean in its config); after a layer,
 * or adapted, they are layers (worker/model/layers/rescale.c). */
static int leading_preprocess(const mw_model *m, const char *cls, const json_t *cfg)
{
    const json_t *mean = json_object_get(cfg, "mean");
    return m->nlayers == 0 && mw_preprocess_is_layer(cls) &&
           (strcmp(cls, "Normalization") != 0 || (mean && !json_is_null(mean)));
}

/* Add a layer of Keras class cls (not InputLayer) to the model, once its name is known to be
 * unique. */
mw_status mw_keras_add_layer(mw_kbuilder *B, const mw_klayer *L, const char *cls, const json_t *cfg,
                             const char *name, int is_last, const json_t *kwargs)
{
    mw_kqbuf q;
    if (name) /* Keras needs unique names; the summary and checkpoints do too */
        for (int j = 0; j < B->m->nlayers; j++)
            if (!B->m->layers[j].folded && !strcmp(B->m->layers[j].name, name))
                return mw_kfail(L, MW_EMODEL,
                                "the name is already used by an earlier layer; "
                                "expected unique layer names");
    mw_status rc;
    const int first = B->m->nlayers;
    const mw_layer_ops *row = mw_layer_row_keras(cls);
    if (row && leading_preprocess(B->m, cls, cfg))
        row = NULL;
    if (row) { /* the layer table (worker/model/layer.h) */
        mw_kread R = {.B = B, .L = L, .is_last = is_last, .kwargs = kwargs};
        rc = row->parse(&R, cls, cfg, name);
    } else if (mw_preprocess_is_layer(cls)) { /* the input pipeline (worker/data/preprocess.h) */
        rc = mw_preprocess_add(&B->m->pre, &B->m->in_h, &B->m->in_w, &B->m->in_c, B->m->nlayers,
                               B->m->flat_input, is_last, cls, cfg, name, B->origin);
        B->m->pre_free = mw_preprocess_close;
    } else {
        rc = mw_kfail(L, MW_EUNSUPPORTED, "layer class %s is not supported; supported: %s",
                      mw_kquote(q, cls), layer_list());
    }
    for (int j = first; rc == MW_OK && j < B->m->nlayers; j++) { /* and its folded activation */
        B->m->layers[j].policy = L->policy;
        B->m->layers[j].nest = B->nest;
    }
    return rc;
}

/* The model must end in (None, classes) logits, and match the data's class count when known
 * (nclasses > 0). */
mw_status mw_keras_check_output(const mw_kbuilder *B, int nclasses)
{
    const char *origin = B->origin;
    mw_status mrc = mw_masks_plan(B->m); /* a padding mask only where it is honoured */
    if (mrc != MW_OK)
        return mw_kfrom_model(origin, mrc);
    const mw_model *m = B->m;
    const mw_layer *last = &m->layers[m->nlayers - 1], *shown = last;
    while (shown->folded && shown > m->layers) /* name the Keras layer, not "dense/softmax" */
        shown--;
    char want[32] = "classes";
    if (nclasses > 0)
        snprintf(want, sizeof want, "%d", nclasses);
    /* a sequence's output, and an image's beside labels per pixel (nclasses 0), is per position */
    const int seq = last->out_h == 1 && last->out_w > 1, pixels = last->out_h > 1;
    if (!last->flat && !seq && !(pixels && nclasses == 0))
        return mw_keras_fail_at(origin, MW_EMODEL,
                                "the model's output is (None, %d, %d, %d) after layer "
                                "'%s'; expected (None, %s) logits: end with Flatten and Dense(%s) "
                                "(or give labels (N, %d, %d), a class per pixel)",
                                last->out_h, last->out_w, last->out_c, shown->name, want, want,
                                last->out_h, last->out_w);
    if (nclasses > 0 && last->out_c != nclasses)
        return mw_keras_fail_at(origin, MW_EMODEL,
                                "the model's output has %d units (layer '%s') but the "
                                "data set has %d classes; expected a last Dense(%d)",
                                last->out_c, shown->name, nclasses, nclasses);
    return MW_OK;
}

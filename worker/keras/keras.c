/* Keras model JSON (Sequential, Functional) -> mw_model; see keras.h.
 *
 * Steps: parse with jansson (JSON_REJECT_DUPLICATES, so a key written twice is an error, not
 * a silent choice), unwrap the TensorFlow.js wrapper, find the layer list and the input shape,
 * then one pass over the layers: the graph around each layer is read here, the layer's own
 * config by its row of the layer table (worker/model/layer.h), which reads every field that
 * changes what the layer computes, rejects the values this program does not implement, and
 * calls its family's builder (which checks the shapes). Fields that do not change the math (a seed,
 * "module", build configs) are ignored. User text that reaches a message is escaped and shortened
 * first, so odd bytes cannot garble a terminal or overflow the message slot. */
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
#include "worker/model/keras_keys.h"
#include "worker/model/kread.h"
#include "worker/model/layer.h"
#include "worker/model/masks.h"

#define NAME_MAX_LEN 55 /* layer names: room for "/softmax" in mw_layer.name */
#define MAX_LAYERS 1000

/* "InputLayer, " and the classes of the layer table, for messages. */
static const char *layer_list(void)
{
    static char list[1200];
    if (!list[0])
        snprintf(list, sizeof list, "InputLayer, %s", mw_layer_keras_list());
    return list;
}

/* ---- messages ------------------------------------------------------------------------- */

/* "origin: message" */
static mw_status fail_at(const char *origin, mw_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mw_status fail_at(const char *origin, mw_status s, const char *fmt, ...)
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
 * as floats (worker/model/layers/embedding.c). */
static int int_dtype(const json_t *v)
{
    static const char *const ints[] = {"int8",  "int16",  "int32",  "int64",
                                       "uint8", "uint16", "uint32", "uint64"};
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

/* ---- activations, initializers, regularizers --------------------------------------------- */

/* ---- input shape ------------------------------------------------------------------------- */

typedef struct {
    int rank; /* 3: (H, W, C); 2: (H, W); 1: (D); 0: none given */
    int d[3];
    char from[MW_KQUOTE_MAX * 8 + 160]; /* where it was found, for messages */
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
static mw_status parse_shape(const mw_klayer *L, const json_t *v, const char *key, kshape *s)
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

/* ---- the layers -------------------------------------------------------------------------- */

/* ---- the model --------------------------------------------------------------------------- */

/* The model config: the document itself, or a TensorFlow.js wrapper's modelTopology (its
 * model_config member, or modelTopology itself). */
static mw_status find_model(const char *origin, const json_t *root, const json_t **out,
                            int *functional)
{
    mw_kdbuf d;
    mw_kqbuf q;
    const json_t *cfg = root;
    if (!json_is_object(root))
        return fail_at(origin, MW_EMODEL,
                       "found %s; expected a Keras model object "
                       "({\"class_name\": \"Sequential\", ...})",
                       mw_kdescribe(d, root));
    const json_t *topo = json_object_get(root, "modelTopology");
    if (topo) {
        if (!json_is_object(topo))
            return fail_at(origin, MW_EMODEL, "modelTopology: found %s; expected an object",
                           mw_kdescribe(d, topo));
        const json_t *mc = json_object_get(topo, "model_config");
        cfg = mc ? mc : topo;
        if (!json_is_object(cfg))
            return fail_at(origin, MW_EMODEL,
                           "modelTopology.model_config: found %s; expected an "
                           "object",
                           mw_kdescribe(d, cfg));
    }
    const json_t *cls = json_object_get(cfg, "class_name");
    if (!json_is_string(cls))
        return fail_at(origin, MW_EMODEL,
                       "class_name: found %s; expected \"Sequential\" (a Keras "
                       "model from model.to_json())",
                       mw_kdescribe(d, cls));
    const char *c = json_string_value(cls);
    *functional = !strcmp(c, "Functional") || !strcmp(c, "Model");
    if (strcmp(c, "Sequential") != 0 && !*functional)
        return fail_at(origin, MW_EUNSUPPORTED,
                       "class_name %s is not supported; supported: \"Sequential\", "
                       "\"Functional\" (subclassed models are not)",
                       mw_kquote(q, c));
    *out = cfg;
    return MW_OK;
}

/* The input shape, from the first layer (an InputLayer's batch_input_shape or batch_shape,
 * or another layer's batch_input_shape) or the model's build_input_shape / build_config. */
static mw_status find_input(const char *origin, const json_t *model, const json_t *conf,
                            const json_t *layers, kshape *s)
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
static mw_status start_model(mw_kbuilder *B, const kshape *s, int h, int w, int c)
{
    char ks[96];
    const char *origin = B->origin;
    if (s->rank == 0) {
        if (h == 0)
            return fail_at(origin, MW_EMODEL,
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
        return fail_at(origin, MW_EMODEL,
                       "the model's input is %s (%s) but the data hold %d values per example "
                       "(features or token ids (N, %d)); expected (None, %d)",
                       ks, s->from, c, c, c);
    if (!ok) {
        char alt[64] = "";
        if (c == 1)
            snprintf(alt, sizeof alt, ", (None, %d, %d)", h, w);
        return fail_at(origin, MW_EMODEL,
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
    mw_kdbuf d;
    const json_t *conf = json_object_get(model, "config"), *layers;
    if (json_is_array(conf)) { /* older Keras 2: config is the layer list */
        layers = conf;
    } else if (json_is_object(conf)) {
        layers = json_object_get(conf, "layers");
        if (!json_is_array(layers))
            return fail_at(origin, MW_EMODEL,
                           "config.layers: found %s; expected the list of "
                           "layers",
                           mw_kdescribe(d, layers));
    } else {
        return fail_at(origin, MW_EMODEL, "config: found %s; expected an object with \"layers\"",
                       mw_kdescribe(d, conf));
    }
    *conf_out = conf;
    *layers_out = layers;
    return MW_OK;
}

/* config.name, when given, becomes the model's name. */
static mw_status set_model_name(mw_kbuilder *B, const json_t *conf)
{
    mw_kdbuf d;
    const json_t *mname = json_object_get(conf, "name");
    if (mname && !json_is_null(mname)) {
        if (!json_is_string(mname) || !name_ok(json_string_value(mname), sizeof B->m->name - 1))
            return fail_at(B->origin, MW_EMODEL,
                           "config.name: found %s; expected 1 to %zu "
                           "printable characters without '/'",
                           mw_kdescribe(d, mname), sizeof B->m->name - 1);
        snprintf(B->m->name, sizeof B->m->name, "%s", json_string_value(mname));
    }
    return MW_OK;
}

/* What every layers[i] entry needs whatever its class: an object with a built-in class_name,
 * a config object, an optional valid name, trainable, float32. Sets L->where to name the
 * layer and returns its class, config and name (NULL when it has none), all borrowed. */
static mw_status read_layer(mw_klayer *L, const json_t *e, size_t i, const char **cls_out,
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
static mw_status check_input_layer(const mw_klayer *L, const json_t *cfg, size_t i)
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

/* Add a layer of Keras class cls (not InputLayer) to the model, once its name is known to be
 * unique. */
static mw_status add_layer(mw_kbuilder *B, const mw_klayer *L, const char *cls, const json_t *cfg,
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
    for (int j = first; rc == MW_OK && j < B->m->nlayers; j++) /* and its folded activation */
        B->m->layers[j].policy = L->policy;
    return rc;
}

/* The model must end in (None, classes) logits, and match the data's class count when known
 * (nclasses > 0). */
static mw_status check_output(const mw_kbuilder *B, int nclasses)
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
    if (!last->flat && !(last->out_h == 1 && last->out_w > 1)) /* a sequence's: per position */
        return fail_at(origin, MW_EMODEL,
                       "the model's output is (None, %d, %d, %d) after layer "
                       "'%s'; expected (None, %s) logits: end with Flatten and Dense(%s)",
                       last->out_h, last->out_w, last->out_c, shown->name, want, want);
    if (nclasses > 0 && last->out_c != nclasses)
        return fail_at(origin, MW_EMODEL,
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
static mw_status resolve(const mw_klayer *L, const knames *K, const json_t *layers, size_t i,
                         const char *s, int *out)
{
    mw_kqbuf q;
    for (size_t j = 0; j < i; j++)
        if (K->name[j] && !strcmp(K->name[j], s)) {
            *out = K->idx[j];
            return MW_OK;
        }
    for (size_t j = i; j < json_array_size(layers); j++) {
        const json_t *c = json_object_get(json_array_get(layers, j), "config");
        const char *nm = json_string_value(json_object_get(c, "name"));
        if (nm && !strcmp(nm, s))
            return mw_kfail(L, MW_EMODEL,
                            "inbound_nodes: input %s comes at or after this layer (a cycle, or "
                            "layers out of order); expected the layers in topological order",
                            mw_kquote(q, s));
    }
    return mw_kfail(L, MW_EMODEL,
                    "inbound_nodes: input %s is not a layer of the model; expected the name of an "
                    "earlier layer",
                    mw_kquote(q, s));
}

/* One input reference: Keras 3's {"class_name": "__keras_tensor__", "config":
 * {"keras_history": [layer, node, tensor]}} or Keras 2's [layer, node, tensor, kwargs]. */
static mw_status read_ref(const mw_klayer *L, const json_t *t, const char **name)
{
    mw_kdbuf d;
    const json_t *h = t;
    int node = 0, idx = 0;
    if (json_is_object(t))
        h = json_object_get(json_object_get(t, "config"), "keras_history");
    if (!json_is_array(h) || json_array_size(h) < 3 || !json_is_string(json_array_get(h, 0)) ||
        !mw_kas_int(json_array_get(h, 1), 0, 1 << 20, &node) ||
        !mw_kas_int(json_array_get(h, 2), 0, 1 << 20, &idx))
        return mw_kfail(L, MW_EMODEL,
                        "inbound_nodes: found %s as an input; expected a keras tensor with "
                        "keras_history [layer, node, tensor] (Keras 3) or [layer, node, tensor, "
                        "{}] (Keras 2)",
                        mw_kdescribe(d, t));
    if (node != 0 || idx != 0)
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "inbound_nodes: input node %d, tensor %d of a layer (a shared layer or "
                        "a layer with several outputs); supported: node 0, tensor 0",
                        node, idx);
    *name = json_string_value(json_array_get(h, 0));
    return MW_OK;
}

/* Keras 3 call arguments besides the inputs: only mask (null, or Keras' own mask tensor: see
 * mask_op) and training are allowed. */
static mw_status check_kwargs(const mw_klayer *L, const json_t *kw)
{
    const char *key;
    const json_t *v;
    mw_kqbuf q;
    json_object_foreach((json_t *)kw, key, v)
    {
        if (!strcmp(key, "mask") ||
            (!strcmp(key, "training") && (json_is_boolean(v) || json_is_null(v))))
            continue;
        return mw_kfail(L, MW_EUNSUPPORTED,
                        "inbound_nodes: call argument %s is not supported; supported: the "
                        "inputs alone",
                        mw_kquote(q, key));
    }
    return MW_OK;
}

/* The input references of layers[i]'s only node: refs[0..*n), borrowed; *kwargs its Keras 3
 * keyword arguments (NULL: none). A layer of class cls that takes several tensors as its call's
 * arguments (MultiHeadAttention: query, value, and a key, also as kwargs "key") reads its
 * keyword arguments itself; the others have only the inputs. */
static mw_status read_node(const mw_klayer *L, const char *cls, const json_t *e,
                           const json_t **refs, int *n, const json_t **kwargs)
{
    *kwargs = NULL;
    const int multi = cls && !strcmp(cls, "MultiHeadAttention");
    /* KerasHub's blocks read their own keyword arguments, and refuse a second sequence */
    const int block =
        cls && (!strcmp(cls, "TransformerEncoder") || !strcmp(cls, "TransformerDecoder"));
    mw_kdbuf d;
    const json_t *nodes = json_object_get(e, "inbound_nodes"), *list;
    if (!json_is_array(nodes) || json_array_size(nodes) != 1)
        return mw_kfail(
            L, json_is_array(nodes) && json_array_size(nodes) > 1 ? MW_EUNSUPPORTED : MW_EMODEL,
            "inbound_nodes: found %s; expected one node (a layer called once)",
            mw_kdescribe(d, nodes));
    const json_t *node = json_array_get(nodes, 0);
    if (json_is_object(node)) { /* Keras 3 */
        const json_t *args = json_object_get(node, "args"), *kw = json_object_get(node, "kwargs");
        if (multi && json_is_array(args) && json_array_size(args) >= 1 &&
            json_array_size(args) <= 3) {
            const json_t *key = json_is_object(kw) ? json_object_get(kw, "key") : NULL;
            *n = (int)json_array_size(args);
            for (int j = 0; j < *n; j++)
                refs[j] = json_array_get(args, (size_t)j);
            if (key && !json_is_null(key)) {
                if (*n != 2)
                    return mw_kfail(L, MW_EMODEL,
                                    "inbound_nodes[0]: a key in kwargs beside %d arguments; "
                                    "expected query and value as arguments",
                                    *n);
                refs[(*n)++] = key;
            }
            *kwargs = json_is_object(kw) ? kw : NULL;
            return MW_OK;
        }
        if (block && json_is_array(args) && json_array_size(args) == 2) {
            refs[0] = json_array_get(args, 0), refs[1] = json_array_get(args, 1), *n = 2;
            return MW_OK; /* the block refuses it, naming what it supports */
        }
        if (!json_is_array(args) || json_array_size(args) != 1)
            return mw_kfail(L, MW_EMODEL, "inbound_nodes[0].args: found %s; expected one argument",
                            mw_kdescribe(d, args));
        if (kw && json_is_object(kw) && block)
            *kwargs = kw;
        else if (kw && json_is_object(kw))
            MW_TRY(check_kwargs(L, kw));
        list = json_array_get(args, 0);
        if (!json_is_array(list)) {
            refs[0] = list, *n = 1;
            return MW_OK;
        }
    } else if (json_is_array(node)) { /* Keras 2 */
        list = node;
    } else {
        return mw_kfail(L, MW_EMODEL, "inbound_nodes[0]: found %s; expected a node",
                        mw_kdescribe(d, node));
    }
    if (json_array_size(list) < 1 || json_array_size(list) > MW_MAX_INPUTS)
        return mw_kfail(L, MW_EUNSUPPORTED, "inbound_nodes: %zu inputs; supported: 1 to %d",
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
        return fail_at(origin, MW_EUNSUPPORTED,
                       "input_layers: the model has %zu inputs; supported: one input", ni);
    for (size_t i = 0; i < json_array_size(layers); i++) {
        const json_t *e = json_array_get(layers, i);
        const char *cls = json_string_value(json_object_get(e, "class_name"));
        const char *nm = json_string_value(json_object_get(json_object_get(e, "config"), "name"));
        mw_kqbuf q;
        if (cls && !strcmp(cls, "InputLayer") && i > 0)
            return fail_at(origin, MW_EUNSUPPORTED,
                           "layer %s (InputLayer): a second input; supported: one input",
                           mw_kquote(q, nm ? nm : "?"));
        if (i == 0 && (!cls || strcmp(cls, "InputLayer") != 0))
            return fail_at(origin, MW_EMODEL,
                           "layers[0]: a Functional model starts with its InputLayer");
    }
    return MW_OK;
}

/* output_layers names the last layer, the model's only output. */
static mw_status check_graph_output(const char *origin, const json_t *conf, const char *last)
{
    const json_t *ol = json_object_get(conf, "output_layers");
    mw_kqbuf q, r;
    if (json_is_array(ol) && json_is_array(json_array_get(ol, 0))) {
        if (json_array_size(ol) != 1)
            return fail_at(origin, MW_EUNSUPPORTED,
                           "output_layers: the model has %zu outputs; supported: one output",
                           json_array_size(ol));
        ol = json_array_get(ol, 0);
    }
    const char *nm = json_string_value(json_array_get(ol, 0));
    if (!nm || !last || strcmp(nm, last) != 0)
        return fail_at(origin, MW_EMODEL,
                       "output_layers: names %s; expected the last layer of the list, %s",
                       mw_kquote(q, nm ? nm : "nothing"), mw_kquote(r, last ? last : "?"));
    return MW_OK;
}

/* The model index standing for a mask tensor (see mask_op) in knames. */
#define MASK_NODE (-2)

/* Keras 3 writes the padding mask's computation into a Functional graph as operation layers
 * (module keras.src.ops.numpy): NotEqual(ids, 0), which Embedding(mask_zero=True) computes,
 * and LogicalOr / LogicalAnd of masks, which merges compute; layers get them as call
 * arguments (mask, query_mask, ...). mwtrain plans the same mask from the Embedding
 * (mw_masks_plan), so these nodes are checked to be that mask and add no layer. */
static int is_mask_op(const json_t *e)
{
    const char *c = json_string_value(json_object_get(e, "class_name"));
    const char *mod = json_string_value(json_object_get(e, "module"));
    return c && mod && !strncmp(mod, "keras.src.ops", 13) &&
           (!strcmp(c, "NotEqual") || !strcmp(c, "LogicalOr") || !strcmp(c, "LogicalAnd"));
}

/* A mask op's node: NotEqual of the model's input and 0, or a logical op of two masks. */
static mw_status mask_op(const mw_klayer *L, const knames *K, const json_t *layers, size_t i,
                         const char *cls)
{
    mw_kdbuf d;
    const json_t *nodes = json_object_get(json_array_get(layers, i), "inbound_nodes");
    const json_t *node = json_array_get(nodes, 0);
    const json_t *args = json_object_get(node, "args");
    if (!json_is_array(nodes) || json_array_size(nodes) != 1 || !json_is_array(args) ||
        json_array_size(args) != 2)
        return mw_kfail(L, MW_EMODEL, "inbound_nodes: found %s; expected one node of 2 arguments",
                        mw_kdescribe(d, nodes));
    const int ne = !strcmp(cls, "NotEqual");
    for (size_t j = 0; j < 2; j++) {
        const json_t *a = json_array_get(args, j);
        const char *src = NULL;
        int idx = 0;
        if (ne && j == 1) {
            if (!json_is_number(a) || json_number_value(a) != 0)
                return mw_kfail(L, MW_EUNSUPPORTED,
                                "inbound_nodes[0].args[1]: found %s; supported: 0 (the padding "
                                "mask of Embedding(mask_zero=True))",
                                mw_kdescribe(d, a));
            continue;
        }
        MW_TRY(read_ref(L, a, &src));
        MW_TRY(resolve(L, K, layers, i, src, &idx));
        if (ne ? idx != -1 : idx != MASK_NODE)
            return mw_kfail(L, MW_EUNSUPPORTED, "inbound_nodes[0].args[%zu]: %s; supported: %s", j,
                            mw_kdescribe(d, a),
                            ne ? "the model's input (the padding mask of "
                                 "Embedding(mask_zero=True))"
                               : "masks (NotEqual, LogicalOr, LogicalAnd)");
    }
    return MW_OK;
}

/* Every call argument of a node that holds a tensor (mask, query_mask, ...) must be a mask
 * op's (the layers read their masks from the plan, not from the file). */
static mw_status check_mask_args(const mw_klayer *L, const knames *K, const json_t *layers,
                                 size_t i, const json_t *kw)
{
    const char *key;
    const json_t *v;
    mw_kqbuf q;
    json_object_foreach((json_t *)kw, key, v)
    {
        const size_t n = strlen(key);
        if (!(json_is_object(v) || json_is_array(v)) ||
            !(!strcmp(key, "mask") || (n > 5 && !strcmp(key + n - 5, "_mask"))))
            continue; /* not a tensor (use_causal_mask: a flag) */
        const char *src = NULL;
        int idx = 0;
        MW_TRY(read_ref(L, v, &src));
        MW_TRY(resolve(L, K, layers, i, src, &idx));
        if (idx != MASK_NODE)
            return mw_kfail(L, MW_EUNSUPPORTED,
                            "inbound_nodes[0].kwargs.%s: the output of %s; supported: the "
                            "padding mask of Embedding(mask_zero=True)",
                            key, mw_kquote(q, src));
    }
    return MW_OK;
}

static mw_status graph_layers(mw_kbuilder *B, const json_t *layers, knames *K, int nclasses)
{
    const size_t n = json_array_size(layers);
    for (size_t i = 1; i < n; i++) {
        mw_klayer L = {B->origin, "", MW_POLICY_FLOAT32};
        const char *cls = NULL, *name = NULL, *src = NULL;
        const json_t *cfg = NULL, *refs[MW_MAX_INPUTS];
        int in[MW_MAX_INPUTS], nin = 0;
        MW_TRY(read_layer(&L, json_array_get(layers, i), i, &cls, &cfg, &name));
        if (!name)
            return mw_kfail(&L, MW_EMODEL, "name is missing; a Functional model names its layers");
        if (is_mask_op(json_array_get(layers, i)) && i + 1 < n) {
            MW_TRY(mask_op(&L, K, layers, i, cls));
            K->name[i] = name;
            K->idx[i] = MASK_NODE;
            continue;
        }
        const json_t *kwargs = NULL,
                     *node = json_array_get(
                         json_object_get(json_array_get(layers, i), "inbound_nodes"), 0);
        MW_TRY(read_node(&L, cls, json_array_get(layers, i), refs, &nin, &kwargs));
        if (json_is_object(node) && json_is_object(json_object_get(node, "kwargs")))
            MW_TRY(check_mask_args(&L, K, layers, i, json_object_get(node, "kwargs")));
        for (int j = 0; j < nin; j++) {
            MW_TRY(read_ref(&L, refs[j], &src));
            MW_TRY(resolve(&L, K, layers, i, src, &in[j]));
            if (in[j] == MASK_NODE)
                return mw_kfail(&L, MW_EUNSUPPORTED,
                                "inbound_nodes: input %d is a mask (%s); supported: masks as "
                                "the call's mask arguments",
                                j, src);
        }
        mw_status rc = mw_model_set_inputs(B->m, in, nin);
        if (rc != MW_OK)
            return mw_kfrom_model(B->origin, rc);
        MW_TRY(add_layer(B, &L, cls, cfg, name, i + 1 == n, kwargs));
        K->name[i] = name;
        K->idx[i] = B->m->nlayers - 1;
    }
    if (n < 2)
        return fail_at(B->origin, MW_EMODEL, "the model has no layers besides its input");
    (void)nclasses;
    const mw_model *m = B->m;
    for (int i = 0; i + 1 < m->nlayers; i++) { /* every layer leads to the output */
        int used = 0;
        for (int j = i + 1; j < m->nlayers && !used; j++)
            for (int t = 0; t < m->layers[j].nin; t++)
                used |= m->layers[j].in[t] == i;
        if (!used)
            return fail_at(B->origin, MW_EMODEL,
                           "layer '%s' (%s): its output is not used; expected every layer to lead "
                           "to the model's output (the last layer)",
                           m->layers[i].name, m->layers[i].cls);
    }
    return MW_OK;
}

static mw_status build_graph(mw_kbuilder *B, const json_t *model, const json_t *conf,
                             const json_t *layers, const int shape[3], int nclasses)
{
    const char *origin = B->origin;
    const size_t n = json_array_size(layers);
    if (n > MAX_LAYERS)
        return fail_at(origin, MW_EUNSUPPORTED, "%zu layers; at most %d are supported", n,
                       MAX_LAYERS);
    if (n == 0) /* K below holds layers[0] */
        return fail_at(origin, MW_EMODEL, "layers: an empty list; expected the InputLayer first");
    MW_TRY(check_graph_input(origin, conf, layers));
    kshape s;
    MW_TRY(find_input(origin, model, conf, layers, &s));
    MW_TRY(start_model(B, &s, shape[0], shape[1], shape[2]));
    MW_TRY(set_model_name(B, conf));
    B->m->graph = 1;
    const char *in_name = json_string_value(
        json_object_get(json_object_get(json_array_get(layers, 0), "config"), "name"));
    snprintf(B->m->input_name, sizeof B->m->input_name, "%s", in_name ? in_name : "input_layer");
    mw_klayer L0 = {origin, "", MW_POLICY_FLOAT32};
    const char *cls0 = NULL, *name0 = NULL;
    const json_t *cfg0 = NULL;
    MW_TRY(read_layer(&L0, json_array_get(layers, 0), 0, &cls0, &cfg0, &name0));
    MW_TRY(check_input_layer(&L0, cfg0, 0));
    knames K = {calloc(n, sizeof(char *)), calloc(n, sizeof(int)), n};
    mw_status rc = K.name && K.idx ? MW_OK : fail_at(origin, MW_ENOMEM, "out of memory");
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

static mw_status build(mw_kbuilder *B, const json_t *root, int h, int w, int c, int nclasses)
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
        return fail_at(origin, MW_EUNSUPPORTED, "%zu layers; at most %d are supported", n,
                       MAX_LAYERS);
    kshape s;
    MW_TRY(find_input(origin, model, conf, layers, &s));
    MW_TRY(start_model(B, &s, h, w, c));
    MW_TRY(set_model_name(B, conf));

    size_t nreal = 0;
    for (size_t i = 0; i < n; i++) {
        mw_klayer L = {origin, "", MW_POLICY_FLOAT32};
        const char *cls = NULL, *name = NULL;
        const json_t *cfg = NULL;
        MW_TRY(read_layer(&L, json_array_get(layers, i), i, &cls, &cfg, &name));
        if (!strcmp(cls, "InputLayer")) {
            MW_TRY(check_input_layer(&L, cfg, i));
            continue;
        }
        MW_TRY(add_layer(B, &L, cls, cfg, name, i + 1 == n, NULL));
        nreal++;
    }
    if (nreal == 0)
        return fail_at(origin, MW_EMODEL, "the model has no layers besides its input");
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
        return fail_at(origin, MW_EINVAL,
                       "data shape %dx%dx%d, %d classes: expected positive "
                       "sizes (or all 0)",
                       in_h, in_w, in_c, nclasses);
    if (!json_text || nbytes == 0)
        return fail_at(origin, MW_EMODEL, "empty; expected a Keras model JSON (model.to_json())");
    if (nbytes > MW_KERAS_MAX_BYTES)
        return fail_at(origin, MW_EMODEL, "%zu bytes; expected at most %u (4 MiB)", nbytes,
                       MW_KERAS_MAX_BYTES);
    json_error_t je;
    json_t *root = json_loadb(json_text, nbytes, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        char t[sizeof je.text * 4 + 8];
        mw_str_escape(t, sizeof t, je.text, sizeof je.text, 0);
        return fail_at(origin, MW_EMODEL, "line %d, column %d: %s (not valid JSON)", je.line,
                       je.column, t);
    }
    mw_kbuilder B = {origin, m, 0};
    mw_status rc = build(&B, root, in_h, in_w, in_c, nclasses);
    json_decref(root);
    if (rc == MW_OK) {
        m->source = malloc(nbytes + 1);
        if (!m->source) {
            rc = fail_at(origin, MW_ENOMEM, "out of memory");
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

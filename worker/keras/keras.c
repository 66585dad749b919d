/* Keras model JSON (Sequential, Functional) -> mw_model; see keras.h.
 *
 * Steps: parse with jansson (JSON_REJECT_DUPLICATES, so a key written twice is an error, not
 * a silent choice), unwrap the TensorFlow.js wrapper, find the layer list and the input shape,
 * then one pass over the layers: the graph around each layer is read by keras_graph.c (a
 * Functional model), the layer itself by keras_read.c, its own config by its row of the layer
 * table (worker/model/layer.h), which reads every field that
 * changes what the layer computes, rejects the values this program does not implement, and
 * calls its family's builder (which checks the shapes). Fields that do not change the math (a seed,
 * "module", build configs) are ignored. User text that reaches a message is escaped and shortened
 * first, so odd bytes cannot garble a terminal or overflow the message slot. */
#include "worker/keras/keras.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/fs.h"
#include "common/strfmt.h"
#include "worker/keras/keras_graph.h"
#include "worker/keras/keras_hub.h"
#include "worker/keras/keras_ops.h"
#include "worker/keras/keras_read.h"
#include "worker/model/kread.h"

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
        return mw_keras_fail_at(origin, MW_EMODEL,
                                "found %s; expected a Keras model object "
                                "({\"class_name\": \"Sequential\", ...})",
                                mw_kdescribe(d, root));
    const json_t *topo = json_object_get(root, "modelTopology");
    if (topo) {
        if (!json_is_object(topo))
            return mw_keras_fail_at(origin, MW_EMODEL,
                                    "modelTopology: found %s; expected an object",
                                    mw_kdescribe(d, topo));
        const json_t *mc = json_object_get(topo, "model_config");
        cfg = mc ? mc : topo;
        if (!json_is_object(cfg))
            return mw_keras_fail_at(origin, MW_EMODEL,
                                    "modelTopology.model_config: found %s; expected an "
                                    "object",
                                    mw_kdescribe(d, cfg));
    }
    const json_t *cls = json_object_get(cfg, "class_name");
    if (!json_is_string(cls))
        return mw_keras_fail_at(origin, MW_EMODEL,
                                "class_name: found %s; expected \"Sequential\" (a Keras "
                                "model from model.to_json())",
                                mw_kdescribe(d, cls));
    const char *c = json_string_value(cls);
    *out = cfg;
    *functional = mw_keras_hub_is(cfg) || !strcmp(c, "Functional") || !strcmp(c, "Model");
    if (mw_keras_hub_is(cfg))
        return MW_OK; /* one of KerasHub's models: built from its arguments (keras_hub.h) */
    if (strcmp(c, "Sequential") != 0 && !*functional)
        return mw_keras_fail_at(origin, MW_EUNSUPPORTED,
                                "class_name %s is not supported; supported: \"Sequential\", "
                                "\"Functional\" (subclassed models are not)",
                                mw_kquote(q, c));
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
            return mw_keras_fail_at(origin, MW_EMODEL,
                                    "config.layers: found %s; expected the list of "
                                    "layers",
                                    mw_kdescribe(d, layers));
    } else {
        return mw_keras_fail_at(origin, MW_EMODEL,
                                "config: found %s; expected an object with \"layers\"",
                                mw_kdescribe(d, conf));
    }
    *conf_out = conf;
    *layers_out = layers;
    return MW_OK;
}

/* A Functional model's graph, its shared ReversibleEmbeddings split first (keras_ops.h). */
static mw_status functional_graph(mw_kbuilder *B, const json_t *model, const json_t *conf,
                                  const json_t *layers, const int shape[3], int nclasses)
{
    json_t *own = NULL;
    MW_TRY(mw_keras_ops_unshare(B->origin, model, &own));
    if (!own)
        return mw_keras_build_graph(B, model, conf, layers, shape, nclasses);
    mw_status rc = find_layers(B->origin, own, &conf, &layers);
    if (rc == MW_OK)
        rc = mw_keras_build_graph(B, own, conf, layers, shape, nclasses);
    json_decref(own);
    return rc;
}

static mw_status build(mw_kbuilder *B, const json_t *root, int h, int w, int c, int nclasses)
{
    const char *origin = B->origin;
    const json_t *model = NULL, *conf = NULL, *layers = NULL;
    int functional = 0;
    MW_TRY(find_model(origin, root, &model, &functional));
    B->lengths = json_object_get(model, MW_KERAS_LENGTHS_KEY);
    if (mw_keras_hub_is(model)) { /* the graph its Python code builds */
        json_t *hub = NULL;
        MW_TRY(mw_keras_hub_expand(origin, model, &hub, &B->backbone));
        mw_status rc = find_layers(origin, hub, &conf, &layers);
        if (rc == MW_OK)
            rc = mw_keras_build_graph(B, hub, conf, layers, (const int[]){h, w, c}, nclasses);
        json_decref(hub);
        return rc;
    }
    MW_TRY(find_layers(origin, model, &conf, &layers));
    if (functional)
        return functional_graph(B, model, conf, layers, (const int[]){h, w, c}, nclasses);
    if (B->parts)
        return mw_keras_fail_at(origin, MW_EDATA,
                                "the data hold %d named inputs (x_train.%s, ...), but a Sequential "
                                "model takes one input (x_train); expected a Functional model "
                                "whose InputLayers are named after them",
                                B->parts->n, B->parts->name[0]);
    size_t n = json_array_size(layers);
    if (n > MW_KERAS_MAX_LAYERS)
        return mw_keras_fail_at(origin, MW_EUNSUPPORTED, "%zu layers; at most %d are supported", n,
                                MW_KERAS_MAX_LAYERS);
    mw_kshape s;
    MW_TRY(mw_keras_find_input(origin, model, conf, layers, &s));
    MW_TRY(mw_keras_start_model(B, &s, h, w, c));
    MW_TRY(mw_keras_set_model_name(B, conf));

    size_t nreal = 0;
    for (size_t i = 0; i < n; i++) {
        mw_klayer L = {origin, "", MW_POLICY_FLOAT32, NULL};
        const char *cls = NULL, *name = NULL;
        const json_t *cfg = NULL;
        MW_TRY(mw_keras_read_layer(&L, json_array_get(layers, i), i, &cls, &cfg, &name));
        if (!strcmp(cls, "InputLayer")) {
            MW_TRY(mw_keras_check_input_layer(&L, cfg, i));
            continue;
        }
        if (mw_keras_is_nested(cls)) { /* a model used as a layer: its layers in its place */
            int out = 0;
            MW_TRY(mw_keras_add_nested(B, &L, cls, cfg, name, B->m->nlayers - 1, i + 1 == n, layers,
                                       i, &out));
        } else {
            MW_TRY(mw_keras_add_layer(B, &L, cls, cfg, name, i + 1 == n, NULL));
        }
        nreal++;
    }
    if (nreal == 0)
        return mw_keras_fail_at(origin, MW_EMODEL, "the model has no layers besides its input");
    return mw_keras_check_output(B, nclasses);
}

mw_status mw_keras_load(mw_model *m, const char *json_text, size_t nbytes, const char *origin,
                        int in_h, int in_w, int in_c, int nclasses)
{
    return mw_keras_load_parts(m, json_text, nbytes, origin, in_h, in_w, in_c, nclasses, NULL);
}

mw_status mw_keras_load_parts(mw_model *m, const char *json_text, size_t nbytes, const char *origin,
                              int in_h, int in_w, int in_c, int nclasses,
                              const mw_input_parts *parts)
{
    mw_model_init(m, 0, 0, 0);
    if (!origin || !*origin)
        origin = "model";
    if (in_h < 0 || in_w < 0 || in_c < 0 || nclasses < 0 ||
        ((in_h == 0) != (in_w == 0) || (in_h == 0) != (in_c == 0)))
        return mw_keras_fail_at(origin, MW_EINVAL,
                                "data shape %dx%dx%d, %d classes: expected positive "
                                "sizes (or all 0)",
                                in_h, in_w, in_c, nclasses);
    if (!json_text || nbytes == 0)
        return mw_keras_fail_at(origin, MW_EMODEL,
                                "empty; expected a Keras model JSON (model.to_json())");
    if (nbytes > MW_KERAS_MAX_BYTES)
        return mw_keras_fail_at(origin, MW_EMODEL, "%zu bytes; expected at most %u (4 MiB)", nbytes,
                                MW_KERAS_MAX_BYTES);
    json_error_t je;
    json_t *root = json_loadb(json_text, nbytes, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        char t[sizeof je.text * 4 + 8];
        mw_str_escape(t, sizeof t, je.text, sizeof je.text, 0);
        return mw_keras_fail_at(origin, MW_EMODEL, "line %d, column %d: %s (not valid JSON)",
                                je.line, je.column, t);
    }
    mw_kbuilder B = {.origin = origin, .m = m, .parts = parts && parts->n ? parts : NULL};
    mw_status rc = build(&B, root, in_h, in_w, in_c, nclasses);
    json_decref(root);
    if (rc == MW_OK) {
        m->source = malloc(nbytes + 1);
        if (!m->source) {
            rc = mw_keras_fail_at(origin, MW_ENOMEM, "out of memory");
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
    return mw_keras_load_file_parts(m, path, in_h, in_w, in_c, nclasses, NULL);
}

mw_status mw_keras_load_file_parts(mw_model *m, const char *path, int in_h, int in_w, int in_c,
                                   int nclasses, const mw_input_parts *parts)
{
    mw_model_init(m, 0, 0, 0);
    char *buf = NULL;
    size_t n = 0;
    /* a regular file, never blocking, its size checked before it is read (common/fs.h) */
    MW_TRY(mw_fs_read_input(path, "a Keras model: JSON or a .keras archive", MW_KERAS_MAX_BYTES,
                            MW_EMODEL, &buf, &n));
    mw_status rc = mw_keras_load_parts(m, buf, n, path, in_h, in_w, in_c, nclasses, parts);
    free(buf);
    return rc;
}

mw_status mw_keras_build_tutorial(mw_model *m, int h, int w, int c, int nclasses)
{
    return mw_keras_load(m, mw_keras_tutorial_json, mw_keras_tutorial_json_nbytes,
                         "built-in model (worker/models/tutorial_cnn.json)", h, w, c, nclasses);
}

/* .keras archives through libzip; see keras_archive.h.
 *
 * Reading: open the zip (from memory or a file, with libzip's consistency checks), read
 * config.json (bounded by MW_KERAS_MAX_BYTES) into the Keras JSON reader, check metadata.json
 * when present, and keep model.weights.h5's bytes; each member is read to its end so libzip
 * verifies its CRC. Writing: metadata.json, config.json and model.weights.h5, stored
 * uncompressed as Keras does, in that order. */
#include "worker/keras/keras_archive.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zip.h>

#include "common/log.h"
#include "common/sysmem.h"
#include "worker/data/zip_input.h"
#include "worker/keras/keras.h"
#include "worker/keras/keras_h5.h"
#include "worker/keras/keras_loss.h"
#include "worker/keras/keras_vars.h"
#include "worker/model/kread.h"
#include "worker/model/layer.h"
#include "worker/model/loss.h"
#include "worker/optimizers.h"

/* The Keras version whose layout this writes (metadata.json's keras_version). */
#define KERAS_VERSION "3.6.0"
/* Largest model.weights.h5 read (4 GiB of weights is far beyond what mwtrain trains). */
#define MAX_WEIGHTS_BYTES ((zip_uint64_t)4 << 30)

void mw_keras_weights_init(mw_keras_weights *w)
{
    memset(w, 0, sizeof *w);
}

void mw_keras_weights_free(mw_keras_weights *w)
{
    free(w->h5);
    mw_keras_weights_init(w);
}

int mw_keras_archive_is(const char *path)
{
    const size_t n = strlen(path);
    if (n >= 6 && !strcmp(path + n - 6, ".keras"))
        return 1;
    /* never open what is not a regular file (a FIFO would block): the loader reports it */
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    unsigned char b[4] = {0};
    if (fd < 0)
        return 0;
    const ssize_t got = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, b, 4, 0) : 0;
    close(fd);
    return got == 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4;
}

/* Member `name` into a malloc'ed buffer (NUL-terminated; *nbytes without it): *out NULL when
 * the archive has no such member. At most max bytes. */
static mw_status read_member(zip_t *z, const char *name, zip_uint64_t max, const char *origin,
                             char **out, size_t *nbytes)
{
    *out = NULL, *nbytes = 0;
    const zip_int64_t idx = zip_name_locate(z, name, 0);
    if (idx < 0)
        return MW_OK;
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z, (zip_uint64_t)idx, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        return mw_err(MW_EDATA, "%s: %s: its size cannot be read: %s", origin, name,
                      zip_strerror(z));
    /* deflate cannot expand more than 1032:1: a larger claim is a corrupt directory */
    const int bounded = !(st.valid & ZIP_STAT_COMP_SIZE) || st.size <= st.comp_size * 1032 + 64;
    if (st.size > max || !bounded)
        return mw_err(MW_EDATA, "%s: %s claims %llu bytes (at most %llu accepted%s)", origin, name,
                      (unsigned long long)st.size, (unsigned long long)max,
                      bounded ? "" : "; more than its compressed size can hold: corrupt");
    /* the size from the zip directory, checked before anything is inflated */
    MW_TRY(mw_sysmem_check_load(st.size, "%s: %s %s to", origin, name,
                                st.comp_method == ZIP_CM_STORE ? "takes" : "inflates"));
    char *buf = malloc((size_t)st.size + 1);
    if (!buf)
        return mw_err(MW_ENOMEM, "%s: %s: %llu bytes: out of memory", origin, name,
                      (unsigned long long)st.size);
    zip_file_t *zf = zip_fopen_index(z, (zip_uint64_t)idx, 0);
    if (!zf) {
        free(buf);
        return mw_err(MW_EDATA, "%s: %s cannot be opened: %s", origin, name, zip_strerror(z));
    }
    zip_uint64_t got = 0;
    zip_int64_t r = 1;
    while (r > 0 && got <= st.size) { /* to the end: libzip checks the CRC there */
        char extra;
        r = got < st.size ? zip_fread(zf, buf + got, st.size - got) : zip_fread(zf, &extra, 1);
        if (r > 0)
            got += (zip_uint64_t)r;
    }
    mw_status rc = MW_OK;
    if (r < 0)
        rc = mw_err(MW_EDATA, "%s: %s cannot be read (truncated or corrupt archive): %s", origin,
                    name, zip_file_strerror(zf));
    else if (got != st.size)
        rc = mw_err(MW_EDATA, "%s: %s holds %llu bytes, the archive's directory says %llu", origin,
                    name, (unsigned long long)got, (unsigned long long)st.size);
    zip_fclose(zf);
    if (rc != MW_OK) {
        free(buf);
        return rc;
    }
    buf[st.size] = '\0';
    *out = buf, *nbytes = (size_t)st.size;
    return MW_OK;
}

static mw_status check_metadata(const char *text, size_t n, const char *origin)
{
    json_error_t je;
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    const char *v = json_string_value(json_object_get(root, "keras_version"));
    mw_status rc = MW_OK;
    if (!json_is_object(root))
        rc = mw_err(MW_EDATA, "%s: metadata.json is not a JSON object%s%s", origin,
                    root ? "" : ": ", root ? "" : je.text);
    else
        mw_log_debug("%s: written by Keras %s", origin, v ? v : "(no keras_version)");
    json_decref(root);
    return rc;
}

static mw_status load_zip(zip_t *z, mw_model *m, const char *origin, int in_h, int in_w, int in_c,
                          int nclasses, mw_keras_weights *w, const mw_input_parts *parts)
{
    char *cfg = NULL, *meta = NULL, *h5 = NULL;
    size_t ncfg = 0, nmeta = 0, nh5 = 0;
    char where[600];
    mw_status rc = read_member(z, "config.json", MW_KERAS_MAX_BYTES, origin, &cfg, &ncfg);
    if (rc == MW_OK && !cfg)
        rc = mw_err(MW_EDATA,
                    "%s: no config.json in the archive (a .keras archive holds "
                    "config.json, metadata.json and model.weights.h5)",
                    origin);
    if (rc == MW_OK)
        rc = read_member(z, "metadata.json", MW_KERAS_MAX_BYTES, origin, &meta, &nmeta);
    if (rc == MW_OK && meta)
        rc = check_metadata(meta, nmeta, origin);
    if (rc == MW_OK)
        rc = read_member(z, "model.weights.h5", MAX_WEIGHTS_BYTES, origin, &h5, &nh5);
    if (rc == MW_OK && !h5)
        rc = mw_err(MW_EDATA,
                    "%s: no model.weights.h5 in the archive (a .keras archive holds "
                    "config.json, metadata.json and model.weights.h5)",
                    origin);
    if (rc == MW_OK) {
        snprintf(where, sizeof where, "%s: config.json", origin);
        rc = mw_keras_load_parts(m, cfg, ncfg, where, in_h, in_w, in_c, nclasses, parts);
    }
    if (rc == MW_OK && w) {
        w->h5 = h5, w->h5_nbytes = nh5;
        snprintf(w->origin, sizeof w->origin, "%s: model.weights.h5", origin);
        h5 = NULL;
    }
    free(cfg);
    free(meta);
    free(h5);
    return rc;
}

#define BAD_ZIP "not a zip archive, or a truncated one"

mw_status mw_keras_archive_load(mw_model *m, const void *bytes, size_t nbytes, const char *origin,
                                int in_h, int in_w, int in_c, int nclasses, mw_keras_weights *w)
{
    mw_model_init(m, 0, 0, 0);
    zip_t *z;
    MW_TRY(mw_zip_input_open_buffer(bytes, nbytes, origin, BAD_ZIP, &z));
    mw_status rc = load_zip(z, m, origin, in_h, in_w, in_c, nclasses, w, NULL);
    zip_discard(z);
    return rc;
}

/* path, a regular file (MW_EIO otherwise), opened read-only with its consistency checked, or
 * MW_EDATA naming it. */
static mw_status open_zip(const char *path, zip_t **z)
{
    return mw_zip_input_open_file(path, "a .keras archive (or Keras JSON)", BAD_ZIP, z, NULL, NULL);
}

static mw_status archive_load_file(mw_model *m, const char *path, int in_h, int in_w, int in_c,
                                   int nclasses, mw_keras_weights *w, const mw_input_parts *parts)
{
    mw_model_init(m, 0, 0, 0);
    zip_t *z;
    MW_TRY(open_zip(path, &z));
    mw_status rc = load_zip(z, m, path, in_h, in_w, in_c, nclasses, w, parts);
    zip_discard(z);
    return rc;
}

mw_status mw_keras_archive_load_file(mw_model *m, const char *path, int in_h, int in_w, int in_c,
                                     int nclasses, mw_keras_weights *w)
{
    return archive_load_file(m, path, in_h, in_w, in_c, nclasses, w, NULL);
}

mw_status mw_keras_archive_compiled(const char *path, const char *key, json_t **out)
{
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return MW_OK; /* the model load reports it */
    zip_t *z;
    MW_TRY(open_zip(path, &z));
    char *cfg = NULL;
    size_t ncfg = 0;
    mw_status rc = read_member(z, "config.json", MW_KERAS_MAX_BYTES, path, &cfg, &ncfg);
    zip_discard(z);
    if (rc != MW_OK || !cfg) {
        free(cfg);
        return rc; /* no config.json: the model load reports it */
    }
    json_error_t je;
    json_t *root = json_loadb(cfg, ncfg, JSON_REJECT_DUPLICATES, &je);
    free(cfg);
    if (!root) /* the model load reports it, with the line */
        return MW_OK;
    json_t *cc = json_object_get(root, "compile_config");
    json_t *opt = key ? json_object_get(cc, key) : cc;
    if (opt && !json_is_null(opt))
        *out = json_incref(opt);
    json_decref(root);
    return MW_OK;
}

mw_status mw_keras_model_load(mw_model *m, const char *path, int in_h, int in_w, int in_c,
                              int nclasses, mw_keras_weights *w)
{
    return mw_keras_model_load_parts(m, path, in_h, in_w, in_c, nclasses, w, NULL);
}

mw_status mw_keras_model_load_parts(mw_model *m, const char *path, int in_h, int in_w, int in_c,
                                    int nclasses, mw_keras_weights *w, const mw_input_parts *parts)
{
    if (mw_keras_archive_is(path))
        return archive_load_file(m, path, in_h, in_w, in_c, nclasses, w, parts);
    return mw_keras_load_file_parts(m, path, in_h, in_w, in_c, nclasses, parts);
}

mw_status mw_keras_weights_apply(const mw_keras_weights *w, const mw_model *m, float *params)
{
    if (!w->h5)
        return MW_OK;
    return mw_keras_h5_read(m, params, w->h5, w->h5_nbytes, w->origin);
}

/* ---- config.json ---- */

static json_t *obj(const char *module, const char *cls, json_t *config)
{
    return json_pack("{s:s, s:s, s:o, s:n}", "module", module, "class_name", cls, "config", config,
                     "registered_name");
}

/* A layer's dtype as Keras 3 writes a policy. */
static json_t *policy_json(mw_policy p)
{
    if (p == MW_POLICY_FLOAT32)
        return json_string("float32");
    return json_pack("{s:s, s:s, s:{s:s}, s:n}", "module", "keras", "class_name", "DTypePolicy",
                     "config", "name", mw_policy_name(p), "registered_name");
}

/* Keras 3's config of own layer i of m; NULL for a kind this writer does not know. */
static json_t *layer_config(const mw_model *m, int i)
{
    const mw_layer *l = &m->layers[i];
    json_t *c = json_pack("{s:s, s:b}", "name", l->name, "trainable", 1);
    json_object_set_new(c, "dtype", policy_json(l->policy));
    const mw_layer_ops *row = mw_layer_row(l->kind);
    const char *cls = row->to_keras ? row->to_keras(m, i, c) : NULL;
    if (!cls) {
        json_decref(c);
        return NULL;
    }
    return obj("keras.layers", cls, c);
}

static json_t *input_shape(const mw_model *m)
{
    if (m->flat_input)
        return json_pack("[n, i]", m->in_c);
    return json_pack("[n, i, i, i]", m->in_h, m->in_w, m->in_c);
}

/* A Keras 3 Sequential config from m's layers (a Keras 2 source, which Keras 3 cannot read). */
static mw_status sequential_config(const mw_model *m, json_t **out)
{
    json_t *layers = json_array();
    json_array_append_new(layers,
                          obj("keras.layers", "InputLayer",
                              json_pack("{s:o, s:s, s:b, s:s}", "batch_shape", input_shape(m),
                                        "dtype", "float32", "sparse", 0, "name", "input_layer")));
    for (int i = 0; i < m->nlayers; i++) {
        if (!mw_keras_layer_is_own(&m->layers[i]))
            continue;
        json_t *l = layer_config(m, i);
        if (!l) {
            json_decref(layers);
            return mw_err(MW_EUNSUPPORTED,
                          "layer '%s' (%s): writing its Keras 3 config is not supported "
                          "(worker/keras/keras_archive.c)",
                          m->layers[i].name, m->layers[i].cls);
        }
        json_array_append_new(layers, l);
    }
    json_t *cfg = json_pack("{s:s, s:b, s:s, s:o}", "name", m->name[0] ? m->name : "sequential",
                            "trainable", 1, "dtype", "float32", "layers", layers);
    *out = obj("keras", "Sequential", cfg);
    return MW_OK;
}

static json_t *compile_config(const mw_model *m, const mw_keras_optimizer *o)
{
    /* Keras' class of the optimizer and the hyperparameters its row names (worker/optimizers.h);
     * those a checkpoint does not record come from the flags (see mw_keras_optimizer) */
    const int k = mw_optimizer_find(o->name, 0);
    const mw_optimizer_row *row = mw_optimizer_row_of(k < 0 ? MW_OPT_ADAM : (mw_optimizer)k);
    json_t *c = json_pack("{s:s, s:f}", "name", row->keras_name ? row->keras_name : o->name,
                          "learning_rate", o->learning_rate);
    for (int i = 0; i < 4 && row->keras_hyper[i]; i++) {
        const char *h = row->keras_hyper[i];
        const double v = !strcmp(h, "momentum") ? o->momentum
                         : !strcmp(h, "beta_1") ? o->beta1
                         : !strcmp(h, "beta_2") ? o->beta2
                                                : o->epsilon;
        json_object_set_new(c, h, json_real(v));
    }
    json_t *opt = obj("keras.optimizers", row->keras, c);
    const mw_loss ls = m->loss; /* as trained (worker/keras/keras_loss.h) */
    return json_pack("{s:o, s:o, s:n, s:o, s:n, s:b, s:i, s:b}", "optimizer", opt, "loss",
                     mw_keras_loss_to_json(&ls), "loss_weights", "metrics",
                     mw_keras_metrics_to_json(&ls, m->nclasses), "weighted_metrics", "run_eagerly",
                     0, "steps_per_execution", 1, "jit_compile", 0);
}

/* Each layer of a Keras config (model.config.layers, or Keras 2's config list) whose policy m
 * computes with differs from the one the config names (--dtype-policy over the file's) gets
 * m's. */
static void apply_policies(json_t *model, const mw_model *m)
{
    json_t *conf = json_object_get(model, "config");
    json_t *layers = json_is_array(conf) ? conf : json_object_get(conf, "layers");
    for (size_t i = 0; i < json_array_size(layers); i++) {
        json_t *cfg = json_object_get(json_array_get(layers, i), "config");
        const char *name = json_string_value(json_object_get(cfg, "name"));
        for (int j = 0; name && j < m->nlayers; j++) {
            const mw_layer *l = &m->layers[j];
            if (l->folded || strcmp(l->name, name) != 0)
                continue;
            const json_t *v = json_object_get(cfg, "dtype");
            const char *had =
                json_is_string(v)
                    ? json_string_value(v)
                    : json_string_value(json_object_get(json_object_get(v, "config"), "name"));
            mw_policy p = MW_POLICY_FLOAT32;
            if (had && mw_policy_parse(had, &p) != 0)
                p = (mw_policy)-1;
            if (p != l->policy)
                json_object_set_new(cfg, "dtype", policy_json(l->policy));
            break;
        }
    }
}

/* Keys KerasHub 0.32 writes in a layer's config that its constructor refuses ("Unrecognized
 * keyword arguments"), so that Keras cannot load a Functional model holding the layer:
 * ViTPatchingAndEmbedding's num_patches and num_positions, ViTEncoderBlock's key_dim. Each
 * follows from the others (the reader checks it), and the archive written leaves them out (in
 * nested models' layers too), so that keras.models.load_model reads it. */
static void drop_unloadable_keys(json_t *model)
{
    static const char *const drop[][2] = {
        {"ViTPatchingAndEmbedding", "num_patches"},
        {"ViTPatchingAndEmbedding", "num_positions"},
        {"ViTEncoderBlock", "key_dim"},
    };
    json_t *conf = json_object_get(model, "config");
    json_t *layers = json_is_array(conf) ? conf : json_object_get(conf, "layers");
    for (size_t i = 0; i < json_array_size(layers); i++) {
        json_t *e = json_array_get(layers, i), *cfg = json_object_get(e, "config");
        const char *cls = json_string_value(json_object_get(e, "class_name"));
        if (json_is_array(json_object_get(cfg, "layers"))) /* a nested model: its layers too */
            drop_unloadable_keys(e);
        for (size_t k = 0; cls && k < sizeof drop / sizeof drop[0]; k++)
            if (!strcmp(cls, drop[k][0]))
                json_object_del(cfg, drop[k][1]);
    }
}

/* A model description's model object: itself, or a TensorFlow.js wrapper's modelTopology (its
 * model_config member, or modelTopology itself); borrowed from root. */
static json_t *source_model(json_t *root)
{
    json_t *topo = json_object_get(root, "modelTopology");
    if (!topo)
        return root;
    return json_object_get(topo, "model_config") ? json_object_get(topo, "model_config") : topo;
}

/* m->source's model object when it is Keras 3's shape (has "module"), a new reference; else
 * NULL. */
static json_t *keras3_source(const mw_model *m)
{
    if (!m->source)
        return NULL;
    json_t *root = json_loadb(m->source, m->source_nbytes, 0, NULL);
    json_t *model = source_model(root);
    json_t *out = json_is_object(model) && json_object_get(model, "module") ? model : NULL;
    json_incref(out);
    json_decref(root);
    return out;
}

mw_status mw_keras_source_set_policy(mw_model *m)
{
    if (!m->source)
        return MW_OK;
    json_t *root = json_loadb(m->source, m->source_nbytes, 0, NULL);
    json_t *model = source_model(root);
    if (!json_is_object(model)) { /* it was read as a model: never */
        json_decref(root);
        return MW_OK;
    }
    apply_policies(model, m);
    return mw_keras_source_replace(m, root);
}

mw_status mw_keras_source_set_lengths(mw_model *m)
{
    if (!m->source || !m->parts.n)
        return MW_OK;
    json_t *root = json_loadb(m->source, m->source_nbytes, 0, NULL);
    json_t *model = source_model(root), *lengths = json_object();
    if (!json_is_object(model) || !lengths) { /* it was read as a model: never */
        json_decref(lengths);
        json_decref(root);
        return lengths ? MW_OK : mw_err(MW_ENOMEM, "out of memory");
    }
    for (int k = 0; k < m->parts.n; k++)
        json_object_set_new(lengths, m->parts.name[k], json_integer(m->parts.width[k]));
    json_object_set_new(model, MW_KERAS_LENGTHS_KEY, lengths);
    return mw_keras_source_replace(m, root);
}

mw_status mw_keras_config_json(const mw_model *m, const mw_keras_optimizer *opt, char **out)
{
    *out = NULL;
    json_t *model = keras3_source(m);
    if (model) /* the lengths a run recorded are mwtrain's, not Keras' */
        json_object_del(model, MW_KERAS_LENGTHS_KEY);
    if (model) {
        apply_policies(model, m);
        drop_unloadable_keys(model);
    } else
        MW_TRY(sequential_config(m, &model));
    if (!json_object_get(model, "build_config"))
        json_object_set_new(model, "build_config",
                            json_pack("{s:o}", "input_shape", input_shape(m)));
    /* the source's compile_config (an archive's, or the loss mwtrain put there: its keys are
     * kept), with the loss and metric as trained and an optimizer where it has none */
    json_t *ours = compile_config(m, opt), *cc = json_object_get(model, "compile_config");
    if (json_is_object(cc)) {
        json_object_set(cc, "loss", json_object_get(ours, "loss"));
        json_object_set(cc, "metrics", json_object_get(ours, "metrics"));
        if (!json_is_object(json_object_get(cc, "optimizer")))
            json_object_set(cc, "optimizer", json_object_get(ours, "optimizer"));
        json_decref(ours);
    } else {
        json_object_set_new(model, "compile_config", ours);
    }
    *out = json_dumps(model, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(model);
    return *out ? MW_OK : mw_err(MW_ENOMEM, "config.json: out of memory");
}

/* ---- writing the zip ---- */

/* Add name with data[0..n) (copied into the archive's buffer by libzip at close: data must
 * live until zip_close), stored uncompressed. */
static mw_status add_member(zip_t *z, const char *name, const void *data, size_t n,
                            const char *path)
{
    zip_source_t *src = zip_source_buffer(z, data, n, 0);
    zip_int64_t idx = src ? zip_file_add(z, name, src, ZIP_FL_ENC_UTF_8 | ZIP_FL_OVERWRITE) : -1;
    if (idx < 0) {
        zip_source_free(src);
        return mw_err(MW_EIO, "%s: cannot add %s: %s", path, name, zip_strerror(z));
    }
    if (zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_STORE, 0) != 0)
        return mw_err(MW_EIO, "%s: %s: %s", path, name, zip_strerror(z));
    return MW_OK;
}

/* The bytes written into src (an in-memory zip source after zip_close), malloc'ed. */
static mw_status take_image(zip_source_t *src, const char *name, void **out, size_t *nbytes)
{
    *out = NULL, *nbytes = 0;
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_source_stat(src, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) || zip_source_open(src) != 0)
        return mw_err(MW_EINTERNAL, "%s: the archive written in memory cannot be read back", name);
    void *buf = malloc(st.size ? (size_t)st.size : 1);
    const zip_int64_t got = buf ? zip_source_read(src, buf, st.size) : -1;
    zip_source_close(src);
    if (got < 0 || (zip_uint64_t)got != st.size) {
        free(buf);
        return mw_err(buf ? MW_EINTERNAL : MW_ENOMEM, "%s: cannot take the archive's %llu bytes",
                      name, (unsigned long long)st.size);
    }
    *out = buf, *nbytes = (size_t)st.size;
    return MW_OK;
}

mw_status mw_keras_archive_image(const mw_model *m, const float *params,
                                 const mw_keras_optimizer *opt, const char *name, void **out,
                                 size_t *nbytes)
{
    *out = NULL, *nbytes = 0;
    char *cfg = NULL, meta[160], origin[600], date[32];
    void *h5 = NULL;
    size_t nh5 = 0;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", &tm);
    snprintf(meta, sizeof meta, "{\"keras_version\": \"%s\", \"date_saved\": \"%s\"}",
             KERAS_VERSION, date);
    snprintf(origin, sizeof origin, "%s: model.weights.h5", name);
    MW_TRY(mw_keras_config_json(m, opt, &cfg));
    mw_status rc = mw_keras_h5_write(m, params, opt, &h5, &nh5, origin);
    zip_error_t e;
    zip_error_init(&e);
    zip_source_t *src = rc == MW_OK ? zip_source_buffer_create(NULL, 0, 0, &e) : NULL;
    zip_t *z = NULL;
    if (src) {
        zip_source_keep(src); /* the archive's bytes are read from it after zip_close */
        z = zip_open_from_source(src, ZIP_TRUNCATE, &e);
    }
    if (rc == MW_OK && !z)
        rc = mw_err(MW_ENOMEM, "%s: cannot make the archive in memory: %s", name,
                    zip_error_strerror(&e));
    zip_error_fini(&e);
    if (rc == MW_OK)
        rc = add_member(z, "metadata.json", meta, strlen(meta), name);
    if (rc == MW_OK)
        rc = add_member(z, "config.json", cfg, strlen(cfg), name);
    if (rc == MW_OK)
        rc = add_member(z, "model.weights.h5", h5, nh5, name);
    if (rc == MW_OK && zip_close(z) != 0) {
        rc = mw_err(MW_ENOMEM, "%s: cannot write the archive in memory: %s", name, zip_strerror(z));
        zip_discard(z);
    } else if (rc != MW_OK && z) {
        zip_discard(z);
    }
    if (rc == MW_OK)
        rc = take_image(src, name, out, nbytes);
    if (src)
        zip_source_free(src);
    free(cfg);
    free(h5);
    return rc;
}

mw_status mw_keras_archive_write(const mw_model *m, const float *params,
                                 const mw_keras_optimizer *opt, const char *path)
{
    void *img = NULL;
    size_t n = 0;
    MW_TRY(mw_keras_archive_image(m, params, opt, path, &img, &n));
    FILE *f = fopen(path, "wb");
    int bad = !f || fwrite(img, 1, n, f) != n;
    const int e = errno;
    if (f && fclose(f) != 0 && !bad)
        bad = 1;
    free(img);
    if (bad)
        return mw_err(MW_EIO, "%s: cannot write the archive: %s", path, strerror(e ? e : EIO));
    return MW_OK;
}

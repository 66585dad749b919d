/* `.keras` archives in and out: a zip (libzip) of
 *
 *   metadata.json      {"keras_version": "3.6.0", "date_saved": "2026-11-23@00:12:30"}
 *   config.json        the model's serialized config (Keras 3: module, class_name, config,
 *                      registered_name, build_config, compile_config)
 *   model.weights.h5   the weights (worker/keras/keras_h5.h)
 *
 * Reading takes the architecture from config.json (through worker/keras/keras.h, so every model
 * rule applies) and keeps the weights image, applied after the model is finalized. Any
 * problem with the archive (not a zip, truncated, a member missing, corrupt or unreadable;
 * weights that do not match config.json) is one MW_EDATA naming the archive, the member and
 * the layer or variable; model errors in config.json stay MW_EMODEL / MW_EUNSUPPORTED.
 * docs/formats.md describes both files. */
#ifndef MW_WORKER_KERAS_ARCHIVE_H
#define MW_WORKER_KERAS_ARCHIVE_H

#include <jansson.h>
#include <stddef.h>

#include "common/status.h"
#include "worker/keras/keras_h5.h"
#include "worker/model/model.h"

/* The initial weights of a model read from an archive, until they are applied. */
typedef struct {
    void *h5; /* owned image of model.weights.h5, NULL when the model came from JSON */
    size_t h5_nbytes;
    char origin[512]; /* "<archive>: model.weights.h5" */
} mw_keras_weights;

void mw_keras_weights_init(mw_keras_weights *w);
void mw_keras_weights_free(mw_keras_weights *w);

/* 1 when path is to be read as a .keras archive: its name ends in .keras, or its first
 * bytes are a zip's ("PK\3\4"). */
int mw_keras_archive_is(const char *path);

/* m (as mw_keras_load: not finalized) and *w from the archive bytes[0..nbytes); origin names it
 * in messages. w (NULL: the weights are not wanted, as for a summary) is set only on
 * success. */
mw_status mw_keras_archive_load(mw_model *m, const void *bytes, size_t nbytes, const char *origin,
                                int in_h, int in_w, int in_c, int nclasses, mw_keras_weights *w);
/* The same from a file (MW_EIO when it cannot be read). */
mw_status mw_keras_archive_load_file(mw_model *m, const char *path, int in_h, int in_w, int in_c,
                                     int nclasses, mw_keras_weights *w);
/* What an archive was compiled with: config.json's compile_config[key] ("optimizer",
 * "loss", "metrics"; key NULL: the whole compile_config; Keras' serialized form, for
 * mw_optimizer_from_json and mw_keras_loss_from_json) as a new reference in *out, or NULL when the
 * archive has none (not compiled, or null). Problems with the archive itself are MW_EDATA as above;
 * a config.json that is not JSON leaves *out NULL (the model load reports it). */
mw_status mw_keras_archive_compiled(const char *path, const char *key, json_t **out);
/* m->source with each layer's dtype set to the policy m computes with where they differ
 * (--dtype-policy over the file's), so that the description a checkpoint keeps resumes in the
 * same policy. MW_ENOMEM. */
mw_status mw_keras_source_set_policy(mw_model *m);
/* m->source with the lengths of m's named inputs (m->parts, the data's) recorded under
 * MW_KERAS_LENGTHS_KEY (worker/model/kread.h), so that a checkpoint's model builds without the
 * data (an export) when its InputLayers say (None, None). Nothing for one input; MW_ENOMEM. */
mw_status mw_keras_source_set_lengths(mw_model *m);
/* --model: a .keras archive (w gets its weights) or Keras JSON (w stays empty). */
mw_status mw_keras_model_load(mw_model *m, const char *path, int in_h, int in_w, int in_c,
                              int nclasses, mw_keras_weights *w);
/* The same for data of several named inputs (keras.h: mw_keras_load_parts). */
mw_status mw_keras_model_load_parts(mw_model *m, const char *path, int in_h, int in_w, int in_c,
                                    int nclasses, mw_keras_weights *w, const mw_input_parts *parts);
/* Copy w's weights into params (m finalized, params in its arena layout); nothing when w
 * holds none. */
mw_status mw_keras_weights_apply(const mw_keras_weights *w, const mw_model *m, float *params);

/* config.json for m (malloc'ed text into *out): m->source when it is Keras 3's shape (a
 * TensorFlow.js wrapper unwrapped), with build_config and compile_config added where missing;
 * otherwise (Keras 2 / tf.keras JSON, which Keras 3 cannot load) a Keras 3 Sequential config
 * written from m's layers. compile_config: sparse categorical cross-entropy (from logits unless
 * the model ends in softmax), accuracy, and opt's optimizer with its hyperparameters. */
mw_status mw_keras_config_json(const mw_model *m, const mw_keras_optimizer *opt, char **out);

/* A .keras archive of m with params (m's arena layout) and opt's state, made in memory: *out
 * (malloc'ed) of *nbytes. name names it in messages. */
mw_status mw_keras_archive_image(const mw_model *m, const float *params,
                                 const mw_keras_optimizer *opt, const char *name, void **out,
                                 size_t *nbytes);
/* The same written to path (replaced; not atomic: mwtrain export writes through
 * mw_keras_archive_image and its own atomic replacement). */
mw_status mw_keras_archive_write(const mw_model *m, const float *params,
                                 const mw_keras_optimizer *opt, const char *path);

#endif

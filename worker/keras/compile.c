/* A run's loss and metric from the flags or a .keras archive; see compile.h. */
#include "worker/keras/compile.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "worker/keras/keras_archive.h"
#include "worker/keras/keras_loss.h"
#include "worker/model/keras_keys.h"

static mw_status loss_file(mw_train_opts *o)
{
    char *text = NULL;
    size_t n = 0;
    MW_TRY(mw_fs_read_input(o->loss_config, "the JSON of keras.losses.serialize", MW_LOSS_MAX_BYTES,
                            MW_ECONFIG, &text, &n));
    json_error_t e;
    json_t *j = json_loadb(text, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    free(text);
    if (!j)
        return mw_err(MW_ECONFIG, "%s: line %d: %s (expected the JSON of keras.losses.serialize)",
                      o->loss_config, e.line, e.text);
    mw_status rc = mw_keras_loss_from_json(&o->loss, j, o->loss_config);
    json_decref(j);
    snprintf(o->loss_from, sizeof o->loss_from, "--loss-config %s", o->loss_config);
    return rc;
}

/* The keys Keras writes in compile_config (worker/model/keras_keys.h): the optimizer
 * (worker/keras/optimizer.c), the loss and the metrics (or the weighted metrics) are read; one
 * output's loss weight must be 1. */
static const mw_kkey compile_keys[] = {
    MW_KREAD("optimizer"),
    MW_KREAD("loss"),
    MW_KREAD("metrics"),
    MW_KDEF("loss_weights", "null|1|[1]", "a weighted loss"),
    MW_KREAD("weighted_metrics"),
    MW_KIGN("run_eagerly", "eager or graph execution computes the same"),
    MW_KIGN("steps_per_execution", "steps per call to the backend, the same steps"),
    MW_KIGN("jit_compile", "XLA compilation computes the same"),
    MW_KDEF("auto_scale_loss", "true", "mixed_float16 without loss scaling"),
    MW_KEND,
};

/* A .keras archive's compile_config has every key accounted for (whatever gives the loss). */
static mw_status check_compile(const mw_train_opts *o)
{
    json_t *cc = NULL;
    char at[700];
    MW_TRY(mw_keras_archive_compiled(o->model_path, NULL, &cc));
    snprintf(at, sizeof at, "%s: config.json: compile_config", o->model_path);
    mw_status rc =
        json_is_object(cc) ? mw_kcheck_config_keys(at, "compile_config", cc, compile_keys) : MW_OK;
    json_decref(cc);
    return rc;
}

/* A .keras archive's compile_config: its loss, then its metrics (or weighted metrics). */
static mw_status archive_loss(mw_train_opts *o)
{
    json_t *j = NULL, *m = NULL;
    MW_TRY(mw_keras_archive_compiled(o->model_path, "loss", &j));
    if (!j)
        return MW_OK;
    snprintf(o->loss_from, sizeof o->loss_from, "%s: config.json: compile_config.loss",
             o->model_path);
    mw_status rc = mw_keras_loss_from_json(&o->loss, j, o->loss_from);
    json_decref(j);
    if (rc == MW_OK)
        rc = mw_keras_archive_compiled(o->model_path, "metrics", &m);
    char where[700];
    snprintf(where, sizeof where, "%s: config.json: compile_config.metrics", o->model_path);
    if (rc == MW_OK && m)
        rc = mw_keras_metrics_from_json(&o->loss, m, where);
    json_decref(m);
    m = NULL;
    if (rc == MW_OK)
        rc = mw_keras_archive_compiled(o->model_path, "weighted_metrics", &m);
    snprintf(where, sizeof where, "%s: config.json: compile_config.weighted_metrics",
             o->model_path);
    if (rc == MW_OK && m)
        rc = mw_keras_weighted_metrics_from_json(&o->loss, m, where);
    json_decref(m);
    return rc;
}

mw_status mw_loss_resolve(mw_train_opts *o)
{
    if (o->model_path && mw_keras_archive_is(o->model_path))
        MW_TRY(check_compile(o));
    if (o->loss_name && o->loss_config)
        return mw_err(MW_EINVAL, "--loss %s and --loss-config %s: give the loss one way",
                      o->loss_name, o->loss_config);
    if (o->loss_config)
        return loss_file(o);
    if (o->loss_name) {
        json_t *j = json_string(o->loss_name);
        mw_status rc = j ? mw_keras_loss_from_json(&o->loss, j, "--loss") : MW_ENOMEM;
        json_decref(j);
        snprintf(o->loss_from, sizeof o->loss_from, "--loss %s", o->loss_name);
        return rc;
    }
    if (o->model_path && mw_keras_archive_is(o->model_path))
        return archive_loss(o);
    return MW_OK;
}

mw_status mw_metrics_resolve(mw_train_opts *o)
{
    if (!o->metrics)
        return MW_OK;
    json_t *list = json_array();
    const char *p = o->metrics;
    while (list && *p) { /* comma-separated names, spaces around them ignored */
        p += strspn(p, " ,");
        const size_t n = strcspn(p, ",");
        size_t e = n;
        while (e > 0 && p[e - 1] == ' ')
            e--;
        if (e > 0 && json_array_append_new(list, json_stringn(p, e)) != 0)
            json_decref(list), list = NULL;
        p += n;
    }
    if (!list)
        return mw_err(MW_ENOMEM, "--metrics: out of memory");
    mw_status rc = mw_keras_metrics_from_json(&o->loss, list, "--metrics");
    json_decref(list);
    return rc;
}

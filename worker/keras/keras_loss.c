/* Keras loss and metric configs into an mw_loss and back; see keras_loss.h. */
#include "worker/keras/keras_loss.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/keras/kconfig.h"

/* "axis": -1 only (fixed_keys); Keras 3.15 gives SparseCategoricalCrossentropy one, Keras 3.6
 * did not, so it is read for every loss and written only where a loss row lists it. */
static const char *const loss_common[] = {"name", "dtype", "reduction", "axis", NULL};

/* Keras' defaults of a kind: what keras.losses.get(name) builds. */
static void keras_defaults(mw_loss *ls, mw_loss_kind kind, const mw_loss *metrics_of)
{
    memset(ls, 0, sizeof *ls);
    ls->kind = kind;
    ls->d.kind = mw_loss_row(kind)->dkind;
    ls->d.delta = 1.0f, ls->d.gamma = 2.0f, ls->d.alpha = 0.25f;
    ls->metrics = metrics_of->metrics, ls->by_shape = metrics_of->by_shape;
}

static mw_status find_kind(const mw_kc_loc *l, const char *key, const char *name, mw_loss_kind *k)
{
    const int i = mw_loss_find(name);
    if (i < 0)
        return mw_kc_bad(l, key, "loss '%s' is not supported; supported: %s", name, mw_loss_list());
    *k = (mw_loss_kind)i;
    return MW_OK;
}

/* reduction and axis at the values mwtrain computes. */
static mw_status fixed_keys(const mw_kc_loc *l, const json_t *cfg)
{
    const json_t *r = json_object_get(cfg, "reduction");
    if (r && !json_is_null(r) &&
        (!json_is_string(r) || (strcmp(json_string_value(r), "sum_over_batch_size") != 0 &&
                                strcmp(json_string_value(r), "auto") != 0)))
        return mw_kc_bad(l, "reduction",
                         "expected \"sum_over_batch_size\" (the mean over the global batch, what "
                         "mwtrain computes)");
    const json_t *a = json_object_get(cfg, "axis");
    if (a && !(json_is_integer(a) && json_integer_value(a) == -1))
        return mw_kc_bad(l, "axis", "expected -1 (the last axis)");
    return MW_OK;
}

/* ignore_class: null, or a label >= 0 (mwtrain's labels are class indices; Keras' -1 has no
 * example to ignore in data mwtrain reads). */
static mw_status ignore_class(const mw_kc_loc *l, const json_t *cfg, mw_loss *ls)
{
    const json_t *ic = json_object_get(cfg, "ignore_class");
    if (!ic || json_is_null(ic))
        return MW_OK;
    if (!json_is_integer(ic) || json_integer_value(ic) < 0 || json_integer_value(ic) > INT32_MAX)
        return mw_kc_bad(l, "ignore_class",
                         "expected null or a label >= 0 (the examples with that label count "
                         "for nothing; mwtrain's labels are class indices >= 0, so give the "
                         "examples to ignore a label of their own, such as 255)");
    ls->has_ignore = 1;
    ls->ignore_class = (int32_t)json_integer_value(ic);
    return MW_OK;
}

static mw_status class_values(const mw_kc_loc *l, const json_t *cfg, mw_loss *ls)
{
    const mw_loss_ops *row = mw_loss_row(ls->kind);
    const char *const none[] = {NULL};
    MW_TRY(mw_kc_known(l, cfg, row->keras, loss_common, row->keys[0] ? row->keys : none,
                       "name, dtype, reduction"));
    MW_TRY(fixed_keys(l, cfg));
    MW_TRY(ignore_class(l, cfg, ls));
    double s = 0, delta = 1, gamma = 2, alpha = 0.25;
    MW_TRY(mw_kc_bool(l, cfg, "from_logits", &ls->d.from_logits));
    MW_TRY(mw_kc_num(l, cfg, "label_smoothing", 0, 1, 0, &s));
    MW_TRY(mw_kc_num(l, cfg, "delta", 0, INFINITY, LO_OPEN, &delta));
    MW_TRY(mw_kc_num(l, cfg, "gamma", 0, INFINITY, 0, &gamma));
    MW_TRY(mw_kc_num(l, cfg, "alpha", 0, 1, 0, &alpha));
    MW_TRY(mw_kc_bool(l, cfg, "apply_class_balancing", &ls->d.balanced));
    ls->d.smoothing = (float)s, ls->d.delta = (float)delta;
    ls->d.gamma = (float)gamma, ls->d.alpha = (float)alpha;
    return MW_OK;
}

mw_status mw_keras_loss_from_json(mw_loss *ls, const json_t *j, const char *where)
{
    mw_kc_loc l = {.where = where};
    mw_loss t;
    mw_loss_kind kind = MW_LOSS_SPARSE_XENT;
    if (json_is_string(j)) {
        MW_TRY(find_kind(&l, NULL, json_string_value(j), &kind));
        keras_defaults(&t, kind, ls);
        *ls = t;
        return MW_OK;
    }
    const char *cls;
    const json_t *cfg;
    MW_TRY(mw_kc_unwrap(&l, j, "keras.losses", &cls, &cfg));
    MW_TRY(find_kind(&l, "class_name", cls, &kind));
    keras_defaults(&t, kind, ls);
    mw_kc_loc c;
    mw_kc_sub(&c, &l, "config");
    if (cfg)
        MW_TRY(class_values(&c, cfg, &t));
    *ls = t;
    return MW_OK;
}

/* An AUC's config at the values mwtrain computes (Keras' defaults). */
static mw_status auc_config(const mw_kc_loc *l, const json_t *cfg)
{
    static const struct {
        const char *key, *want;
    } fixed[] = {{"num_thresholds", "200"},
                 {"curve", "\"ROC\""},
                 {"summation_method", "\"interpolation\""},
                 {"multi_label", "false"},
                 {"num_labels", "null"},
                 {"label_weights", "null"},
                 {"from_logits", "false"},
                 {"thresholds", "null"}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        const json_t *v = json_object_get(cfg, fixed[i].key);
        json_t *want = json_loads(fixed[i].want, JSON_DECODE_ANY, NULL);
        const int ok = !v || json_equal(v, want) || (json_is_null(want) && json_is_null(v));
        json_decref(want);
        if (!ok) {
            char key[64];
            snprintf(key, sizeof key, "config.%s", fixed[i].key);
            return mw_kc_bad(l, key, "expected %s (mwtrain computes Keras' default AUC)",
                             fixed[i].want);
        }
    }
    return MW_OK;
}

/* A metric entry: a name or a serialized metric ({"class_name": ..., "config": {...}}). */
static mw_status metric_of(const mw_kc_loc *l, const json_t *m, mw_loss_kind loss,
                           mw_metric_kind *out)
{
    const char *name = json_string_value(m);
    const json_t *cfg = NULL;
    if (!name) {
        static const char *const common[] = {"name", "dtype", NULL}, *const threshold[] = {
                                                                         "threshold", NULL};
        static const char *const auc[] = {"num_thresholds", "curve",      "summation_method",
                                          "multi_label",    "num_labels", "label_weights",
                                          "from_logits",    "thresholds", NULL};
        MW_TRY(mw_kc_unwrap(l, m, "keras.metrics", &name, &cfg));
        mw_kc_loc c;
        mw_kc_sub(&c, l, "config");
        if (cfg)
            MW_TRY(mw_kc_known(&c, cfg, name, common, strcmp(name, "AUC") ? threshold : auc,
                               "name, dtype"));
        const json_t *th = json_object_get(cfg, "threshold");
        if (th && !(json_is_number(th) && json_number_value(th) == 0.5))
            return mw_kc_bad(l, "config.threshold", "expected 0.5 (mwtrain's binary threshold)");
    }
    *out = mw_metric_find(name, loss);
    if (!strcmp(name, "accuracy") || !strcmp(name, "acc")) /* by the shapes, later */
        return MW_OK;
    const mw_loss_ops *row = mw_loss_row(loss);
    const int sparse = !row->dense, classifier = row->accuracy != MW_METRIC_NONE;
    if (*out == MW_METRIC_NONE || sparse != (*out == MW_METRIC_SPARSE_ACC) ||
        (*out == MW_METRIC_AUC && !classifier))
        return mw_kc_bad(l, NULL, "metric '%s' is not one mwtrain computes beside %s; expected %s",
                         name, row->keras,
                         sparse       ? "accuracy (or sparse_categorical_accuracy)"
                         : classifier ? "accuracy, binary_accuracy, categorical_accuracy, auc, "
                                        "mae, mse or rmse"
                                      : "mae, mse or rmse");
    return *out == MW_METRIC_AUC && cfg ? auc_config(l, cfg) : MW_OK;
}

mw_status mw_keras_metrics_from_json(mw_loss *ls, const json_t *metrics, const char *where)
{
    mw_kc_loc l = {.where = where};
    if (!metrics || json_is_null(metrics))
        return MW_OK;
    if (!json_is_array(metrics))
        return mw_kc_bad(&l, NULL, "expected a list of metrics");
    if (json_array_size(metrics) > MW_METRICS_MAX)
        return mw_kc_bad(&l, NULL, "%zu metrics; mwtrain reports at most %d",
                         json_array_size(metrics), MW_METRICS_MAX);
    mw_metric_list ml = {0, {MW_METRIC_NONE}, 1, 0, 0};
    unsigned by_shape = 0;
    for (size_t i = 0; i < json_array_size(metrics); i++) {
        mw_kc_loc e;
        char idx[24];
        snprintf(idx, sizeof idx, "%zu", i);
        mw_kc_sub(&e, &l, idx);
        const json_t *mi = json_array_get(metrics, i);
        MW_TRY(metric_of(&e, mi, ls->kind, &ml.kind[i]));
        if (json_is_string(mi) &&
            (!strcmp(json_string_value(mi), "accuracy") || !strcmp(json_string_value(mi), "acc")))
            by_shape |= 1u << i;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(mw_metric_key(ml.kind[j]), mw_metric_key(ml.kind[i])))
                return mw_kc_bad(&e, NULL,
                                 "a second %s metric (entry %zu is one); each is reported once",
                                 mw_metric_label(ml.kind[i]), j);
        ml.n = (int)i + 1;
    }
    if (ml.n > 0)
        ls->metrics = ml, ls->by_shape = by_shape;
    return MW_OK;
}

mw_status mw_keras_weighted_metrics_from_json(mw_loss *ls, const json_t *wm, const char *where)
{
    if (!wm || json_is_null(wm) || (json_is_array(wm) && !json_array_size(wm)))
        return MW_OK;
    if (ls->metrics.n > 0) {
        char *text = json_dumps(wm, JSON_COMPACT | JSON_ENCODE_ANY);
        mw_status rc = mw_err(MW_EUNSUPPORTED,
                              "%s: %.200s beside metrics: metrics and weighted_metrics both "
                              "given; mwtrain reports one list of metrics: compile with one of "
                              "them",
                              where, text ? text : "a list");
        free(text);
        return rc;
    }
    mw_loss t = *ls;
    MW_TRY(mw_keras_metrics_from_json(&t, wm, where));
    for (int i = 0; i < t.metrics.n; i++)
        if (t.metrics.kind[i] == MW_METRIC_AUC)
            return mw_err(MW_EUNSUPPORTED,
                          "%s: AUC weighted by sample weights is not supported; supported: "
                          "the accuracies, MAE, MSE and RMSE",
                          where);
    *ls = t;
    ls->weighted_metrics = 1;
    return MW_OK;
}

/* A float32 value as the shortest decimal that reads back as the same float32 (0.2f as 0.2,
 * not 0.20000000298023224): what the user wrote, for Keras' config. */
static json_t *short_real(float f)
{
    char buf[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        if ((float)strtod(buf, NULL) == f)
            break;
    }
    return json_real(strtod(buf, NULL));
}

json_t *mw_keras_loss_to_json(const mw_loss *ls)
{
    const mw_loss_ops *row = mw_loss_row(ls->kind);
    json_t *cfg =
        json_pack("{s:s, s:s}", "name", row->keras_name, "reduction", "sum_over_batch_size");
    for (int i = 0; cfg && i < 6 && row->keys[i]; i++) {
        const char *k = row->keys[i];
        json_t *v = !strcmp(k, "from_logits")                      ? json_boolean(ls->d.from_logits)
                    : !strcmp(k, "label_smoothing")                ? short_real(ls->d.smoothing)
                    : !strcmp(k, "axis")                           ? json_integer(-1)
                    : !strcmp(k, "delta")                          ? short_real(ls->d.delta)
                    : !strcmp(k, "gamma")                          ? short_real(ls->d.gamma)
                    : !strcmp(k, "alpha")                          ? short_real(ls->d.alpha)
                    : !strcmp(k, "apply_class_balancing")          ? json_boolean(ls->d.balanced)
                    : !strcmp(k, "ignore_class") && ls->has_ignore ? json_integer(ls->ignore_class)
                                                                   : json_null();
        json_object_set_new(cfg, k, v);
    }
    return json_pack("{s:s, s:s, s:o, s:n}", "module", "keras.losses", "class_name", row->keras,
                     "config", cfg, "registered_name");
}

json_t *mw_keras_metrics_to_json(const mw_loss *ls, int width)
{
    const mw_metric_list ml = mw_loss_metrics(ls);
    mw_loss shaped = *ls; /* what Keras' "accuracy" would be here */
    shaped.metrics.n = 1, shaped.by_shape = 1;
    mw_loss_accuracy_by_shape(&shaped, width);
    static const char *const names[] = {
        [MW_METRIC_SPARSE_ACC] = "sparse_categorical_accuracy",
        [MW_METRIC_CAT_ACC] = "categorical_accuracy",
        [MW_METRIC_BIN_ACC] = "binary_accuracy",
        [MW_METRIC_MAE] = "mae",
        [MW_METRIC_MSE] = "mse",
        [MW_METRIC_RMSE] = "root_mean_squared_error",
        [MW_METRIC_AUC] = "auc",
    };
    _Static_assert(sizeof names / sizeof *names == MW_METRIC_AUC + 1, "a name per metric");
    json_t *list = json_array();
    for (int i = 0; list && i < ml.n; i++) {
        const mw_metric_kind m = ml.kind[i];
        const char *name = m == shaped.metrics.kind[0] ? "accuracy"
                           : names[m]                  ? names[m]
                                                       : "accuracy";
        json_array_append_new(list, json_string(name));
    }
    return list;
}

mw_status mw_keras_source_set_loss(mw_model *m)
{
    if (!m->source)
        return MW_OK;
    json_t *root = json_loadb(m->source, m->source_nbytes, 0, NULL);
    if (!json_is_object(root)) { /* it was read as a model: never */
        json_decref(root);
        return MW_OK;
    }
    json_t *cc = json_object_get(root, "compile_config");
    if (!json_is_object(cc)) {
        cc = json_object();
        json_object_set_new(root, "compile_config", cc);
    }
    json_object_set_new(cc, "loss", mw_keras_loss_to_json(&m->loss));
    json_t *list = mw_keras_metrics_to_json(&m->loss, m->nclasses);
    json_object_set_new(cc, m->loss.weighted_metrics ? "weighted_metrics" : "metrics", list);
    if (m->loss.weighted_metrics)
        json_object_set_new(cc, "metrics", json_null());
    return mw_keras_source_replace(m, root);
}

mw_status mw_keras_source_replace(mw_model *m, json_t *root)
{
    char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text)
        return mw_err(MW_ENOMEM, "the model's description: out of memory");
    free(m->source);
    m->source = text;
    m->source_nbytes = strlen(text);
    return MW_OK;
}

mw_status mw_keras_source_loss(const char *text, mw_loss *ls, const char *where, int *found)
{
    *found = 0;
    json_t *root = json_loads(text, 0, NULL);
    const json_t *cc = json_object_get(root, "compile_config");
    const json_t *loss = json_object_get(cc, "loss");
    mw_status rc = MW_OK;
    mw_loss t = *ls;
    if (loss && !json_is_null(loss)) {
        char w[600];
        snprintf(w, sizeof w, "%s: compile_config.loss", where);
        t.metrics.n = 0, t.by_shape = 0;
        rc = mw_keras_loss_from_json(&t, loss, w);
        snprintf(w, sizeof w, "%s: compile_config.metrics", where);
        if (rc == MW_OK)
            rc = mw_keras_metrics_from_json(&t, json_object_get(cc, "metrics"), w);
        snprintf(w, sizeof w, "%s: compile_config.weighted_metrics", where);
        t.weighted_metrics = 0;
        if (rc == MW_OK)
            rc =
                mw_keras_weighted_metrics_from_json(&t, json_object_get(cc, "weighted_metrics"), w);
        if (rc == MW_OK)
            *ls = t, *found = 1;
    }
    json_decref(root);
    return rc;
}

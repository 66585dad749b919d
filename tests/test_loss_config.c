/* Unit tests for Keras loss and metric configs (worker/keras/keras_loss.h, compile.h): good
 * configs in Keras 3, Keras 2, class-name and short-name form with every field landing where
 * it belongs; each bad config one error naming the source and the key, with the loss left
 * alone; the metrics list (Keras' "accuracy" by the shapes); the way back to JSON and through
 * a model's description; and the rule for --loss with --loss-config. The numbers the losses
 * compute are checked against real Keras in the keras suite (tests/keras/loss_e2e.py) and
 * the kernels by finite differences (tests/test_loss.c). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"
#include "tests/util.h"
#include "worker/keras/compile.h"
#include "worker/keras/keras_loss.h"
#include "worker/model/loss.h"
#include "worker/opts.h"

static mw_status parse(mw_loss *ls, const char *text, const char *where)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    assert_non_null(j);
    mw_status rc = mw_keras_loss_from_json(ls, j, where);
    json_decref(j);
    return rc;
}

/* The first metric reported. */
static mw_metric_kind first_metric(const mw_loss *ls)
{
    return mw_loss_metrics(ls).kind[0];
}

static void test_good_configs(void **state)
{
    (void)state;
    mw_loss ls;
    mw_loss_default(&ls);
    assert_int_equal(parse(&ls, "\"mse\"", "x"), MW_OK);
    assert_int_equal(ls.kind, MW_LOSS_MSE);
    assert_int_equal(first_metric(&ls), MW_METRIC_MAE); /* a regression loss's default */
    assert_int_equal(parse(&ls, "\"BinaryCrossentropy\"", "x"), MW_OK);
    assert_int_equal(ls.kind, MW_LOSS_BCE);
    assert_int_equal(ls.d.from_logits, 0); /* Keras' default */
    assert_int_equal(mw_loss_wants(&ls), MW_LOSS_OUT_SIGMOID);
    assert_int_equal(parse(&ls,
                           "{\"module\": \"keras.losses\", \"class_name\": "
                           "\"BinaryFocalCrossentropy\", \"config\": {\"name\": \"bfc\", "
                           "\"reduction\": \"sum_over_batch_size\", \"from_logits\": true, "
                           "\"label_smoothing\": 0.1, \"axis\": -1, \"apply_class_balancing\": "
                           "true, \"alpha\": 0.3, \"gamma\": 1.5, \"dtype\": null}, "
                           "\"registered_name\": null}",
                           "x"),
                     MW_OK);
    assert_int_equal(ls.kind, MW_LOSS_FOCAL);
    assert_int_equal(ls.d.kind, MW_DLOSS_FOCAL);
    assert_true(ls.d.from_logits && ls.d.balanced);
    assert_true(ls.d.smoothing == 0.1f && ls.d.alpha == 0.3f && ls.d.gamma == 1.5f);
    assert_int_equal(mw_loss_wants(&ls), MW_LOSS_OUT_ANY);
    /* Keras 2's shape; Huber's delta when the JSON has it */
    assert_int_equal(
        parse(&ls,
              "{\"class_name\": \"Huber\", \"config\": {\"delta\": 0.5, \"reduction\": "
              "\"auto\"}}",
              "x"),
        MW_OK);
    assert_int_equal(ls.kind, MW_LOSS_HUBER);
    assert_true(ls.d.delta == 0.5f);
    assert_int_equal(parse(&ls, "{\"class_name\": \"CategoricalCrossentropy\"}", "x"), MW_OK);
    assert_int_equal(mw_loss_wants(&ls), MW_LOSS_OUT_SOFTMAX);
    assert_int_equal(mw_loss_target_bytes(&ls, 10), 40);
    assert_int_equal(parse(&ls, "\"sparse_categorical_crossentropy\"", "x"), MW_OK);
    assert_int_equal(mw_loss_target_bytes(&ls, 10), 4);
}

/* Each bad config: the status, the source and the key in the message, ls unchanged. */
static void test_bad_configs(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        mw_status rc;
        const char *sub1, *sub2;
    } cases[] = {
        {"\"poisson\"", MW_ECONFIG, "src: loss 'poisson' is not supported", "MeanSquaredError"},
        {"{\"class_name\": \"Poisson\"}", MW_ECONFIG, "src: class_name:", "LogCosh"},
        {"{\"class_name\": \"BinaryCrossentropy\", \"config\": {\"foo\": 1}}", MW_ECONFIG,
         "src: config.foo: unknown argument of BinaryCrossentropy", "label_smoothing"},
        {"{\"class_name\": \"MeanSquaredError\", \"config\": {\"from_logits\": true}}", MW_ECONFIG,
         "config.from_logits: unknown argument of MeanSquaredError", "reduction"},
        {"{\"class_name\": \"BinaryCrossentropy\", \"config\": {\"from_logits\": 1}}", MW_ECONFIG,
         "config.from_logits: expected true or false", "1"},
        {"{\"class_name\": \"BinaryCrossentropy\", \"config\": {\"label_smoothing\": 1.5}}",
         MW_ECONFIG, "config.label_smoothing: expected a number in [0, 1]", "1.5"},
        {"{\"class_name\": \"Huber\", \"config\": {\"delta\": 0}}", MW_ECONFIG,
         "config.delta: expected a number > 0", "0"},
        {"{\"class_name\": \"MeanSquaredError\", \"config\": {\"reduction\": \"sum\"}}", MW_ECONFIG,
         "config.reduction: expected \"sum_over_batch_size\"", "mean"},
        {"{\"class_name\": \"CategoricalCrossentropy\", \"config\": {\"axis\": 1}}", MW_ECONFIG,
         "config.axis: expected -1", "last axis"},
        {"{\"class_name\": \"SparseCategoricalCrossentropy\", \"config\": {\"ignore_class\": "
         "-1}}",
         MW_ECONFIG, "config.ignore_class: expected null or a label >= 0", "such as 255"},
        {"{\"class_name\": \"SparseCategoricalCrossentropy\", \"config\": {\"ignore_class\": "
         "\"pad\"}}",
         MW_ECONFIG, "config.ignore_class: expected null or a label >= 0", NULL},
        {"{\"class_name\": \"CategoricalCrossentropy\", \"config\": {\"ignore_class\": 0}}",
         MW_ECONFIG, "ignore_class", NULL},
        {"{\"module\": \"keras.optimizers\", \"class_name\": \"Huber\"}", MW_ECONFIG,
         "src: module: expected \"keras.losses\"", "keras.optimizers"},
        {"[1]", MW_ECONFIG, "src: expected an object", "class_name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mw_loss ls, before;
        mw_err_clear(); /* each case's own first error */
        mw_loss_default(&ls);
        before = ls;
        json_t *j = json_loads(cases[i].text, JSON_DECODE_ANY, NULL);
        assert_non_null(j);
        mw_status rc = mw_keras_loss_from_json(&ls, j, "src");
        json_decref(j);
        char who[32];
        snprintf(who, sizeof who, "case %zu", i);
        if (!mw_test_err_matches(who, rc, cases[i].rc,
                                 (const char *const[]){cases[i].sub1, cases[i].sub2, NULL}))
            fail_msg("%s: %s", who, cases[i].text);
        assert_memory_equal(&ls, &before, sizeof ls);
    }
}

static mw_status metrics(mw_loss *ls, const char *text)
{
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(j);
    mw_status rc = mw_keras_metrics_from_json(ls, j, "m");
    json_decref(j);
    return rc;
}

/* The first metric; "accuracy" by the shapes, as Keras' compile_utils.get_metric. */
static void test_metrics(void **state)
{
    (void)state;
    mw_loss ls;
    assert_int_equal(parse(&ls, "\"binary_crossentropy\"", "x"), MW_OK);
    assert_int_equal(metrics(&ls, "[\"accuracy\", \"mae\"]"), MW_OK);
    mw_loss_accuracy_by_shape(&ls, 1);
    assert_int_equal(first_metric(&ls), MW_METRIC_BIN_ACC);
    mw_loss_accuracy_by_shape(&ls, 3); /* multi-hot: Keras takes categorical accuracy */
    assert_int_equal(first_metric(&ls), MW_METRIC_CAT_ACC);
    assert_int_equal(parse(&ls, "\"mse\"", "x"), MW_OK);
    ls.metrics.n = 0, ls.by_shape = 0;
    assert_int_equal(
        metrics(&ls, "[{\"module\": \"keras.metrics\", \"class_name\": \"RootMeanSquaredError\", "
                     "\"config\": {\"name\": \"root_mean_squared_error\", \"dtype\": "
                     "\"float32\"}, \"registered_name\": null}]"),
        MW_OK);
    assert_int_equal(first_metric(&ls), MW_METRIC_RMSE);
    assert_string_equal(mw_metric_label(MW_METRIC_RMSE), "RMSE");
    double sums[MW_SUMS] = {0};
    sums[MW_SUM_COUNT] = 2.0, sums[MW_SUM_METRIC(0)] = 8.0;
    const mw_metric_list rmse = mw_loss_metrics(&ls);
    assert_true(mw_metrics_value(&rmse, 0, sums) == 2.0);
    assert_int_equal(metrics(&ls, "[]"), MW_OK); /* keeps what it had */
    assert_int_equal(first_metric(&ls), MW_METRIC_RMSE);
    mw_err_clear();
    expect_err(metrics(&ls, "[\"auc\"]"), MW_ECONFIG, "m: 0: metric 'auc' is not one",
               "mae, mse or rmse");
    mw_err_clear();
    expect_err(metrics(&ls, "\"mae\""), MW_ECONFIG, "m: expected a list of metrics");
    assert_int_equal(parse(&ls, "\"sparse_categorical_crossentropy\"", "x"), MW_OK);
    mw_err_clear();
    expect_err(metrics(&ls, "[\"mae\"]"), MW_ECONFIG, "metric 'mae'",
               "beside SparseCategoricalCrossentropy", "sparse_categorical_accuracy");
    mw_err_clear();
    expect_err(metrics(&ls, "[{\"class_name\": \"BinaryAccuracy\", \"config\": {\"threshold\": "
                            "0.7}}]"),
               MW_ECONFIG, "config.threshold: expected 0.5");
}

/* Several metrics, in compile_config's order, and what is refused of a list. */
static void test_metric_list(void **state)
{
    (void)state;
    mw_loss ls;
    assert_int_equal(parse(&ls, "\"binary_crossentropy\"", "x"), MW_OK);
    assert_int_equal(
        metrics(&ls, "[\"mse\", \"accuracy\", {\"module\": \"keras.metrics\", \"class_name\": "
                     "\"AUC\", \"config\": {\"name\": \"auc\", \"num_thresholds\": 200, "
                     "\"curve\": \"ROC\", \"summation_method\": \"interpolation\", "
                     "\"multi_label\": false, \"num_labels\": null, \"label_weights\": null, "
                     "\"from_logits\": false}, \"registered_name\": null}, \"rmse\"]"),
        MW_OK);
    mw_loss_accuracy_by_shape(&ls, 1);
    mw_metric_list ml = mw_loss_metrics(&ls);
    assert_int_equal(ml.n, 4);
    assert_int_equal(ml.kind[0], MW_METRIC_MSE);
    assert_int_equal(ml.kind[1], MW_METRIC_BIN_ACC);
    assert_int_equal(ml.kind[2], MW_METRIC_AUC);
    assert_int_equal(ml.kind[3], MW_METRIC_RMSE);
    assert_int_equal(mw_sums_len(&ml), MW_SUMS); /* an AUC: its buckets too */
    /* the way out: Keras' names, "accuracy" where Keras' rule gives that metric */
    json_t *out = mw_keras_metrics_to_json(&ls, 1);
    char *text = json_dumps(out, JSON_COMPACT);
    assert_string_equal(text, "[\"mse\",\"accuracy\",\"auc\",\"root_mean_squared_error\"]");
    free(text);
    json_decref(out);
    const mw_metric_list two = {2, {MW_METRIC_MAE, MW_METRIC_RMSE}, 1, 0, 0};
    assert_int_equal(mw_sums_len(&two), MW_SUM_METRIC(2)); /* no AUC: no buckets */
    const struct {
        const char *text, *sub1, *sub2;
    } bad[] = {
        {"[\"mae\", \"mae\"]", "m: 1: a second MAE metric", "entry 0"},
        {"[\"accuracy\", \"binary_accuracy\"]", "m: 1: a second Accuracy metric", "entry 0"},
        {"[\"mae\", \"mse\", \"rmse\", \"auc\", \"accuracy\"]", "m: 5 metrics", "at most 4"},
        {"[\"mae\", {\"class_name\": \"AUC\", \"config\": {\"num_thresholds\": 100}}]",
         "m: 1.config.num_thresholds: expected 200", "default AUC"},
        {"[{\"class_name\": \"AUC\", \"config\": {\"curve\": \"PR\"}}]",
         "m: 0.config.curve: expected \"ROC\"", NULL},
        {"[{\"class_name\": \"AUC\", \"config\": {\"multi_label\": true}}]",
         "m: 0.config.multi_label: expected false", NULL},
        {"[\"mae\", \"precision\"]", "m: 1: metric 'precision' is not one", "auc"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mw_loss before = ls;
        mw_err_clear();
        char who[32];
        snprintf(who, sizeof who, "list %zu", i);
        if (!mw_test_err_matches(who, metrics(&ls, bad[i].text), MW_ECONFIG,
                                 (const char *const[]){bad[i].sub1, bad[i].sub2, NULL}))
            fail_msg("%s: %s", who, bad[i].text);
        assert_memory_equal(&ls, &before, sizeof ls); /* unchanged on failure */
    }
    /* AUC is a classifier's: refused beside a sparse loss and a regression */
    assert_int_equal(parse(&ls, "\"sparse_categorical_crossentropy\"", "x"), MW_OK);
    mw_err_clear();
    expect_err(metrics(&ls, "[\"accuracy\", \"auc\"]"), MW_ECONFIG, "m: 1: metric 'auc'",
               "beside SparseCategoricalCrossentropy");
}

/* Keras' AUC.result from the bucket counts: separated outputs give 1, a constant output 0.5,
 * reversed ones 0; a mixed case against the trapezoids worked by hand. */
static void test_auc_value(void **state)
{
    (void)state;
    const mw_metric_list ml = {2, {MW_METRIC_BIN_ACC, MW_METRIC_AUC}, 1, 0, 0};
    const struct {
        float q[4], y[4];
        double want;
    } cases[] = {
        {{0.9f, 0.8f, 0.2f, 0.1f}, {1, 1, 0, 0}, 1.0},
        {{0.5f, 0.5f, 0.5f, 0.5f}, {1, 0, 1, 0}, 0.5},
        {{0.1f, 0.2f, 0.8f, 0.9f}, {1, 1, 0, 0}, 0.0},
        /* positives at 0.9 and 0.3, negatives at 0.6 and 0.1: ranks give 3 of 4 pairs */
        {{0.9f, 0.3f, 0.6f, 0.1f}, {1, 1, 0, 0}, 0.75},
        /* outside [0, 1] and NaN are clipped (NaN as 0): 2 > 1 > 0 ~ -1 */
        {{2.0f, -1.0f, 0.5f, NAN}, {1, 0, 1, 0}, 1.0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double acc[MW_SUMS] = {0};
        mw_metrics_add_host(&ml, acc, cases[c].q, cases[c].y, sizeof(float), NULL, NULL, 4, 1);
        acc[MW_SUM_COUNT] = 4;
        double pos = 0, neg = 0;
        for (int j = 0; j < MW_AUC_THRESHOLDS; j++)
            pos += acc[MW_SUM_AUC_POS + j], neg += acc[MW_SUM_AUC_NEG + j];
        assert_true(pos == 2 && neg == 2);
        const double got = mw_metrics_value(&ml, 1, acc);
        if (fabs(got - cases[c].want) > 1e-12)
            fail_msg("AUC case %zu: %.17g, expected %.17g", c, got, cases[c].want);
    }
}

/* to_json then from_json gives the same loss, for every kind. */
static void test_round_trip(void **state)
{
    (void)state;
    for (int k = 0; k < MW_LOSS_KINDS; k++) {
        mw_loss a, b;
        assert_int_equal(parse(&a, "\"mse\"", "x"), MW_OK);
        json_t *name = json_string(mw_loss_row((mw_loss_kind)k)->keras);
        assert_int_equal(mw_keras_loss_from_json(&a, name, "x"), MW_OK);
        json_decref(name);
        a.d.from_logits = mw_loss_row(a.kind)->has_logits;
        if (a.kind == MW_LOSS_BCE || a.kind == MW_LOSS_CCE || a.kind == MW_LOSS_FOCAL)
            a.d.smoothing = 0.25f;
        if (a.kind == MW_LOSS_FOCAL)
            a.d.gamma = 3.0f, a.d.alpha = 0.75f, a.d.balanced = 1;
        if (a.kind == MW_LOSS_HUBER)
            a.d.delta = 0.125f;
        if (a.kind == MW_LOSS_SPARSE_XENT)
            a.has_ignore = 1, a.ignore_class = 255;
        json_t *j = mw_keras_loss_to_json(&a);
        assert_non_null(j);
        b = a;
        b.d.smoothing = 0.5f, b.d.delta = 9.0f; /* must be overwritten */
        assert_int_equal(mw_keras_loss_from_json(&b, j, "round trip"), MW_OK);
        json_decref(j);
        assert_int_equal(b.kind, a.kind);
        assert_memory_equal(&b.d, &a.d, sizeof a.d);
        assert_int_equal(b.has_ignore, a.has_ignore);
        assert_int_equal(b.ignore_class, a.ignore_class);
    }
}

/* Keras gets the values as written: 0.1, not float32's 0.10000000149011612. */
static void test_short_values(void **state)
{
    (void)state;
    mw_loss ls;
    assert_int_equal(parse(&ls,
                           "{\"class_name\": \"BinaryFocalCrossentropy\", \"config\": "
                           "{\"label_smoothing\": 0.1, \"gamma\": 1.7, \"alpha\": 0.3}}",
                           "x"),
                     MW_OK);
    json_t *j = mw_keras_loss_to_json(&ls);
    const json_t *cfg = json_object_get(j, "config");
    assert_true(json_real_value(json_object_get(cfg, "label_smoothing")) == 0.1);
    assert_true(json_real_value(json_object_get(cfg, "gamma")) == 1.7);
    assert_true(json_real_value(json_object_get(cfg, "alpha")) == 0.3);
    json_decref(j);
}

/* The loss put into a model's description comes back out of it; a text without one leaves
 * the loss alone. */
static void test_source(void **state)
{
    (void)state;
    mw_model m;
    mw_model_init(&m, 1, 1, 3);
    const char *text = "{\"class_name\": \"Sequential\", \"config\": {\"layers\": []}}";
    m.source = strdup(text);
    m.source_nbytes = strlen(text);
    m.nclasses = 1;
    assert_int_equal(parse(&m.loss, "{\"class_name\": \"Huber\", \"config\": {\"delta\": 2}}", "x"),
                     MW_OK);
    m.loss.metrics = (mw_metric_list){1, {MW_METRIC_RMSE}, 1, 0, 0};
    assert_int_equal(mw_keras_source_set_loss(&m), MW_OK);
    mw_loss got;
    mw_loss_default(&got);
    int found = 0;
    assert_int_equal(mw_keras_source_loss(m.source, &got, "ckpt", &found), MW_OK);
    assert_int_equal(found, 1);
    assert_int_equal(got.kind, MW_LOSS_HUBER);
    assert_true(got.d.delta == 2.0f);
    assert_int_equal(first_metric(&got), MW_METRIC_RMSE);
    mw_loss none;
    mw_loss_default(&none);
    assert_int_equal(mw_keras_source_loss(text, &none, "ckpt", &found), MW_OK);
    assert_int_equal(found, 0);
    assert_int_equal(none.kind, MW_LOSS_SPARSE_XENT);
    mw_model_free(&m);
}

/* --loss and --loss-config: one way; a file read as --optimizer-config is. */
static void test_resolve(void **state)
{
    (void)state;
    mw_train_opts o;
    mw_train_opts_default(&o);
    o.loss_name = "mse", o.loss_config = "l.json";
    mw_err_clear();
    expect_err(mw_loss_resolve(&o), MW_EINVAL, "--loss mse and --loss-config l.json",
               "give the loss one way");
    mw_train_opts_default(&o);
    o.loss_name = "huber";
    assert_int_equal(mw_loss_resolve(&o), MW_OK);
    assert_int_equal(o.loss.kind, MW_LOSS_HUBER);
    assert_string_equal(o.loss_from, "--loss huber");
    char path[] = "/tmp/mwtest-loss-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char bad[] = "{\"class_name\": \"Huber\",";
    assert_int_equal(write(fd, bad, sizeof bad - 1), (ssize_t)(sizeof bad - 1));
    close(fd);
    mw_train_opts_default(&o);
    o.loss_config = path;
    mw_err_clear();
    expect_err(mw_loss_resolve(&o), MW_ECONFIG, path, "line 1",
               "expected the JSON of keras.losses.serialize");
    unlink(path);
    mw_train_opts_default(&o);
    assert_int_equal(mw_loss_resolve(&o), MW_OK); /* nothing given: the default */
    assert_int_equal(o.loss.kind, MW_LOSS_SPARSE_XENT);
    assert_string_equal(o.loss_from, "");
    /* --metrics: Keras' names in order over the loss's default, spaces and empty entries
     * ignored, each checked against the loss */
    mw_train_opts_default(&o);
    o.loss_name = "binary_crossentropy", o.metrics = " auc, accuracy,,mse ";
    assert_int_equal(mw_loss_resolve(&o), MW_OK);
    assert_int_equal(mw_metrics_resolve(&o), MW_OK);
    mw_loss_accuracy_by_shape(&o.loss, 1);
    const mw_metric_list ml = mw_loss_metrics(&o.loss);
    assert_int_equal(ml.n, 3);
    assert_true(ml.kind[0] == MW_METRIC_AUC && ml.kind[1] == MW_METRIC_BIN_ACC &&
                ml.kind[2] == MW_METRIC_MSE);
    o.metrics = "mae,precision";
    mw_err_clear();
    expect_err(mw_metrics_resolve(&o), MW_ECONFIG, "--metrics: 1: metric 'precision' is not one",
               "beside BinaryCrossentropy");
    mw_train_opts_default(&o);
    o.metrics = "auc"; /* beside the default sparse loss */
    mw_err_clear();
    expect_err(mw_metrics_resolve(&o), MW_ECONFIG, "--metrics: 0: metric 'auc'",
               "beside SparseCategoricalCrossentropy");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_configs), cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_metrics),      cmocka_unit_test(test_metric_list),
        cmocka_unit_test(test_auc_value),    cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_source),       cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_short_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

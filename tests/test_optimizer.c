/* Unit tests for Keras optimizer configs (worker/keras/optimizer.h): a table of bad configs read
 * from tests/data/optimizer/<case>/ (each must fail with its message and leave the options
 * alone), good configs in Keras 3, Keras 2 and name form with every field landing where it
 * belongs, and the command line's rule for --optimizer-config with the shorthand flags. The
 * numbers the rules and schedules compute are checked against real Keras in the keras suite
 * (tests/keras/optim_parity.py). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "tests/util.h"
#include "worker/cli.h"
#include "worker/keras/optimizer.h"
#include "worker/replicas/replicas.h"
#include "worker/schedule.h"

/* A bad config, read from a file as --optimizer-config reads it: MW_ECONFIG (MW_EUNSUPPORTED
 * for features mwtrain lacks), a message that starts with the file's path, and the options
 * untouched. */
static int bad_config(void *ctx, const char *name, const char *text, size_t n)
{
    const char *dir = ctx;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(text, 1, n, f) != n) {
        fprintf(stderr, "case %s: cannot write %s\n", name, path);
        if (f)
            fclose(f);
        return 0;
    }
    fclose(f);
    mw_train_opts o, before;
    mw_train_opts_default(&o);
    memcpy(&before, &o, sizeof o); /* padding included, for the memcmp below */
    mw_status rc = mw_optimizer_load(&o, path);
    int ok = (rc == MW_ECONFIG || rc == MW_EUNSUPPORTED) && mw_err_status() == rc &&
             strncmp(mw_err_msg(), path, strlen(path)) == 0 && memcmp(&o, &before, sizeof o) == 0;
    if (!ok)
        fprintf(stderr, "case %s: got %s \"%s\"%s; want MW_ECONFIG \"%s: ...\", options alone\n",
                name, mw_status_str(rc), mw_err_msg(),
                memcmp(&o, &before, sizeof o) ? " and changed options" : "", path);
    return ok;
}

static void test_bad_configs(void **state)
{
    (void)state;
    char *dir = strdup(mw_test_tmpdir("optimizer"));
    assert_true(mw_test_cases("tests/data/optimizer", bad_config, dir) >= 38);
    free(dir);
}

static mw_status from_text(mw_train_opts *o, const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    assert_non_null(j);
    mw_status rc = mw_optimizer_from_json(o, j, "test");
    json_decref(j);
    return rc;
}

/* Keras 3's serialize(RMSprop(...)) with a CosineDecay: every field in its place. */
static void test_keras3_rmsprop_cosine(void **state)
{
    (void)state;
    mw_train_opts o;
    mw_train_opts_default(&o);
    assert_int_equal(
        from_text(&o, "{\"module\": \"keras.optimizers\", \"class_name\": \"RMSprop\", \"config\": "
                      "{\"name\": \"rmsprop\", \"learning_rate\": {\"module\": "
                      "\"keras.optimizers.schedules\", \"class_name\": \"CosineDecay\", "
                      "\"config\": {\"initial_learning_rate\": 0.5, \"decay_steps\": 1000, "
                      "\"alpha\": 0.25, \"name\": \"CosineDecay\", \"warmup_target\": 2.0, "
                      "\"warmup_steps\": 100}, \"registered_name\": null}, \"weight_decay\": "
                      "0.125, \"clipnorm\": null, \"global_clipnorm\": 3.0, \"clipvalue\": "
                      "null, \"use_ema\": false, \"ema_momentum\": 0.99, "
                      "\"ema_overwrite_frequency\": null, \"loss_scale_factor\": null, "
                      "\"gradient_accumulation_steps\": null, \"rho\": 0.75, \"momentum\": 0.5, "
                      "\"epsilon\": 0.001, \"centered\": true}, \"registered_name\": null}"),
        MW_OK);
    assert_int_equal(o.optimizer, MW_OPT_RMSPROP);
    assert_true(o.rho == 0.75 && o.momentum == 0.5 && o.epsilon == 0.001 && o.centered);
    assert_true(o.weight_decay == 0.125 && o.global_clipnorm == 3.0);
    assert_true(o.clipnorm == 0 && o.clipvalue == 0);
    assert_int_equal(o.schedule.kind, MW_SCHED_COSINE);
    assert_true(o.schedule.initial == 0.5 && o.schedule.decay_steps == 1000);
    assert_true(o.schedule.alpha == 0.25 && o.schedule.warmup);
    assert_true(o.schedule.warmup_target == 2.0 && o.schedule.warmup_steps == 100);
    assert_true(o.learning_rate == 0.5); /* the schedule's rate at step 0 */
    assert_true(mw_optimizer_lr(&o, 0) == 0.5);
    assert_true(mw_optimizer_lr(&o, 100) == 2.0); /* the end of the warm-up */
    assert_int_equal(mw_optimizer_slots(&o), 3);
}

/* tf.keras's shape, and a bare name: Keras' defaults for what is left out. */
static void test_keras2_and_names(void **state)
{
    (void)state;
    mw_train_opts o;
    mw_train_opts_default(&o);
    o.momentum = 0.9; /* the shorthand's default must not leak into a config's SGD */
    assert_int_equal(from_text(&o, "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": "
                                   "0.25, \"nesterov\": true, \"decay\": 0.0, \"jit_compile\": "
                                   "true, \"is_legacy_optimizer\": false}}"),
                     MW_OK);
    assert_int_equal(o.optimizer, MW_OPT_SGD);
    assert_true(o.learning_rate == 0.25 && o.momentum == 0.0 && o.nesterov);
    assert_int_equal(o.schedule.kind, MW_SCHED_CONSTANT);
    assert_int_equal(from_text(&o, "\"adamw\""), MW_OK);
    assert_int_equal(o.optimizer, MW_OPT_ADAMW);
    assert_true(o.learning_rate == 0.001 && o.weight_decay == 0.004 && !o.nesterov);
    assert_true(o.beta1 == 0.9 && o.beta2 == 0.999 && o.epsilon == 1e-7);
    assert_int_equal(from_text(&o, "{\"class_name\": \"Adagrad\"}"), MW_OK);
    assert_int_equal(o.optimizer, MW_OPT_ADAGRAD);
    assert_true(o.initial_accumulator == 0.1 && o.weight_decay == 0.0);
    assert_int_equal(from_text(&o, "{\"class_name\": \"Adam\", \"config\": {\"amsgrad\": true}}"),
                     MW_OK);
    assert_int_equal(mw_optimizer_slots(&o), 3);
    /* Adagrad's accumulator starts at initial_accumulator_value, the others at zero */
    float s[3][4];
    memset(s, 0xff, sizeof s);
    assert_int_equal(from_text(&o, "{\"class_name\": \"Adagrad\", \"config\": "
                                   "{\"initial_accumulator_value\": 0.5}}"),
                     MW_OK);
    mw_optimizer_init_slots(&o, s[0], s[1], s[2], 4);
    for (int i = 0; i < 4; i++)
        assert_true(s[0][i] == 0.5f && s[1][i] == 0.0f && s[2][i] == 0.0f);
}

/* Keras 3's serialize(LossScaleOptimizer(SGD(0.05), initial_scale=2**40,
 * dynamic_growth_steps=3)), as Python printed it: the inner optimizer's fields and the
 * scaling's; a bare name inside works too, with Keras' defaults for the scaling. */
static void test_loss_scale_optimizer(void **state)
{
    (void)state;
    mw_train_opts o;
    mw_train_opts_default(&o);
    assert_true(o.loss_scale_initial == 32768.0 && o.loss_scale_growth == 2000);
    assert_int_equal(
        from_text(&o, "{\"module\": \"keras.optimizers\", \"class_name\": \"LossScaleOptimizer\", "
                      "\"config\": {\"name\": \"loss_scale_optimizer\", \"weight_decay\": null, "
                      "\"clipnorm\": null, \"global_clipnorm\": null, \"clipvalue\": null, "
                      "\"use_ema\": false, \"ema_momentum\": 0.99, \"ema_overwrite_frequency\": "
                      "null, \"loss_scale_factor\": null, \"gradient_accumulation_steps\": null, "
                      "\"inner_optimizer\": {\"module\": \"keras.optimizers\", \"class_name\": "
                      "\"SGD\", \"config\": {\"name\": \"SGD\", \"learning_rate\": "
                      "0.05000000074505806, \"momentum\": 0.0, \"nesterov\": false}, "
                      "\"registered_name\": null}, \"initial_scale\": 1099511627776.0, "
                      "\"dynamic_growth_steps\": 3}, \"registered_name\": null}"),
        MW_OK);
    assert_int_equal(o.optimizer, MW_OPT_SGD);
    assert_true(o.learning_rate == 0.05000000074505806 && o.momentum == 0.0);
    assert_true(o.loss_scale_initial == 0x1p40 && o.loss_scale_growth == 3);
    mw_train_opts_default(&o);
    assert_int_equal(from_text(&o, "{\"class_name\": \"LossScaleOptimizer\", \"config\": "
                                   "{\"inner_optimizer\": \"rmsprop\"}}"),
                     MW_OK);
    assert_int_equal(o.optimizer, MW_OPT_RMSPROP);
    assert_true(o.loss_scale_initial == 32768.0 && o.loss_scale_growth == 2000);
}

/* PiecewiseConstantDecay at and around its boundaries (Keras: values[i] while
 * boundaries[i-1] < step <= boundaries[i]); the numbers come from the config itself. */
static void test_piecewise_boundaries(void **state)
{
    (void)state;
    mw_train_opts o;
    mw_train_opts_default(&o);
    assert_int_equal(
        from_text(&o, "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": {\"class_name\": "
                      "\"PiecewiseConstantDecay\", \"config\": {\"boundaries\": [3, 7], "
                      "\"values\": [0.5, 0.25, 0.125]}}}}"),
        MW_OK);
    const double want[] = {0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.125, 0.125};
    for (long t = 0; t < 10; t++)
        assert_true(mw_optimizer_lr(&o, t) == want[t]);

    /* a boundary per epoch: 100 epochs of 938 steps (once refused above 64), and the most,
     * MW_SCHED_MAX_BOUNDARIES; one more is refused with the limit named */
    const int counts[] = {100, MW_SCHED_MAX_BOUNDARIES, MW_SCHED_MAX_BOUNDARIES + 1};
    for (int k = 0; k < 3; k++) {
        const int n = counts[k];
        size_t cap = 200 + (size_t)n * 48, len = 0;
        char *text = malloc(cap);
        len += (size_t)snprintf(text + len, cap - len,
                                "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": "
                                "{\"class_name\": \"PiecewiseConstantDecay\", \"config\": "
                                "{\"boundaries\": [");
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(text + len, cap - len, "%s%d", i ? ", " : "", 938 * (i + 1));
        len += (size_t)snprintf(text + len, cap - len, "], \"values\": [");
        for (int i = 0; i <= n; i++)
            len += (size_t)snprintf(text + len, cap - len, "%s%.17g", i ? ", " : "",
                                    1.0 / (double)(i + 1));
        snprintf(text + len, cap - len, "]}}}}");
        mw_train_opts_default(&o);
        mw_err_clear();
        const mw_status rc = from_text(&o, text);
        free(text);
        if (n > MW_SCHED_MAX_BOUNDARIES) {
            char want_msg[200];
            snprintf(want_msg, sizeof want_msg,
                     "config.learning_rate.config.boundaries: expected a list of 1 to %d step "
                     "numbers, got [938,1876,",
                     MW_SCHED_MAX_BOUNDARIES);
            expect_err(rc, MW_ECONFIG, want_msg);
            mw_err_clear();
            continue;
        }
        assert_int_equal(rc, MW_OK);
        assert_true(mw_optimizer_lr(&o, 0) == 1.0);
        assert_true(mw_optimizer_lr(&o, 938) == 1.0);                    /* step <= boundary 0 */
        assert_true(mw_optimizer_lr(&o, 939) == 1.0 / 2);                /* past it */
        assert_true(mw_optimizer_lr(&o, 938L * n + 1) == 1.0 / (n + 1)); /* past the last */
    }
}

/* The step counts for every optimizer (schedules follow it), and Adam's alpha is Keras':
 * lr sqrt(1 - b2^t) / (1 - b1^t) with t = iterations + 1. */
static void test_hyper_counts_steps(void **state)
{
    (void)state;
    mw_train_opts o;
    mw_train_opts_default(&o);
    o.optimizer = MW_OPT_SGD;
    long it = 0;
    mw_optim_hyper h;
    mw_optimizer_hyper(&o, &it, &h);
    mw_optimizer_hyper(&o, &it, &h);
    assert_int_equal(it, 2);
    assert_true(h.lr == (float)o.learning_rate && h.decay_lr == h.lr && h.gscale == 1.0f);
    o.optimizer = MW_OPT_ADAM;
    it = 4;
    mw_optimizer_hyper(&o, &it, &h);
    double want = 1e-3 * sqrt(1.0 - pow(0.999, 5)) / (1.0 - pow(0.9, 5));
    assert_true(fabs(h.lr - want) <= 1e-4 * want); /* in float32, as Keras: 0.999f != 0.999 */
    /* 1 - beta as Keras multiplies by it: Python's 1 - 0.9 rounded to float32, not 1.0f - 0.9f */
    assert_true(h.one_minus_beta1 == 0.1f && h.one_minus_beta2 == 0.001f);
    assert_true(h.one_minus_beta1 != 1.0f - 0.9f && h.one_minus_beta2 != 1.0f - 0.999f);
}

/* --optimizer-config with a shorthand flag is an error naming both, at parse; alone it is read
 * once argv is parsed (mw_optimizer_resolve: the parse opens no file). */
static void test_cli_conflict(void **state)
{
    (void)state;
    const char *dir = mw_test_tmpdir("optimizer_cli");
    char path[4096];
    snprintf(path, sizeof path, "%s/opt.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.01}}", f);
    fclose(f);
    mw_cli c;
    char *ok[] = {"mwtrain", "train", "--optimizer-config", path};
    assert_int_equal(mw_cli_parse(&c, 4, ok), MW_OK);
    assert_int_equal(c.train.optimizer, MW_OPT_ADAM);
    assert_int_equal(mw_optimizer_resolve(&c.train), MW_OK);
    assert_int_equal(c.train.optimizer, MW_OPT_RMSPROP);
    assert_true(c.train.learning_rate == 0.01 && c.train.momentum == 0.0);
    char *both[] = {"mwtrain", "train", "--learning-rate", "0.1", "--optimizer-config", path};
    expect_err(mw_cli_parse(&c, 6, both), MW_EINVAL, "--learning-rate and --optimizer-config",
               "give the optimizer one way");
    mw_err_clear();
    char *rms[] = {"mwtrain", "train", "--optimizer", "rmsprop"};
    assert_int_equal(mw_cli_parse(&c, 4, rms), MW_OK);
    assert_int_equal(mw_optimizer_resolve(&c.train), MW_OK);
    assert_true(c.train.momentum == 0.0); /* Keras' RMSprop default, not SGD's shorthand 0.9 */
    char *adamw[] = {"mwtrain", "train", "--optimizer", "adamw"};
    assert_int_equal(mw_cli_parse(&c, 4, adamw), MW_OK);
    assert_int_equal(mw_optimizer_resolve(&c.train), MW_OK);
    assert_true(c.train.weight_decay == 0.004);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_configs),          cmocka_unit_test(test_keras3_rmsprop_cosine),
        cmocka_unit_test(test_keras2_and_names),     cmocka_unit_test(test_loss_scale_optimizer),
        cmocka_unit_test(test_piecewise_boundaries), cmocka_unit_test(test_hyper_counts_steps),
        cmocka_unit_test(test_cli_conflict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

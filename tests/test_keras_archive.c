/* .keras archives and .weights.h5 (worker/keras/keras_archive.c, keras_h5.c, keras_vars.c).
 *
 * - Round trips: the tutorial CNN (folded activations, a Keras 2 source, so config.json is
 *   written from the layers) and a Keras 3 MLP written as .keras and as .weights.h5 and read
 *   back: the same model (mw_model_diff) and bitwise the same weights.
 * - Keras' snake-case keys of the weights (dense, dense_1, re_lu, max_pooling2d, ...), checked
 *   against the outputs of Keras' own naming.to_snake_case.
 * - A table of broken archives, tests/data/keras_archive/<case>/input.keras (made from a Keras
 *   archive by tests/keras/gen_bad_archives.py): each fails before training with the message
 *   in its `expected` file and MW_EDATA (or the status in its `status` file); `good` loads.
 * The oracle tests against real Keras are tests/keras/ (suite keras). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/util.h"
#include "worker/keras/keras.h"
#include "worker/keras/keras_archive.h"
#include "worker/keras/keras_h5.h"
#include "worker/keras/keras_vars.h"
#include "worker/model/diff.h"
#include "worker/model/weights.h"

static void check_rc(mw_status rc, const char *what)
{
    if (rc != MW_OK)
        fail_msg("%s: %s: %s", what, mw_status_str(rc), mw_err_msg());
}

static const char mlp_k3[] =
    "{\"module\": \"keras\", \"class_name\": \"Sequential\", \"config\": {\"name\": \"mlp\", "
    "\"layers\": [{\"module\": \"keras.layers\", \"class_name\": \"InputLayer\", \"config\": "
    "{\"batch_shape\": [null, 784], \"name\": \"in\"}}, {\"module\": \"keras.layers\", "
    "\"class_name\": \"Dense\", \"config\": {\"name\": \"hidden\", \"units\": 16, "
    "\"activation\": \"relu\"}}, {\"module\": \"keras.layers\", \"class_name\": \"Dense\", "
    "\"config\": {\"name\": \"top\", \"units\": 10, \"use_bias\": false}}, {\"module\": "
    "\"keras.layers\", \"class_name\": \"ReLU\", \"config\": {\"name\": \"r\"}}, {\"module\": "
    "\"keras.layers\", \"class_name\": \"Dense\", \"config\": {\"name\": \"out\", \"units\": "
    "10, \"activation\": \"softmax\"}}]}}";

/* a: the original (finalized, seeded); writes it both ways and reads both back. The arenas
 * are compared whole (tensors are aligned in them, with zero padding between). */
static void roundtrip(mw_model *a, const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/m.keras", dir);
    const mw_keras_optimizer adam = {"adam", 1e-3, 0.9, 0.9, 0.999, 1e-7, 0, NULL, NULL};
    check_rc(mw_keras_archive_write(a, a->params.data, &adam, path), "write");
    mw_model b;
    mw_keras_weights w;
    mw_keras_weights_init(&w);
    check_rc(mw_keras_model_load(&b, path, 0, 0, 0, 0, &w), "load");
    assert_non_null(w.h5);
    check_rc(mw_model_finalize(&b, 1), "finalize");
    mw_model_init_params(&b, 99); /* other values, then the archive's */
    check_rc(mw_keras_weights_apply(&w, &b, b.params.data), "apply");
    char what[512] = "";
    assert_int_equal(mw_model_diff(a, &b, what, sizeof what), 0);
    assert_int_equal(a->nparams, b.nparams);
    assert_int_equal(a->params.count, b.params.count);
    assert_memory_equal(a->params.data, b.params.data, a->params.count * sizeof(float));

    void *img = NULL;
    size_t n = 0;
    const mw_keras_optimizer sgd = {"sgd", 0.5, 0.9, 0, 0, 0, 3, a->params.data, NULL};
    check_rc(mw_keras_h5_write(a, a->params.data, &sgd, &img, &n, "h5"), "h5 write");
    memset(b.params.data, 0, b.params.count * sizeof(float));
    check_rc(mw_keras_h5_read(&b, b.params.data, img, n, "h5"), "h5 read");
    assert_memory_equal(a->params.data, b.params.data, a->params.count * sizeof(float));
    free(img);
    mw_keras_weights_free(&w);
    mw_model_free(&b);
}

static void test_roundtrip(void **state)
{
    mw_model a;
    check_rc(mw_keras_build_tutorial(&a, 28, 28, 1, 10), "tutorial");
    check_rc(mw_model_finalize(&a, 1), "finalize");
    mw_model_init_params(&a, 5);
    roundtrip(&a, *state);
    mw_model_free(&a);

    mw_err_clear();
    check_rc(mw_keras_load(&a, mlp_k3, strlen(mlp_k3), "mlp", 28, 28, 1, 10), "mlp");
    check_rc(mw_model_finalize(&a, 1), "finalize");
    mw_model_init_params(&a, 6);
    for (int l = 0; l < a.nlayers; l++) /* non-zero biases, so a lost bias shows */
        for (size_t i = 0; i < a.layers[l].b_count; i++)
            a.params.data[a.layers[l].b_off + i] = 0.001f * (float)(i + 1);
    roundtrip(&a, *state);
    /* its Keras 3 source passes through, with build and compile configs added */
    char *cfg = NULL;
    const mw_keras_optimizer adam = {"adam", 1e-3, 0.9, 0.9, 0.999, 1e-7, 0, NULL, NULL};
    check_rc(mw_keras_config_json(&a, &adam, &cfg), "config");
    expect_contains(cfg, "\"name\":\"hidden\"");
    expect_contains(cfg, "\"compile_config\"");
    expect_contains(cfg, "\"from_logits\":false"); /* it ends in softmax */
    free(cfg);
    mw_model_free(&a);
}

static void test_snake_case(void **state)
{
    (void)state;
    /* naming.to_snake_case of Keras 3.6.0 */
    static const char *const pairs[][2] = {
        {"Conv2D", "conv2d"},
        {"MaxPooling2D", "max_pooling2d"},
        {"ReLU", "re_lu"},
        {"BatchNormalization", "batch_normalization"},
        {"GlobalAveragePooling2D", "global_average_pooling2d"},
        {"InputLayer", "input_layer"},
        {"LeakyReLU", "leaky_re_lu"},
        {"PReLU", "p_re_lu"},
        {"ELU", "elu"},
        {"Conv2DTranspose", "conv2d_transpose"},
        {"ABcDe", "a_bc_de"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        char got[64];
        mw_keras_snake_case(pairs[i][0], got, sizeof got);
        assert_string_equal(got, pairs[i][1]);
    }
    /* keys count own layers of the same class; folded activations are not layers */
    mw_model m;
    mw_err_clear();
    check_rc(mw_keras_load(&m, mlp_k3, strlen(mlp_k3), "mlp", 28, 28, 1, 10), "mlp");
    const char *want[] = {"dense", NULL, "dense_1", "re_lu", "dense_2", NULL};
    assert_int_equal(m.nlayers, 6);
    for (int i = 0; i < m.nlayers; i++) {
        char key[64];
        assert_int_equal(mw_keras_layer_is_own(&m.layers[i]), want[i] != NULL);
        if (!want[i])
            continue;
        mw_keras_layer_key(&m, i, key, sizeof key);
        assert_string_equal(key, want[i]);
    }
    mw_model_free(&m);
}

/* One broken archive: it must fail (before training) with MW_EDATA or its `status`. */
static int run_case(const char *dir, const char *name, const char *input, size_t n)
{
    char path[1024], want[64] = "MW_EDATA";
    snprintf(path, sizeof path, "%s/%s/status", dir, name);
    size_t nst = 0;
    char *st = mw_test_read_file(path, &nst);
    if (st) {
        snprintf(want, sizeof want, "%.*s", (int)strcspn(st, "\r\n"), st);
        free(st);
    }
    mw_model m;
    mw_keras_weights w;
    mw_keras_weights_init(&w);
    mw_status rc = mw_keras_archive_load(&m, input, n, "input.keras", 0, 0, 0, 0, &w);
    if (rc == MW_OK && (rc = mw_model_finalize(&m, 1)) == MW_OK)
        rc = mw_keras_weights_apply(&w, &m, m.params.data);
    mw_keras_weights_free(&w);
    mw_model_free(&m);
    if (!strcmp(name, "good")) {
        if (rc != MW_OK)
            printf("case good: %s\n", mw_err_msg());
        return rc == MW_OK;
    }
    if (strcmp(mw_status_str(rc), want) != 0) {
        printf("case %s: status %s, expected %s (%s)\n", name, mw_status_str(rc), want,
               mw_err_msg());
        return 0;
    }
    return 1;
}

static void test_bad_archives(void **state)
{
    (void)state;
    char *root = mw_test_srcpath("tests/data/keras_archive");
    DIR *d = opendir(root);
    assert_non_null(d);
    int n = 0, failed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        size_t nbytes = 0;
        snprintf(path, sizeof path, "%s/%s/input.keras", root, e->d_name);
        char *input = mw_test_read_file(path, &nbytes);
        snprintf(path, sizeof path, "%s/%s/expected", root, e->d_name);
        size_t nexp = 0;
        char *exp = mw_test_read_file(path, &nexp);
        if (!input || (!exp && strcmp(e->d_name, "good") != 0)) {
            printf("case %s: no input.keras or no expected\n", e->d_name);
            failed++;
        } else {
            mw_err_clear();
            const int ok = run_case(root, e->d_name, input, nbytes);
            const char *msg = mw_err_msg();
            if (ok && exp) {
                exp[strcspn(exp, "\r\n")] = '\0';
                if (!strstr(msg, exp)) {
                    printf("case %s: message\n  %s\nexpected it to contain\n  %s\n", e->d_name, msg,
                           exp);
                    failed++;
                }
            } else if (!ok) {
                failed++;
            }
            n++;
        }
        free(input);
        free(exp);
    }
    closedir(d);
    free(root);
    printf("tests/data/keras_archive: %d cases, %d failed\n", n, failed);
    assert_true(n >= 15);
    assert_int_equal(failed, 0);
}

/* A file named .keras that is no zip is read as an archive (not as JSON). */
static void test_named_keras(void **state)
{
    char *path = mw_test_write_file(*state, "m.keras", "{}", 2);
    mw_model m;
    mw_err_clear();
    assert_int_equal(mw_keras_model_load(&m, path, 0, 0, 0, 0, NULL), MW_EDATA);
    expect_contains(mw_err_msg(), "m.keras: not a zip archive");
    mw_model_free(&m);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        mw_test_in_tmpdir(test_roundtrip),
        cmocka_unit_test(test_snake_case),
        cmocka_unit_test(test_bad_archives),
        mw_test_in_tmpdir(test_named_keras),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

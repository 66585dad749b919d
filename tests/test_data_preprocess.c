/* Tests for the input pipeline of Keras preprocessing layers (worker/data/preprocess.h) as the data
 * set applies it: a table of configs it refuses (status and the message parts: layer, field,
 * what is supported), the random draws (keyed by seed, epoch and example id only; in range;
 * flips about half the time), and batch assembly through a pipeline (uint8 pixels raw for a
 * rescaling pipeline, / 255 otherwise; random layers only with augment). What each layer
 * computes is checked against real Keras by tests/keras/test_preprocess.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "tests/util.h"
#include "worker/data/data.h"
#include "worker/data/preprocess.h"
#include "worker/keras/keras.h"
#include "worker/model/model.h"

#define INPUT_8x8x3                                                                                \
    "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 8, 8, 3]}}"
#define FLATTEN "{\"class_name\": \"Flatten\", \"config\": {\"name\": \"flatten\"}}"
#define DENSE "{\"class_name\": \"Dense\", \"config\": {\"name\": \"dense\", \"units\": 2}}"

/* A Sequential model: input, the given layers (JSON, comma-separated), then tail. */
static mw_status load(mw_model *m, const char *input, const char *layers, const char *tail)
{
    char json[4096];
    snprintf(
        json, sizeof json,
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [%s, %s%s%s]}}",
        input, layers, *tail ? ", " : "", tail);
    return mw_keras_load(m, json, strlen(json), "m.json", 0, 0, 0, 0);
}

#define LAYER(cls, cfg) "{\"class_name\": \"" cls "\", \"config\": {\"name\": \"p\"" cfg "}}"

typedef struct {
    const char *name;
    const char *input, *layers, *tail;
    mw_status want;
    const char *msg[4];
} bad_case;

static const bad_case bad_cases[] = {
    {"after_conv",
     INPUT_8x8x3,
     "{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"c\", \"filters\": 2, \"kernel_size\": "
     "[3, 3]}}, " LAYER("RandomFlip", ""),
     FLATTEN ", " DENSE,
     MW_EUNSUPPORTED,
     {"m.json", "layer 'p' (RandomFlip)", "leading run"}},
    {"last", INPUT_8x8x3, LAYER("RandomFlip", ""), "", MW_EMODEL, {"cannot end the model"}},
    {"flat_input",
     "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 192]}}",
     LAYER("Rescaling", ", \"scale\": 2.0"),
     DENSE,
     MW_EMODEL,
     {"layer 'p' (Rescaling)", "needs image input"}},
    {"fill_mode",
     INPUT_8x8x3,
     LAYER("RandomTranslation", ", \"height_factor\": 0.1, \"width_factor\": 0.1, "
                                "\"fill_mode\": \"mirror\""),
     FLATTEN ", " DENSE,
     MW_EUNSUPPORTED,
     {"(RandomTranslation)", "fill_mode \"mirror\" is not supported", "reflect, wrap"}},
    {"interpolation",
     INPUT_8x8x3,
     LAYER("RandomTranslation", ", \"height_factor\": 0.1, \"width_factor\": 0.1, "
                                "\"interpolation\": \"bicubic\""),
     FLATTEN ", " DENSE,
     MW_EUNSUPPORTED,
     {"interpolation \"bicubic\"", "bilinear, nearest"}},
    {"factor_range",
     INPUT_8x8x3,
     LAYER("RandomTranslation", ", \"height_factor\": 1.5, \"width_factor\": 0.1"),
     FLATTEN ", " DENSE,
     MW_EMODEL,
     {"'height_factor' must lie in [-1, 1]"}},
    {"factor_missing",
     INPUT_8x8x3,
     LAYER("RandomTranslation", ", \"height_factor\": 0.1"),
     FLATTEN ", " DENSE,
     MW_EMODEL,
     {"'width_factor' must be a number or a pair"}},
    {"crop_too_big",
     INPUT_8x8x3,
     LAYER("RandomCrop", ", \"height\": 10, \"width\": 4"),
     FLATTEN ", " DENSE,
     MW_EUNSUPPORTED,
     {"(RandomCrop)", "crops 10x4 from 8x8", "smaller"}},
    {"crop_no_height",
     INPUT_8x8x3,
     LAYER("RandomCrop", ", \"width\": 4"),
     FLATTEN ", " DENSE,
     MW_EMODEL,
     {"'height' must be an integer in 1..65536"}},
    {"flip_mode",
     INPUT_8x8x3,
     LAYER("RandomFlip", ", \"mode\": \"diagonal\""),
     FLATTEN ", " DENSE,
     MW_EMODEL,
     {"mode \"diagonal\"", "horizontal, vertical"}},
    {"channels_first",
     INPUT_8x8x3,
     LAYER("RandomFlip", ", \"data_format\": \"channels_first\""),
     FLATTEN ", " DENSE,
     MW_EUNSUPPORTED,
     {"data_format \"channels_first\" is not supported"}},
    /* an adapted one (mean null too) is a model layer, its statistics weights */
    {"norm_no_variance",
     INPUT_8x8x3,
     LAYER("Normalization", ", \"axis\": [-1], \"mean\": 0.5, \"variance\": null"),
     FLATTEN ", " DENSE,
     MW_EUNSUPPORTED,
     {"(Normalization)", "'variance' is not in the config"}},
    {"norm_length",
     INPUT_8x8x3,
     LAYER("Normalization", ", \"mean\": [1, 2], \"variance\": [1, 1]"),
     FLATTEN ", " DENSE,
     MW_EMODEL,
     {"'mean' must be a number or a list of 3"}},
    {"norm_axis",
     INPUT_8x8x3,
     LAYER("Normalization", ", \"axis\": 1, \"mean\": 1, \"variance\": 1"),
     FLATTEN ", " DENSE,
     MW_EUNSUPPORTED,
     {"'axis' must be -1"}},
    {"norm_negative_variance",
     INPUT_8x8x3,
     LAYER("Normalization", ", \"mean\": 1, \"variance\": -2"),
     FLATTEN ", " DENSE,
     MW_EMODEL,
     {"'variance' must not be negative"}},
    {"rescaling_scale",
     INPUT_8x8x3,
     LAYER("Rescaling", ", \"scale\": \"big\""),
     FLATTEN ", " DENSE,
     MW_EMODEL,
     {"(Rescaling)", "'scale' must be a number"}},
};

static void test_bad_configs(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        const bad_case *c = &bad_cases[i];
        mw_model m;
        mw_err_clear();
        mw_status rc = load(&m, c->input, c->layers, c->tail);
        char who[64];
        snprintf(who, sizeof who, "case %s", c->name);
        if (!mw_test_err_matches(who, rc, c->want, c->msg))
            failed++;
        if (rc != MW_OK && m.pre) {
            fprintf(stderr, "%s: a failed load kept a pipeline\n", who);
            failed++;
        }
        mw_model_free(&m);
        mw_err_clear();
    }
    printf("%zu bad configs\n", sizeof bad_cases / sizeof *bad_cases);
    assert_int_equal(failed, 0);
}

/* The pipeline's shapes feed the model: a crop makes the first real layer's input smaller. */
static void test_shapes(void **state)
{
    (void)state;
    mw_model m;
    expect_err(
        load(
            &m, INPUT_8x8x3,
            LAYER(
                "RandomFlip",
                "") ", "
                    "{\"class_name\": \"RandomCrop\", \"config\": {\"name\": \"q\", \"height\": 5, "
                    "\"width\": 6}}",
            FLATTEN ", " DENSE),
        MW_OK, "");
    assert_non_null(m.pre);
    assert_int_equal(mw_preprocess_nlayers(m.pre), 2);
    assert_int_equal(mw_preprocess_in_count(m.pre), 8 * 8 * 3);
    assert_int_equal(mw_preprocess_out_count(m.pre), 5 * 6 * 3);
    assert_int_equal(m.in_h, 5);
    assert_int_equal(m.in_w, 6);
    assert_int_equal(m.layers[m.nlayers - 1].out_c, 2);
    assert_int_equal(m.layers[0].in_h * m.layers[0].in_w * m.layers[0].in_c, 90);
    mw_model_free(&m);
    assert_null(m.pre);
}

/* Draws depend on (seed, epoch, id) only; flips about half; crops and shifts in range. */
static void test_draws(void **state)
{
    (void)state;
    mw_model m;
    expect_err(
        load(
            &m, INPUT_8x8x3,
            LAYER(
                "RandomFlip",
                "") ", "
                    "{\"class_name\": \"RandomCrop\", \"config\": {\"name\": \"q\", \"height\": 5, "
                    "\"width\": 6}}, "
                    "{\"class_name\": \"RandomTranslation\", \"config\": {\"name\": \"t\", "
                    "\"height_factor\": [-0.25, 0.5], \"width_factor\": 0.2}}",
            FLATTEN ", " DENSE),
        MW_OK, "");
    mw_pre_draw a[3], b[3];
    int flips = 0, seen_y[4] = {0}, seen_x[3] = {0}, differ = 0;
    const int n = 2000;
    for (uint32_t id = 0; id < (uint32_t)n; id++) {
        mw_preprocess_draw(m.pre, 42, 3, id, a);
        mw_preprocess_draw(m.pre, 42, 3, id, b);
        assert_memory_equal(a, b, sizeof a);
        flips += a[0].flip;
        assert_in_range(a[1].crop_y, 0, 3);
        assert_in_range(a[1].crop_x, 0, 2);
        seen_y[a[1].crop_y] = seen_x[a[1].crop_x] = 1;
        assert_true(a[2].dy >= -0.25f * 5 && a[2].dy <= 0.5f * 5); /* its input: the 5x6 crop */
        assert_true(a[2].dx >= -0.2f * 6 && a[2].dx <= 0.2f * 6);
        mw_preprocess_draw(m.pre, 42, 4, id, b);
        differ += memcmp(a, b, sizeof a) != 0;
    }
    assert_in_range(flips, n / 2 - 150, n / 2 + 150);
    for (int i = 0; i < 4; i++)
        assert_int_equal(seen_y[i], 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(seen_x[i], 1);
    assert_true(differ > n * 9 / 10); /* another epoch, other images */
    mw_model_free(&m);
}

/* Batches through a pipeline: uint8 raw before Rescaling, / 255 before RandomFlip alone; the
 * flip acts only with augment, exactly where its draw says. */
static void test_batch(void **state)
{
    (void)state;
    uint8_t img[2 * 2 * 3 * 1];
    int32_t lab[2] = {1, 0};
    for (int i = 0; i < 12; i++)
        img[i] = (uint8_t)(i * 20 + 3);
    mw_dataset d;
    mw_dataset_init(&d);
    d.images = img, d.labels = lab, d.count = 2, d.rows = 2, d.cols = 3, d.channels = 1;
    d.num_classes = 2;
    const char *in =
        "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 2, 3, 1]}}";
    mw_model m;
    expect_err(
        load(&m, in, LAYER("Rescaling", ", \"scale\": 0.5, \"offset\": 1"), FLATTEN ", " DENSE),
        MW_OK, "");
    d.pre = m.pre;
    float x[12];
    int32_t y[2];
    uint32_t ids[2] = {1, 0};
    mw_dataset_batch(&d, x, y, ids, 2);
    for (int j = 0; j < 6; j++) {
        assert_true(x[j] == (float)img[6 + j] * 0.5f + 1.0f);
        assert_true(x[6 + j] == (float)img[j] * 0.5f + 1.0f);
    }
    assert_int_equal(y[0], 0);
    mw_model_free(&m);

    expect_err(load(&m, in, LAYER("RandomFlip", ", \"mode\": \"horizontal\""), FLATTEN ", " DENSE),
               MW_OK, "");
    d.pre = m.pre;
    mw_dataset_batch(&d, x, y, ids, 2); /* not augmenting: the identity, / 255 */
    for (int j = 0; j < 6; j++)
        assert_true(x[j] == (float)img[6 + j] / 255.0f);
    d.augment = 1, d.aug_seed = 7, d.epoch = 2;
    mw_pre_draw dr[1];
    for (uint32_t id = 0; id < 2; id++) {
        mw_dataset_batch(&d, x, y, &id, 1);
        mw_preprocess_draw(m.pre, 7, 2, id, dr);
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 3; c++) {
                int sc = dr[0].flip ? 2 - c : c;
                assert_true(x[r * 3 + c] == (float)img[id * 6 + (uint32_t)(r * 3 + sc)] / 255.0f);
            }
    }
    mw_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_draws),
        cmocka_unit_test(test_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

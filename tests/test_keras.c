/* Models from Keras JSON (worker/keras/keras.c) and what they brought into the model: Dropout,
 * Activation layers, initializers with their config values, regularizers.
 *
 * - Good configs under tests/data/keras/ (Keras 2, older Keras 2 with the layer list as
 *   config, Keras 3, both TensorFlow.js wrappers): every layer's parameter count against the
 *   formulas Keras uses (Conv2D kh*kw*cin*filters + filters, Dense in*units + units), the
 *   total, output shapes in the summary; then a few Adam steps each, with a falling loss.
 * - A table of unsupported or malformed configs, tests/data/keras/bad/<case>/input.json,
 *   each failing with the message in its `expected` file.
 * - The built-in tutorial model equals the same network built layer by layer (names, shapes,
 *   initial weights bit for bit).
 * - Initializer statistics, regularization loss and gradient against central differences,
 *   the dropout kernels (ref == cpu, keep rate, scaling, identity at inference), masks that
 *   follow the global example id whatever the batch position or micro-batch, and a
 *   central-difference check of a whole model with Dropout and 'same' padding.
 * - Functional graphs: the same graph in the Keras 3 and Keras 2 forms, its inputs, BN state,
 *   summary and model diff; central differences through a graph of every new layer with
 *   shared tensors (gradients that add up from several consumers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/rng.h"
#include "kernels/cpu/table.h"
#include "kernels/dropout.h"
#include "kernels/ref/table.h"
#include "tests/util.h"
#include "worker/keras/keras.h"
#include "worker/model/diff.h"
#include "worker/model/layers/activation.h"
#include "worker/model/layers/batchnorm.h"
#include "worker/model/layers/conv2d.h"
#include "worker/model/layers/dense.h"
#include "worker/model/layers/dropout.h"
#include "worker/model/layers/pooling.h"
#include "worker/model/layers/reshape.h"
#include "worker/model/model.h"
#include "worker/model/model_ws.h"
#include "worker/model/summary.h"
#include "worker/model/weights.h"

/* ---- helpers ---- */

static void check_rc(mw_status rc, const char *what)
{
    if (rc != MW_OK)
        fail_msg("%s: %s: %s", what, mw_status_str(rc), mw_err_msg());
}

/* Load tests/data/keras/<file> for 28x28x1 images and 10 classes. */
static void load_data_file(mw_model *m, const char *file)
{
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/keras/%s", file);
    char *path = mw_test_srcpath(rel);
    mw_err_clear();
    check_rc(mw_keras_load_file(m, path, 28, 28, 1, 10), path);
    free(path);
}

static mw_status load_text(mw_model *m, const char *text, int h, int w, int c, int k)
{
    mw_err_clear();
    return mw_keras_load(m, text, strlen(text), "test.json", h, w, c, k);
}

/* The model's summary as a string (malloc'ed). */
static char *summary_of(const mw_model *m)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    mw_model_summary(m, f);
    fclose(f);
    return buf;
}

static size_t conv_p(int kh, int kw, int cin, int filters)
{
    return (size_t)kh * kw * cin * filters + (size_t)filters;
}

static size_t dense_p(int in, int units)
{
    return (size_t)in * units + (size_t)units;
}

/* ---- good configs ---- */

typedef struct {
    const char *name, *cls, *shape; /* as the summary prints them */
    size_t params;
} layer_expect;

typedef struct {
    const char *file, *model_name;
    layer_expect layers[12];
} config_expect;

static const config_expect *good_configs(size_t *n)
{
    static config_expect c[7];
    static int done = 0;
    if (!done) {
        c[0] =
            (config_expect){"cnn_dropout_k2.json",
                            "dropout_cnn",
                            {
                                {"conv2d", "Conv2D", "(None, 26, 26, 32)", conv_p(3, 3, 1, 32)},
                                {"max_pooling2d", "MaxPooling2D", "(None, 13, 13, 32)", 0},
                                {"dropout", "Dropout", "(None, 13, 13, 32)", 0},
                                {"conv2d_1", "Conv2D", "(None, 11, 11, 64)", conv_p(3, 3, 32, 64)},
                                {"max_pooling2d_1", "MaxPooling2D", "(None, 5, 5, 64)", 0},
                                {"dropout_1", "Dropout", "(None, 5, 5, 64)", 0},
                                {"flatten", "Flatten", "(None, 1600)", 0},
                                {"dense", "Dense", "(None, 128)", dense_p(1600, 128)},
                                {"dropout_2", "Dropout", "(None, 128)", 0},
                                {"dense_1", "Dense", "(None, 10)", dense_p(128, 10)},
                            }};
        c[1] = (config_expect){"legacy_list_k2.json",
                               "sequential",
                               {
                                   {"flatten", "Flatten", "(None, 784)", 0},
                                   {"dense", "Dense", "(None, 32)", dense_p(784, 32)},
                                   {"dense_1", "Dense", "(None, 10)", dense_p(32, 10)},
                               }};
        c[2] = (config_expect){"mlp_k3.json",
                               "mlp",
                               {
                                   {"flatten", "Flatten", "(None, 784)", 0},
                                   {"dense", "Dense", "(None, 128)", dense_p(784, 128)},
                                   {"dropout", "Dropout", "(None, 128)", 0},
                                   {"dense_1", "Dense", "(None, 10)", dense_p(128, 10)},
                               }};
        c[3] =
            (config_expect){"same5x5_k3.json",
                            "same5x5",
                            {
                                {"conv2d", "Conv2D", "(None, 28, 28, 16)", conv_p(5, 5, 1, 16)},
                                {"max_pooling2d", "MaxPooling2D", "(None, 14, 14, 16)", 0},
                                {"conv2d_1", "Conv2D", "(None, 14, 14, 32)", conv_p(5, 5, 16, 32)},
                                {"re_lu", "ReLU", "(None, 14, 14, 32)", 0},
                                {"max_pooling2d_1", "MaxPooling2D", "(None, 7, 7, 32)", 0},
                                {"flatten", "Flatten", "(None, 1568)", 0},
                                {"dense", "Dense", "(None, 10)", dense_p(1568, 10)},
                                {"activation", "Activation", "(None, 10)", 0},
                            }};
        c[4] = (config_expect){"tfjs_wrapper.json",
                               "sequential_1",
                               {
                                   {"conv2d", "Conv2D", "(None, 13, 13, 8)", conv_p(3, 3, 1, 8)},
                                   {"flatten", "Flatten", "(None, 1352)", 0},
                                   {"dense", "Dense", "(None, 10)", dense_p(1352, 10)},
                               }};
        c[5] = (config_expect){
            "tfjs_topology.json",
            "flat_input",
            {
                {"logits", "Dense", "(None, 10)", (size_t)784 * 10}, /* use_bias false */
            }};
        c[6] = (config_expect){
            "depthwise_k3.json",
            "depthwise",
            {
                {"conv2d", "Conv2D", "(None, 13, 13, 8)", conv_p(3, 3, 1, 8)},
                /* depth_multiplier 2: a 3x3x8x2 kernel, 16 biases */
                {"depthwise_conv2d", "DepthwiseConv2D", "(None, 13, 13, 16)", 3 * 3 * 8 * 2 + 16},
                /* groups 16 of one channel each: 3x3x1x16 */
                {"conv2d_1", "Conv2D", "(None, 13, 13, 16)", conv_p(3, 3, 1, 16)},
                /* dilation 2 (a 5x5 reach); depthwise 3x3x16x1, pointwise 16x16, bias */
                {"separable_conv2d", "SeparableConv2D", "(None, 13, 13, 16)", 144 + 256 + 16},
                {"conv2d_2", "Conv2D", "(None, 13, 13, 8)", conv_p(3, 3, 16, 8)},
                {"flatten", "Flatten", "(None, 1352)", 0},
                {"dense", "Dense", "(None, 10)", dense_p(1352, 10)},
            }};
        done = 1;
    }
    *n = sizeof c / sizeof *c;
    return c;
}

/* Each config's layers, parameter counts, total and summary rows. */
static void test_good_configs(void **state)
{
    (void)state;
    size_t nc;
    const config_expect *cs = good_configs(&nc);
    for (size_t ci = 0; ci < nc; ci++) {
        const config_expect *c = &cs[ci];
        mw_model m;
        load_data_file(&m, c->file);
        check_rc(mw_model_finalize(&m, 1), c->file);
        assert_string_equal(m.name, c->model_name);
        assert_int_equal(m.nclasses, 10);
        size_t total = 0;
        int j = 0;
        for (int i = 0; i < m.nlayers; i++) {
            const mw_layer *l = &m.layers[i];
            if (l->folded) {
                assert_int_equal(l->w_count + l->b_count, 0);
                continue;
            }
            const layer_expect *e = &c->layers[j++];
            if (!e->name)
                fail_msg("%s: more layers than expected (%s)", c->file, l->name);
            if (strcmp(l->name, e->name) || strcmp(l->cls, e->cls) ||
                l->w_count + l->b_count != e->params)
                fail_msg("%s: layer %d is %s (%s) with %zu parameters; want %s (%s) with %zu",
                         c->file, j - 1, l->name, l->cls, l->w_count + l->b_count, e->name, e->cls,
                         e->params);
            total += e->params;
        }
        assert_null(c->layers[j].name);
        assert_int_equal(m.nparams, total);
        char *s = summary_of(&m);
        char line[160], head[64], tot[64];
        snprintf(head, sizeof head, "Model: \"%s\"", c->model_name);
        expect_contains(s, head);
        for (int k = 0; k < j; k++) {
            const layer_expect *e = &c->layers[k];
            char label[96];
            snprintf(label, sizeof label, "%s (%s)", e->name, e->cls);
            snprintf(line, sizeof line, "%-32s %-22s %10zu\n", label, e->shape, e->params);
            if (!strstr(s, line))
                fail_msg("%s: summary has no row \"%s\":\n%s", c->file, line, s);
        }
        snprintf(tot, sizeof tot, "Total params: %zu\n", total);
        expect_contains(s, tot);
        free(s);
        assert_non_null(m.source);
        assert_true(m.source_nbytes > 0 && strlen(m.source) == m.source_nbytes);
        mw_model_free(&m);
    }
}

/* What the configs carry besides shapes: folded activations, initializers, regularizers,
 * dropout rates, the flat input. */
static void test_config_details(void **state)
{
    (void)state;
    mw_model m;
    load_data_file(&m, "cnn_dropout_k2.json");
    const mw_layer *L = m.layers;
    /* conv2d conv2d/relu max_pooling2d dropout ...; finalize moves the relu behind the pool */
    assert_int_equal(L[1].kind, MW_LAYER_RELU);
    assert_true(L[1].folded);
    assert_int_equal(L[3].kind, MW_LAYER_DROPOUT);
    assert_true(L[3].rate == 0.25f);
    const mw_layer *last = &L[m.nlayers - 1];
    assert_int_equal(last->kind, MW_LAYER_IDENTITY); /* dense_1/softmax, folded into the loss */
    assert_true(last->softmax && last->folded);
    assert_string_equal(last->name, "dense_1/softmax");
    int found = 0;
    for (int i = 0; i < m.nlayers; i++)
        if (!strcmp(L[i].name, "dense")) {
            assert_true(fabs(L[i].kernel_reg.l2 - 0.001) < 1e-9);
            assert_true(L[i].kernel_reg.l1 == 0.0 && L[i].bias_reg.l2 == 0.0);
            found = 1;
        }
    assert_true(found);
    mw_model_free(&m);

    load_data_file(&m, "same5x5_k3.json");
    L = m.layers;
    assert_int_equal(L[0].kernel_init.kind, MW_INIT_HE_NORMAL);
    assert_true(L[0].conv.PT == 2 && L[0].conv.PL == 2 && L[0].conv.OH == 28);
    assert_int_equal(L[3].kernel_init.kind, MW_INIT_VARIANCE_SCALING); /* conv2d_1 */
    assert_true(L[3].kernel_init.scale == 2.0);
    assert_int_equal(L[3].kernel_init.mode, MW_FAN_OUT);
    assert_int_equal(L[3].kernel_init.dist, MW_DIST_UNTRUNCATED_NORMAL);
    assert_true(L[3].kernel_reg.l1 == 1e-5 && L[3].kernel_reg.l2 == 1e-4);
    assert_int_equal(L[4].kind, MW_LAYER_RELU);
    assert_false(L[4].folded);
    assert_int_equal(L[5].pool.PT, 0); /* 14 -> 7 'same': no padding needed */
    assert_int_equal(L[7].kernel_init.kind, MW_INIT_RANDOM_NORMAL);
    assert_true(L[7].kernel_init.b == 0.02);
    assert_true(L[8].kind == MW_LAYER_IDENTITY && L[8].softmax && !L[8].folded);
    mw_model_free(&m);

    load_data_file(&m, "tfjs_wrapper.json");
    assert_int_equal(m.layers[0].kernel_init.kind, MW_INIT_VARIANCE_SCALING);
    assert_int_equal(m.layers[0].kernel_init.mode, MW_FAN_AVG);
    assert_int_equal(m.layers[0].kernel_init.dist, MW_DIST_UNIFORM);
    assert_int_equal(m.layers[0].conv.SH, 2);
    mw_model_free(&m);

    load_data_file(&m, "tfjs_topology.json"); /* (None, 784) input: the model starts flat */
    assert_true(m.in_h == 1 && m.in_w == 1 && m.in_c == 784 && m.flat_input);
    assert_false(m.layers[0].has_bias);
    mw_model_free(&m);

    load_data_file(&m, "legacy_list_k2.json");
    assert_int_equal(m.layers[1].kernel_init.kind, MW_INIT_HE_NORMAL);
    assert_true(m.layers[1].bias_reg.l1 == 0.0005 && m.layers[1].bias_reg.l2 == 0.0);
    mw_model_free(&m);
}

/* Input shapes: from the file when the caller has no data, from the data when the file has
 * none; build_input_shape; load errors. */
/* A Functional model's layer list at length 0 and 1: refused with a message (layers[0] was
 * written past an empty allocation). */
static void test_graph_empty_layers(void **state)
{
    (void)state;
    mw_model m;
    const char *empty = "{\"class_name\": \"Functional\", \"config\": {\"name\": \"f\", "
                        "\"layers\": [], \"input_layers\": [], \"output_layers\": []}}";
    expect_err(load_text(&m, empty, 0, 0, 0, 0), MW_EMODEL,
               "test.json: layers: an empty list; expected the InputLayer first");
    mw_model_free(&m);
    const char *one = "{\"class_name\": \"Functional\", \"config\": {\"name\": \"f\", "
                      "\"layers\": [{\"class_name\": \"InputLayer\", \"name\": \"in\", "
                      "\"config\": {\"name\": \"in\", \"batch_shape\": [null, 4]}, "
                      "\"inbound_nodes\": []}], \"input_layers\": [[\"in\", 0, 0]], "
                      "\"output_layers\": [[\"in\", 0, 0]]}}";
    expect_err(load_text(&m, one, 0, 0, 0, 0), MW_EMODEL,
               "test.json: the model has no layers besides its input");
    mw_model_free(&m);
}

static void test_input_shapes(void **state)
{
    (void)state;
    mw_model m;
    const char *noinput = "{\"class_name\": \"Sequential\", \"config\": {\"layers\": ["
                          "{\"class_name\": \"Flatten\", \"config\": {}},"
                          "{\"class_name\": \"Dense\", \"config\": {\"units\": 3}}]}}";
    check_rc(load_text(&m, noinput, 4, 5, 2, 3), "no input shape, data given");
    assert_true(m.in_h == 4 && m.in_w == 5 && m.in_c == 2);
    assert_string_equal(m.layers[0].name, "flatten");
    assert_int_equal(m.layers[1].w_count, 40 * 3);
    mw_model_free(&m);
    expect_err(load_text(&m, noinput, 0, 0, 0, 0), MW_EMODEL,
               "test.json: the model has no input shape");
    mw_model_free(&m);

    /* Keras 2 build_input_shape, taken from the file (summary without data) */
    const char *built = "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", "
                        "\"layers\": [{\"class_name\": \"Conv2D\", \"config\": {\"filters\": 2,"
                        " \"kernel_size\": 3, \"padding\": \"SAME\"}}, {\"class_name\": "
                        "\"Flatten\", \"config\": {}}, {\"class_name\": \"Dense\", \"config\": "
                        "{\"units\": 4}}], \"build_input_shape\": [null, 6, 7, 3]}}";
    check_rc(load_text(&m, built, 0, 0, 0, 0), "build_input_shape");
    assert_true(m.in_h == 6 && m.in_w == 7 && m.in_c == 3);
    assert_int_equal(m.layers[0].out_h, 6); /* padding is case-insensitive, as in Keras */
    assert_string_equal(m.layers[0].name, "conv2d");
    mw_model_free(&m);
    expect_err(load_text(&m, built, 6, 7, 1, 4), MW_EMODEL,
               "the model's input is (None, 6, 7, 3) (model config "
               "build_input_shape) but the data are 6x7x1 images");
    mw_model_free(&m);

    /* (None, H, W) input for 1-channel data, flat for Dense */
    char *path = mw_test_srcpath("tests/data/keras/mlp_k3.json");
    check_rc(mw_keras_load_file(&m, path, 0, 0, 0, 0), "mlp from the file alone");
    assert_true(m.in_h == 28 && m.in_w == 28 && m.in_c == 1 && m.nlayers == 6);
    mw_model_free(&m);
    mw_err_clear();
    expect_err(mw_keras_load_file(&m, path, 28, 28, 3, 10), MW_EMODEL,
               "mlp_k3.json: the model's input is (None, 28, 28) "
               "(layer 'input_layer' (InputLayer) batch_shape) but "
               "the data are 28x28x3 images");
    mw_model_free(&m);
    free(path);

    mw_err_clear();
    expect_err(mw_keras_load_file(&m, "/nonexistent/model.json", 28, 28, 1, 10), MW_EIO,
               "/nonexistent/model.json: cannot open: No such file or directory; expected a "
               "Keras model");
    mw_model_free(&m);
    expect_err(load_text(&m, "", 28, 28, 1, 10), MW_EMODEL,
               "test.json: empty; expected a Keras model JSON");
    mw_err_clear();
    size_t big = MW_KERAS_MAX_BYTES + 1;
    char *text = malloc(big);
    memset(text, ' ', big);
    expect_err(mw_keras_load(&m, text, big, "big.json", 28, 28, 1, 10), MW_EMODEL,
               "big.json: 4194305 bytes; expected at most");
    free(text);
    mw_model_free(&m);
    /* the text needs no terminator: a prefix of a longer buffer */
    const char *two = "{\"class_name\": \"Sequential\", \"config\": [{\"class_name\": \"Dense\","
                      " \"config\": {\"units\": 2, \"batch_input_shape\": [null, 3]}}]}GARBAGE";
    mw_err_clear();
    check_rc(mw_keras_load(&m, two, strlen(two) - 7, "prefix", 1, 1, 3, 2), "prefix");
    mw_model_free(&m);
    mw_err_clear();
}

/* ---- bad configs ---- */

/* A bad config (for 28x28x1 data and 10 classes): MW_EMODEL or MW_EUNSUPPORTED (also as the
 * recorded status), a message that starts "input.json: " and an empty model. */
static int bad_config(void *ctx, const char *name, const char *text, size_t n)
{
    (void)ctx;
    mw_model m;
    mw_status rc = mw_keras_load(&m, text, n, "input.json", 28, 28, 1, 10);
    int ok = (rc == MW_EMODEL || rc == MW_EUNSUPPORTED) && mw_err_status() == rc &&
             strncmp(mw_err_msg(), "input.json: ", 12) == 0 && m.nlayers == 0 && m.layers == NULL &&
             m.source == NULL;
    if (!ok)
        fprintf(stderr,
                "case %s: got %s with %d layers; want MW_EMODEL or MW_EUNSUPPORTED, "
                "\"input.json: ...\" and an empty model\n",
                name, mw_status_str(rc), m.nlayers);
    mw_model_free(&m);
    return ok;
}

/* Every tests/data/keras/bad/<case>/input.json fails with its `expected` message. */
static void test_bad_configs(void **state)
{
    (void)state;
    assert_true(mw_test_cases("tests/data/keras/bad", bad_config, NULL) >= 15);
}

/* ---- the built-in model ---- */

static mw_status build_by_hand(mw_model *m)
{
    mw_model_init(m, 28, 28, 1);
    MW_TRY(mw_model_add_conv2d(m, NULL, 32, 3, 3, 1, 1, 0, 1));
    MW_TRY(mw_model_add_relu(m, NULL, 1));
    MW_TRY(mw_model_add_maxpool(m, NULL, 2, 2, 2, 2, 0));
    MW_TRY(mw_model_add_conv2d(m, NULL, 64, 3, 3, 1, 1, 0, 1));
    MW_TRY(mw_model_add_relu(m, NULL, 1));
    MW_TRY(mw_model_add_maxpool(m, NULL, 2, 2, 2, 2, 0));
    MW_TRY(mw_model_add_flatten(m, NULL));
    MW_TRY(mw_model_add_dense(m, NULL, 64, 1));
    MW_TRY(mw_model_add_relu(m, NULL, 1));
    return mw_model_add_dense(m, NULL, 10, 1);
}

/* The embedded JSON gives the network the add API gives: names, shapes, parameters and the
 * initial weights bit for bit (so the tutorial results stay what they were). */
static void test_builtin_tutorial(void **state)
{
    (void)state;
    mw_model a, b;
    check_rc(mw_keras_build_tutorial(&a, 28, 28, 1, 10), "tutorial");
    check_rc(build_by_hand(&b), "by hand");
    check_rc(mw_model_finalize(&a, 64), "finalize");
    check_rc(mw_model_finalize(&b, 64), "finalize");
    assert_int_equal(a.nlayers, b.nlayers);
    for (int i = 0; i < a.nlayers; i++) {
        const mw_layer *x = &a.layers[i], *y = &b.layers[i];
        assert_string_equal(x->name, y->name);
        assert_string_equal(x->cls, y->cls);
        assert_int_equal(x->kind, y->kind);
        assert_true(x->out_h == y->out_h && x->out_w == y->out_w && x->out_c == y->out_c);
        assert_true(x->w_off == y->w_off && x->b_off == y->b_off && x->w_count == y->w_count);
    }
    assert_int_equal(a.nparams, 121930);
    assert_int_equal(a.params.count, b.params.count);
    mw_model_init_params(&a, 42);
    mw_model_init_params(&b, 42);
    assert_memory_equal(a.params.data, b.params.data, a.params.count * sizeof(float));
    char *sa = summary_of(&a), *sb = summary_of(&b);
    assert_string_equal(sa, sb);
    free(sa), free(sb);
    assert_int_equal(a.source_nbytes, mw_keras_tutorial_json_nbytes);
    assert_null(b.source);
    mw_model_free(&a);
    mw_model_free(&b);

    mw_err_clear();
    expect_err(mw_keras_build_tutorial(&a, 32, 32, 3, 10), MW_EMODEL,
               "built-in model (worker/models/tutorial_cnn.json): the "
               "model's input is (None, 28, 28, 1)");
    mw_model_free(&a);
    mw_err_clear();
}

/* ---- initializers ---- */

/* A Dense(units) on a flat input of `in` with the given initializer JSON for kernel and bias. */
static void dense_with_init(mw_model *m, int in, int units, const char *kinit, const char *binit)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"class_name\": \"Sequential\", \"config\": {\"layers\": [{\"class_name\": "
             "\"Dense\", \"config\": {\"units\": %d, \"batch_input_shape\": [null, %d], "
             "\"kernel_initializer\": %s, \"bias_initializer\": %s}}]}}",
             units, in, kinit, binit);
    check_rc(load_text(m, text, 1, 1, in, units), text);
    check_rc(mw_model_finalize(m, 1), "finalize");
    mw_model_init_params(m, 1234);
}

static void stats(const float *x, size_t n, double *mean, double *sd, double *lo, double *hi)
{
    double s = 0, s2 = 0;
    *lo = INFINITY, *hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        *lo = x[i] < *lo ? x[i] : *lo;
        *hi = x[i] > *hi ? x[i] : *hi;
    }
    *mean = s / (double)n;
    for (size_t i = 0; i < n; i++)
        s2 += (x[i] - *mean) * (x[i] - *mean);
    *sd = sqrt(s2 / (double)n);
}

typedef struct {
    const char *json;
    double mean, sd; /* expected; sd < 0: not checked */
    double lo, hi;   /* every value within [lo, hi] */
} init_case;

/* Sample statistics of 400x300 = 120000 draws (fan_in 400, fan_out 300): the standard
 * deviation within 10% of Keras' formula, the mean near its value, the range respected. */
static void test_initializers(void **state)
{
    (void)state;
    const double fi = 400, fo = 300;
    const init_case cases[] = {
        {"{\"class_name\": \"HeNormal\", \"config\": {\"seed\": 7}}", 0, sqrt(2 / fi),
         -2 * sqrt(2 / fi) / 0.8796, 2 * sqrt(2 / fi) / 0.8796},
        {"\"he_uniform\"", 0, sqrt(6 / fi) / sqrt(3), -sqrt(6 / fi), sqrt(6 / fi)},
        {"{\"class_name\": \"GlorotNormal\", \"config\": {}}", 0, sqrt(2 / (fi + fo)), -1, 1},
        {"{\"class_name\": \"GlorotUniform\", \"config\": {\"seed\": null}}", 0,
         sqrt(6 / (fi + fo)) / sqrt(3), -sqrt(6 / (fi + fo)), sqrt(6 / (fi + fo))},
        {"{\"class_name\": \"VarianceScaling\", \"config\": {\"scale\": 2.0, \"mode\": "
         "\"fan_out\", \"distribution\": \"untruncated_normal\"}}",
         0, sqrt(2 / fo), -1, 1},
        {"{\"class_name\": \"VarianceScaling\", \"config\": {\"scale\": 0.5, \"mode\": "
         "\"fan_avg\", \"distribution\": \"uniform\"}}",
         0, sqrt(0.5 / 350), -sqrt(1.5 / 350), sqrt(1.5 / 350)},
        {"{\"class_name\": \"VarianceScaling\", \"config\": {\"scale\": 3.0, \"mode\": "
         "\"fan_in\", \"distribution\": \"truncated_normal\"}}",
         0, sqrt(3 / fi), -1, 1},
        {"{\"class_name\": \"LecunNormal\", \"config\": {}}", 0, sqrt(1 / fi), -1, 1},
        {"{\"class_name\": \"RandomUniform\", \"config\": {\"minval\": 1.0, \"maxval\": 3.0}}", 2.0,
         2 / sqrt(12), 1.0, 3.0},
        {"{\"class_name\": \"RandomNormal\", \"config\": {\"mean\": -1.0, \"stddev\": 0.5}}", -1.0,
         0.5, -5, 3},
        {"{\"class_name\": \"TruncatedNormal\", \"config\": {\"mean\": 0.5, \"stddev\": 0.1}}", 0.5,
         0.1 * 0.8796, 0.3, 0.7},
        {"{\"class_name\": \"Ones\", \"config\": {}}", 1, 0, 1, 1},
        {"{\"class_name\": \"Constant\", \"config\": {\"value\": -0.25}}", -0.25, 0, -0.25, -0.25},
        {"\"zeros\"", 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const init_case *c = &cases[i];
        mw_model m;
        dense_with_init(&m, 400, 300, c->json, "{\"class_name\": \"Ones\", \"config\": {}}");
        const mw_layer *l = &m.layers[0];
        double mean, sd, lo, hi;
        stats(m.params.data + l->w_off, l->w_count, &mean, &sd, &lo, &hi);
        int ok = fabs(mean - c->mean) <= 0.02 * (c->sd > 0 ? c->sd : 1) * 5 &&
                 (c->sd == 0 ? sd == 0 : fabs(sd - c->sd) <= 0.1 * c->sd) && lo >= c->lo &&
                 hi <= c->hi;
        if (!ok)
            fail_msg("%s: mean %.5g sd %.5g range [%.5g, %.5g]; want mean %.5g sd %.5g within "
                     "[%.5g, %.5g]",
                     c->json, mean, sd, lo, hi, c->mean, c->sd, c->lo, c->hi);
        for (size_t j = 0; j < l->b_count; j++)
            assert_true(m.params.data[l->b_off + j] == 1.0f);
        mw_model_free(&m);
    }
    /* A bias with a variance-scaling initializer: Keras' fans of a 1-D shape are (n, n). */
    mw_model m;
    dense_with_init(&m, 400, 5000, "\"zeros\"", "\"he_normal\"");
    double mean, sd, lo, hi;
    stats(m.params.data + m.layers[0].b_off, 5000, &mean, &sd, &lo, &hi);
    assert_true(fabs(sd - sqrt(2.0 / 5000)) <= 0.1 * sqrt(2.0 / 5000));
    mw_model_free(&m);
}

/* ---- regularization ---- */

static const char *reg_model =
    "{\"class_name\": \"Sequential\", \"config\": {\"layers\": ["
    "{\"class_name\": \"Conv2D\", \"config\": {\"filters\": 3, \"kernel_size\": 3, "
    " \"batch_input_shape\": [null, 5, 5, 2], \"bias_initializer\": \"ones\","
    " \"kernel_regularizer\": {\"class_name\": \"L2\", \"config\": {\"l2\": 0.03}},"
    " \"bias_regularizer\": {\"class_name\": \"L1\", \"config\": {\"l1\": 0.02}}}},"
    "{\"class_name\": \"Flatten\", \"config\": {}},"
    "{\"class_name\": \"Dense\", \"config\": {\"units\": 4, \"kernel_regularizer\": "
    " {\"class_name\": \"L1L2\", \"config\": {\"l1\": 0.01, \"l2\": 0.05}}}},"
    "{\"class_name\": \"Dense\", \"config\": {\"units\": 2}}]}}";

/* Loss = scale * sum(l1 |w| + l2 w^2); the gradient it adds against central differences of
 * the loss (double), on weights kept away from 0 where |w| has its kink. */
static void test_regularization(void **state)
{
    (void)state;
    mw_model m;
    check_rc(load_text(&m, reg_model, 5, 5, 2, 2), "reg model");
    check_rc(mw_model_finalize(&m, 16), "finalize");
    mw_model_init_params(&m, 5);
    float *p = m.params.data;
    for (size_t i = 0; i < m.params.count; i++)
        if (fabsf(p[i]) < 0.05f && p[i] != 0.0f)
            p[i] = p[i] < 0 ? -0.05f : 0.05f;
    /* by hand */
    double want = 0;
    for (int i = 0; i < m.nlayers; i++) {
        const mw_layer *l = &m.layers[i];
        for (size_t j = 0; j < l->w_count; j++) {
            double w = p[l->w_off + j];
            want += l->kernel_reg.l1 * fabs(w) + l->kernel_reg.l2 * w * w;
        }
        for (size_t j = 0; j < l->b_count; j++) {
            double w = p[l->b_off + j];
            want += l->bias_reg.l1 * fabs(w) + l->bias_reg.l2 * w * w;
        }
    }
    assert_true(want > 0);
    assert_true(fabs(mw_model_regularization(&m, NULL, 1.0f) - want) <= 1e-9 * want + 1e-12);
    const float scale = 0.25f; /* 4 replicas */
    float *g = calloc(m.params.count, sizeof(float));
    for (size_t i = 0; i < m.params.count; i++)
        g[i] = 1.0f; /* it accumulates */
    double got = mw_model_regularization(&m, g, scale);
    assert_true(fabs(got - 0.25 * want) <= 1e-9 * want);
    const float h = 1e-3f;
    size_t bad = 0;
    for (size_t i = 0; i < m.params.count; i++) {
        float save = p[i];
        p[i] = save + h;
        double lp = mw_model_regularization(&m, NULL, 1.0f);
        p[i] = save - h;
        double lm = mw_model_regularization(&m, NULL, 1.0f);
        p[i] = save;
        double num = (lp - lm) / ((double)(save + h) - (double)(save - h));
        double ana = (g[i] - 1.0) / scale;
        if (fabs(num - ana) > 1e-4 + 1e-3 * fabs(ana)) {
            if (!bad)
                fprintf(stderr, "reg gradient [%zu]: numeric %.9g analytic %.9g\n", i, num, ana);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
    /* the last Dense has no regularizer: its gradient is untouched */
    const mw_layer *l = &m.layers[m.nlayers - 1];
    for (size_t j = 0; j < l->w_count; j++)
        assert_true(g[l->w_off + j] == 1.0f);
    free(g);
    mw_model_free(&m);

    /* no regularizers: 0, and no work */
    check_rc(mw_keras_build_tutorial(&m, 28, 28, 1, 10), "tutorial");
    check_rc(mw_model_finalize(&m, 1), "finalize");
    assert_true(mw_model_regularization(&m, NULL, 1.0f) == 0.0);
    mw_model_free(&m);
}

/* ---- dropout ---- */

/* The kernels: ref == cpu bitwise (masks and outputs), in place, kept fraction ~ 1 - rate,
 * kept values scaled by 1 / (1 - rate), ids select the mask rows, backward = dy * mask. */
static void test_dropout_kernels(void **state)
{
    (void)state;
    mw_kernels ref, cpu;
    mw_kernels_init_ref(&ref);
    mw_kernels_init_cpu(&cpu);
    const int N = 6;
    const size_t D = 1001, count = (size_t)N * D;
    const float rates[] = {0.0f, 0.1f, 0.5f, 0.9f};
    float *x = malloc(count * sizeof(float)), *y1 = malloc(count * sizeof(float));
    float *y2 = malloc(count * sizeof(float)), *m1 = malloc(count * sizeof(float));
    float *m2 = malloc(count * sizeof(float)), *dx = malloc(count * sizeof(float));
    float *dy = malloc(count * sizeof(float));
    mw_test_fill_uniform(x, count, 1, 0.5f, 1.5f);
    mw_test_fill_uniform(dy, count, 2, -1.0f, 1.0f);
    const uint32_t ids[6] = {7, 3, 1000000, 0, 42, 7};
    mw_kctx k1 = {.nthreads = 1}, k3 = {.nthreads = 3};
    for (size_t r = 0; r < sizeof rates / sizeof *rates; r++) {
        float rate = rates[r], keep = 1.0f / (1.0f - rate);
        ref.dropout_fwd(&k1, y1, m1, x, ids, 99, 4, rate, N, D);
        cpu.dropout_fwd(&k3, y2, m2, x, ids, 99, 4, rate, N, D);
        assert_memory_equal(m1, m2, count * sizeof(float));
        assert_memory_equal(y1, y2, count * sizeof(float));
        size_t kept = 0;
        for (size_t i = 0; i < count; i++) {
            assert_true(m1[i] == 0.0f || m1[i] == keep);
            assert_true(y1[i] == x[i] * m1[i]);
            kept += m1[i] != 0.0f;
        }
        double frac = (double)kept / (double)count;
        if (fabs(frac - (1.0 - rate)) > 0.03)
            fail_msg("rate %g: kept %.4f of the elements", (double)rate, frac);
        /* ids[0] == ids[5]: the same example id, the same mask row */
        assert_memory_equal(m1, m1 + 5 * D, D * sizeof(float));
        if (rate > 0)
            assert_true(memcmp(m1, m1 + D, D * sizeof(float)) != 0);
        /* in place */
        memcpy(y2, x, count * sizeof(float));
        cpu.dropout_fwd(&k3, y2, m2, y2, ids, 99, 4, rate, N, D);
        assert_memory_equal(y1, y2, count * sizeof(float));
        /* backward, out of place and in place */
        ref.dropout_bwd(&k1, dx, dy, m1, count);
        for (size_t i = 0; i < count; i++)
            assert_true(dx[i] == dy[i] * m1[i]);
        memcpy(y2, dy, count * sizeof(float));
        cpu.dropout_bwd(&k3, y2, y2, m1, count);
        assert_memory_equal(dx, y2, count * sizeof(float));
    }
    /* another seed or another stream (layer): another mask */
    ref.dropout_fwd(&k1, y1, m1, x, ids, 99, 4, 0.5f, N, D);
    ref.dropout_fwd(&k1, y2, m2, x, ids, 100, 4, 0.5f, N, D);
    assert_true(memcmp(m1, m2, count * sizeof(float)) != 0);
    ref.dropout_fwd(&k1, y2, m2, x, ids, 99, 5, 0.5f, N, D);
    assert_true(memcmp(m1, m2, count * sizeof(float)) != 0);
    /* ids NULL: example n has id n */
    const uint32_t seq[6] = {0, 1, 2, 3, 4, 5};
    ref.dropout_fwd(&k1, y1, m1, x, seq, 9, 1, 0.3f, N, D);
    cpu.dropout_fwd(&k3, y2, m2, x, NULL, 9, 1, 0.3f, N, D);
    assert_memory_equal(m1, m2, count * sizeof(float));
    /* empty batch: nothing touched */
    y1[0] = 12345.0f;
    cpu.dropout_fwd(&k3, y1, m1, x, NULL, 9, 1, 0.3f, 0, D);
    cpu.dropout_bwd(&k3, y1, dy, m1, 0);
    assert_true(y1[0] == 12345.0f);
    assert_int_equal(mw_dropout_threshold(0.0f), 0);
    assert_int_equal(mw_dropout_threshold(0.5f), 1u << 23);
    free(x), free(y1), free(y2), free(m1), free(m2), free(dx), free(dy);
}

/* In a model: the mask of an example follows its global id, not its batch position or the
 * micro-batch it lands in; inference (the default) is the identity; ref and cpu agree. */
static void test_dropout_layout(void **state)
{
    (void)state;
    mw_model m;
    load_data_file(&m, "mlp_k3.json");
    check_rc(mw_model_finalize(&m, 1), "finalize");
    mw_model_init_params(&m, 3);
    int di = -1;
    for (int i = 0; i < m.nlayers; i++)
        if (m.layers[i].kind == MW_LAYER_DROPOUT)
            di = i;
    assert_true(di > 0);
    const size_t D = 128;
    mw_kernels kt;
    mw_kernels_init_cpu(&kt);
    mw_model_ws ws;
    mw_model_ws_init(&ws);
    check_rc(mw_model_ws_alloc(&ws, &m, 8), "ws");
    assert_int_equal(ws.training, 0);
    assert_null(ws.example_ids);
    mw_kctx k = {.nthreads = 1, .ws = ws.scratch, .ws_count = ws.scratch_count};
    const size_t img = 28 * 28;
    float *images = malloc(20 * img * sizeof(float));
    mw_test_fill_uniform(images, 20 * img, 8, 0.0f, 1.0f);

    /* inference: the dropout output equals its input (the dense relu output) */
    for (int j = 0; j < 4; j++) {
        memcpy(ws.act[0] + j * img, images + j * img, img * sizeof(float));
        ((int32_t *)ws.y)[j] = j;
    }
    mw_model_forward(&m, &kt, &k, &ws, 4);
    float *before = malloc(4 * D * sizeof(float));
    /* act[di] is the input of the dropout layer, act[di + 1] aliases it (in place) */
    assert_ptr_equal(ws.act[di], ws.act[di + 1]);
    memcpy(before, ws.act[di + 1], 4 * D * sizeof(float));
    float loss_inf = ws.loss[0];

    /* training, batch A: ids {5, 9, 2, 7} at positions 0..3 */
    const uint32_t a[4] = {5, 9, 2, 7};
    float maskA[4][128];
    ws.training = 1;
    ws.dropout_seed = 77;
    ws.example_ids = a;
    for (int j = 0; j < 4; j++)
        memcpy(ws.act[0] + j * img, images + a[j] * img, img * sizeof(float));
    mw_model_forward(&m, &kt, &k, &ws, 4);
    memcpy(maskA, ((float *)ws.buf[di]), sizeof maskA);
    for (int j = 0; j < 4; j++) {
        int zeros = 0;
        for (size_t e = 0; e < D; e++)
            zeros += maskA[j][e] == 0.0f;
        assert_true(zeros > 0 && zeros < (int)D); /* rate 0.2 of 128 */
    }
    assert_true(loss_inf == loss_inf); /* computed */

    /* batch B: ids {7, 100, 5} (7 and 5 moved), then micro-batches of 1 and 2 with ref */
    const uint32_t b[3] = {7, 100, 5};
    for (int j = 0; j < 3; j++)
        memcpy(ws.act[0] + j * img, images + (b[j] % 20) * img, img * sizeof(float));
    ws.example_ids = b;
    mw_model_forward(&m, &kt, &k, &ws, 3);
    assert_memory_equal(((float *)ws.buf[di]) + 0 * D, maskA[3], D * sizeof(float));
    assert_memory_equal(((float *)ws.buf[di]) + 2 * D, maskA[0], D * sizeof(float));
    mw_kernels ref;
    mw_kernels_init_ref(&ref);
    ws.example_ids = a + 2; /* ids 2, 7 as a micro-batch of two */
    mw_model_forward(&m, &ref, &k, &ws, 2);
    assert_memory_equal(((float *)ws.buf[di]), maskA[2], 2 * D * sizeof(float));
    ws.example_ids = a + 1; /* id 9 alone */
    mw_model_forward(&m, &ref, &k, &ws, 1);
    assert_memory_equal(((float *)ws.buf[di]), maskA[1], D * sizeof(float));
    /* the next step's seed: a new mask */
    ws.dropout_seed = 78;
    ws.example_ids = a;
    mw_model_forward(&m, &kt, &k, &ws, 1);
    assert_true(memcmp(((float *)ws.buf[di]), maskA[0], D * sizeof(float)) != 0);

    /* back to inference: identity again, same outputs as before */
    ws.training = 0;
    for (int j = 0; j < 4; j++)
        memcpy(ws.act[0] + j * img, images + j * img, img * sizeof(float));
    mw_model_forward(&m, &kt, &k, &ws, 4);
    assert_memory_equal(ws.act[di + 1], before, 4 * D * sizeof(float));
    assert_true(ws.loss[0] == loss_inf);
    free(before);
    free(images);
    mw_model_ws_free(&ws);
    mw_model_free(&m);
}

/* ---- central differences through a whole model ---- */

typedef struct {
    const mw_model *m;
    const mw_kernels *kt;
    mw_kctx *k;
    mw_model_ws *ws;
    const float *input;
    size_t in_count;
    int n;
    uint64_t choices; /* hash of every maxpool argmax and ReLU sign of the last forward */
} fwd_env;

/* The piece of a piecewise activation that input v falls on: ReLU's with max_value,
 * negative_slope or threshold, hard_sigmoid's and hard_silu's (kinks at -3 and 3). */
static uint64_t piece(const mw_layer *l, float v)
{
    if (l->kind == MW_LAYER_RELUX)
        return (uint64_t)(v > l->relu_threshold) + 2u * (v < l->relu_max) + 4u * (v < 0.0f);
    return (uint64_t)(v > -3.0f) + 2u * (v < 3.0f);
}

/* Forward from the saved input (in-place layers may overwrite act[0]); sum of losses. */
static double model_loss(fwd_env *e)
{
    memcpy(e->ws->act[0], e->input, e->in_count * sizeof(float));
    mw_model_forward(e->m, e->kt, e->k, e->ws, e->n);
    double s = 0;
    for (int i = 0; i < e->n; i++)
        s += e->ws->loss[i];
    e->choices = 0;
    for (int i = 0; i < e->m->nlayers; i++) {
        const mw_layer *l = &e->m->layers[i];
        size_t cnt = (size_t)e->n * l->out_h * l->out_w * l->out_c;
        if (l->kind == MW_LAYER_RELU) /* a step across ReLU's kink */
            for (size_t j = 0; j < cnt; j++)
                e->choices = mw_rng_hash(e->choices, (uint64_t)i, e->ws->act[i + 1][j] > 0.0f);
        if (l->kind == MW_LAYER_RELUX ||
            (l->kind == MW_LAYER_ACT && l->act >= MW_ACTK_HARD_SIGMOID))
            for (size_t j = 0; j < cnt; j++) /* or across a piecewise one's */
                e->choices =
                    mw_rng_hash(e->choices, (uint64_t)i, piece(l, e->ws->act[l->in[0] + 1][j]));
        if (l->kind != MW_LAYER_MAXPOOL)
            continue;
        for (size_t j = 0; j < cnt; j++)
            e->choices =
                mw_rng_hash(e->choices, (uint64_t)i, (uint64_t)((const int32_t *)e->ws->buf[i])[j]);
    }
    return s;
}

/* Conv2D 5x5 'same' (stride 1 and 2), MaxPooling2D 'same' on an odd size, Dropout (mask fixed
 * by seed and ids), Dense, Dropout at the input: analytic gradients of every parameter
 * against central differences (double), with both kernel tables. A step that changes a
 * pool's choice crosses a kink of the loss, where a difference quotient means nothing; such
 * parameters are skipped (a few percent at h = 1e-3) and the rest must all agree. */
static const char *gc_model =
    "{\"class_name\": \"Sequential\", \"config\": {\"layers\": ["
    "{\"class_name\": \"InputLayer\", \"config\": {\"batch_input_shape\": [null, 7, 7, 2]}},"
    "{\"class_name\": \"Dropout\", \"config\": {\"rate\": 0.3}},"
    "{\"class_name\": \"Conv2D\", \"config\": {\"filters\": 3, \"kernel_size\": 5, "
    " \"padding\": \"same\"}},"
    "{\"class_name\": \"MaxPooling2D\", \"config\": {\"pool_size\": 2, \"padding\": \"same\"}},"
    "{\"class_name\": \"Dropout\", \"config\": {\"rate\": 0.5}},"
    "{\"class_name\": \"Conv2D\", \"config\": {\"filters\": 4, \"kernel_size\": [5, 3], "
    " \"strides\": 2, \"padding\": \"same\", \"bias_initializer\": {\"class_name\": "
    " \"RandomNormal\", \"config\": {\"stddev\": 0.1}}}},"
    "{\"class_name\": \"Flatten\", \"config\": {}},"
    "{\"class_name\": \"Dropout\", \"config\": {\"rate\": 0.25}},"
    "{\"class_name\": \"Dense\", \"config\": {\"units\": 5, \"activation\": \"softmax\"}}]}}";

static void gradcheck(int fast)
{
    mw_model m;
    check_rc(load_text(&m, gc_model, 7, 7, 2, 5), "gradcheck model");
    check_rc(mw_model_finalize(&m, 1), "finalize");
    mw_model_init_params(&m, 11);
    assert_int_equal(m.layers[1].conv.PT, 2);
    assert_int_equal(m.layers[2].pool.OH, 4); /* 7 -> 4 */
    const int N = 3;
    mw_kernels kt;
    if (fast)
        mw_kernels_init_cpu(&kt);
    else
        mw_kernels_init_ref(&kt);
    mw_model_ws ws;
    mw_model_ws_init(&ws);
    check_rc(mw_model_ws_alloc(&ws, &m, N), "ws");
    mw_kctx k = {.nthreads = 2, .ws = ws.scratch, .ws_count = ws.scratch_count};
    const size_t in_count = (size_t)N * 7 * 7 * 2;
    float *input = malloc(in_count * sizeof(float));
    mw_test_fill_uniform(input, in_count, 21, -1.0f, 1.0f);
    const uint32_t ids[3] = {4, 17, 9};
    ((int32_t *)ws.y)[0] = 1, ((int32_t *)ws.y)[1] = 4, ((int32_t *)ws.y)[2] = 0;
    ws.training = 1;
    ws.dropout_seed = 5;
    ws.example_ids = ids;
    fwd_env e = {&m, &kt, &k, &ws, input, in_count, N, 0};
    model_loss(&e);
    float *g = mw_alloc_aligned(m.params.count * sizeof(float));
    mw_model_backward(&m, &kt, &k, &ws, g, N, 1.0f);
    int dropped = 0;
    for (size_t i = 0; i < (size_t)N * 7 * 7 * 2; i++)
        dropped += ((float *)ws.buf[0])[i] == 0.0f;
    assert_true(dropped > 0);

    float *p = m.params.data;
    const float h = 1e-3f;
    size_t bad = 0, checked = 0, kinks = 0;
    double maxerr = 0;
    for (size_t i = 0; i < m.params.count; i++) {
        int real = 0;
        for (int l = 0; l < m.nlayers; l++) {
            const mw_layer *L = &m.layers[l];
            real |= (i >= L->w_off && i < L->w_off + L->w_count) ||
                    (i >= L->b_off && i < L->b_off + L->b_count);
        }
        if (!real)
            continue;
        float save = p[i], hi = save + h, lo = save - h;
        p[i] = hi;
        double lp = model_loss(&e);
        uint64_t choices = e.choices;
        p[i] = lo;
        double lm = model_loss(&e);
        p[i] = save;
        if (e.choices != choices) {
            kinks++;
            continue;
        }
        double num = (lp - lm) / ((double)hi - (double)lo);
        double err = fabs(num - g[i]);
        maxerr = err > maxerr ? err : maxerr;
        checked++;
        if (err > 1e-3 + 1e-2 * fabs(g[i])) {
            if (!bad)
                fprintf(stderr, "%s: param %zu: numeric %.9g analytic %.9g\n", kt.name, i, num,
                        (double)g[i]);
            bad++;
        }
    }
    printf("%s: %zu parameters checked, %zu skipped at a kink, max |err| %.3g\n", kt.name, checked,
           kinks, maxerr);
    assert_int_equal(checked + kinks, m.nparams);
    assert_true(kinks <= m.nparams / 10);
    assert_int_equal(bad, 0);
    free(g);
    free(input);
    mw_model_ws_free(&ws);
    mw_model_free(&m);
}

static void test_gradcheck_ref(void **state)
{
    (void)state;
    gradcheck(0);
}

static void test_gradcheck_cpu(void **state)
{
    (void)state;
    gradcheck(1);
}

/* ---- Functional graphs ---- */

/* tests/data/keras/graph/resblock_k{3,2}.json: the same residual block written by Keras 3 and
 * in the Keras 2 form: each layer's inputs, the BN state, the summary's "Connected to", and
 * mw_model_diff finding them equal and finding a changed momentum. */
static void test_graph_configs(void **state)
{
    (void)state;
    mw_model a, b;
    load_data_file(&a, "graph/resblock_k3.json");
    load_data_file(&b, "graph/resblock_k2.json");
    check_rc(mw_model_finalize(&a, 16), "finalize k3");
    /* conv_a conv_a/relu conv_b bn add gap logits */
    static const int want[7][2] = {{-1, -1}, {0, -1}, {1, -1}, {2, -1}, {1, 3}, {4, -1}, {5, -1}};
    assert_int_equal(a.nlayers, 7);
    for (const mw_model *m = &a; m; m = m == &a ? &b : NULL)
        for (int i = 0; i < 7; i++) {
            const mw_layer *l = &m->layers[i];
            assert_int_equal(l->nin, want[i][1] < 0 ? 1 : 2);
            assert_int_equal(l->in[0], want[i][0]);
            if (l->nin == 2)
                assert_int_equal(l->in[1], want[i][1]);
        }
    assert_true(a.graph && b.graph);
    assert_int_equal(a.layers[3].kind, MW_LAYER_BATCHNORM);
    assert_true(a.layers[3].momentum == 0.99f && a.layers[3].epsilon == 1e-3f);
    assert_int_equal(a.nparams, conv_p(3, 3, 1, 4) + conv_p(3, 3, 4, 4) + 4 * 4 + dense_p(4, 10));
    assert_int_equal(a.nstate, 8);
    assert_true(a.layers[1].in_place);  /* conv_a feeds only its relu ... */
    assert_false(a.layers[3].in_place); /* ... whose output feeds conv_b and add */
    char *s = summary_of(&a);
    if (!strstr(s, "conv_a[0][0], bn[0][0]") || !strstr(s, "Non-trainable params: 8\n") ||
        !strstr(s, "input_layer (InputLayer)"))
        fail_msg("graph summary:\n%s", s);
    free(s);
    char what[400];
    assert_int_equal(mw_model_diff(&a, &b, what, sizeof what), 0);
    /* a table without one of the graph ops refuses the model, naming the layer: BN needs
     * its moving-statistics entries too (they run where the gradients live) */
    mw_kernels kt;
    mw_kernels_init_cpu(&kt);
    assert_int_equal(mw_model_check_kernels(&a, &kt), MW_OK);
    kt.bn_stats_update = NULL;
    assert_int_equal(mw_model_check_kernels(&a, &kt), MW_EUNSUPPORTED);
    mw_kernels_init_cpu(&kt);
    kt.bn_bwd = NULL, kt.name = "cuda";
    mw_err_clear();
    assert_int_equal(mw_model_check_kernels(&a, &kt), MW_EUNSUPPORTED);
    assert_string_equal(mw_err_msg(), "layer 'bn' (BatchNormalization): the cuda kernels do not "
                                      "implement it yet; train this model on the CPU "
                                      "(--device cpu)");
    mw_err_clear();
    mw_model c;
    char *path = mw_test_srcpath("tests/data/keras/graph/resblock_k3.json");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = calloc(1, 1 << 20);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    free(path);
    char *mom = strstr(text, "\"momentum\": 0.99");
    assert_non_null(mom);
    memcpy(mom, "\"momentum\": 0.90", 16);
    check_rc(mw_keras_load(&c, text, n, "c.json", 28, 28, 1, 10), "modified");
    assert_int_equal(mw_model_diff(&a, &c, what, sizeof what), 1);
    if (!strstr(what, "layer 2 (bn): momentum 0.99 in the checkpoint, 0.9 in --model"))
        fail_msg("diff: %s", what);
    /* synchronized: the layer says so, a different flag is a different model, and a table
     * without the synchronized entries refuses it (naming the layer and the way out) */
    memcpy(mom, "\"momentum\": 0.99", 16);
    char *sync = strstr(text, "\"synchronized\": false");
    assert_non_null(sync);
    memcpy(sync, "\"synchronized\": true ", 21);
    mw_model d;
    check_rc(mw_keras_load(&d, text, n, "d.json", 28, 28, 1, 10), "synchronized");
    assert_true(d.layers[3].sync && !a.layers[3].sync);
    assert_true(mw_model_has_sync(&d) && !mw_model_has_sync(&a));
    assert_int_equal(mw_model_diff(&a, &d, what, sizeof what), 1);
    if (!strstr(what, "layer 2 (bn): synchronized false in the checkpoint, true in --model"))
        fail_msg("diff: %s", what);
    check_rc(mw_model_finalize(&d, 16), "finalize d");
    mw_kernels_init_cpu(&kt);
    assert_int_equal(mw_model_check_kernels(&d, &kt), MW_OK);
    kt.bn_sync_bwd = NULL, kt.name = "cuda";
    assert_int_equal(mw_model_check_kernels(&a, &kt), MW_OK);
    assert_int_equal(mw_model_check_kernels(&d, &kt), MW_EUNSUPPORTED);
    assert_string_equal(mw_err_msg(), "layer 'bn' (BatchNormalization): synchronized true: the "
                                      "cuda backend cannot all-reduce batch statistics yet; train "
                                      "this model on the CPU (--device cpu) or set synchronized "
                                      "false");
    mw_err_clear();
    free(text);
    mw_model_free(&a), mw_model_free(&b), mw_model_free(&c), mw_model_free(&d);
}

/* Central differences through tests/data/keras/graph/gradcheck_k2.json: padding, a strided
 * convolution whose output feeds a ReLU and a BN (so neither runs in place and the gradient
 * adds up from both), Add, Dropout and Multiply on a shared tensor, Concatenate, average
 * pooling, tanh feeding Flatten and GlobalMaxPooling2D, gelu, elu, BN on a flat Dense, a
 * softmax in the middle. Training mode (BN uses the batch statistics, so every example's loss
 * depends on every other's), both kernel tables, every trainable parameter; a step that
 * changes a max pooling's choice is skipped as in gradcheck(). The same through
 * tests/data/keras/graph/gradcheck_crop.json: two Cropping2D of one convolution's output added
 * (their backward adds into the shared gradient), and a Cropping2D after a tanh. The same
 * through tests/data/keras/graph/gradcheck_mha.json: a Reshape of the image into 28 steps, a
 * causal self-attention with dropout of its probabilities (the multipliers keyed by the
 * example ids, the same in every forward), and a cross-attention whose query, value and key
 * are three tensors (an output_shape of its own), then Add, LayerNormalization and the 1-D
 * pooling: every projection's kernel and bias, through the masked softmax. The same through
 * tests/data/keras/graph/gradcheck_act.json: the activation classes (LeakyReLU and ELU, both
 * reading one convolution, added), GlobalAveragePooling2D, and a Softmax layer between two
 * Dense. And through the token models, whose input is 784 token ids below 20:
 * tests/data/keras/graph/gradcheck_tokens.json (Embedding, Conv1D, MaxPooling1D,
 * AveragePooling1D, GlobalMaxPooling1D) and gradcheck_tokens_pos.json (KerasHub's
 * TokenAndPositionEmbedding, PositionEmbedding and SinePositionEncoding added, the 1-D
 * average) and gradcheck_tokens_fn.json (gradcheck_tokens' layers as a Functional model):
 * every row of both tables; gradcheck_tokens_rope.json (KerasHub's RotaryEmbedding twice, the
 * default and another max_wavelength, scaling_factor and denominator_dim, before a Dense on
 * each position): the table's gradient through both rotations. */
/* The residual Adds that run fused with their sums' normalization (worker/model/plan.c:
 * plan_fusion), counted, so that the finite differences check the fused backward on both tables:
 * the pre-norm and post-norm blocks of gradcheck_transformer, Llama's and Gemma's (RMS), ViT's
 * and gradcheck_mha's; no other model has one. */
static void check_fused(const mw_model *m, const char *rel)
{
    static const struct {
        const char *model;
        int pairs;
    } want[] = {{"llama", 3}, {"gemma", 3}, {"transformer", 3}, {"vit", 4}, {"mha", 1}};
    int fused = 0, expect = 0;
    for (int i = 0; i < m->nlayers; i++)
        fused += m->layers[i].fuse_norm;
    for (size_t j = 0; j < sizeof want / sizeof *want; j++)
        expect = strstr(rel, want[j].model) ? want[j].pairs : expect;
    assert_int_equal(fused, expect);
}

static void graph_gradcheck(int fast, const char *rel)
{
    mw_model m;
    char *path = mw_test_srcpath(rel);
    mw_err_clear();
    check_rc(mw_keras_load_file(&m, path, 28, 28, 1, 10), path);
    free(path);
    check_rc(mw_model_finalize(&m, 1), "finalize");
    mw_model_init_params(&m, 13);
    check_fused(&m, rel);
    const int gemma = strstr(rel, "gemma") != NULL;
    if (strstr(rel, "llama") || gemma) { /* two blocks, each one attention: 4 on 2, 2 on 1 */
        int at = 0, blocks = 0, norms = 0;
        static const int kv[2][3] = {{4, 2, 6}, {2, 1, 4}}; /* Gemma's head_dim 6 and 4 */
        for (int i = 0; i < m.nlayers; i++) {
            const mw_layer *l = &m.layers[i];
            blocks += l->block_first && !strcmp(l->block_cls, gemma ? "GemmaDecoderBlock"
                                                                    : "LlamaTransformerDecoder");
            if (l->kind == MW_LAYER_RMSNORM && gemma) /* (1 + scale): scales away from 0 */
                mw_test_fill_uniform(m.params.data + l->w_off, l->w_count, 60 + (uint64_t)norms++,
                                     -0.5f, 0.5f);
            if (l->kind != MW_LAYER_MHA)
                continue;
            assert_true(at < 2 && l->mha.rope && !l->has_bias && l->mha.causal);
            assert_int_equal(l->mha.gemma, gemma);
            assert_true(!gemma || l->mha.key_dim == kv[at][2]);
            assert_int_equal(l->mha.heads, kv[at][0]);
            assert_int_equal(l->mha.kv_heads, kv[at++][1]);
        }
        assert_int_equal(at, 2);
        assert_int_equal(blocks, 2);
        assert_int_equal(norms, gemma ? 6 : 0); /* Gemma 2's post norms in the first block */
    } else if (strstr(rel, "mha") || strstr(rel, "transformer")) {
        int mha = 0, blocks = 0;
        for (int i = 0; i < m.nlayers; i++) {
            mha += m.layers[i].kind == MW_LAYER_MHA;
            blocks += m.layers[i].block_first;
        }
        assert_int_equal(mha, 2);
        assert_int_equal(blocks, strstr(rel, "transformer") ? 2 : 0);
    } else if (strstr(rel, "rope")) {
        assert_int_equal(m.layers[2].kind, MW_LAYER_ROPE);
        assert_int_equal(m.layers[2].rope.denom, 8); /* the features: no denominator_dim */
        assert_int_equal(m.layers[3].kind, MW_LAYER_ROPE);
        assert_int_equal(m.layers[3].rope.denom, 6);
        assert_true(m.layers[3].rope.scale == 2.0f && m.layers[3].rope.max_wavelength == 100.0f);
    } else if (strstr(rel, "tokens")) {
        assert_int_equal(m.layers[0].kind, MW_LAYER_EMBED);
        int tied = 0;
        for (int i = 0; i < m.nlayers; i++) /* the reverse call: the table of layer 0, no own */
            tied += m.layers[i].kind == MW_LAYER_REVEMB && m.layers[i].tied == 1 &&
                    !m.layers[i].w_count;
        assert_int_equal(tied, strstr(rel, "tied") ? 1 : 0);
        assert_int_equal(m.layers[0].untied, strstr(rel, "untied") ? 1 : 0);
        if (!strstr(rel, "pos") && !strstr(rel, "tied")) /* "Conv1D", in either model kind */
            assert_string_equal(m.layers[1].cls, "Conv1D");
    } else if (strstr(rel, "_se")) {
        int bcast = 0;
        for (int i = 0; i < m.nlayers; i++)
            bcast += m.layers[i].bcast;
        assert_int_equal(bcast, 3);     /* se, shift, gate; not the residual x + y */
        assert_false(m.layers[1].flat); /* keepdims: (None, 1, 1, 6) */
    } else if (strstr(rel, "apps")) {
        int konst = 0, root2 = 0;
        for (int i = 0; i < m.nlayers; i++) {
            konst += m.layers[i].konst;
            root2 += m.layers[i].konst && m.layers[i].kscale == 1.4142135f; /* the tensor's */
        }
        assert_int_equal(root2, 1);
        assert_int_equal(konst, 3); /* y * 0.5 + 1.0, then times a scalar tensor */
        assert_int_equal(m.nnests, 2);
        assert_int_equal(m.layers[2].kind, MW_LAYER_LAYERSCALE);
    } else if (strstr(rel, "act")) {
        int acts = 0, softmax = 0;
        for (int i = 0; i < m.nlayers; i++) {
            acts += m.layers[i].kind == MW_LAYER_ACT && !m.layers[i].in_place;
            softmax += m.layers[i].kind == MW_LAYER_SOFTMAX;
        }
        assert_int_equal(acts, 2); /* both read c1: neither runs in place */
        assert_int_equal(softmax, 1);
    } else if (strstr(rel, "misc")) {
        assert_int_equal(m.layers[1].kind, MW_LAYER_RELUX);
        assert_int_equal(m.layers[2].act, MW_ACTK_HARD_SILU);
        assert_int_equal(m.layers[3].act, MW_ACTK_HARD_SIGMOID);
        assert_int_equal(m.layers[6].noise, MW_NOISE_CHANNEL); /* SpatialDropout1D */
        assert_int_equal(m.layers[9].noise, MW_NOISE_EXAMPLE);
        assert_int_equal(m.layers[11].kind, MW_LAYER_NORMALIZE);
        assert_false(m.layers[12].flat); /* keepdims: (None, 1, 1, 4) */
    } else if (strstr(rel, "rms")) {
        /* the four classes, each scale drawn away from its initializer (ones; Gemma's zeros),
         * so that gamma + offset is checked, not only its start */
        static const int at[] = {1, 2, 4, 5, 7};
        static const char *const cls[] = {"RMSNormalization", "LayerNormalization",
                                          "LlamaLayerNorm", "RMSNormalization", "RMSNormalization"};
        for (int j = 0; j < 5; j++) {
            mw_layer *l = &m.layers[at[j]];
            assert_int_equal(l->kind, MW_LAYER_RMSNORM);
            assert_string_equal(l->cls, cls[j]);
            mw_test_fill_uniform(m.params.data + l->w_off, l->w_count, 40 + (uint64_t)j,
                                 j == 3 ? -0.5f : 0.5f, j == 3 ? 0.5f : 1.5f);
        }
    } else if (strstr(rel, "norm")) {
        assert_int_equal(m.layers[1].kind, MW_LAYER_GROUPNORM);
        assert_int_equal(m.layers[1].groups, 3);
        assert_int_equal(m.layers[3].groups, 4); /* groups -1: one per channel */
    } else if (strstr(rel, "dwconv")) {
        assert_int_equal(m.layers[1].kind, MW_LAYER_DWCONV);
        assert_int_equal(m.layers[1].conv.O, 8);             /* depth_multiplier 2 of 4 channels */
        assert_int_equal(m.layers[3].kind, MW_LAYER_DWCONV); /* Conv2D(groups = 8) */
        assert_string_equal(m.layers[3].cls, "Conv2D");
        assert_int_equal(m.layers[5].kind, MW_LAYER_SEPCONV);
        assert_int_equal(m.layers[7].conv.DH, 2);
    } else if (strstr(rel, "_up")) {
        int tr = 0, bilinear = 0, nearest = 0;
        for (int i = 0; i < m.nlayers; i++) {
            tr += m.layers[i].kind == MW_LAYER_CONV2DT;
            bilinear += m.layers[i].kind == MW_LAYER_UPSAMPLE && m.layers[i].bilinear;
            nearest += m.layers[i].kind == MW_LAYER_UPSAMPLE && !m.layers[i].bilinear;
        }
        assert_int_equal(tr, 3);
        assert_int_equal(bilinear, 1);
        assert_int_equal(nearest, 1);
    } else if (strstr(rel, "_vit")) {
        int token = 0, blocks = 0, mha = 0;
        for (int i = 0; i < m.nlayers; i++) {
            token += m.layers[i].kind == MW_LAYER_CLSTOKEN;
            blocks += m.layers[i].block_first;
            mha += m.layers[i].kind == MW_LAYER_MHA;
        }
        assert_int_equal(token, 1);
        assert_int_equal(blocks, 3); /* the patching, the block, the encoder */
        assert_int_equal(mha, 2);
        const mw_layer *get = &m.layers[m.nlayers - 5]; /* x[:, 0]: the crop of step 0, flat */
        assert_string_equal(get->cls, "GetItem");
        assert_int_equal(get->kind, MW_LAYER_CROP);
        assert_true(get->flat && get->pad[2] == 0 && get->pad[3] == 16);
        const mw_layer *mean = get + 1; /* ops.mean(x, axis=[1]): the steps' global average */
        assert_string_equal(mean->cls, "Mean");
        assert_true(mean->kind == MW_LAYER_AVGPOOL && mean->global && mean->flat);
    } else if (strstr(rel, "k2")) {
        assert_false(m.layers[2].in_place); /* r1 reads c1, which bn reads too */
        assert_int_equal(m.layers[2].kind, MW_LAYER_RELU);
    } else {
        assert_int_equal(m.layers[1].kind, MW_LAYER_CROP);
        assert_int_equal(m.layers[2].kind, MW_LAYER_CROP);
    }
    const int N = 3;
    mw_kernels kt;
    if (fast)
        mw_kernels_init_cpu(&kt);
    else
        mw_kernels_init_ref(&kt);
    mw_model_ws ws;
    mw_model_ws_init(&ws);
    check_rc(mw_model_ws_alloc(&ws, &m, N), "ws");
    mw_kctx k = {.nthreads = 2, .ws = ws.scratch, .ws_count = ws.scratch_count};
    const size_t in_count = (size_t)N * 28 * 28;
    float *input = malloc(in_count * sizeof(float));
    mw_test_fill_uniform(input, in_count, 23, -1.0f, 1.0f);
    if (strstr(rel, "tokens")) /* token ids below the fixtures' vocabulary of 20 */
        for (size_t i = 0; i < in_count; i++)
            input[i] = (float)(int)((input[i] + 1.0f) * 9.99f);
    const uint32_t ids[3] = {3, 8, 1};
    ((int32_t *)ws.y)[0] = 4, ((int32_t *)ws.y)[1] = 9, ((int32_t *)ws.y)[2] = 2;
    ws.training = 1;
    ws.dropout_seed = 9;
    ws.example_ids = ids;
    fwd_env e = {&m, &kt, &k, &ws, input, in_count, N, 0};
    model_loss(&e);
    float *g = mw_alloc_aligned(m.params.count * sizeof(float));
    memset(g, 0, m.params.count * sizeof(float));
    mw_model_backward(&m, &kt, &k, &ws, g, N, 1.0f);
    float *p = m.params.data;
    /* gradcheck_apps' float32 loss rounds more coarsely: its worst error at a step of 1e-3,
     * 3e-3 and 1e-2 is 1.1e-3, 4e-4 and 1.1e-4, shrinking as 1 / h (the loss's rounding
     * divided by the step, not an error of the gradients, which Keras' float64 step confirms
     * to 2.5e-6 in parity.py), so its step is 3e-3 */
    const float h = strstr(rel, "apps") ? 3e-3f : 1e-3f;
    size_t bad = 0, checked = 0, kinks = 0;
    double maxerr = 0, maxg = 0; /* maxg: the checked gradients are not all near 0 */
    for (int li = 0; li < m.nlayers; li++) {
        const mw_layer *L = &m.layers[li];
        for (size_t q = 0; q < L->w_count + L->b_count; q++) {
            size_t i = q < L->w_count ? L->w_off + q : L->b_off + (q - L->w_count);
            float save = p[i], hi = save + h, lo = save - h;
            p[i] = hi;
            double lp = model_loss(&e);
            uint64_t choices = e.choices;
            p[i] = lo;
            double lm = model_loss(&e);
            p[i] = save;
            if (e.choices != choices) {
                kinks++;
                continue;
            }
            double num = (lp - lm) / ((double)hi - (double)lo), err = fabs(num - g[i]);
            maxerr = err > maxerr ? err : maxerr;
            maxg = fabs(g[i]) > maxg ? fabs(g[i]) : maxg;
            checked++;
            if (err > 1e-3 + 1e-2 * fabs(g[i])) {
                if (!bad)
                    fprintf(stderr, "%s: %s param %zu: numeric %.9g analytic %.9g\n", kt.name,
                            L->name, q, num, (double)g[i]);
                bad++;
            }
        }
    }
    printf("%s %s: %zu parameters checked, %zu skipped at a kink, max |err| %.3g, max |gradient| "
           "%.3g\n",
           kt.name, m.name, checked, kinks, maxerr, maxg);
    assert_int_equal(checked + kinks, m.nparams - m.nstate);
    assert_true(kinks <= m.nparams / 10);
    assert_int_equal(bad, 0);
    free(g);
    free(input);
    mw_model_ws_free(&ws);
    mw_model_free(&m);
}

static void test_graph_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_k2.json");
}

static void test_graph_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_k2.json");
}

static void test_crop_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_crop.json");
}

static void test_crop_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_crop.json");
}

/* Conv2DTranspose (same with the kernel above the stride, valid with it below, output_padding
 * on one axis) and UpSampling2D (bilinear, nearest 2 x 3), Concatenated. */
static void test_up_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_up.json");
}

static void test_up_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_up.json");
}

static void test_mha_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_mha.json");
}

static void test_mha_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_mha.json");
}

/* KerasHub's blocks as this program builds them (tests/data/keras/graph/
 * gradcheck_transformer.json): a Dense on each of 28 steps, a pre-norm TransformerEncoder with
 * dropout (of the probabilities and of both branches), a post-norm TransformerDecoder (causal,
 * gelu), the 1-D pooling and a Dense: every parameter of every part, both kernel tables. */
static void test_act_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_act.json");
}

static void test_act_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_act.json");
}

static void test_misc_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_misc.json");
}

static void test_misc_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_misc.json");
}

static void test_norm_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_norm.json");
}

static void test_norm_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_norm.json");
}

static void test_rms_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_rms.json");
}

static void test_rms_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_rms.json");
}

static void test_dwconv_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_dwconv.json");
}

static void test_dwconv_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_dwconv.json");
}

static void test_tokens_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_tokens.json");
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_tokens_pos.json");
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_tokens_fn.json");
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_tokens_rope.json");
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_tokens_tied.json");
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_tokens_untied.json");
}

static void test_tokens_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_tokens.json");
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_tokens_pos.json");
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_tokens_fn.json");
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_tokens_rope.json");
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_tokens_tied.json");
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_tokens_untied.json");
}

/* The broadcasting merges (tests/data/keras/graph/gradcheck_se.json): the gradient of the
 * broadcast operand is the sum over the axes it is broadcast on. Then gradcheck_apps.json:
 * keras.applications' LayerScale (its gamma's gradient summed over the pixels),
 * StochasticDepth and CustomScaleLayer in nested models, and operations' constant operands (a
 * number, and a scalar tensor written as __tensor__). */
static void test_se_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_se.json");
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_apps.json");
}

static void test_se_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_se.json");
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_apps.json");
}

/* KerasHub's ViT layers as this program builds them (tests/data/keras/graph/gradcheck_vit.json):
 * the patches' convolution, the class token and the position table, a ViTEncoderBlock without
 * biases, a ViTEncoder with dropout, x[:, 0] and a Dense: every parameter, both tables. */
static void test_vit_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_vit.json");
}

static void test_vit_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_vit.json");
}

static void test_transformer_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_transformer.json");
}

static void test_transformer_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_transformer.json");
}

/* KerasHub's LlamaTransformerDecoder as this program builds it (tests/data/keras/graph/
 * gradcheck_llama.json): two blocks, 4 query heads on 2 key heads and 2 on 1 (grouped-query
 * attention, the rotation of the query and key, the gated feed-forward network): every
 * parameter of every part, both kernel tables. */
static void test_llama_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_llama.json");
}

static void test_llama_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_llama.json");
}

/* KerasHub's GemmaDecoderBlock as this program builds it (tests/data/keras/graph/
 * gradcheck_gemma.json): two blocks, 4 query heads of head_dim 6 on 2 key heads with Gemma 2's
 * post norms, and 2 on 1 (the (1 + scale) norms, the rotation, the gated GELU feed-forward):
 * every parameter of every part, both kernel tables. */
static void test_gemma_gradcheck_ref(void **state)
{
    (void)state;
    graph_gradcheck(0, "tests/data/keras/graph/gradcheck_gemma.json");
}

static void test_gemma_gradcheck_cpu(void **state)
{
    (void)state;
    graph_gradcheck(1, "tests/data/keras/graph/gradcheck_gemma.json");
}

/* The memory estimate counts what a MultiHeadAttention keeps for its backward: per example
 * its projections, the heads' outputs, their gradients, and the probabilities (heads x T x S
 * floats, the term that grows with the square of the context): 32 more examples cost at
 * least 32 x that much more workspace. */
static void test_mha_memory(void **state)
{
    (void)state;
    mw_model m;
    char *path = mw_test_srcpath("tests/data/keras/graph/gradcheck_mha.json");
    mw_err_clear();
    check_rc(mw_keras_load_file(&m, path, 28, 28, 1, 10), path);
    free(path);
    check_rc(mw_model_finalize(&m, 1), "finalize");
    size_t per = 0; /* floats per example kept by the attentions */
    for (int i = 0; i < m.nlayers; i++) {
        const mw_layer *l = &m.layers[i];
        if (l->kind != MW_LAYER_MHA)
            continue;
        const mw_mha *a = &l->mha;
        const size_t T = (size_t)l->in_w, S = (size_t)a->steps, H = (size_t)a->heads;
        per += 2 * (T * H * a->key_dim + S * H * a->key_dim + S * H * a->value_dim +
                    T * H * a->value_dim) +
               H * T * S;
    }
    assert_true(per > 0);
    const size_t d = mw_model_ws_nbytes(&m, 64) - mw_model_ws_nbytes(&m, 32);
    if (d < 32 * per * sizeof(float))
        fail_msg("32 more examples add %zu bytes of workspace; the attentions alone keep %zu", d,
                 32 * per * sizeof(float));
    mw_model_free(&m);
}

/* ---- a few training steps per config ---- */

/* Class k: a bright 6x6 patch at a place of its own, on uniform noise. */
static void synth(float *x, int32_t *labels, int n, uint64_t seed)
{
    mw_rng r;
    mw_rng_seed(&r, seed, 1);
    for (int i = 0; i < n; i++) {
        int k = i % 10;
        float *im = x + (size_t)i * 784;
        for (int j = 0; j < 784; j++)
            im[j] = 0.3f * mw_rng_uniform(&r);
        int r0 = 2 + (k / 5) * 13, c0 = 1 + (k % 5) * 5;
        for (int a = 0; a < 6; a++)
            for (int b = 0; b < 6 && c0 + b < 28; b++)
                im[(r0 + a) * 28 + c0 + b] = 1.0f;
        labels[i] = k;
    }
}

/* Adam on a fixed batch of 40 with dropout and regularization on: the mean loss of the last
 * 3 of 25 steps is well below that of the first 3. */
static void test_training(void **state)
{
    (void)state;
    size_t nc;
    const config_expect *cs = good_configs(&nc);
    const int N = 40, steps = 25;
    float *x = malloc((size_t)N * 784 * sizeof(float));
    int32_t *labels = malloc(N * sizeof(int32_t));
    uint32_t ids[40];
    synth(x, labels, N, 3);
    for (int i = 0; i < N; i++)
        ids[i] = (uint32_t)(1000 + i);
    mw_kernels kt;
    mw_kernels_init_cpu(&kt);
    for (size_t ci = 0; ci < nc; ci++) {
        mw_model m;
        load_data_file(&m, cs[ci].file);
        check_rc(mw_model_finalize(&m, 16), "finalize");
        mw_model_init_params(&m, 42);
        const size_t count = m.params.count;
        mw_model_ws ws;
        mw_model_ws_init(&ws);
        check_rc(mw_model_ws_alloc(&ws, &m, N), "ws");
        mw_kctx k = {.nthreads = 2, .ws = ws.scratch, .ws_count = ws.scratch_count};
        float *g = mw_alloc_aligned(count * sizeof(float));
        float *m1 = mw_alloc_aligned(count * sizeof(float));
        float *m2 = mw_alloc_aligned(count * sizeof(float));
        double first = 0, last = 0;
        ws.training = 1;
        ws.example_ids = ids;
        for (int s = 0; s < steps; s++) {
            memcpy(ws.act[0], x, (size_t)N * 784 * sizeof(float));
            memcpy(ws.y, labels, N * sizeof(int32_t));
            ws.dropout_seed = mw_rng_hash(42, 0xd1, (uint64_t)s);
            memset(g, 0, count * sizeof(float));
            mw_model_forward(&m, &kt, &k, &ws, N);
            mw_model_backward(&m, &kt, &k, &ws, g, N, 1.0f / N);
            double loss = mw_model_regularization(&m, g, 1.0f);
            for (int i = 0; i < N; i++)
                loss += ws.loss[i] / N;
            if (s < 3)
                first += loss / 3;
            if (s >= steps - 3)
                last += loss / 3;
            double lr_t = 3e-3 * sqrt(1.0 - pow(0.999, s + 1)) / (1.0 - pow(0.9, s + 1));
            mw_optim_hyper h = {.lr = (float)lr_t, .gscale = 1.0f, .epsilon = 1e-7f};
            h.one_minus_beta1 = (float)(1.0 - 0.9), h.one_minus_beta2 = (float)(1.0 - 0.999);
            kt.adam_step(&k, m.params.data, m1, m2, NULL, g, count, &h);
        }
        printf("%-22s loss %.4f -> %.4f\n", cs[ci].file, first, last);
        if (!(last < 0.6 * first))
            fail_msg("%s: loss %.4f over the first steps, %.4f over the last: not falling",
                     cs[ci].file, first, last);
        free(g), free(m1), free(m2);
        mw_model_ws_free(&ws);
        mw_model_free(&m);
    }
    free(x);
    free(labels);
}

/* test_keras [K/N]: every test, or shard K of N (tests/util.h: mw_test_run_shard) */
int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_configs),
        cmocka_unit_test(test_config_details),
        cmocka_unit_test(test_input_shapes),
        cmocka_unit_test(test_graph_empty_layers),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_builtin_tutorial),
        cmocka_unit_test(test_initializers),
        cmocka_unit_test(test_regularization),
        cmocka_unit_test(test_dropout_kernels),
        cmocka_unit_test(test_dropout_layout),
        cmocka_unit_test(test_gradcheck_ref),
        cmocka_unit_test(test_graph_configs),
        cmocka_unit_test(test_graph_gradcheck_ref),
        cmocka_unit_test(test_graph_gradcheck_cpu),
        cmocka_unit_test(test_crop_gradcheck_ref),
        cmocka_unit_test(test_crop_gradcheck_cpu),
        cmocka_unit_test(test_mha_gradcheck_ref),
        cmocka_unit_test(test_mha_gradcheck_cpu),
        cmocka_unit_test(test_up_gradcheck_ref),
        cmocka_unit_test(test_up_gradcheck_cpu),
        cmocka_unit_test(test_act_gradcheck_ref),
        cmocka_unit_test(test_act_gradcheck_cpu),
        cmocka_unit_test(test_misc_gradcheck_ref),
        cmocka_unit_test(test_misc_gradcheck_cpu),
        cmocka_unit_test(test_norm_gradcheck_ref),
        cmocka_unit_test(test_norm_gradcheck_cpu),
        cmocka_unit_test(test_rms_gradcheck_ref),
        cmocka_unit_test(test_rms_gradcheck_cpu),
        cmocka_unit_test(test_dwconv_gradcheck_ref),
        cmocka_unit_test(test_dwconv_gradcheck_cpu),
        cmocka_unit_test(test_tokens_gradcheck_ref),
        cmocka_unit_test(test_tokens_gradcheck_cpu),
        cmocka_unit_test(test_se_gradcheck_ref),
        cmocka_unit_test(test_se_gradcheck_cpu),
        cmocka_unit_test(test_vit_gradcheck_ref),
        cmocka_unit_test(test_vit_gradcheck_cpu),
        cmocka_unit_test(test_transformer_gradcheck_ref),
        cmocka_unit_test(test_transformer_gradcheck_cpu),
        cmocka_unit_test(test_llama_gradcheck_ref),
        cmocka_unit_test(test_llama_gradcheck_cpu),
        cmocka_unit_test(test_gemma_gradcheck_ref),
        cmocka_unit_test(test_gemma_gradcheck_cpu),
        cmocka_unit_test(test_mha_memory),
        cmocka_unit_test(test_gradcheck_cpu),
        cmocka_unit_test(test_training),
    };
    return mw_test_run_shard("keras", tests, sizeof tests / sizeof *tests, argc, argv);
}

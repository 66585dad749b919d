/* The whole model against an external oracle: tests/data/cnn_fixture.bin,
 * written by tests/gen_fixture.py with PyTorch (float64). Fixed weights and 16
 * Fashion-MNIST images must give PyTorch's logits, losses, every gradient and
 * the weights after one Keras Adam and one SGD step, with both the reference
 * and the fast CPU kernels. Also: model-building errors, Keras parameter
 * counts, and mw_model_diff on pairs of Keras JSON (each difference and its message). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/table.h"
#include "kernels/ref/table.h"
#include "tests/util.h"
#include "worker/keras/keras.h"
#include "worker/model/diff.h"
#include "worker/model/layers/conv2d.h"
#include "worker/model/layers/dense.h"
#include "worker/model/layers/pooling.h"
#include "worker/model/layers/reshape.h"
#include "worker/model/model.h"
#include "worker/model/model_ws.h"
#include "worker/model/weights.h"

typedef struct {
    char name[64];
    int ndim, dims[8];
    size_t count;
    float *data;
} record;

typedef struct {
    record *r;
    int n;
} fixture;

static fixture fx;

static int read_u32(FILE *f, unsigned *v)
{
    unsigned char b[4];
    if (fread(b, 1, 4, f) != 4)
        return -1;
    *v = b[0] | b[1] << 8 | b[2] << 16 | (unsigned)b[3] << 24;
    return 0;
}

static int load_fixture(void **state)
{
    (void)state;
    char *path = mw_test_srcpath("tests/data/cnn_fixture.bin");
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (set MW_SRCDIR to the source root)\n", path);
        free(path);
        return -1;
    }
    free(path);
    char magic[4];
    unsigned version, n;
    if (fread(magic, 1, 4, f) != 4 || memcmp(magic, "MWFX", 4) || read_u32(f, &version) ||
        version != 1 || read_u32(f, &n) || n > 1000)
        goto bad;
    fx.r = calloc(n, sizeof *fx.r);
    fx.n = (int)n;
    for (unsigned i = 0; i < n; i++) {
        record *r = &fx.r[i];
        unsigned len, nd, d;
        if (read_u32(f, &len) || len >= sizeof r->name || fread(r->name, 1, len, f) != len ||
            read_u32(f, &nd) || nd > 8)
            goto bad;
        r->ndim = (int)nd;
        r->count = 1;
        for (unsigned j = 0; j < nd; j++) {
            if (read_u32(f, &d))
                goto bad;
            r->dims[j] = (int)d;
            r->count *= d;
        }
        r->data = malloc(r->count * sizeof(float) + 1);
        if (fread(r->data, sizeof(float), r->count, f) != r->count)
            goto bad;
    }
    fclose(f);
    return 0;
bad:
    fprintf(stderr, "cnn_fixture.bin: malformed\n");
    fclose(f);
    return -1;
}

static int free_fixture(void **state)
{
    (void)state;
    for (int i = 0; i < fx.n; i++)
        free(fx.r[i].data);
    free(fx.r);
    return 0;
}

static const record *get(const char *name)
{
    for (int i = 0; i < fx.n; i++)
        if (!strcmp(fx.r[i].name, name))
            return &fx.r[i];
    fprintf(stderr, "fixture has no record '%s'\n", name);
    fail();
    return NULL;
}

static const char *const pnames[] = {"conv2d/kernel",  "conv2d/bias",  "conv2d_1/kernel",
                                     "conv2d_1/bias",  "dense/kernel", "dense/bias",
                                     "dense_1/kernel", "dense_1/bias"};

/* View of parameter p (index into pnames) in an arena with the model's layout. */
static float *pview(const mw_model *m, float *base, int p, size_t *count)
{
    int seen = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        if (!l->w_count)
            continue;
        if (seen == p / 2) {
            *count = p % 2 ? l->b_count : l->w_count;
            return base + (p % 2 ? l->b_off : l->w_off);
        }
        seen++;
    }
    fail();
    return NULL;
}

/* Largest |x| of a record, to scale the tolerance per tensor. */
static float absmax(const record *r)
{
    float m = 0;
    for (size_t i = 0; i < r->count; i++)
        m = fabsf(r->data[i]) > m ? fabsf(r->data[i]) : m;
    return m;
}

static void run_fixture(int fast)
{
    mw_kernels kt;
    if (fast)
        mw_kernels_init_cpu(&kt);
    else
        mw_kernels_init_ref(&kt);
    mw_model m;
    assert_int_equal(mw_keras_build_tutorial(&m, 28, 28, 1, 10), MW_OK);
    assert_int_equal(mw_model_finalize(&m, 64), MW_OK);
    for (int p = 0; p < 8; p++) {
        char nm[80];
        snprintf(nm, sizeof nm, "w/%s", pnames[p]);
        const record *r = get(nm);
        size_t count = 0;
        float *v = pview(&m, m.params.data, p, &count);
        assert_int_equal(count, r->count);
        memcpy(v, r->data, count * sizeof(float));
    }
    const record *img = get("images"), *lab = get("labels");
    const int N = img->dims[0];
    mw_model_ws ws;
    mw_model_ws_init(&ws);
    assert_int_equal(mw_model_ws_alloc(&ws, &m, N), MW_OK);
    memcpy(ws.act[0], img->data, img->count * sizeof(float));
    for (int i = 0; i < N; i++)
        ((int32_t *)ws.y)[i] = (int32_t)lab->data[i];
    mw_kctx k = {.nthreads = 2, .ws = ws.scratch, .ws_count = ws.scratch_count};

    mw_model_forward(&m, &kt, &k, &ws, N);
    const record *logits = get("logits"), *losses = get("losses");
    expect_close(ws.act[m.nlayers], logits->data, logits->count, 1e-4f * absmax(logits), 1e-4f);
    expect_close(ws.loss, losses->data, (size_t)N, 1e-5f, 1e-4f);
    double mean = 0;
    for (int i = 0; i < N; i++)
        mean += ws.loss[i];
    mean /= N;
    float meanf = (float)mean;
    expect_close(&meanf, get("loss")->data, 1, 1e-6f, 1e-4f);

    float *grads = mw_alloc_aligned(m.params.count * sizeof(float));
    mw_model_backward(&m, &kt, &k, &ws, grads, N, 1.0f / (float)N);
    for (int p = 0; p < 8; p++) {
        char nm[80];
        snprintf(nm, sizeof nm, "g/%s", pnames[p]);
        const record *r = get(nm);
        size_t count = 0;
        float *g = pview(&m, grads, p, &count);
        /* 1e-4 of the tensor's largest gradient: float32 summation of up to
         * 10816 terms against a float64 oracle */
        if (!mw_test_close_(g, r->data, count, 1e-4f * absmax(r), 1e-4f, nm, __FILE__, __LINE__))
            fail_msg("gradient %s differs from PyTorch (%s kernels)", nm, kt.name);
    }

    /* One Keras Adam step and one SGD step from the fixture's gradients */
    float *pw = malloc(m.params.count * sizeof(float)), *mm = calloc(m.params.count, 4),
          *vv = calloc(m.params.count, 4);
    memcpy(pw, m.params.data, m.params.count * sizeof(float));
    double lr_t = 1e-3 * sqrt(1.0 - 0.999) / (1.0 - 0.9);
    mw_optim_hyper h = {.lr = (float)lr_t, .gscale = 1.0f, .epsilon = 1e-7f};
    h.one_minus_beta1 = (float)(1.0 - 0.9), h.one_minus_beta2 = (float)(1.0 - 0.999);
    kt.adam_step(&k, pw, mm, vv, NULL, grads, m.params.count, &h);
    for (int p = 0; p < 8; p++) {
        char nm[80];
        snprintf(nm, sizeof nm, "adam/%s", pnames[p]);
        size_t count = 0;
        float *v = pview(&m, pw, p, &count);
        if (!mw_test_close_(v, get(nm)->data, count, 2e-5f, 0, nm, __FILE__, __LINE__))
            fail_msg("Adam step differs for %s", nm);
    }
    memcpy(pw, m.params.data, m.params.count * sizeof(float));
    memset(mm, 0, m.params.count * sizeof(float));
    mw_optim_hyper hs = {.lr = 0.01f, .gscale = 1.0f, .momentum = 0.9f};
    kt.sgd_step(&k, pw, mm, NULL, NULL, grads, m.params.count, &hs);
    for (int p = 0; p < 8; p++) {
        char nm[80];
        snprintf(nm, sizeof nm, "sgd/%s", pnames[p]);
        size_t count = 0;
        float *v = pview(&m, pw, p, &count);
        if (!mw_test_close_(v, get(nm)->data, count, 1e-6f, 1e-5f, nm, __FILE__, __LINE__))
            fail_msg("SGD step differs for %s", nm);
    }
    free(pw), free(mm), free(vv), free(grads);
    mw_model_ws_free(&ws);
    mw_model_free(&m);
}

static void fixture_ref(void **state)
{
    (void)state;
    run_fixture(0);
}

static void fixture_cpu(void **state)
{
    (void)state;
    run_fixture(1);
}

/* Parameter counts Keras reports for the tutorial model. */
/* mw_model_plan: finalize's counts, layout and workspace size without the parameter arena
 * (what the memory check estimates from); mw_model_alloc_params then allocates that plan. */
static void plan_without_arena(void **state)
{
    (void)state;
    mw_model a, b;
    assert_int_equal(mw_keras_build_tutorial(&a, 28, 28, 1, 10), MW_OK);
    assert_int_equal(mw_keras_build_tutorial(&b, 28, 28, 1, 10), MW_OK);
    assert_int_equal(mw_model_plan(&a, 64), MW_OK);
    assert_int_equal(mw_model_finalize(&b, 64), MW_OK);
    assert_null(a.params.data);
    assert_false(a.finalized);
    assert_int_equal(a.nparams, 121930);
    assert_int_equal(a.params.count, b.params.count);
    assert_int_equal(a.params.count % 64, 0);
    assert_int_equal(mw_model_ws_nbytes(&a, 16), mw_model_ws_nbytes(&b, 16));
    for (int i = 0; i < a.nlayers; i++)
        assert_int_equal(a.layers[i].w_off, b.layers[i].w_off);
    assert_int_equal(mw_model_alloc_params(&a), MW_OK);
    assert_non_null(a.params.data);
    assert_true(a.finalized);
    mw_model_free(&a);
    mw_model_free(&b);
}

static void tutorial_counts(void **state)
{
    (void)state;
    mw_model m;
    assert_int_equal(mw_keras_build_tutorial(&m, 28, 28, 1, 10), MW_OK);
    assert_int_equal(mw_model_finalize(&m, 1), MW_OK);
    assert_int_equal(m.nparams, 121930);
    size_t expect[][2] = {{288, 32}, {18432, 64}, {102400, 64}, {640, 10}};
    int j = 0;
    for (int i = 0; i < m.nlayers; i++)
        if (m.layers[i].w_count) {
            assert_int_equal(m.layers[i].w_count, expect[j][0]);
            assert_int_equal(m.layers[i].b_count, expect[j][1]);
            j++;
        }
    assert_string_equal(m.layers[0].name, "conv2d");
    assert_string_equal(m.layers[2].name, "conv2d/relu"); /* after its pool */
    assert_string_equal(m.layers[3].name, "conv2d_1");
    assert_string_equal(m.layers[9].name, "dense_1");
    /* padded for equal shards: 4 ranks x 16 floats */
    mw_model_free(&m);
    assert_int_equal(mw_keras_build_tutorial(&m, 28, 28, 1, 10), MW_OK);
    assert_int_equal(mw_model_finalize(&m, 64), MW_OK);
    assert_int_equal(m.params.count % 64, 0);
    mw_model_free(&m);
}

/* Same seed, same weights; different seed, different weights; Glorot range. */
static void init_deterministic(void **state)
{
    (void)state;
    mw_model a, b;
    assert_int_equal(mw_keras_build_tutorial(&a, 28, 28, 1, 10), MW_OK);
    assert_int_equal(mw_model_finalize(&a, 1), MW_OK);
    assert_int_equal(mw_keras_build_tutorial(&b, 28, 28, 1, 10), MW_OK);
    assert_int_equal(mw_model_finalize(&b, 1), MW_OK);
    mw_model_init_params(&a, 7);
    mw_model_init_params(&b, 7);
    assert_memory_equal(a.params.data, b.params.data, a.params.count * sizeof(float));
    mw_model_init_params(&b, 8);
    assert_true(memcmp(a.params.data, b.params.data, a.params.count * sizeof(float)) != 0);
    const mw_layer *l = &a.layers[7]; /* dense: 1600 -> 64 */
    double limit = sqrt(6.0 / (1600 + 64)), sum = 0;
    for (size_t i = 0; i < l->w_count; i++) {
        float v = a.params.data[l->w_off + i];
        assert_true(fabs(v) <= limit);
        sum += v;
    }
    assert_true(fabs(sum / (double)l->w_count) < 0.01 * limit);
    for (size_t i = 0; i < l->b_count; i++)
        assert_true(a.params.data[l->b_off + i] == 0.0f);
    mw_model_free(&a);
    mw_model_free(&b);
}

static void build_errors(void **state)
{
    (void)state;
    mw_model m;
    mw_err_clear();
    mw_model_init(&m, 4, 4, 1);
    expect_err(mw_model_add_conv2d(&m, NULL, 8, 5, 5, 1, 1, 0, 1), MW_EMODEL,
               "layer 'conv2d' (Conv2D): a 5x5 kernel with padding "
               "'valid' does not fit its 4x4x1 input");
    mw_err_clear();
    /* Dense on an image: each pixel, as Keras' Dense on the last axis */
    assert_int_equal(mw_model_add_dense(&m, NULL, 3, 1), MW_OK);
    assert_int_equal(m.layers[0].out_h * m.layers[0].out_w * m.layers[0].out_c, 4 * 4 * 3);
    assert_false(m.layers[0].flat);
    assert_int_equal(mw_model_add_flatten(&m, NULL), MW_OK);
    expect_err(mw_model_add_dense(&m, "head", 0, 1), MW_EMODEL,
               "layer 'head' (Dense): units 0: expected > 0");
    mw_err_clear();
    expect_err(mw_model_add_maxpool(&m, NULL, 2, 2, 2, 2, 0), MW_EMODEL,
               "(MaxPooling2D): pool 2x2");
    mw_model_free(&m);

    mw_err_clear();
    mw_model_init(&m, 4, 4, 1);
    assert_int_equal(mw_model_add_conv2d(&m, NULL, 2, 4, 4, 1, 1, 0, 1), MW_OK);
    expect_err(mw_model_finalize(&m, 1), MW_EMODEL, "model output is 1x1x2 after layer 'conv2d'");
    mw_model_free(&m);
    /* an image output is a class per pixel: 16 positions of 2 classes */
    mw_err_clear();
    mw_model_init(&m, 4, 4, 1);
    assert_int_equal(mw_model_add_conv2d(&m, NULL, 2, 3, 3, 1, 1, 1, 1), MW_OK);
    assert_int_equal(mw_model_finalize(&m, 1), MW_OK);
    assert_int_equal(m.positions, 16);
    assert_int_equal(m.nclasses, 2);
    mw_model_free(&m);
    mw_err_clear();
    mw_model_init(&m, 4, 4, 1);
    expect_err(mw_model_finalize(&m, 1), MW_EMODEL, "model has no layers");
    mw_model_free(&m);
    mw_err_clear();
}

/* A batch of 0 examples (a replica with an empty slice) touches nothing. */
static void empty_batch(void **state)
{
    (void)state;
    mw_kernels kt;
    mw_kernels_init_cpu(&kt);
    mw_model m;
    assert_int_equal(mw_keras_build_tutorial(&m, 28, 28, 1, 10), MW_OK);
    assert_int_equal(mw_model_finalize(&m, 1), MW_OK);
    mw_model_init_params(&m, 1);
    mw_model_ws ws;
    mw_model_ws_init(&ws);
    assert_int_equal(mw_model_ws_alloc(&ws, &m, 4), MW_OK);
    mw_kctx k = {.nthreads = 1, .ws = ws.scratch, .ws_count = ws.scratch_count};
    float *g = mw_alloc_aligned(m.params.count * sizeof(float));
    mw_model_forward(&m, &kt, &k, &ws, 0);
    mw_model_backward(&m, &kt, &k, &ws, g, 0, 1.0f);
    for (size_t i = 0; i < m.params.count; i++)
        assert_true(g[i] == 0.0f);
    free(g);
    mw_model_ws_free(&ws);
    mw_model_free(&m);
}

/* mw_model_ws_alloc_with: the same layout from another allocator (as the GPU
 * path does with mw_cuda_alloc), scratch left to the caller, parameters from
 * ws->params: results bitwise equal to the plain workspace. */
static int with_allocs, with_frees;
static mw_status with_alloc(void **p, size_t nbytes)
{
    with_allocs++;
    *p = mw_alloc_aligned(nbytes);
    return *p ? MW_OK : MW_ENOMEM;
}
static void with_free(void *p)
{
    with_frees += p != NULL;
    free(p);
}

static void ws_alloc_with(void **state)
{
    (void)state;
    mw_kernels kt;
    mw_kernels_init_cpu(&kt);
    mw_model m;
    assert_int_equal(mw_keras_build_tutorial(&m, 28, 28, 1, 10), MW_OK);
    assert_int_equal(mw_model_finalize(&m, 1), MW_OK);
    mw_model_init_params(&m, 7);
    const int N = 5;
    const size_t count = m.params.count, in = (size_t)N * 28 * 28;
    mw_model_ws a, b;
    mw_model_ws_init(&a);
    mw_model_ws_init(&b);
    assert_int_equal(mw_model_ws_alloc(&a, &m, N), MW_OK);
    assert_int_equal(mw_model_ws_alloc_with(&b, &m, N, with_alloc, with_free), MW_OK);
    assert_int_equal(with_allocs, 1);
    assert_null(b.scratch);
    assert_true(b.scratch_count == a.scratch_count);
    for (size_t i = 0; i < in; i++)
        a.act[0][i] = b.act[0][i] = (float)((i * 37) % 101) / 101.0f;
    for (int i = 0; i < N; i++)
        ((int32_t *)a.y)[i] = ((int32_t *)b.y)[i] = (int32_t)(i * 3 % 10);
    mw_kctx ka = {.nthreads = 1, .ws = a.scratch, .ws_count = a.scratch_count};
    float *scr = mw_alloc_aligned(b.scratch_count * sizeof(float) + 64);
    mw_kctx kb = {.nthreads = 1, .ws = scr, .ws_count = b.scratch_count};
    float *ga = mw_alloc_aligned(count * sizeof(float)), *gb = mw_alloc_aligned(count * 4);
    memset(ga, 0, count * sizeof(float));
    memset(gb, 0, count * sizeof(float));
    mw_model_forward(&m, &kt, &ka, &a, N);
    mw_model_backward(&m, &kt, &ka, &a, ga, N, 1.0f / N);
    /* b reads a copy of the parameters; the model's own are scrambled */
    float *pcopy = mw_alloc_aligned(count * sizeof(float));
    memcpy(pcopy, m.params.data, count * sizeof(float));
    memset(m.params.data, 0, count * sizeof(float));
    b.params = pcopy;
    mw_model_forward(&m, &kt, &kb, &b, N);
    mw_model_backward(&m, &kt, &kb, &b, gb, N, 1.0f / N);
    assert_memory_equal(a.loss, b.loss, N * sizeof(float));
    assert_memory_equal(a.prob, b.prob, (size_t)N * m.nclasses * sizeof(float));
    assert_memory_equal(ga, gb, count * sizeof(float));
    double acc_a[MW_SUMS] = {0}, acc_b[MW_SUMS] = {0};
    const mw_metric_list sparse = {1, {MW_METRIC_SPARSE_ACC}, 1, 0, 0};
    mw_model_metrics_add(&m, &a, N, acc_a);
    mw_metrics_add_host(&sparse, acc_b, b.prob, b.y, sizeof(int32_t), NULL, NULL, N, m.nclasses);
    assert_true(acc_a[MW_SUM_METRIC(0)] == acc_b[MW_SUM_METRIC(0)]);
    /* a table without the zero entry still zeroes (memset) */
    kt.zero = NULL;
    memset(gb, 0, count * sizeof(float));
    mw_model_forward(&m, &kt, &kb, &b, N);
    mw_model_backward(&m, &kt, &kb, &b, gb, N, 1.0f / N);
    assert_memory_equal(ga, gb, count * sizeof(float));
    mw_model_ws_free(&b);
    assert_int_equal(with_frees, 1);
    mw_model_ws_free(&a);
    free(pcopy), free(scr), free(ga), free(gb);
    mw_model_free(&m);
}

/* ---- mw_model_diff: pairs of Keras JSON ---- */

/* conv2d(0) max_pooling2d(1) dropout(2) flatten(3) dense(4) dense_1(5), for 28x28x1. */
static const char diff_base[] =
    "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"m\", \"layers\": ["
    "{\"class_name\": \"InputLayer\", \"config\": {\"batch_input_shape\": [null, 28, 28, 1]}},"
    "{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"conv2d\", \"filters\": 4, "
    "\"kernel_size\": [3, 3], \"strides\": [1, 1], \"padding\": \"valid\", \"activation\": "
    "\"relu\", \"kernel_initializer\": {\"class_name\": \"GlorotUniform\", \"config\": {}}, "
    "\"kernel_regularizer\": null}},"
    "{\"class_name\": \"MaxPooling2D\", \"config\": {\"name\": \"max_pooling2d\", "
    "\"pool_size\": [2, 2]}},"
    "{\"class_name\": \"Dropout\", \"config\": {\"name\": \"dropout\", \"rate\": 0.25}},"
    "{\"class_name\": \"Flatten\", \"config\": {\"name\": \"flatten\"}},"
    "{\"class_name\": \"Dense\", \"config\": {\"name\": \"dense\", \"units\": 16, "
    "\"activation\": \"relu\", \"use_bias\": true, \"bias_regularizer\": null}},"
    "{\"class_name\": \"Dense\", \"config\": {\"name\": \"dense_1\", \"units\": 10}}"
    "]}}";

/* text with each pair edits[2k] -> edits[2k+1] replaced once (malloc'ed); edits ends in NULL. */
static char *edit(const char *text, const char *const *edits)
{
    char *out = strdup(text);
    for (int k = 0; edits[k]; k += 2) {
        char *at = strstr(out, edits[k]);
        if (!at)
            fail_msg("edit: \"%s\" is not in the text", edits[k]);
        const size_t head = (size_t)(at - out), from = strlen(edits[k]);
        const size_t to = strlen(edits[k + 1]), rest = strlen(at + from);
        char *next = malloc(head + to + rest + 1);
        memcpy(next, out, head);
        memcpy(next + head, edits[k + 1], to);
        memcpy(next + head + to, at + from, rest + 1);
        free(out);
        out = next;
    }
    return out;
}

static void load_json(mw_model *m, const char *text, int finalize)
{
    mw_err_clear();
    mw_status rc = mw_keras_load(m, text, strlen(text), "test.json", 28, 28, 1, 10);
    if (rc == MW_OK && finalize)
        rc = mw_model_finalize(m, 1);
    if (rc != MW_OK)
        fail_msg("%s: %s\n%s", mw_status_str(rc), mw_err_msg(), text);
}

/* The checkpoint's model is diff_base edited by a_edits, --model's by b_edits; finalized
 * (fa, fb) or not. want NULL: the same function; else the message, exactly. */
static void check_diff(const char *const *a_edits, const char *const *b_edits, int fa, int fb,
                       const char *want)
{
    char *ta = edit(diff_base, a_edits), *tb = edit(diff_base, b_edits);
    mw_model a, b;
    load_json(&a, ta, fa);
    load_json(&b, tb, fb);
    char what[1024] = "untouched";
    int got = mw_model_diff(&a, &b, what, sizeof what);
    if (got != (want != NULL) || strcmp(what, want ? want : "") != 0)
        fail_msg("mw_model_diff gave %d \"%s\"; want %d \"%s\"\ncheckpoint: %s\n--model: %s", got,
                 what, want != NULL, want ? want : "", ta, tb);
    assert_int_equal(mw_model_diff(&b, &b, NULL, 0), 0);
    mw_model_free(&a);
    mw_model_free(&b);
    free(ta);
    free(tb);
}

#define EDITS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_EDITS ((const char *const[]){NULL})

/* Alike: the same text, other layer names, other initializers, L1L2 without l1 = L2, and
 * Activation('relu') = ReLU(), finalized or not. */
static void diff_alike(void **state)
{
    (void)state;
    for (int f = 0; f < 4; f++)
        check_diff(NO_EDITS, NO_EDITS, f & 1, f >> 1, NULL);
    check_diff(NO_EDITS,
               EDITS("\"name\": \"conv2d\"", "\"name\": \"features\"", "\"name\": \"dense\"",
                     "\"name\": \"hidden\"", "\"name\": \"m\"", "\"name\": \"other_model\""),
               1, 1, NULL);
    check_diff(NO_EDITS,
               EDITS("\"GlorotUniform\", \"config\": {}", "\"HeNormal\", \"config\": {\"seed\": 3}",
                     "\"use_bias\": true,", "\"use_bias\": true, \"bias_initializer\": \"ones\","),
               1, 1, NULL);
    check_diff(EDITS("\"kernel_regularizer\": null",
                     "\"kernel_regularizer\": {\"class_name\": \"L2\", \"config\": {\"l2\": 0.5}}"),
               EDITS("\"kernel_regularizer\": null",
                     "\"kernel_regularizer\": {\"class_name\": \"L1L2\", \"config\": {\"l1\": 0, "
                     "\"l2\": 0.5}}"),
               1, 1, NULL);
    /* padding 'same' of a 1x1 kernel pads nothing: the same function as 'valid' */
    check_diff(EDITS("[3, 3]", "[1, 1]"), EDITS("[3, 3]", "[1, 1]", "\"valid\"", "\"same\""), 1, 1,
               NULL);
    check_diff(EDITS("{\"class_name\": \"Flatten\"",
                     "{\"class_name\": \"Activation\", \"config\": {\"activation\": \"relu\"}},"
                     "{\"class_name\": \"Flatten\""),
               EDITS("{\"class_name\": \"Flatten\"",
                     "{\"class_name\": \"ReLU\", \"config\": {}},{\"class_name\": \"Flatten\""),
               1, 0, NULL);
}

/* Each difference, with the layer it is in and both values. */
static void diff_layers(void **state)
{
    (void)state;
    /* the tutorial's repro: one activation relu -> linear, the same parameter count */
    check_diff(
        NO_EDITS,
        EDITS("\"activation\": \"relu\", \"use_bias\"", "\"activation\": \"linear\", \"use_bias\""),
        1, 1, "layer 4 (dense): activation relu in the checkpoint, linear in --model");
    /* a Conv2D's relu sits after its pool once finalized; either state compares alike */
    for (int f = 0; f < 4; f++)
        check_diff(NO_EDITS, EDITS("\"activation\": \"relu\"", "\"activation\": \"linear\""), f & 1,
                   f >> 1,
                   "layer 0 (conv2d): activation relu in the checkpoint, linear in --model");
    check_diff(NO_EDITS,
               EDITS("\"name\": \"dense\", \"units\": 16", "\"name\": \"d\", \"units\": 32"), 1, 1,
               "layer 4 (dense; d in --model): units 16 in the checkpoint, 32 in --model");
    check_diff(NO_EDITS, EDITS("\"filters\": 4", "\"filters\": 8"), 1, 1,
               "layer 0 (conv2d): filters 4 in the checkpoint, 8 in --model");
    /* 3x1 and 1x3 with 'same' padding: every shape and the parameter count alike */
    check_diff(EDITS("[3, 3]", "[3, 1]", "\"valid\"", "\"same\""),
               EDITS("[3, 3]", "[1, 3]", "\"valid\"", "\"same\""), 1, 1,
               "layer 0 (conv2d): kernel 3x1 in the checkpoint, 1x3 in --model");
    check_diff(NO_EDITS, EDITS("\"strides\": [1, 1]", "\"strides\": [2, 2]"), 1, 1,
               "layer 0 (conv2d): strides 1x1 in the checkpoint, 2x2 in --model");
    check_diff(NO_EDITS, EDITS("\"valid\"", "\"same\""), 1, 1,
               "layer 0 (conv2d): padding valid in the checkpoint, same in --model");
    check_diff(NO_EDITS,
               EDITS("\"pool_size\": [2, 2]", "\"pool_size\": [2, 2], \"strides\": [1, 1]"), 1, 1,
               "layer 1 (max_pooling2d): strides 2x2 in the checkpoint, 1x1 in --model");
    check_diff(NO_EDITS, EDITS("\"rate\": 0.25", "\"rate\": 0.5"), 1, 1,
               "layer 2 (dropout): rate 0.25 in the checkpoint, 0.5 in --model");
    check_diff(NO_EDITS, EDITS("\"use_bias\": true", "\"use_bias\": false"), 1, 1,
               "layer 4 (dense): use_bias true in the checkpoint, false in --model");
    check_diff(EDITS("\"units\": 10}", "\"units\": 10, \"activation\": \"softmax\"}"), NO_EDITS, 1,
               1, "layer 5 (dense_1): activation softmax in the checkpoint, linear in --model");
}

/* Regularizers change the loss; an added or missing layer changes the count. */
static void diff_regularizers_and_layers(void **state)
{
    (void)state;
    const char *l2 = "\"kernel_regularizer\": {\"class_name\": \"L2\", \"config\": {\"l2\": 0.01}}";
    check_diff(EDITS("\"kernel_regularizer\": null", l2), NO_EDITS, 1, 1,
               "layer 0 (conv2d): kernel regularizer L2(0.01) in the checkpoint, none in --model");
    check_diff(
        EDITS("\"kernel_regularizer\": null", l2),
        EDITS("\"kernel_regularizer\": null",
              "\"kernel_regularizer\": {\"class_name\": \"L1\", \"config\": {\"l1\": 0.01}}"),
        1, 1,
        "layer 0 (conv2d): kernel regularizer L2(0.01) in the checkpoint, L1(0.01) in "
        "--model");
    check_diff(NO_EDITS, EDITS("\"bias_regularizer\": null", "\"bias_regularizer\": \"l1_l2\""), 1,
               1,
               "layer 4 (dense): bias regularizer none in the checkpoint, L1L2(l1=0.01, l2=0.01) "
               "in --model");
    /* an extra Dropout before the last Dense: the count, then where they part */
    check_diff(NO_EDITS,
               EDITS("{\"class_name\": \"Dense\", \"config\": {\"name\": \"dense_1\"",
                     "{\"class_name\": \"Dropout\", \"config\": {\"rate\": 0.5}},"
                     "{\"class_name\": \"Dense\", \"config\": {\"name\": \"dense_1\""),
               1, 1,
               "the checkpoint has 6 layers, --model 7; the first difference is layer 5 "
               "(dense_1; dropout_1 in --model): Dense in the checkpoint, Dropout in --model");
    /* a layer more at the end, the rest alike */
    check_diff(NO_EDITS,
               EDITS("\"units\": 10}}", "\"units\": 10}},{\"class_name\": \"Softmax\", "
                                        "\"config\": {}}"),
               0, 1, "the checkpoint has 6 layers, --model 7 (the first 6 are alike)");
}

int main(void)
{
    const struct CMUnitTest fixture_tests[] = {
        cmocka_unit_test(fixture_ref),
        cmocka_unit_test(fixture_cpu),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tutorial_counts),
        cmocka_unit_test(plan_without_arena),
        cmocka_unit_test(init_deterministic),
        cmocka_unit_test(build_errors),
        cmocka_unit_test(empty_batch),
        cmocka_unit_test(ws_alloc_with),
        cmocka_unit_test(diff_alike),
        cmocka_unit_test(diff_layers),
        cmocka_unit_test(diff_regularizers_and_layers),
    };
    int bad =
        cmocka_run_group_tests_name("model_fixture", fixture_tests, load_fixture, free_fixture);
    bad += cmocka_run_group_tests_name("model", tests, NULL, NULL);
    return bad ? 1 : 0;
}

/* worker/export: the tutorial model written as safetensors and read back
 * here (header length and padding, the JSON header's names, dtypes, shapes
 * and offsets, every tensor's bytes), atomic replacement, and the messages
 * for unwritable paths and models that cannot be exported. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/util.h"
#include "worker/export.h"
#include "worker/keras.h"
#include "worker/model.h"

typedef struct {
    const char *name;
    int rank;
    long long shape[4];
} want_tensor;

/* The tutorial CNN on 28x28x1 with 10 classes, in Keras' names and layouts. */
static const want_tensor tutorial[] = {
    {"conv2d/kernel", 4, {3, 3, 1, 32}},    {"conv2d/bias", 1, {32}},
    {"conv2d_1/kernel", 4, {3, 3, 32, 64}}, {"conv2d_1/bias", 1, {64}},
    {"dense/kernel", 2, {1600, 64}},        {"dense/bias", 1, {64}},
    {"dense_1/kernel", 2, {64, 10}},        {"dense_1/bias", 1, {10}},
};
enum { NTUTORIAL = sizeof tutorial / sizeof tutorial[0] };

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    uint8_t *p = malloc((size_t)len + 1);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

static uint64_t le(const uint8_t *p, int nbytes)
{
    uint64_t v = 0;
    for (int i = nbytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void build(mw_model *m)
{
    assert_int_equal(mw_keras_build_tutorial(m, 28, 28, 1, 10), MW_OK);
    assert_int_equal(mw_model_finalize(m, 64), MW_OK);
    mw_model_init_params(m, 1234);
}

/* Entries of the directory besides . and .. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* Read path and check it against want[] and params: the header, then every
 * tensor's bytes. The model's tensors are listed in want[] in model order. */
static void check_file(const char *path, const mw_model *m, const float *params,
                       const want_tensor *want, int nwant)
{
    size_t n;
    uint8_t *file = slurp(path, &n);
    assert_true(n >= 8);
    uint64_t hlen = le(file, 8);
    assert_int_equal(hlen % 8, 0);
    assert_true(hlen <= n - 8);
    const char *hdr = (const char *)file + 8;
    /* compact JSON, then only spaces (fewer than 8) */
    size_t end = hlen;
    while (end > 0 && hdr[end - 1] == ' ')
        end--;
    assert_true(hlen - end < 8);
    assert_int_equal(hdr[end - 1], '}');
    assert_null(memchr(hdr, '\n', end));
    assert_null(memmem(hdr, end, ": ", 2)); /* JSON_COMPACT */
    json_error_t jerr;
    json_t *root = json_loadb(hdr, hlen, 0, &jerr);
    if (!root)
        fail_msg("%s: header: %s", path, jerr.text);
    assert_int_equal(json_object_size(root), (size_t)nwant + 1);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(root, "__metadata__"), "format")),
        "mwtrain");
    assert_memory_equal(hdr, "{\"__metadata__\":{\"format\":\"mwtrain\"},", 37);

    const uint8_t *data = file + 8 + hlen;
    size_t data_nbytes = n - 8 - hlen, offset = 0;
    const char *prev = hdr;
    int t = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        for (int part = 0; part < 2; part++) {
            size_t count = part == 0 ? l->w_count : l->b_count;
            if (count == 0)
                continue;
            const float *ref = params + (part == 0 ? l->w_off : l->b_off);
            assert_true(t < nwant);
            const want_tensor *w = &want[t++];
            /* names in model order in the header text */
            char quoted[100];
            snprintf(quoted, sizeof quoted, "\"%s\":", w->name);
            const char *at = strstr(hdr, quoted);
            assert_non_null(at);
            assert_true(at > prev);
            prev = at;

            json_t *e = json_object_get(root, w->name);
            assert_non_null(e);
            assert_int_equal(json_object_size(e), 3);
            assert_string_equal(json_string_value(json_object_get(e, "dtype")), "F32");
            json_t *shape = json_object_get(e, "shape");
            assert_int_equal(json_array_size(shape), (size_t)w->rank);
            long long prod = 1;
            for (int d = 0; d < w->rank; d++) {
                assert_int_equal(json_integer_value(json_array_get(shape, d)), w->shape[d]);
                prod *= w->shape[d];
            }
            assert_int_equal(prod, (long long)count);
            json_t *off = json_object_get(e, "data_offsets");
            assert_int_equal(json_array_size(off), 2);
            assert_int_equal(json_integer_value(json_array_get(off, 0)), (long long)offset);
            assert_int_equal(json_integer_value(json_array_get(off, 1)),
                             (long long)(offset + 4 * count));
            for (size_t k = 0; k < count; k++) {
                uint32_t bits = (uint32_t)le(data + offset + 4 * k, 4), refbits;
                memcpy(&refbits, &ref[k], 4);
                if (bits != refbits)
                    fail_msg("%s[%zu]: file 0x%08x, params 0x%08x", w->name, k, bits, refbits);
            }
            offset += 4 * count;
        }
    }
    assert_int_equal(t, nwant);
    assert_int_equal(offset, data_nbytes); /* no holes, nothing after */
    json_decref(root);
    free(file);
}

static void tutorial_roundtrip(void **state)
{
    const char *dir = *state;
    mw_model m;
    build(&m);
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(mw_export_safetensors(&m, m.params.data, path), MW_OK);
    check_file(path, &m, m.params.data, tutorial, NTUTORIAL);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size % 4, 0);
    assert_true(st.st_size > 4 * (long)m.nparams);

    /* a second export (another buffer) replaces it and leaves no temp file */
    float *other = malloc(m.params.count * sizeof *other);
    mw_test_fill_uniform(other, m.params.count, 9, -1.0f, 1.0f);
    assert_int_equal(mw_export_safetensors(&m, other, path), MW_OK);
    check_file(path, &m, other, tutorial, NTUTORIAL);
    assert_int_equal(count_entries(dir), 1);
    free(other);
    mw_model_free(&m);
}

/* Layers without bias export only a kernel; pooling/flatten/relu nothing. */
static void no_bias_and_names(void **state)
{
    const char *dir = *state;
    mw_model m;
    mw_model_init(&m, 6, 6, 2);
    assert_int_equal(mw_model_add_conv2d(&m, "features", 3, 2, 2, 1, 1, 1, 0), MW_OK);
    assert_int_equal(mw_model_add_maxpool(&m, NULL, 2, 2, 2, 2, 0), MW_OK);
    assert_int_equal(mw_model_add_flatten(&m, NULL), MW_OK);
    assert_int_equal(mw_model_add_dense(&m, "logits", 4, 1), MW_OK);
    assert_int_equal(mw_model_finalize(&m, 1), MW_OK);
    mw_model_init_params(&m, 3);
    const want_tensor want[] = {
        {"features/kernel", 4, {2, 2, 2, 3}},
        {"logits/kernel", 2, {27, 4}},
        {"logits/bias", 1, {4}},
    };
    char path[600];
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    assert_int_equal(mw_export_safetensors(&m, m.params.data, path), MW_OK);
    check_file(path, &m, m.params.data, want, 3);
    mw_model_free(&m);
}

static void error_messages(void **state)
{
    const char *dir = *state;
    mw_model m;
    build(&m);
    char path[600], want[1600];

    /* missing directory */
    snprintf(path, sizeof path, "%s/missing/model.safetensors", dir);
    mw_err_clear();
    assert_int_equal(mw_export_safetensors(&m, m.params.data, path), MW_EIO);
    snprintf(want, sizeof want, "export %s: cannot create a file there: %s", path,
             strerror(ENOENT));
    assert_string_equal(mw_err_msg(), want);

    /* the target is a directory: the rename fails, the temp file goes away */
    snprintf(path, sizeof path, "%s/adir", dir);
    assert_int_equal(mkdir(path, 0777), 0);
    mw_err_clear();
    assert_int_equal(mw_export_safetensors(&m, m.params.data, path), MW_EIO);
    snprintf(want, sizeof want, "export %s: cannot rename %s.tmp.%ld over it: %s", path, path,
             (long)getpid(), strerror(EISDIR));
    assert_string_equal(mw_err_msg(), want);
    assert_int_equal(count_entries(dir), 1);

    /* a layer kind with parameters the exporter has no names for */
    mw_layer *pool = NULL;
    for (int i = 0; i < m.nlayers && !pool; i++)
        if (m.layers[i].kind == MW_LAYER_MAXPOOL)
            pool = &m.layers[i];
    assert_non_null(pool);
    pool->b_count = 1;
    snprintf(path, sizeof path, "%s/new.safetensors", dir);
    mw_err_clear();
    assert_int_equal(mw_export_safetensors(&m, m.params.data, path), MW_EUNSUPPORTED);
    snprintf(want, sizeof want,
             "export %s: layer 'max_pooling2d' (MaxPooling2D) has parameters, but the Keras "
             "variable table (worker/keras_vars.c) does not know its kind",
             path);
    assert_string_equal(mw_err_msg(), want);
    assert_int_equal(count_entries(dir), 1);
    mw_model_free(&m);

    /* not finalized */
    mw_model_init(&m, 4, 4, 1);
    assert_int_equal(mw_model_add_flatten(&m, NULL), MW_OK);
    assert_int_equal(mw_model_add_dense(&m, NULL, 2, 1), MW_OK);
    mw_err_clear();
    assert_int_equal(mw_export_safetensors(&m, m.params.data, "x.safetensors"), MW_EINTERNAL);
    assert_string_equal(mw_err_msg(), "export x.safetensors: the model has no parameters yet");
    mw_model_free(&m);

    /* two layers with one name would give two tensors with one name */
    mw_model_init(&m, 4, 4, 1);
    assert_int_equal(mw_model_add_flatten(&m, NULL), MW_OK);
    assert_int_equal(mw_model_add_dense(&m, "same", 3, 1), MW_OK);
    assert_int_equal(mw_model_add_dense(&m, "same", 2, 1), MW_OK);
    assert_int_equal(mw_model_finalize(&m, 1), MW_OK);
    snprintf(path, sizeof path, "%s/dup.safetensors", dir);
    mw_err_clear();
    assert_int_equal(mw_export_safetensors(&m, m.params.data, path), MW_EMODEL);
    snprintf(want, sizeof want, "export %s: two tensors are named 'same/kernel'", path);
    assert_string_equal(mw_err_msg(), want);
    assert_int_equal(count_entries(dir), 1); /* nothing written */
    mw_model_free(&m);
    mw_err_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        mw_test_in_tmpdir(tutorial_roundtrip),
        mw_test_in_tmpdir(no_bias_and_names),
        mw_test_in_tmpdir(error_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

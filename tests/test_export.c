/* worker/export: the tutorial model written as safetensors and read back
 * here (header length and padding, the JSON header's names, dtypes, shapes
 * and offsets, every tensor's bytes), atomic replacement, and the messages
 * for unwritable paths and models that cannot be exported; a FIFO, a device node or a dangling
 * link as --output refused untouched in every format, and a failed write naming --output and
 * its reason, the old file intact. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/util.h"
#include "worker/keras/export.h"
#include "worker/keras/keras.h"
#include "worker/model/layers/conv2d.h"
#include "worker/model/layers/dense.h"
#include "worker/model/layers/pooling.h"
#include "worker/model/layers/reshape.h"
#include "worker/model/model.h"
#include "worker/model/weights.h"

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
    snprintf(want, sizeof want, "export %s: cannot create a file beside it: %s", path,
             strerror(ENOENT));
    assert_string_equal(mw_err_msg(), want);

    /* the target is a directory: refused before anything is written */
    snprintf(path, sizeof path, "%s/adir", dir);
    assert_int_equal(mkdir(path, 0777), 0);
    mw_err_clear();
    assert_int_equal(mw_export_safetensors(&m, m.params.data, path), MW_EINVAL);
    snprintf(want, sizeof want,
             "export --output %s: is a directory; expected a regular file or a new name (only "
             "a regular file is ever replaced)",
             path);
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
             "export %s: layer 'max_pooling2d' (MaxPooling2D) has parameters, but its row in "
             "the layer table lists no Keras variables",
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

/* `export --output` onto what is not a regular file (a FIFO, a device node through a link, a
 * socket, a dangling link) is refused in every format with MW_EINVAL (exit 2): the node is
 * still there, the same inode, nothing opened it, and no temporary file is left. */
static void non_regular_targets(void **state)
{
    const char *dir = *state;
    mw_model m;
    build(&m);
    char fifo[600], dev[600], dangling[600], want[1600];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(dev, sizeof dev, "%s/null", dir);
    snprintf(dangling, sizeof dangling, "%s/dangling", dir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(symlink("/dev/null", dev), 0);
    assert_int_equal(symlink("nowhere", dangling), 0);
    const struct {
        const char *path, *kind, *watched;
    } targets[] = {
        {fifo, "a FIFO", fifo},
        {dev, "a character device", "/dev/null"},
        {dangling, "a symbolic link", NULL},
    };
    static const char *const formats[] = {"safetensors", "keras", "weights-h5"};
    const mw_keras_optimizer opt = {"adam", 1e-3, 0.9, 0.9, 0.999, 1e-7, 0, NULL, NULL};
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++)
        for (size_t f = 0; f < 3; f++) {
            struct stat before, after;
            assert_int_equal(lstat(targets[t].path, &before), 0);
            int w = targets[t].watched ? mw_test_watch(targets[t].watched) : -1;
            mw_err_clear();
            assert_int_equal(mw_export_file(&m, m.params.data, formats[f], &opt, targets[t].path),
                             MW_EINVAL);
            snprintf(want, sizeof want,
                     "export --output %s: is %s; expected a regular file or a new name (only a "
                     "regular file is ever replaced)",
                     targets[t].path, targets[t].kind);
            assert_string_equal(mw_err_msg(), want);
            assert_int_equal(lstat(targets[t].path, &after), 0);
            assert_int_equal(before.st_ino, after.st_ino);
            assert_int_equal(before.st_mode, after.st_mode);
            if (w >= 0)
                assert_false(mw_test_watch_events(w) & (IN_OPEN | IN_MODIFY | IN_ATTRIB));
            assert_int_equal(count_entries(dir), 3); /* no temporary file left */
        }
    mw_model_free(&m);
    mw_err_clear();
}

/* A write that fails (here a file size limit: EFBIG, as a full disk gives ENOSPC) names
 * --output and the reason, never the temporary file, and leaves the old file as it was. */
static void write_failure_names_output(void **state)
{
    const char *dir = *state;
    mw_model m;
    build(&m);
    char *old = mw_test_write_file(dir, "m.keras", "old", 3);
    const mw_keras_optimizer opt = {"adam", 1e-3, 0.9, 0.9, 0.999, 1e-7, 0, NULL, NULL};
    struct rlimit saved, small;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
    small = (struct rlimit){4096, saved.rlim_max}; /* the soft limit alone: it can go back */
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    static const char *const formats[] = {"keras", "weights-h5", "safetensors"};
    char want[1600];
    for (size_t f = 0; f < 3; f++) {
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
        mw_err_clear();
        const mw_status rc = mw_export_file(&m, m.params.data, formats[f], &opt, old);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
        assert_int_equal(rc, MW_EIO);
        snprintf(want, sizeof want, "export %s: cannot write it: %s (nothing was replaced)", old,
                 strerror(EFBIG));
        assert_string_equal(mw_err_msg(), want);
        size_t n = 0;
        char *text = mw_test_read_file(old, &n);
        assert_int_equal(n, 3);
        assert_memory_equal(text, "old", 3);
        free(text);
        assert_int_equal(count_entries(dir), 1);
    }
    signal(SIGXFSZ, prev);
    free(old);
    mw_model_free(&m);
    mw_err_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        mw_test_in_tmpdir(tutorial_roundtrip),
        mw_test_in_tmpdir(no_bias_and_names),
        mw_test_in_tmpdir(error_messages),
        mw_test_in_tmpdir(non_regular_targets),
        mw_test_in_tmpdir(write_failure_names_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

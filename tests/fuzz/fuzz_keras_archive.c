/* libFuzzer target for the .keras archive reader (worker/keras/keras_archive.c) with the weights
 * reader (worker/keras/keras_h5.c) and the Keras variable table (worker/keras/keras_vars.c), over
 * libzip and libhdf5 as installed (not instrumented: the fuzzer steers our code, not theirs).
 *
 * Any bytes must either load (config.json builds a model, model.weights.h5 fills all of its
 * variables) or fail with one message starting "fuzz.keras: " and a status of bad data, bad
 * or unsupported model, or out of memory; never crash, leak or read out of bounds. A loaded
 * model is then written back as an archive image's weights and read again, which must give
 * the same parameters. No input may reach a file outside itself: the target runs in an empty
 * directory of its own (where an HDF5 external name without a directory leads), watched with
 * inotify; a file opened or made there is a failure. Seeds: tests/fuzz/corpus/keras_archive
 * (archives made by Keras, the broken ones of tests/data/keras_archive, and every HDF5
 * storage layout and link kind of tests/test_keras_h5.c, `test_keras_h5 --corpus DIR`).
 * Run it with tests/fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "common/status.h"
#include "worker/keras/keras_archive.h"
#include "worker/keras/keras_h5.h"
#include "worker/model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_keras_archive: invariant failed: %s (%s)\n", what, mw_err_msg());
        abort();
    }
}

/* weights -> a new HDF5 image -> the same weights */
static void rewrite(const mw_model *m)
{
    void *img = NULL;
    size_t n = 0;
    const mw_keras_optimizer adam = {"adam", 1e-3,           0.9,           0.9, 0.999, 1e-7,
                                     5,      m->params.data, m->params.data};
    check(mw_keras_h5_write(m, m->params.data, &adam, &img, &n, "fuzz") == MW_OK,
          "write the weights of a loaded model");
    float *again = calloc(m->params.count ? m->params.count : 1, sizeof *again);
    check(again != NULL, "memory");
    check(mw_keras_h5_read(m, again, img, n, "fuzz") == MW_OK, "read back what was written");
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        check(!memcmp(again + l->w_off, m->params.data + l->w_off, l->w_count * sizeof(float)) &&
                  !memcmp(again + l->b_off, m->params.data + l->b_off, l->b_count * sizeof(float)),
              "weights survive a round trip");
    }
    free(again);
    free(img);
}

/* The empty directory the target runs in, and its watch (made on the first input; removed
 * when the fuzzer exits). */
static int sandbox_watch = -1;
static char sandbox_dir[] = "/tmp/mwfuzz-cwd-XXXXXX";

static void sandbox_remove(void)
{
    rmdir(sandbox_dir);
}

static void sandbox(void)
{
    if (sandbox_watch >= 0)
        return;
    check(mkdtemp(sandbox_dir) != NULL && chdir(sandbox_dir) == 0,
          "make and enter an empty directory");
    atexit(sandbox_remove);
    sandbox_watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    check(sandbox_watch >= 0 &&
              inotify_add_watch(sandbox_watch, ".", IN_OPEN | IN_CREATE | IN_ACCESS) >= 0,
          "watch it");
}

static void nothing_outside(void)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    const ssize_t n = read(sandbox_watch, buf, sizeof buf);
    if (n > 0)
        fprintf(stderr, "fuzz_keras_archive: %s\n", ((const struct inotify_event *)buf)->name);
    check(n <= 0, "nothing outside the archive is opened or made (a file in the directory)");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sandbox();
    mw_model m;
    mw_keras_weights w;
    mw_keras_weights_init(&w);
    mw_err_clear();
    mw_status rc = mw_keras_archive_load(&m, data, size, "fuzz.keras", 0, 0, 0, 0, &w);
    if (rc == MW_OK) {
        size_t weights = 0;
        for (int i = 0; i < m.nlayers; i++)
            weights += m.layers[i].w_count + m.layers[i].b_count;
        if (weights <= (1u << 20) && (rc = mw_model_finalize(&m, 1)) == MW_OK &&
            (rc = mw_keras_weights_apply(&w, &m, m.params.data)) == MW_OK)
            rewrite(&m);
    }
    if (rc != MW_OK) {
        check(rc == MW_EDATA || rc == MW_EMODEL || rc == MW_EUNSUPPORTED || rc == MW_ENOMEM,
              "status of a failure");
        check(!strncmp(mw_err_msg(), "fuzz.keras: ", 12), "message names the archive");
    }
    mw_keras_weights_free(&w);
    mw_model_free(&m);
    nothing_outside();
    return 0;
}

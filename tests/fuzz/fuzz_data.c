/* libFuzzer target for the data readers (worker/data/data_formats.h): the .npy header parser, the
 * .npz reader (an archive in memory through libzip, mw_data_read_npz_buffer) and the CIFAR
 * record reader. The first input byte picks the reader, the rest is the file.
 *
 * Any bytes must either load into a set whose invariants hold (counts, shapes, labels below the
 * classes; every example assembles into a batch), or fail with MW_EDATA (MW_ENOMEM for a size
 * the limits allow but the fuzzer's malloc limit refuses) and a message naming the file, leaving
 * nothing allocated; never crash, leak or read out of bounds. Run it with tests/fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "worker/data/data.h"
#include "worker/data/data_cifar.h"
#include "worker/data/data_formats.h"
#include "worker/data/data_npy.h"
#include "worker/data/data_npz.h"
#include "worker/data/data_zip.h"

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_data: invariant failed: %s (message: %s)\n", what, mw_err_msg());
        abort();
    }
}

static void check_failure(mw_status rc, const char *name)
{
    check(rc == MW_EDATA || rc == MW_ENOMEM, "a failure is MW_EDATA");
    check(strstr(mw_err_msg(), name) != NULL, "the message names the file");
}

/* Every example of d assembles; labels within the classes. */
static void check_set(const mw_dataset *d, int max_label)
{
    check(d->count > 0 && d->rows > 0 && d->cols > 0 && d->channels > 0, "a non-empty shape");
    size_t count = (size_t)d->rows * d->cols * d->channels;
    float *x = malloc(count * sizeof *x);
    if (!x)
        return;
    for (uint32_t i = 0; i < d->count; i++) {
        int32_t y;
        mw_dataset_batch(d, x, &y, &i, 1);
        check(y >= 0 && y <= max_label, "labels within 0..max_label");
    }
    free(x);
}

static void fuzz_npy(const uint8_t *buf, size_t n)
{
    mw_npy_header h;
    mw_status rc = mw_npy_parse_header(&h, buf, n, n, "fuzz.npy");
    if (rc != MW_OK) {
        check_failure(rc, "fuzz.npy");
        return;
    }
    check(h.data_offset <= n && h.count * (uint64_t)h.itemsize == n - h.data_offset,
          "the shape accounts for every byte after the header");
    check(h.ndim >= 0 && h.ndim <= MW_NPY_MAX_DIMS, "ndim within the limit");
}

static void fuzz_npz(const uint8_t *buf, size_t n)
{
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    static const char *const names[4] = {"x_train.npy", "y_train.npy", "x_test.npy", "y_test.npy"};
    for (int k = 0; k < 4; k++) /* a stored member's offset stays within the archive */
        check(mw_data_zip_data_offset(buf, n, names[k]) <= n, "a member's data offset in bounds");
    int top = -1;
    mw_status rc = mw_data_read_npz_buffer(&tr, &te, buf, n, "fuzz.npz", 0, &top);
    if (rc != MW_OK) {
        check_failure(rc, "fuzz.npz");
    } else {
        check(top >= 0 && top < MW_DATA_MAX_CLASSES, "the largest label in range");
        check_set(&tr, top);
        check_set(&te, top);
    }
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
}

static void fuzz_cifar(const uint8_t *buf, size_t n, int mode)
{
    const int cifar100 = mode & 1, fine = (mode >> 1) & 1;
    const size_t rec = cifar100 ? 3074 : 3073;
    mw_dataset d;
    mw_dataset_init(&d);
    d.count = (uint32_t)(n / rec);
    d.rows = d.cols = 32, d.channels = 3, d.channel_major = 1;
    if (d.count) {
        d.images = malloc((size_t)d.count * 3072);
        d.labels = malloc((size_t)d.count * sizeof *d.labels);
        if (!d.images || !d.labels) {
            mw_dataset_free(&d);
            return;
        }
    }
    uint32_t next = 0;
    mw_status rc = mw_data_cifar_records(&d, &next, buf, n, cifar100, fine, 0, "fuzz.bin");
    if (rc != MW_OK)
        check_failure(rc, "fuzz.bin");
    else {
        check(next == d.count, "every record read");
        check_set(&d, cifar100 ? 99 : 9);
    }
    mw_dataset_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    mw_log_set_level(MW_LOG_ERROR);
    /* A private copy of exactly the file's bytes, so reading past the end is caught by ASan. */
    size_t n = size - 1;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, n);
    mw_err_clear();
    switch (data[0] % 6) {
    case 0:
    case 1:
        fuzz_npy(buf, n);
        break;
    case 2:
    case 3:
        fuzz_npz(buf, n);
        break;
    default:
        fuzz_cifar(buf, n, data[0] / 6 % 4);
        break;
    }
    mw_err_clear();
    free(buf);
    return 0;
}

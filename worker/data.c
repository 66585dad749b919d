/* The data set (see data.h): its life cycle, --data's recognition of a format, batch assembly
 * and the epoch order. The readers are in data_idx.c, data_npy.c, data_npz.c, data_cifar.c. */
#include "worker/data.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/rng.h"
#include "worker/data_formats.h"
#include "worker/preprocess.h"

void mw_dataset_init(mw_dataset *d)
{
    memset(d, 0, sizeof *d);
    d->images = NULL;
    d->labels = NULL;
    d->map = NULL;
}

void mw_dataset_free(mw_dataset *d)
{
    if (d->map)
        munmap(d->map, d->map_nbytes);
    else
        free(d->images);
    free(d->labels);
    mw_dataset_init(d);
}

size_t mw_dataset_image_nbytes(const mw_dataset *d)
{
    return (size_t)d->rows * d->cols * d->channels * (d->type == MW_IMAGES_F32 ? 4u : 1u);
}

/* A mapped set: drop the pages around the n examples just read from this process's page
 * tables (the page cache keeps them). A read fault maps a whole page-cache folio, up to 2 MiB,
 * not only the example's page, so without this a rank's RSS would grow towards the file size
 * as the epochs visit every example; the window dropped is the folio-sized one around each
 * example. Safe while other threads read there: they fault the same bytes back in. */
static void release_pages(const mw_dataset *d, const uint32_t *ids, int n, size_t nbytes)
{
    const uintptr_t W = UINT64_C(2) << 20, base = (uintptr_t)d->map;
    const uintptr_t end = base + d->map_nbytes;
    uintptr_t done_lo = 0, done_hi = 0;
    for (int i = 0; i < n; i++) {
        uintptr_t at = (uintptr_t)(d->images + (size_t)ids[i] * nbytes);
        uintptr_t lo = at & ~(W - 1), hi = (at + nbytes + W - 1) & ~(W - 1);
        lo = lo < base ? base : lo;
        hi = hi > end ? end : hi;
        if (lo >= done_lo && hi <= done_hi)
            continue;
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
        done_lo = lo, done_hi = hi;
    }
}

/* Example id as floats (H, W, C) into dst: uint8 values / 255 (raw: as they are), float32 as
 * stored. */
static void assemble(const mw_dataset *d, float *dst, uint32_t id, size_t nbytes, int raw)
{
    const size_t hw = (size_t)d->rows * d->cols, C = d->channels, count = hw * C;
    assert(id < d->count);
    const uint8_t *src = d->images + (size_t)id * nbytes;
    if (d->type == MW_IMAGES_F32) /* little-endian like the host (data.h); maybe unaligned */
        memcpy(dst, src, count * sizeof *dst);
    else if (!d->channel_major)
        for (size_t j = 0; j < count; j++)
            dst[j] = raw ? (float)src[j] : (float)src[j] / 255.0f;
    else /* (C, H, W) -> (H, W, C) */
        for (size_t c = 0; c < C; c++)
            for (size_t j = 0; j < hw; j++)
                dst[j * C + c] = raw ? (float)src[c * hw + j] : (float)src[c * hw + j] / 255.0f;
}

/* Through the input pipeline: each example assembled into scratch, then transformed into x. */
static void batch_pipeline(const mw_dataset *d, float *x, const uint32_t *ids, int n, size_t nbytes)
{
    const mw_preprocess *p = d->pre;
    const size_t in = mw_preprocess_in_count(p), out = mw_preprocess_out_count(p);
    const int L = mw_preprocess_nlayers(p);
    float *a = malloc(2 * in * sizeof *a);
    mw_pre_draw *draws = malloc((size_t)L * sizeof *draws);
    if (!a || !draws) { /* a few KiB: no way to go on, and no status to return */
        mw_log_error("out of memory assembling a batch (%zu bytes)", 2 * in * sizeof *a);
        abort();
    }
    const int raw = mw_preprocess_takes_raw(p);
    for (int i = 0; i < n; i++) {
        assemble(d, a, ids[i], nbytes, raw);
        if (d->augment)
            mw_preprocess_draw(p, d->aug_seed, d->epoch, ids[i], draws);
        mw_preprocess_apply(p, x + (size_t)i * out, a, a + in, d->augment, draws);
    }
    free(draws);
    free(a);
}

void mw_dataset_batch(const mw_dataset *d, float *x, int32_t *y, const uint32_t *ids, int n)
{
    const size_t count = (size_t)d->rows * d->cols * d->channels;
    const size_t nbytes = mw_dataset_image_nbytes(d);
    if (d->pre)
        batch_pipeline(d, x, ids, n, nbytes);
    else
        for (int i = 0; i < n; i++)
            assemble(d, x + (size_t)i * count, ids[i], nbytes, 0);
    if (y)
        for (int i = 0; i < n; i++)
            y[i] = d->labels[ids[i]];
    if (d->map)
        release_pages(d, ids, n, nbytes);
}

/* ---- --data PATH ---- */

typedef enum { F_NONE, F_NPZ, F_NPY_DIR, F_CIFAR10, F_CIFAR100, F_IDX } data_format;

static int exists(const char *dir, const char *name)
{
    char p[4096];
    struct stat st;
    return mw_data_join(p, sizeof p, dir, name) == MW_OK && stat(p, &st) == 0;
}

/* Which reader path needs: a file by its first bytes, a directory by the files it holds. */
static mw_status detect(const char *path, data_format *f)
{
    struct stat st;
    const char *hint = strcmp(path, MW_DATA_DEFAULT_DIR) == 0
                           ? " (install the Debian package dataset-fashion-mnist)"
                           : "";
    if (stat(path, &st) != 0)
        return mw_err(MW_EIO, "data %s: %s%s", path, strerror(errno), hint);
    *f = F_NONE;
    if (S_ISREG(st.st_mode)) {
        uint8_t magic[6] = {0};
        FILE *fp = fopen(path, "rb");
        if (!fp)
            return mw_err(MW_EIO, "data %s: cannot open: %s", path, strerror(errno));
        size_t got = fread(magic, 1, sizeof magic, fp);
        fclose(fp);
        if (got >= 4 && !memcmp(magic, "PK", 2))
            *f = F_NPZ;
        else if (got == 6 && !memcmp(magic, "\x93NUMPY", 6))
            return mw_err(MW_EDATA,
                          "data %s: a single .npy array; give the directory that holds "
                          "x_train.npy, y_train.npy, x_test.npy and y_test.npy, or one .npz",
                          path);
        else
            return mw_err(MW_EDATA,
                          "data %s: not a zip archive (.npz): expected the signature \"PK\" at "
                          "the start, or a directory",
                          path);
        return MW_OK;
    }
    if (!S_ISDIR(st.st_mode))
        return mw_err(MW_EIO, "data %s: neither a file nor a directory", path);
    if (exists(path, "x_train.npy"))
        *f = F_NPY_DIR;
    else if (exists(path, "data_batch_1.bin"))
        *f = F_CIFAR10;
    else if (exists(path, "train.bin"))
        *f = F_CIFAR100;
    else
        *f = F_IDX; /* its reader names the IDX files it looked for */
    return MW_OK;
}

mw_status mw_dataset_open(mw_dataset *train, mw_dataset *test, const char *path,
                          const mw_data_opts *o)
{
    data_format f;
    MW_TRY(detect(path, &f));
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    mw_status rc = MW_OK;
    int top = -1, own = 0;
    switch (f) {
    case F_NPZ:
        MW_TRY_GOTO(mw_data_read_npz(&tr, &te, path, o->classes, &top), rc, fail);
        break;
    case F_NPY_DIR:
        MW_TRY_GOTO(mw_data_read_npy_dir(&tr, &te, path, o->classes, &top), rc, fail);
        break;
    case F_CIFAR10:
    case F_CIFAR100:
        MW_TRY_GOTO(
            mw_data_read_cifar(&tr, &te, path, f == F_CIFAR100, o->cifar_fine, o->classes, &own),
            rc, fail);
        break;
    default:
        MW_TRY_GOTO(mw_dataset_load_dir(&tr, &te, path, o->classes > 0 ? o->classes : 256), rc,
                    fail);
        for (uint32_t i = 0; i < tr.count; i++)
            top = tr.labels[i] > top ? tr.labels[i] : top;
        for (uint32_t i = 0; i < te.count; i++)
            top = te.labels[i] > top ? te.labels[i] : top;
        break;
    }
    if (te.rows != tr.rows || te.cols != tr.cols || te.channels != tr.channels) {
        rc = mw_err(MW_EDATA, "data %s: test images are %ux%ux%u but train images are %ux%ux%u",
                    path, te.rows, te.cols, te.channels, tr.rows, tr.cols, tr.channels);
        goto fail;
    }
    tr.num_classes = te.num_classes = o->classes > 0 ? o->classes : own > 0 ? own : top + 1;
    mw_dataset_free(train);
    mw_dataset_free(test);
    *train = tr;
    *test = te;
    return MW_OK;
fail:
    mw_dataset_free(&tr);
    mw_dataset_free(&te);
    return rc;
}

void mw_dataset_epoch_order(uint32_t *ids, uint32_t n, uint64_t seed, int epoch)
{
    mw_rng r;
    mw_rng_seed(&r, seed, UINT64_C(0x5eed0000) + (uint64_t)epoch);
    for (uint32_t i = 0; i < n; i++)
        ids[i] = i;
    mw_rng_shuffle(&r, ids, n);
}

/* The CIFAR binary reader (worker/data/data_cifar.h).
 *
 * CIFAR-10: data_batch_1.bin .. data_batch_5.bin (train) and test_batch.bin, each a sequence
 * of 3073-byte records: 1 label byte (0..9), then 3072 image bytes, the 1024 red values of
 * the 32x32 image row by row, then green, then blue (channel-major).
 * CIFAR-100: train.bin and test.bin, 3074-byte records: a coarse label byte (0..19), a fine
 * label byte (0..99), then the same 3072 image bytes.
 *
 * Each file must be a whole, non-zero number of records. The images are kept channel-major,
 * as stored, and transposed to (H, W, C) when a batch is assembled. */
#include "worker/data/data_cifar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/sysmem.h"
#include "worker/data/data_formats.h"

#define SIDE 32u
#define IMAGE_NBYTES (SIDE * SIDE * 3u)

static size_t record_nbytes(int cifar100)
{
    return (cifar100 ? 2u : 1u) + IMAGE_NBYTES;
}

mw_status mw_data_cifar_records(mw_dataset *d, uint32_t *next, const uint8_t *bytes, size_t nbytes,
                                int cifar100, int fine, int classes, const char *name)
{
    const size_t rec = record_nbytes(cifar100);
    if (nbytes == 0 || nbytes % rec != 0)
        return mw_err(MW_EDATA,
                      "%s: file size %zu is not a whole, non-zero number of %zu-byte records "
                      "(%s label byte%s + 3072 image bytes): not a %s file",
                      name, nbytes, rec, cifar100 ? "coarse and fine" : "1", cifar100 ? "s" : "",
                      cifar100 ? "CIFAR-100" : "CIFAR-10");
    const uint32_t n = (uint32_t)(nbytes / rec);
    if (n > d->count - *next)
        return mw_err(MW_EINTERNAL, "%s: more records than allocated", name);
    const int own = cifar100 ? (fine ? 100 : 20) : 10;
    const int limit = classes > 0 ? classes : own;
    char why[48];
    if (classes > 0)
        snprintf(why, sizeof why, "--classes %d", classes);
    else
        snprintf(why, sizeof why, "%s has %d classes",
                 cifar100 ? (fine ? "CIFAR-100 (fine labels)" : "CIFAR-100 (coarse labels)")
                          : "CIFAR-10",
                 own);
    int top = 0;
    MW_TRY(mw_data_take_labels(d->labels + *next, bytes + (cifar100 && fine ? 1 : 0), rec, 'u', 1,
                               n, limit, why, name, &top));
    const size_t lab = cifar100 ? 2 : 1;
    for (uint32_t i = 0; i < n; i++)
        memcpy(d->images + ((size_t)*next + i) * IMAGE_NBYTES, bytes + i * rec + lab, IMAGE_NBYTES);
    *next += n;
    return MW_OK;
}

/* The size of dir/name (a regular file), in *nbytes; path receives the full name. */
static mw_status stat_file(char *path, size_t cap, const char *dir, const char *name,
                           size_t *nbytes)
{
    MW_TRY(mw_data_join(path, cap, dir, name));
    struct stat st;
    if (stat(path, &st) != 0)
        return mw_err(MW_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) /* never opened: a FIFO would block */
        return mw_err(MW_EIO, "%s: is %s, not a regular file; expected a CIFAR binary batch", path,
                      mw_fs_kind(st.st_mode));
    *nbytes = (size_t)st.st_size;
    return MW_OK;
}

static mw_status read_file(const char *path, uint8_t *buf, size_t nbytes)
{
    FILE *f;
    size_t now;
    MW_TRY(mw_fs_fopen_input(path, "a CIFAR binary batch", &f, &now));
    size_t got = fread(buf, 1, nbytes, f);
    int bad = ferror(f);
    fclose(f);
    if (got != nbytes)
        return mw_err(MW_EIO, "%s: read error after %zu of %zu bytes%s", path, got, nbytes,
                      bad ? "" : " (the file shrank)");
    return MW_OK;
}

/* One set from its files (names[0..nfiles)): sizes checked first, then each file's records. */
static mw_status read_set(mw_dataset *d, const char *dir, const char *const *names, int nfiles,
                          int cifar100, int fine, int classes)
{
    char path[4096];
    size_t total = 0, biggest = 0, sizes[5];
    const size_t rec = record_nbytes(cifar100);
    for (int i = 0; i < nfiles; i++) {
        MW_TRY(stat_file(path, sizeof path, dir, names[i], &sizes[i]));
        if (sizes[i] == 0 || sizes[i] % rec != 0)
            return mw_data_cifar_records(d, &(uint32_t){0}, NULL, sizes[i], cifar100, fine, classes,
                                         path); /* its message */
        total += sizes[i] / rec;
        biggest = sizes[i] > biggest ? sizes[i] : biggest;
    }
    if ((uint64_t)total * IMAGE_NBYTES > MW_DATA_MAX_NBYTES || total >= UINT32_MAX)
        return mw_err(MW_EDATA, "%s: %zu records, more than the limit", dir, total);
    /* the images, the labels and the largest file's bytes, before they are read */
    MW_TRY(mw_sysmem_check_load(total * (IMAGE_NBYTES + sizeof *d->labels) + biggest,
                                "%s: %zu CIFAR records take", dir, total));
    d->count = (uint32_t)total;
    d->rows = d->cols = SIDE;
    d->channels = 3;
    d->type = MW_IMAGES_U8;
    d->channel_major = 1;
    d->images = malloc(total * IMAGE_NBYTES);
    d->labels = malloc(total * sizeof *d->labels);
    uint8_t *buf = malloc(biggest);
    mw_status rc = MW_OK;
    if (!d->images || !d->labels || !buf) {
        rc = mw_err(MW_ENOMEM, "%s: cannot allocate memory for %zu CIFAR records", dir, total);
        goto done;
    }
    uint32_t next = 0;
    for (int i = 0; i < nfiles; i++) {
        MW_TRY_GOTO(mw_data_join(path, sizeof path, dir, names[i]), rc, done);
        MW_TRY_GOTO(read_file(path, buf, sizes[i]), rc, done);
        MW_TRY_GOTO(mw_data_cifar_records(d, &next, buf, sizes[i], cifar100, fine, classes, path),
                    rc, done);
    }
done:
    free(buf);
    return rc;
}

mw_status mw_data_read_cifar(mw_dataset *train, mw_dataset *test, const char *dir, int cifar100,
                             int fine, int classes, int *nclasses)
{
    static const char *const c10_train[5] = {"data_batch_1.bin", "data_batch_2.bin",
                                             "data_batch_3.bin", "data_batch_4.bin",
                                             "data_batch_5.bin"};
    static const char *const c10_test[1] = {"test_batch.bin"};
    static const char *const c100_train[1] = {"train.bin"};
    static const char *const c100_test[1] = {"test.bin"};
    if (cifar100) {
        MW_TRY(read_set(train, dir, c100_train, 1, 1, fine, classes));
        MW_TRY(read_set(test, dir, c100_test, 1, 1, fine, classes));
    } else {
        MW_TRY(read_set(train, dir, c10_train, 5, 0, 0, classes));
        MW_TRY(read_set(test, dir, c10_test, 1, 0, 0, classes));
    }
    *nclasses = cifar100 ? (fine ? 100 : 20) : 10;
    mw_log_debug("data: %u train and %u test CIFAR-%s images from %s", train->count, test->count,
                 cifar100 ? "100" : "10", dir);
    return MW_OK;
}

/* ---- the reader table's rows ---- */

static int cifar10_claims(const char *path, int is_dir, const uint8_t *head, size_t got)
{
    (void)head, (void)got;
    return is_dir && mw_data_has(path, "data_batch_1.bin");
}

static int cifar100_claims(const char *path, int is_dir, const uint8_t *head, size_t got)
{
    (void)head, (void)got;
    return is_dir && mw_data_has(path, "train.bin");
}

static mw_status cifar10_read(mw_dataset *train, mw_dataset *test, const char *path,
                              const mw_data_opts *o, int *top, int *own)
{
    (void)top;
    return mw_data_read_cifar(train, test, path, 0, o->cifar_fine, o->classes, own);
}

static mw_status cifar100_read(mw_dataset *train, mw_dataset *test, const char *path,
                               const mw_data_opts *o, int *top, int *own)
{
    (void)top;
    return mw_data_read_cifar(train, test, path, 1, o->cifar_fine, o->classes, own);
}

const mw_data_reader mw_reader_cifar10 = {"CIFAR-10", cifar10_claims, cifar10_read};
const mw_data_reader mw_reader_cifar100 = {"CIFAR-100", cifar100_claims, cifar100_read};

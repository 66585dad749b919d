/* --data PATH: which reader a path needs, recognised by content, and the classes of the set;
 * see mw_dataset_open in data.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs.h"
#include "worker/data/data.h"
#include "worker/data/data_formats.h"

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
        FILE *fp;
        size_t nbytes;
        MW_TRY(mw_fs_fopen_input(path, "a .npz archive or a directory", &fp, &nbytes));
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
    if (!S_ISDIR(st.st_mode)) /* never opened: a FIFO would block */
        return mw_err(MW_EIO,
                      "data %s: is %s, not a regular file; expected a .npz archive or a "
                      "directory",
                      path, mw_fs_kind(st.st_mode));
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

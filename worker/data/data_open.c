/* --data PATH: which reader a path needs, recognised by content through the reader table
 * (data_formats.h), and the classes of the set; see data_open.h. */
#include "worker/data/data_open.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs.h"
#include "common/log.h"
#include "worker/data/data_cifar.h"
#include "worker/data/data_csv.h"
#include "worker/data/data_formats.h"
#include "worker/data/data_idx.h"
#include "worker/data/data_images.h"
#include "worker/data/data_npy.h"
#include "worker/data/data_npz.h"
#include "worker/data/data_text.h"
#include "worker/data/data_tfrecord.h"

/* The reader table's rows, asked in order: the first that claims a path reads it (IDX, which
 * takes any directory, last). */
static const mw_data_reader *const readers[] = {
    &mw_reader_npz,     &mw_reader_npy_file, &mw_reader_npy_dir,
    &mw_reader_cifar10, &mw_reader_cifar100, &mw_reader_csv,
    &mw_reader_images,  &mw_reader_tfrecord, &mw_reader_idx,
};

/* The reader path needs: a file by its first bytes, a directory by the files it holds. */
static mw_status detect(const char *path, const mw_data_reader **out)
{
    struct stat st;
    const char *hint = strcmp(path, MW_DATA_DEFAULT_DIR) == 0
                           ? " (install the Debian package dataset-fashion-mnist)"
                           : "";
    if (stat(path, &st) != 0)
        return mw_err(MW_EIO, "data %s: %s%s", path, strerror(errno), hint);
    uint8_t head[8] = {0};
    size_t got = 0;
    if (S_ISREG(st.st_mode)) {
        FILE *fp;
        size_t nbytes;
        MW_TRY(mw_fs_fopen_input(path, "a .npz archive or a directory", &fp, &nbytes));
        got = fread(head, 1, sizeof head, fp);
        fclose(fp);
    } else if (!S_ISDIR(st.st_mode)) { /* never opened: a FIFO would block */
        return mw_err(MW_EIO,
                      "data %s: is %s, not a regular file; expected a .npz archive or a "
                      "directory",
                      path, mw_fs_kind(st.st_mode));
    }
    for (size_t i = 0; i < sizeof readers / sizeof *readers; i++)
        if (readers[i]->claims(path, S_ISDIR(st.st_mode), head, got)) {
            *out = readers[i];
            return MW_OK;
        }
    return mw_err(MW_EDATA,
                  "data %s: not a zip archive (.npz): expected the signature \"PK\" at the "
                  "start, or a directory",
                  path);
}

mw_status mw_dataset_open(mw_dataset *train, mw_dataset *test, const char *path,
                          const mw_data_opts *o)
{
    static const mw_data_reader text = {"text corpus", NULL, mw_data_read_text};
    const mw_data_reader *r = &text;
    if (o->sequence_length <= 0) /* a text corpus only by --sequence-length */
        MW_TRY(detect(path, &r));
    mw_log_debug("data %s: %s", path, r->name);
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    mw_status rc = MW_OK;
    int top = -1, own = 0;
    MW_TRY_GOTO(r->read(&tr, &te, path, o, &top, &own), rc, fail);
    if (te.rows != tr.rows || te.cols != tr.cols || te.channels != tr.channels) {
        rc = mw_err(MW_EDATA, "data %s: test images are %ux%ux%u but train images are %ux%ux%u",
                    path, te.rows, te.cols, te.channels, tr.rows, tr.cols, tr.channels);
        goto fail;
    }
    if (tr.targets && te.targets && tr.target_width != te.target_width) {
        rc = mw_err(MW_EDATA,
                    "data %s: the training targets have %d values per example, the test "
                    "targets %d; expected the same",
                    path, tr.target_width, te.target_width);
        goto fail;
    }
    if (!tr.targets && te.count && tr.label_width != te.label_width) {
        rc = mw_err(MW_EDATA,
                    "data %s: the training set has %d label(s) per example, the test set %d; "
                    "expected the same",
                    path, tr.label_width, te.label_width);
        goto fail;
    }
    if (!tr.targets && te.count && tr.label_rows != te.label_rows) {
        rc = mw_err(MW_EDATA,
                    "data %s: the training labels have %d rows per example, the test labels %d "
                    "(0: not (N, H, W)); expected the same",
                    path, tr.label_rows, te.label_rows);
        goto fail;
    }
    if (!tr.targets != !te.targets) {
        rc = mw_err(MW_EDATA,
                    "data %s: the training set has %s but the test set has %s; expected the "
                    "same kind of targets",
                    path, tr.targets ? "float32 targets" : "integer class labels",
                    te.targets ? "float32 targets" : "integer class labels");
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

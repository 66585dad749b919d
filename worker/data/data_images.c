/* An image folder as --data (see data_images.h): the class folders and files listed as Keras'
 * image_dataset_from_directory lists them (keras/src/utils/dataset_utils.py, index_directory),
 * each file one example of a MW_IMAGES_ENCODED set (worker/data/stream.h). */
#include "worker/data/data_images.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/log.h"
#include "worker/data/data_formats.h"
#include "worker/data/image_decode.h"
#include "worker/data/np_shuffle.h"
#include "worker/data/stream.h"

/* A list of malloc'ed strings. */
typedef struct {
    char **v;
    size_t n, cap;
} strlist;

static void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static mw_status strlist_add(strlist *l, const char *dir, const char *name)
{
    if (l->n == l->cap) {
        const size_t c = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, c * sizeof *v);
        if (!v)
            return mw_err(MW_ENOMEM, "%s: out of memory listing the folder", dir);
        l->v = v, l->cap = c;
    }
    char *s = name ? malloc(strlen(dir) + strlen(name) + 2) : strdup(dir);
    if (!s)
        return mw_err(MW_ENOMEM, "%s: out of memory listing the folder", dir);
    if (name)
        sprintf(s, "%s/%s", dir, name);
    l->v[l->n++] = s;
    return MW_OK;
}

static int by_name(const void *a, const void *b) /* Python's sorted() on str: code points */
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Keras' ALLOWLIST_FORMATS, compared lower-cased. */
static int image_name(const char *name)
{
    static const char *const ext[] = {".bmp", ".gif", ".jpeg", ".jpg", ".png"};
    const size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
        const size_t e = strlen(ext[i]);
        if (n >= e && strcasecmp(name + n - e, ext[i]) == 0)
            return 1;
    }
    return 0;
}

/* The entries of dir: its subfolders into dirs (real ones only with real_only, as os.walk
 * without followlinks descends; any that stat calls a folder otherwise, as os.path.isdir), the
 * rest into files (a broken link too: its open names it). */
static mw_status list_dir(const char *dir, strlist *dirs, strlist *files, int real_only)
{
    DIR *d = opendir(dir);
    if (!d)
        return mw_err(MW_EIO, "%s: cannot list the folder: %s", dir, strerror(errno));
    mw_status rc = MW_OK;
    struct dirent *e;
    while (rc == MW_OK && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) {
            rc = mw_err(MW_EDATA, "%s/%s: path too long", dir, e->d_name);
            break;
        }
        struct stat st, lst;
        const int is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
        const int real = lstat(path, &lst) == 0 && S_ISDIR(lst.st_mode);
        if (is_dir && (real || !real_only))
            rc = dirs ? strlist_add(dirs, path, NULL) : MW_OK;
        else if (!is_dir && files)
            rc = strlist_add(files, path, NULL);
    }
    closedir(d);
    return rc;
}

/* Every folder under top (top included), not through links, sorted by path as Keras'
 * sorted(os.walk(top)) takes them. */
static mw_status walk(const char *top, strlist *out)
{
    MW_TRY(strlist_add(out, top, NULL));
    for (size_t i = 0; i < out->n; i++) { /* breadth-first; the order is the sort's */
        if (out->n > (size_t)1 << 24)
            return mw_err(MW_EDATA, "%s: more than 2^24 folders", top);
        MW_TRY(list_dir(out->v[i], out, NULL, 1));
    }
    if (out->n > 1) /* qsort of NULL is undefined even for 0 elements */
        qsort(out->v, out->n, sizeof *out->v, by_name);
    return MW_OK;
}

/* The image files of one class folder, in Keras' order, appended to files; *skipped: files
 * that are not images by name. */
static mw_status class_files(const char *cls, strlist *files, size_t *skipped)
{
    strlist dirs = {0};
    mw_status rc = walk(cls, &dirs);
    for (size_t i = 0; rc == MW_OK && i < dirs.n; i++) {
        strlist here = {0};
        rc = list_dir(dirs.v[i], NULL, &here, 1);
        if (rc == MW_OK)
            if (here.n > 1)
                qsort(here.v, here.n, sizeof *here.v, by_name);
        for (size_t j = 0; rc == MW_OK && j < here.n; j++) {
            const char *base = strrchr(here.v[j], '/') + 1;
            if (image_name(base))
                rc = strlist_add(files, here.v[j], NULL);
            else
                ++*skipped;
        }
        strlist_free(&here);
    }
    strlist_free(&dirs);
    return rc;
}

/* The class of folder name among classes (sorted), or -1. */
static int class_of(const strlist *classes, const char *name)
{
    for (size_t i = 0; i < classes->n; i++)
        if (strcmp(strrchr(classes->v[i], '/') + 1, name) == 0)
            return (int)i;
    return -1;
}

/* Drop the folders whose name starts with '.' (.git, .ipynb_checkpoints): Keras'
 * index_directory takes no such folder as a class. */
static void drop_hidden(strlist *names)
{
    size_t k = 0;
    for (size_t i = 0; i < names->n; i++) {
        if (strrchr(names->v[i], '/')[1] == '.')
            free(names->v[i]);
        else
            names->v[k++] = names->v[i];
    }
    names->n = k;
}

/* One split's folder (dir) into d: its class folders sorted, each one's image files as
 * examples labelled by the class's place among classes (the training split's, which it sets
 * when train). */
static mw_status read_split(mw_dataset *d, const char *dir, strlist *classes, int train,
                            const mw_stream_shape *shape, const char *what)
{
    strlist names = {0}, files = {0};
    mw_status rc = list_dir(dir, &names, NULL, 0);
    drop_hidden(&names);
    if (names.n > 1)
        qsort(names.v, names.n, sizeof *names.v, by_name);
    if (rc == MW_OK && names.n == 0)
        rc = mw_err(MW_EDATA,
                    "%s: no class folders; expected one folder of images per class (as "
                    "keras.utils.image_dataset_from_directory reads)",
                    dir);
    if (rc == MW_OK)
        rc = mw_stream_new(&d->stream, shape, what);
    d->type = MW_IMAGES_ENCODED;
    size_t skipped = 0, cap = 0;
    for (size_t c = 0; rc == MW_OK && c < names.n; c++) {
        const char *base = strrchr(names.v[c], '/') + 1;
        const int label = train ? (int)c : class_of(classes, base);
        if (label < 0) {
            rc = mw_err(MW_EDATA, "%s: class folder '%s' is not a class of the training set", dir,
                        base);
            break;
        }
        const size_t first = files.n;
        rc = class_files(names.v[c], &files, &skipped);
        if (rc == MW_OK && train && files.n == first)
            rc = mw_err(MW_EDATA,
                        "%s: class folder holds no image file (.bmp, .gif, .jpeg, .jpg, .png); "
                        "expected at least one (the model cannot learn a class without examples)",
                        names.v[c]);
        if (rc == MW_OK && files.n > cap) {
            cap = files.n * 2;
            int32_t *l = realloc(d->labels, cap * sizeof *l);
            if (!l)
                rc = mw_err(MW_ENOMEM, "%s: out of memory for %zu labels", dir, cap);
            else
                d->labels = l;
        }
        for (size_t i = first; rc == MW_OK && i < files.n; i++)
            d->labels[i] = label;
    }
    if (rc == MW_OK && files.n == 0) /* train: each class has one; Keras refuses it too */
        rc = mw_err(MW_EDATA,
                    "%s: no image file (.bmp, .gif, .jpeg, .jpg, .png) in its class folders; "
                    "expected at least one (the test set would be empty)",
                    dir);
    if (rc == MW_OK && files.n >= UINT32_MAX)
        rc = mw_err(MW_EDATA, "%s: %zu images; at most 2^32 - 2", dir, files.n);
    for (size_t i = 0; rc == MW_OK && i < files.n; i++) {
        uint32_t src;
        struct stat st;
        if (stat(files.v[i], &st) == 0) /* a file that cannot be read is named when it is */
            mw_stream_note_size(d->stream, (uint64_t)st.st_size);
        rc = mw_stream_add_source(d->stream, files.v[i], &src);
        if (rc == MW_OK)
            rc = mw_stream_add_example(d->stream, src, MW_STREAM_WHOLE_FILE);
    }
    d->count = (uint32_t)files.n;
    if (rc == MW_OK && skipped)
        mw_log_debug("%s: %zu files skipped (not .bmp, .gif, .jpeg, .jpg or .png)", dir, skipped);
    if (rc == MW_OK && train)
        *classes = names, names = (strlist){0};
    strlist_free(&names);
    strlist_free(&files);
    return rc;
}

static int is_folder(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* DIR/train, and the held-out split's folder: DIR/test, else DIR/validation. */
static int split_dirs(const char *path, char *train, char *test, size_t cap)
{
    if (mw_data_join(train, cap, path, "train") != MW_OK || !is_folder(train))
        return 0;
    if (mw_data_join(test, cap, path, "test") == MW_OK && is_folder(test))
        return 1;
    return mw_data_join(test, cap, path, "validation") == MW_OK && is_folder(test);
}

/* 1 when folder cls holds an image file (by name) directly. */
static int holds_image(const char *cls)
{
    strlist files = {0};
    int found = 0;
    if (list_dir(cls, NULL, &files, 1) == MW_OK)
        for (size_t i = 0; i < files.n && !found; i++)
            found = image_name(strrchr(files.v[i], '/') + 1);
    strlist_free(&files);
    mw_err_clear();
    return found;
}

/* DIR/train/, or DIR's own class folders: a subfolder holding an image file. */
static int images_claims(const char *path, int is_dir, const uint8_t *head, size_t got)
{
    (void)head, (void)got;
    char train[4096];
    if (!is_dir)
        return 0;
    if (mw_data_join(train, sizeof train, path, "train") == MW_OK && is_folder(train))
        return 1;
    strlist dirs = {0};
    int found = 0;
    if (list_dir(path, &dirs, NULL, 0) == MW_OK)
        for (size_t i = 0; i < dirs.n && !found; i++)
            found = holds_image(dirs.v[i]);
    strlist_free(&dirs);
    mw_err_clear();
    return found;
}

/* Examples ids[0..n) of all into d (its stream new, shaped as all's). */
static mw_status take_examples(mw_dataset *d, const mw_dataset *all, const uint32_t *ids,
                               uint32_t n, const char *what)
{
    mw_stream_shape sh;
    mw_stream_shape_of(all->stream, &sh);
    MW_TRY(mw_stream_new(&d->stream, &sh, what));
    d->type = MW_IMAGES_ENCODED;
    if (!(d->labels = malloc((n ? n : 1) * sizeof *d->labels)))
        return mw_err(MW_ENOMEM, "%s: out of memory for %u labels", what, n);
    uint64_t largest;
    mw_stream_nbytes(all->stream, &largest);
    mw_stream_note_size(d->stream, largest);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t src;
        const char *path = mw_stream_source(all->stream, mw_stream_source_of(all->stream, ids[k]));
        MW_TRY(mw_stream_add_source(d->stream, path, &src));
        MW_TRY(mw_stream_add_example(d->stream, src, MW_STREAM_WHOLE_FILE));
        d->labels[k] = all->labels[ids[k]];
        d->count = k + 1;
    }
    return MW_OK;
}

/* One tree of class folders cut as Keras' validation_split with a seed cuts it: the files in
 * Keras' order shuffled by NumPy's RandomState(seed), the last int(split x n) held out. */
static mw_status read_split_tree(mw_dataset *train, mw_dataset *test, const char *path,
                                 const mw_data_opts *o, strlist *classes,
                                 const mw_stream_shape *shape)
{
    if (o->validation_split <= 0 || o->validation_seed < 0)
        return mw_err(MW_EDATA,
                      "%s: class folders without train/ and test/ folders; give "
                      "--validation-split F and --validation-seed N to hold out a fraction F "
                      "for testing (Keras' validation_split and seed), or make train/ and test/",
                      path);
    mw_dataset all;
    mw_dataset_init(&all);
    mw_status rc = read_split(&all, path, classes, 1, shape, "image folder");
    const uint32_t n = all.count, nval = (uint32_t)(o->validation_split * (double)n);
    if (rc == MW_OK && (nval == 0 || nval == n))
        rc = mw_err(MW_EDATA,
                    "%s: --validation-split %g of %u images holds out %u; expected at least one "
                    "image on each side",
                    path, o->validation_split, n, nval);
    uint32_t *perm = rc == MW_OK ? malloc((size_t)n * sizeof *perm) : NULL;
    if (rc == MW_OK && !perm)
        rc = mw_err(MW_ENOMEM, "%s: out of memory for %u ids", path, n);
    if (rc == MW_OK)
        mw_np_shuffle(perm, n, (uint32_t)o->validation_seed);
    if (rc == MW_OK)
        rc = take_examples(train, &all, perm, n - nval, "training set");
    if (rc == MW_OK)
        rc = take_examples(test, &all, perm + (n - nval), nval, "validation set");
    free(perm);
    mw_dataset_free(&all);
    return rc;
}

/* The decoded shape: --color-mode's channels, --image-size or the first training image's. */
static mw_status settle_shape(mw_dataset *tr, mw_dataset *te, const mw_data_opts *o,
                              mw_stream_shape *shape)
{
    uint32_t h = o->image_h, w = o->image_w;
    if (!h || !w)
        MW_TRY(mw_stream_probe(tr->stream, 0, &h, &w));
    mw_stream_set_size(tr->stream, h, w);
    if (te->stream)
        mw_stream_set_size(te->stream, h, w);
    shape->height = h, shape->width = w;
    for (mw_dataset *d = tr; d; d = d == tr ? te : NULL)
        d->rows = h, d->cols = w, d->channels = (uint32_t)shape->channels;
    return MW_OK;
}

static mw_status images_read(mw_dataset *train, mw_dataset *test, const char *path,
                             const mw_data_opts *o, int *top, int *own)
{
    char tr[4096], te[4096];
    const int has_train = mw_data_join(tr, sizeof tr, path, "train") == MW_OK && is_folder(tr);
    if (has_train && !split_dirs(path, tr, te, sizeof tr))
        return mw_err(MW_EDATA,
                      "%s: an image folder needs train/ and test/ (or validation/) folders, "
                      "each with one folder of images per class; found train/ only",
                      path);
    if (has_train && o->validation_split > 0)
        return mw_err(MW_EDATA,
                      "%s: --validation-split cuts one tree of class folders, but this folder "
                      "has train/ and %s already",
                      path, strrchr(te, '/') + 1);
    mw_stream_shape shape = {.channels = o->color_channels ? o->color_channels : 3,
                             .interp = o->interp,
                             .crop = o->crop};
    strlist classes = {0};
    mw_status rc = MW_OK;
    if (!has_train)
        rc = read_split_tree(train, test, path, o, &classes, &shape);
    else
        rc = read_split(train, tr, &classes, 1, &shape, "training set");
    if (rc == MW_OK && has_train)
        rc = read_split(test, te, &classes, 0, &shape, "test set");
    if (rc == MW_OK && o->classes > 0 && (size_t)o->classes < classes.n)
        rc = mw_err(MW_EDATA, "%s: %zu class folders, but --classes %d", has_train ? tr : path,
                    classes.n, o->classes);
    if (rc == MW_OK)
        rc = settle_shape(train, test, o, &shape);
    *top = (int)classes.n - 1, *own = (int)classes.n;
    strlist_free(&classes);
    return rc;
}

const mw_data_reader mw_reader_images = {"image folder", images_claims, images_read};

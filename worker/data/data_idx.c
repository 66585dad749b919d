/* The IDX reader (Fashion-MNIST by default): mw_dataset_load and mw_dataset_load_dir.
 *
 * zlib's gzread reads gzip-compressed and plain files alike, so one path handles both. The
 * two headers are read and checked (magic, dimensions, size limits, equal counts) before
 * anything is allocated, so a corrupt header cannot trigger a huge allocation. After each
 * body one more byte is requested: it catches trailing data and, for gzip files, makes
 * zlib reach the end of the stream and verify the CRC, which a read of exactly the body
 * would skip. */
#include "worker/data/data_idx.h"

#include "worker/data/data.h"
#include "worker/data/data_formats.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/sysmem.h"

#define READ_CHUNK (1u << 30) /* gzread takes an unsigned and returns an int */
#define GZ_BUFFER (1u << 17)  /* larger than zlib's 8 KiB default: fewer read calls */

static const char *const dir_names[4] = {
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
};

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Read up to nbytes; returns the number read. Stops early at end of file or on an error,
 * leaving errno of a failed read in *saved_errno for read_error. */
static size_t read_full(gzFile f, void *buf, size_t nbytes, int *saved_errno)
{
    size_t got = 0;
    while (got < nbytes) {
        size_t want = nbytes - got < READ_CHUNK ? nbytes - got : READ_CHUNK;
        errno = 0;
        int r = gzread(f, (uint8_t *)buf + got, (unsigned)want);
        if (r <= 0) {
            *saved_errno = errno;
            break;
        }
        got += (size_t)r;
    }
    return got;
}

/* zlib's message without the "path: " prefix gzerror puts in front of it. */
static const char *zlib_msg(gzFile f, const char *path, int *zerr)
{
    const char *msg = gzerror(f, zerr);
    size_t plen = strlen(path);
    if (strncmp(msg, path, plen) == 0 && msg[plen] == ':' && msg[plen + 1] == ' ')
        msg += plen + 2;
    return msg;
}

/* The error for reading got of the expected bytes of `what`: an I/O error, a damaged or
 * truncated gzip stream, or (zlib saw nothing wrong) a plain file that ends too early. */
static mw_status read_error(gzFile f, const char *path, int saved_errno, const char *what,
                            size_t expected, size_t got)
{
    int zerr = Z_OK;
    const char *msg = zlib_msg(f, path, &zerr);
    switch (zerr) {
    case Z_OK:
    case Z_STREAM_END:
        return mw_err(MW_EDATA, "%s: truncated %s: expected %zu bytes, read %zu", path, what,
                      expected, got);
    case Z_ERRNO:
        return mw_err(MW_EIO, "%s: read error in %s: %s", path, what,
                      saved_errno ? strerror(saved_errno) : msg);
    case Z_MEM_ERROR:
        return mw_err(MW_ENOMEM, "%s: out of memory while decompressing", path);
    case Z_BUF_ERROR:
        return mw_err(MW_EDATA, "%s: truncated gzip stream in %s: expected %zu bytes, read %zu",
                      path, what, expected, got);
    default:
        return mw_err(MW_EDATA, "%s: corrupt gzip stream (zlib: %s) while reading %s", path, msg,
                      what);
    }
}

static mw_status read_exact(gzFile f, const char *path, void *buf, size_t nbytes, const char *what)
{
    int saved_errno = 0;
    size_t got = read_full(f, buf, nbytes, &saved_errno);
    if (got < nbytes)
        return read_error(f, path, saved_errno, what, nbytes, got);
    return MW_OK;
}

/* The body of body_nbytes has been read: the file must end here, and a gzip stream must
 * end cleanly (trailer present, CRC and length correct). */
static mw_status expect_end(gzFile f, const char *path, size_t header_nbytes, size_t body_nbytes)
{
    uint8_t extra;
    errno = 0;
    int r = gzread(f, &extra, 1);
    int saved_errno = errno;
    if (r == 1)
        return mw_err(MW_EDATA,
                      "%s: unexpected data after the %zu header + %zu data bytes the header "
                      "describes (wrong dimensions in the header?)",
                      path, header_nbytes, body_nbytes);
    int zerr = Z_OK;
    const char *msg = zlib_msg(f, path, &zerr);
    if (zerr == Z_BUF_ERROR)
        return mw_err(MW_EDATA,
                      "%s: truncated gzip stream: all %zu data bytes were read but the gzip "
                      "trailer is missing",
                      path, body_nbytes);
    if (zerr == Z_ERRNO)
        return mw_err(MW_EIO, "%s: read error at end of file: %s", path,
                      saved_errno ? strerror(saved_errno) : msg);
    if (zerr != Z_OK && zerr != Z_STREAM_END)
        return mw_err(MW_EDATA, "%s: corrupt gzip stream (zlib: %s) after all %zu data bytes", path,
                      msg, body_nbytes);
    return MW_OK;
}

static mw_status open_idx(gzFile *out, const char *path)
{
    int fd;
    size_t nbytes;
    MW_TRY(mw_fs_open_input(path, "an IDX file, gzip-compressed or plain", &fd, &nbytes));
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return mw_err(MW_ENOMEM, "%s: cannot open: out of memory", path);
    }
    gzbuffer(f, GZ_BUFFER);
    *out = f;
    return MW_OK;
}

/* Read and check an IDX header: the magic must be want_magic exactly (unsigned bytes and
 * its number of dimensions); the sizes go to dims. kind is "image" or "label". */
static mw_status read_header(gzFile f, const char *path, uint32_t want_magic, const char *kind,
                             uint32_t *dims)
{
    uint8_t hdr[16];
    unsigned ndims = want_magic & 0xffu;
    assert(ndims <= 3);
    size_t hdr_nbytes = 4 + 4 * (size_t)ndims;
    int saved_errno = 0;

    size_t got = read_full(f, hdr, 4, &saved_errno);
    if (got == 4) {
        uint32_t magic = be32(hdr);
        if ((magic & ~0xffu) != (want_magic & ~0xffu))
            return mw_err(MW_EDATA, "%s: bad magic 0x%08x, expected 0x%08x: not an IDX %s file",
                          path, magic, want_magic, kind);
        if ((magic & 0xffu) != ndims)
            return mw_err(MW_EDATA,
                          "%s: IDX magic 0x%08x declares %u dimension%s, expected %u (magic "
                          "0x%08x): not an IDX %s file",
                          path, magic, magic & 0xffu, (magic & 0xffu) == 1 ? "" : "s", ndims,
                          want_magic, kind);
        got += read_full(f, hdr + 4, hdr_nbytes - 4, &saved_errno);
    }
    if (got < hdr_nbytes)
        return read_error(f, path, saved_errno, "header", hdr_nbytes, got);
    for (unsigned i = 0; i < ndims; i++)
        dims[i] = be32(hdr + 4 + 4 * i);
    return MW_OK;
}

/* dims = (count, rows, cols): reject an empty set, degenerate or huge images, and a total
 * above MW_DATA_MAX_NBYTES, before anything is allocated. */
static mw_status check_image_dims(const char *path, const uint32_t *dims)
{
    if (dims[0] == 0)
        return mw_err(MW_EDATA, "%s: 0 images: the data set is empty", path);
    if (dims[1] == 0 || dims[2] == 0 || dims[1] > MW_DATA_MAX_DIM || dims[2] > MW_DATA_MAX_DIM)
        return mw_err(MW_EDATA, "%s: bad image size %ux%u (rows x cols): each must be 1..%u", path,
                      dims[1], dims[2], MW_DATA_MAX_DIM);
    uint64_t nbytes = (uint64_t)dims[0] * dims[1] * dims[2]; /* < 2^56: no overflow */
    if (nbytes > MW_DATA_MAX_NBYTES || nbytes > SIZE_MAX)
        return mw_err(MW_EDATA, "%s: %u images of %ux%u need %llu bytes, more than the limit %llu",
                      path, dims[0], dims[1], dims[2], (unsigned long long)nbytes,
                      (unsigned long long)MW_DATA_MAX_NBYTES);
    return MW_OK;
}

mw_status mw_dataset_load(mw_dataset *d, const char *images_path, const char *labels_path,
                          int num_classes)
{
    mw_status rc = MW_OK;
    gzFile fi = NULL, fl = NULL;
    uint8_t *raw_labels = NULL;
    uint32_t idims[3] = {0, 0, 0}, ldims[1] = {0};
    mw_dataset t;
    mw_dataset_init(&t);

    if (num_classes < 1)
        return mw_err(MW_EINVAL, "%s: num_classes is %d, expected at least 1", labels_path,
                      num_classes);

    /* Both headers first: nothing is allocated until the sizes are known to be sane. */
    MW_TRY_GOTO(open_idx(&fi, images_path), rc, fail);
    MW_TRY_GOTO(read_header(fi, images_path, MW_IDX_IMAGES_MAGIC, "image", idims), rc, fail);
    MW_TRY_GOTO(check_image_dims(images_path, idims), rc, fail);
    MW_TRY_GOTO(open_idx(&fl, labels_path), rc, fail);
    MW_TRY_GOTO(read_header(fl, labels_path, MW_IDX_LABELS_MAGIC, "label", ldims), rc, fail);
    if (ldims[0] != idims[0]) {
        rc = mw_err(MW_EDATA, "%s has %u images but %s has %u labels: the counts must match",
                    images_path, idims[0], labels_path, ldims[0]);
        goto fail;
    }

    t.count = idims[0];
    t.rows = idims[1];
    t.cols = idims[2];
    t.channels = 1;
    t.num_classes = num_classes;
    size_t image_nbytes = (size_t)t.count * t.rows * t.cols;
    /* sizes from the headers, checked before a byte of the bodies is inflated */
    MW_TRY_GOTO(mw_sysmem_check_load(image_nbytes + (uint64_t)t.count * (1 + sizeof *t.labels),
                                     "%s: %u images of %ux%u take", images_path, t.count, t.rows,
                                     t.cols),
                rc, fail);
    t.images = malloc(image_nbytes);
    t.labels = malloc((size_t)t.count * sizeof *t.labels);
    raw_labels = malloc(t.count);
    if (!t.images || !t.labels || !raw_labels) {
        rc = mw_err(MW_ENOMEM, "%s: cannot allocate %zu bytes for %u images", images_path,
                    image_nbytes, t.count);
        goto fail;
    }

    MW_TRY_GOTO(read_exact(fi, images_path, t.images, image_nbytes,
                           "image data (after the 16-byte header)"),
                rc, fail);
    MW_TRY_GOTO(expect_end(fi, images_path, 16, image_nbytes), rc, fail);
    MW_TRY_GOTO(
        read_exact(fl, labels_path, raw_labels, t.count, "label data (after the 8-byte header)"),
        rc, fail);
    MW_TRY_GOTO(expect_end(fl, labels_path, 8, t.count), rc, fail);

    for (uint32_t i = 0; i < t.count; i++) {
        if (raw_labels[i] >= num_classes) {
            rc = mw_err(MW_EDATA, "%s: example %u has label %u, expected 0..%d (num_classes %d)",
                        labels_path, i, raw_labels[i], num_classes - 1, num_classes);
            goto fail;
        }
        t.labels[i] = raw_labels[i];
    }

    mw_dataset_free(d);
    *d = t;
    mw_dataset_init(&t); /* now owned by d */
fail:
    mw_dataset_free(&t);
    free(raw_labels);
    if (fi)
        gzclose(fi);
    if (fl)
        gzclose(fl);
    return rc;
}

/* dir/name.gz if it exists, else dir/name; out holds the path. hint ends the message. */
static mw_status find_file(char *out, size_t cap, const char *dir, const char *name,
                           const char *hint)
{
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/')
        dlen--;
    struct stat st;
    int n = snprintf(out, cap, "%.*s/%s.gz", (int)dlen, dir, name);
    if (n < 0 || (size_t)n >= cap)
        return mw_err(MW_EINVAL, "data directory %s: path too long", dir);
    if (stat(out, &st) == 0)
        return MW_OK;
    int gz_errno = errno;
    snprintf(out, cap, "%.*s/%s", (int)dlen, dir, name);
    if (stat(out, &st) == 0)
        return MW_OK;
    int plain_errno = errno;
    int e = gz_errno != ENOENT ? gz_errno : plain_errno;
    return mw_err(MW_EIO, "data directory %s: found neither %s.gz nor %s%s%s%s", dir, name, name,
                  e != ENOENT ? ": " : "", e != ENOENT ? strerror(e) : "", hint);
}

mw_status mw_dataset_load_dir(mw_dataset *train, mw_dataset *test, const char *dir, int num_classes)
{
    const char *hint = strcmp(dir, MW_DATA_DEFAULT_DIR) == 0
                           ? " (install the Debian package dataset-fashion-mnist)"
                           : "";
    struct stat st;
    if (stat(dir, &st) != 0)
        return mw_err(MW_EIO, "data directory %s: %s%s", dir, strerror(errno), hint);
    if (!S_ISDIR(st.st_mode))
        return mw_err(MW_EIO, "data directory %s: not a directory", dir);

    char paths[4][4096];
    for (int i = 0; i < 4; i++)
        MW_TRY(find_file(paths[i], sizeof paths[i], dir, dir_names[i], hint));

    mw_status rc = MW_OK;
    mw_dataset tr, te;
    mw_dataset_init(&tr);
    mw_dataset_init(&te);
    MW_TRY_GOTO(mw_dataset_load(&tr, paths[0], paths[1], num_classes), rc, fail);
    MW_TRY_GOTO(mw_dataset_load(&te, paths[2], paths[3], num_classes), rc, fail);
    if (te.rows != tr.rows || te.cols != tr.cols) {
        rc = mw_err(MW_EDATA, "%s: test images are %ux%u but the train images in %s are %ux%u",
                    paths[2], te.rows, te.cols, paths[0], tr.rows, tr.cols);
        goto fail;
    }
    mw_log_debug("data: %u train and %u test images of %ux%u from %s", tr.count, te.count, tr.rows,
                 tr.cols, dir);

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

/* ---- the reader table's row ---- */

/* Any other directory: the reader names the IDX files it looked for. */
static int idx_claims(const char *path, int is_dir, const uint8_t *head, size_t got)
{
    (void)path, (void)head, (void)got;
    return is_dir;
}

static mw_status idx_read(mw_dataset *train, mw_dataset *test, const char *path,
                          const mw_data_opts *o, int *top, int *own)
{
    (void)own;
    MW_TRY(mw_dataset_load_dir(train, test, path, o->classes > 0 ? o->classes : 256));
    for (uint32_t i = 0; i < train->count; i++)
        *top = train->labels[i] > *top ? train->labels[i] : *top;
    for (uint32_t i = 0; i < test->count; i++)
        *top = test->labels[i] > *top ? test->labels[i] : *top;
    return MW_OK;
}

const mw_data_reader mw_reader_idx = {"IDX files", idx_claims, idx_read};

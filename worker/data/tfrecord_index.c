/* The record index of a plain TFRecord shard (worker/data/tfrecord_index.h): a scan, the file
 * that keeps it, and the checks that tell a kept index still describes its shard.
 *
 * A kept index is trusted only for what it is checked for: its magic, its length (40 + 8N + 4
 * bytes), its CRC, the shard's size and mtime, and offsets that ascend inside the shard. The
 * records themselves are still checked on every read (mw_tfrecord_read_at), so an index that
 * passes these checks but points at the wrong bytes gives a CRC error, never wrong data. */
#include "worker/data/tfrecord_index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/fs.h"
#include "common/log.h"

#define MAGIC "MWTFRIX1"
#define HEAD 40u

void mw_tfrecord_index_free(mw_tfrecord_index *ix)
{
    free(ix->offsets);
    ix->offsets = NULL;
    ix->count = 0;
}

/* Append off to ix (capacity *cap). */
static mw_status push(mw_tfrecord_index *ix, uint64_t *cap, uint64_t off, const char *name)
{
    if (ix->count == *cap) {
        uint64_t n = *cap ? *cap * 2 : 1024;
        uint64_t *o = realloc(ix->offsets, n * sizeof *o);
        if (!o)
            return mw_err(MW_ENOMEM, "%s: out of memory for %llu record offsets", name,
                          (unsigned long long)n);
        ix->offsets = o;
        *cap = n;
    }
    ix->offsets[ix->count++] = off;
    return MW_OK;
}

mw_status mw_tfrecord_index_scan(mw_tfrecord_index *ix, mw_tfrecord *t)
{
    ix->count = 0;
    ix->offsets = NULL;
    if (mw_tfrecord_kind(t) != MW_TFRECORD_PLAIN)
        return mw_err(MW_EUNSUPPORTED,
                      "%s: %s-compressed shard has no record index; it is read in order only "
                      "(decompress it for random access)",
                      mw_tfrecord_name(t), mw_tfrecord_compression_name(mw_tfrecord_kind(t)));
    uint64_t cap = 0;
    for (;;) {
        const uint8_t *data;
        size_t n;
        uint64_t off;
        mw_status rc = mw_tfrecord_next(t, &data, &n, &off);
        if (rc == MW_OK && !data)
            return MW_OK;
        if (rc == MW_OK)
            rc = push(ix, &cap, off, mw_tfrecord_name(t));
        if (rc != MW_OK) {
            mw_tfrecord_index_free(ix);
            return rc;
        }
    }
}

mw_status mw_tfrecord_index_path(char *out, size_t cap, const char *shard, const char *dir)
{
    char name[4096];
    const char *base = shard;
    if (dir) {
        const char *slash = strrchr(shard, '/');
        base = slash ? slash + 1 : shard;
    }
    int n = snprintf(name, sizeof name, "%s%s", base, MW_TFRECORD_INDEX_SUFFIX);
    if (n < 0 || (size_t)n >= sizeof name)
        return mw_err(MW_EIO, "%s: path too long for its index file", shard);
    if (dir)
        return mw_fs_join(out, cap, dir, name);
    if ((size_t)n >= cap)
        return mw_err(MW_EIO, "%s: path too long for its index file", shard);
    memcpy(out, name, (size_t)n + 1);
    return MW_OK;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* The index file's bytes for ix over a shard of stat st; *nbytes. NULL when out of memory. */
static uint8_t *encode(const mw_tfrecord_index *ix, const struct stat *st, size_t *nbytes)
{
    *nbytes = HEAD + 8 * (size_t)ix->count + 4;
    uint8_t *b = malloc(*nbytes);
    if (!b)
        return NULL;
    memcpy(b, MAGIC, 8);
    put64(b + 8, (uint64_t)st->st_size);
    put64(b + 16, (uint64_t)(int64_t)st->st_mtim.tv_sec);
    put64(b + 24, (uint64_t)st->st_mtim.tv_nsec);
    put64(b + 32, ix->count);
    for (uint64_t i = 0; i < ix->count; i++)
        put64(b + HEAD + 8 * i, ix->offsets[i]);
    uint32_t crc = mw_crc32c(0, b, *nbytes - 4);
    for (int i = 0; i < 4; i++)
        b[*nbytes - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
    return b;
}

/* NULL when b[0..n) is an intact index of a shard of stat st (ix filled), else why not. */
static const char *decode(mw_tfrecord_index *ix, const uint8_t *b, size_t n, const struct stat *st)
{
    if (n < HEAD + 4 || memcmp(b, MAGIC, 8) != 0)
        return "not an index file";
    const uint64_t count = get64(b + 32);
    if (count > (n - HEAD - 4) / 8 || HEAD + 8 * count + 4 != n)
        return "its length does not match its record count";
    uint32_t crc = mw_crc32c(0, b, n - 4);
    if (((uint32_t)b[n - 4] | (uint32_t)b[n - 3] << 8 | (uint32_t)b[n - 2] << 16 |
         (uint32_t)b[n - 1] << 24) != crc)
        return "its CRC does not match";
    if (get64(b + 8) != (uint64_t)st->st_size)
        return "the shard's size changed";
    if (get64(b + 16) != (uint64_t)(int64_t)st->st_mtim.tv_sec ||
        get64(b + 24) != (uint64_t)st->st_mtim.tv_nsec)
        return "the shard's mtime changed";
    ix->offsets = malloc((count ? count : 1) * sizeof *ix->offsets);
    if (!ix->offsets)
        return "out of memory";
    ix->count = count;
    for (uint64_t i = 0; i < count; i++) {
        ix->offsets[i] = get64(b + HEAD + 8 * i);
        if (ix->offsets[i] + MW_TFRECORD_FRAMING > (uint64_t)st->st_size ||
            (i > 0 && ix->offsets[i] <= ix->offsets[i - 1])) {
            mw_tfrecord_index_free(ix);
            return "its offsets do not ascend inside the shard";
        }
    }
    return NULL;
}

/* The kept index at ipath into ix; NULL when it is usable, else why not (nothing recorded). */
static const char *load(mw_tfrecord_index *ix, const char *ipath, const struct stat *st)
{
    struct stat ist;
    if (stat(ipath, &ist) != 0)
        return "there is none";
    /* at most one record per MW_TFRECORD_FRAMING bytes of the shard */
    if (!S_ISREG(ist.st_mode) ||
        (uint64_t)ist.st_size > HEAD + 4 + 8 * ((uint64_t)st->st_size / MW_TFRECORD_FRAMING))
        return "it is not a regular file of an index's size";
    int fd = open(ipath, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return "it cannot be opened";
    size_t n = (size_t)ist.st_size;
    uint8_t *b = malloc(n ? n : 1);
    const char *why = !b ? "out of memory" : NULL;
    if (!why && mw_fs_pread_full(fd, b, n, 0) != 0)
        why = "it cannot be read";
    close(fd);
    if (!why)
        why = decode(ix, b, n, st);
    free(b);
    return why;
}

mw_status mw_tfrecord_index_open(mw_tfrecord_index *ix, const char *path, const char *dir,
                                 int *rebuilt)
{
    ix->count = 0;
    ix->offsets = NULL;
    if (rebuilt)
        *rebuilt = 0;
    char ipath[4096];
    MW_TRY(mw_tfrecord_index_path(ipath, sizeof ipath, path, dir));
    mw_tfrecord *t;
    MW_TRY(mw_tfrecord_open(&t, path, MW_TFRECORD_AUTO));
    struct stat st; /* after the open: a shard replaced since reads as changed next time */
    mw_status rc = MW_OK;
    if (stat(path, &st) != 0)
        rc = mw_err(MW_EIO, "%s: %s; expected a TFRecord shard", path, strerror(errno));
    const char *why = rc == MW_OK && mw_tfrecord_kind(t) == MW_TFRECORD_PLAIN
                          ? load(ix, ipath, &st)
                          : "the shard is compressed";
    if (rc == MW_OK && why) {
        mw_log(MW_LOG_INFO, "%s: building its record index (%s: %s)", path, ipath, why);
        rc = mw_tfrecord_index_scan(ix, t);
        size_t n = 0;
        uint8_t *b = rc == MW_OK ? encode(ix, &st, &n) : NULL;
        if (rc == MW_OK && !b)
            rc = mw_err(MW_ENOMEM, "%s: out of memory for its index", path);
        char idir[4096];
        const char *slash = strrchr(ipath, '/');
        snprintf(idir, sizeof idir, "%.*s", slash ? (int)(slash - ipath) : 1, slash ? ipath : ".");
        if (rc == MW_OK)
            rc = mw_fs_write_atomic(idir, slash ? slash + 1 : ipath, b, n,
                                    "TFRecord index directory");
        free(b);
        if (rc != MW_OK)
            mw_tfrecord_index_free(ix);
        else if (rebuilt)
            *rebuilt = 1;
    }
    mw_tfrecord_close(t);
    return rc;
}

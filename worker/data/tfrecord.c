/* The TFRecord record reader (worker/data/tfrecord.h): the framing, both CRCs, and GZIP or
 * ZLIB shards inflated as they are read.
 *
 * A plain shard is read with pread at explicit offsets (a file) or copied from memory (a
 * buffer), so the sequential cursor and mw_tfrecord_read_at never disturb each other. A
 * compressed shard has one zlib stream, fed 64 KiB of the file at a time; records are read
 * from its output in order. Every length is checked against what can still be there (the
 * shard's size for a plain shard) and against MW_TFRECORD_MAX_RECORD before a byte is
 * allocated; a compressed shard's record buffer grows only as inflated bytes arrive, so a
 * hostile length costs no more memory than the data behind it. */
#include "worker/data/tfrecord.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/crc32c.h"
#include "common/fs.h"

#define HEADER 12u       /* length and its CRC */
#define IN_CHUNK 65536u  /* compressed bytes read at a time */
#define GROW_STEP 65536u /* a compressed shard's record buffer grows from this */

struct mw_tfrecord {
    char *name;
    int fd;             /* -1 over a buffer */
    const uint8_t *mem; /* the buffer, or NULL */
    uint64_t size;      /* the raw file's (or buffer's) size */
    mw_tfrecord_compression kind;
    uint64_t raw_pos; /* next raw byte the sequential reader takes */
    uint64_t pos;     /* next byte of the (uncompressed) stream */
    uint64_t index;   /* records read in order */
    int broken;       /* a sequential read failed where the next record cannot be found */
    z_stream z;
    int z_live, z_end;
    uint8_t *in; /* IN_CHUNK compressed bytes */
    uint8_t *buf;
    size_t cap;
};

const char *mw_tfrecord_compression_name(mw_tfrecord_compression c)
{
    switch (c) {
    case MW_TFRECORD_GZIP:
        return "GZIP";
    case MW_TFRECORD_ZLIB:
        return "ZLIB";
    case MW_TFRECORD_PLAIN:
        return "plain";
    default:
        return "auto";
    }
}

static mw_status rec_err(const mw_tfrecord *t, uint64_t index, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static mw_status rec_err(const mw_tfrecord *t, uint64_t index, uint64_t off, const char *fmt, ...)
{
    char where[1200], rec[32] = "the record";
    if (index != MW_TFRECORD_NO_INDEX)
        snprintf(rec, sizeof rec, "record %llu", (unsigned long long)index);
    snprintf(where, sizeof where, "%s: %s at %sbyte offset %llu", t->name, rec,
             t->kind == MW_TFRECORD_PLAIN ? "" : "uncompressed ", (unsigned long long)off);
    va_list ap;
    va_start(ap, fmt);
    mw_status rc = mw_verr_at(MW_EDATA, where, fmt, ap);
    va_end(ap);
    return rc;
}

/* Up to n raw bytes at off into dst; *got short only at the end of the file. */
static mw_status raw_read(const mw_tfrecord *t, uint64_t off, uint8_t *dst, size_t n, size_t *got)
{
    *got = 0;
    if (off >= t->size)
        return MW_OK;
    if (n > t->size - off)
        n = (size_t)(t->size - off);
    if (t->mem) {
        memcpy(dst, t->mem + off, n);
        *got = n;
        return MW_OK;
    }
    while (*got < n) {
        ssize_t r = pread(t->fd, dst + *got, n - *got, (off_t)(off + *got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return mw_err(MW_EIO, "%s: read error at byte %llu: %s", t->name,
                          (unsigned long long)(off + *got), strerror(errno));
        if (r == 0)
            break; /* the file shrank under us: reads as its end */
        *got += (size_t)r;
    }
    return MW_OK;
}

/* Feed the inflater the next chunk of the file; *got 0 at the end of the file. */
static mw_status refill(mw_tfrecord *t, size_t *got)
{
    MW_TRY(raw_read(t, t->raw_pos, t->in, IN_CHUNK, got));
    t->raw_pos += *got;
    t->z.next_in = t->in;
    t->z.avail_in = (uInt)*got;
    return MW_OK;
}

/* A finished stream with input left: another gzip member follows (tf.data's readers accept
 * concatenated members as zlib does); after a zlib stream nothing may follow. */
static mw_status next_member(mw_tfrecord *t, int *more)
{
    size_t got = 0;
    *more = 0;
    if (t->z.avail_in == 0)
        MW_TRY(refill(t, &got));
    if (t->z.avail_in == 0)
        return MW_OK;
    if (t->kind == MW_TFRECORD_ZLIB)
        return mw_err(MW_EDATA, "%s: %llu bytes after the end of the ZLIB stream; expected none",
                      t->name, (unsigned long long)(t->size - t->raw_pos + t->z.avail_in));
    if (inflateReset(&t->z) != Z_OK)
        return mw_err(MW_EINTERNAL, "%s: inflateReset failed", t->name);
    t->z_end = 0;
    *more = 1;
    return MW_OK;
}

/* Up to n inflated bytes into dst; *got short only at the clean end of the stream. */
static mw_status inflate_read(mw_tfrecord *t, uint8_t *dst, size_t n, size_t *got)
{
    const char *kind = mw_tfrecord_compression_name(t->kind);
    t->z.next_out = dst;
    t->z.avail_out = (uInt)n;
    while (t->z.avail_out > 0) {
        if (t->z_end) {
            int more;
            MW_TRY(next_member(t, &more));
            if (!more)
                break;
        }
        if (t->z.avail_in == 0) {
            size_t in = 0;
            MW_TRY(refill(t, &in));
            if (in == 0)
                return mw_err(MW_EDATA,
                              "%s: %s stream truncated after %llu uncompressed bytes; expected "
                              "the rest of the stream and its end",
                              t->name, kind, (unsigned long long)(t->pos + (n - t->z.avail_out)));
        }
        int rc = inflate(&t->z, Z_NO_FLUSH);
        if (rc == Z_STREAM_END)
            t->z_end = 1;
        else if (rc == Z_MEM_ERROR)
            return mw_err(MW_ENOMEM, "%s: out of memory inflating the %s stream", t->name, kind);
        else if (rc != Z_OK && rc != Z_BUF_ERROR)
            return mw_err(MW_EDATA, "%s: %s stream corrupt after %llu uncompressed bytes: %s",
                          t->name, kind, (unsigned long long)(t->pos + (n - t->z.avail_out)),
                          t->z.msg ? t->z.msg : "inflate failed");
    }
    *got = n - t->z.avail_out;
    return MW_OK;
}

/* n bytes of the record stream at *off (sequential: the cursor; else raw bytes of a plain
 * shard); *off advances by what was read. */
static mw_status take(mw_tfrecord *t, int seq, uint64_t *off, uint8_t *dst, size_t n, size_t *got)
{
    if (seq && t->kind != MW_TFRECORD_PLAIN)
        MW_TRY(inflate_read(t, dst, n, got));
    else
        MW_TRY(raw_read(t, *off, dst, n, got));
    *off += *got;
    return MW_OK;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Room for n bytes in t->buf. */
static mw_status reserve(mw_tfrecord *t, size_t n)
{
    if (n <= t->cap)
        return MW_OK;
    uint8_t *b = realloc(t->buf, n);
    if (!b)
        return mw_err(MW_ENOMEM, "%s: out of memory for a %zu-byte record", t->name, n);
    t->buf = b;
    t->cap = n;
    return MW_OK;
}

/* need bytes (data and CRC) into t->buf. A plain shard's size was checked, so the buffer is
 * sized at once; a compressed one grows as inflated bytes arrive. */
static mw_status take_body(mw_tfrecord *t, int seq, uint64_t *off, size_t need, size_t *got)
{
    *got = 0;
    if (!seq || t->kind == MW_TFRECORD_PLAIN) {
        MW_TRY(reserve(t, need));
        return take(t, seq, off, t->buf, need, got);
    }
    while (*got < need) {
        size_t want = t->cap > *got ? t->cap - *got : 0;
        if (want == 0) {
            size_t grow = t->cap < GROW_STEP ? GROW_STEP : t->cap * 2;
            MW_TRY(reserve(t, grow < need ? grow : need));
            continue;
        }
        if (want > need - *got)
            want = need - *got;
        size_t n = 0;
        MW_TRY(take(t, seq, off, t->buf + *got, want, &n));
        *got += n;
        if (n < want)
            break;
    }
    return MW_OK;
}

/* The record whose header starts at *off (seq: the sequential cursor). At a clean end *data
 * is NULL. *framed: 1 once the record's framing was whole (its data CRC alone may fail), so
 * *off is where the next record starts. */
static mw_status read_record(mw_tfrecord *t, int seq, uint64_t *off, uint64_t index,
                             const uint8_t **data, size_t *nbytes, int *framed)
{
    const uint64_t at = *off;
    *data = NULL;
    *nbytes = 0;
    *framed = 0;
    uint8_t h[HEADER];
    size_t got;
    MW_TRY(take(t, seq, off, h, HEADER, &got));
    if (got == 0)
        return MW_OK;
    if (got < HEADER)
        return rec_err(t, index, at, "truncated record header: %zu of %u bytes", got, HEADER);
    const uint64_t len = le64(h);
    const uint32_t stored = le32(h + 8), want = mw_crc32c_mask(mw_crc32c(0, h, 8));
    if (stored != want)
        return rec_err(t, index, at,
                       "length CRC mismatch (stored 0x%08x, computed 0x%08x over the length "
                       "bytes); expected a TFRecord record header",
                       stored, want);
    if (len > MW_TFRECORD_MAX_RECORD)
        return rec_err(t, index, at, "length %llu above the largest record accepted (%llu bytes)",
                       (unsigned long long)len, (unsigned long long)MW_TFRECORD_MAX_RECORD);
    if (t->kind == MW_TFRECORD_PLAIN && len + 4 > t->size - *off)
        return rec_err(t, index, at,
                       "length %llu runs past the end of the shard (%llu bytes left after the "
                       "header; expected the data and its 4-byte CRC)",
                       (unsigned long long)len, (unsigned long long)(t->size - *off));
    const size_t need = (size_t)len + 4;
    MW_TRY(take_body(t, seq, off, need, &got));
    if (got < need)
        return rec_err(t, index, at, "truncated record: %zu of %zu data and CRC bytes", got, need);
    *framed = 1;
    const uint32_t dstored = le32(t->buf + len), dwant = mw_crc32c_mask(mw_crc32c(0, t->buf, len));
    if (dstored != dwant)
        return rec_err(t, index, at,
                       "data CRC mismatch (stored 0x%08x, computed 0x%08x over %llu data bytes)",
                       dstored, dwant, (unsigned long long)len);
    *data = t->buf;
    *nbytes = (size_t)len;
    return MW_OK;
}

mw_status mw_tfrecord_next(mw_tfrecord *t, const uint8_t **data, size_t *nbytes, uint64_t *offset)
{
    const int plain = t->kind == MW_TFRECORD_PLAIN;
    uint64_t off = plain ? t->raw_pos : t->pos;
    *offset = off;
    *data = NULL;
    *nbytes = 0;
    if (t->broken)
        return mw_err(MW_EDATA, "%s: cannot read past the error at record %llu", t->name,
                      (unsigned long long)t->index);
    int framed;
    mw_status rc = read_record(t, 1, &off, t->index, data, nbytes, &framed);
    if (rc != MW_OK && !framed) {
        t->broken = 1;
        return rc;
    }
    if (plain)
        t->raw_pos = off;
    else
        t->pos = off;
    if (*data || rc != MW_OK)
        t->index++;
    return rc;
}

uint64_t mw_tfrecord_position(const mw_tfrecord *t)
{
    return t->index;
}

mw_status mw_tfrecord_read_at(mw_tfrecord *t, uint64_t offset, uint64_t index, const uint8_t **data,
                              size_t *nbytes)
{
    if (t->kind != MW_TFRECORD_PLAIN)
        return mw_err(MW_EUNSUPPORTED,
                      "%s: %s-compressed shard: records are read in order only; decompress it "
                      "(gzip -d, or tf.data without compression) for random access",
                      t->name, mw_tfrecord_compression_name(t->kind));
    uint64_t off = offset;
    int framed;
    MW_TRY(read_record(t, 0, &off, index, data, nbytes, &framed));
    if (!*data)
        return rec_err(t, index, offset, "no record there: the shard is %llu bytes long",
                       (unsigned long long)t->size);
    return MW_OK;
}

/* The compression of a shard whose first bytes are h[0..got). */
static mw_tfrecord_compression sniff(const uint8_t *h, size_t got)
{
    if (got >= HEADER && le32(h + 8) == mw_crc32c_mask(mw_crc32c(0, h, 8)))
        return MW_TFRECORD_PLAIN;
    if (got >= 2 && h[0] == 0x1f && h[1] == 0x8b)
        return MW_TFRECORD_GZIP;
    if (got >= 2 && (h[0] & 0x0f) == 8 && (h[0] >> 4) <= 7 && ((h[0] << 8) | h[1]) % 31 == 0)
        return MW_TFRECORD_ZLIB;
    return MW_TFRECORD_PLAIN; /* the record reader says what is wrong with it */
}

static mw_status start(mw_tfrecord *t, mw_tfrecord_compression c)
{
    if (c == MW_TFRECORD_AUTO) {
        uint8_t h[HEADER];
        size_t got;
        MW_TRY(raw_read(t, 0, h, HEADER, &got));
        c = sniff(h, got);
    }
    t->kind = c;
    if (c == MW_TFRECORD_PLAIN)
        return MW_OK;
    t->in = malloc(IN_CHUNK);
    if (!t->in)
        return mw_err(MW_ENOMEM, "%s: out of memory for the inflater", t->name);
    if (inflateInit2(&t->z, c == MW_TFRECORD_GZIP ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK)
        return mw_err(MW_ENOMEM, "%s: cannot start the %s inflater", t->name,
                      mw_tfrecord_compression_name(c));
    t->z_live = 1;
    return MW_OK;
}

static mw_status make(mw_tfrecord **out, const char *name)
{
    mw_tfrecord *t = calloc(1, sizeof *t);
    if (!t || !(t->name = strdup(name))) {
        free(t);
        return mw_err(MW_ENOMEM, "%s: out of memory opening a TFRecord shard", name);
    }
    t->fd = -1;
    *out = t;
    return MW_OK;
}

mw_status mw_tfrecord_open(mw_tfrecord **out, const char *path, mw_tfrecord_compression c)
{
    *out = NULL;
    mw_tfrecord *t;
    MW_TRY(make(&t, path));
    size_t size = 0;
    mw_status rc = mw_fs_open_input(path, "a TFRecord shard", &t->fd, &size);
    t->size = size;
    if (rc == MW_OK)
        rc = start(t, c);
    if (rc != MW_OK) {
        mw_tfrecord_close(t);
        return rc;
    }
    *out = t;
    return MW_OK;
}

mw_status mw_tfrecord_open_buffer(mw_tfrecord **out, const char *name, const void *bytes,
                                  size_t nbytes, mw_tfrecord_compression c)
{
    *out = NULL;
    mw_tfrecord *t;
    MW_TRY(make(&t, name));
    static const uint8_t empty[1];
    t->mem = nbytes ? bytes : empty;
    t->size = nbytes;
    mw_status rc = start(t, c);
    if (rc != MW_OK) {
        mw_tfrecord_close(t);
        return rc;
    }
    *out = t;
    return MW_OK;
}

void mw_tfrecord_close(mw_tfrecord *t)
{
    if (!t)
        return;
    if (t->z_live)
        inflateEnd(&t->z);
    if (t->fd >= 0)
        close(t->fd);
    free(t->in);
    free(t->buf);
    free(t->name);
    free(t);
}

mw_tfrecord_compression mw_tfrecord_kind(const mw_tfrecord *t)
{
    return t->kind;
}

const char *mw_tfrecord_name(const mw_tfrecord *t)
{
    return t->name;
}

uint64_t mw_tfrecord_size(const mw_tfrecord *t)
{
    return t->kind == MW_TFRECORD_PLAIN ? t->size : 0;
}

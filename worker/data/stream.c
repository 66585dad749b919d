/* Encoded images decoded as batches need them (see stream.h): the tables of sources and
 * examples, reading one example's bytes (a whole file, or one TFRecord record's Example
 * feature), decoding and resizing it, and the first failure kept for the step to report. */
#include "worker/data/stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "worker/data/example.h"
#include "worker/data/image_decode.h"
#include "worker/data/image_resize.h"
#include "worker/data/tfrecord.h"

struct mw_stream {
    mw_stream_shape shape;
    char *image_key;
    char what[64];
    char **sources;
    uint32_t nsources, cap_sources;
    uint32_t *src; /* per example */
    uint64_t *off; /* per example */
    uint32_t count, cap;
    uint64_t path_bytes, largest;
    pthread_mutex_t lock; /* the kept failure */
    mw_status err;
    char *err_msg;
};

mw_status mw_stream_new(mw_stream **out, const mw_stream_shape *shape, const char *what)
{
    *out = NULL;
    mw_stream *s = calloc(1, sizeof *s);
    if (!s)
        return mw_err(MW_ENOMEM, "%s: out of memory for the image table", what);
    s->shape = *shape;
    snprintf(s->what, sizeof s->what, "%s", what);
    if (shape->image_key && !(s->image_key = strdup(shape->image_key))) {
        free(s);
        return mw_err(MW_ENOMEM, "%s: out of memory for the image table", what);
    }
    s->shape.image_key = s->image_key;
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return MW_OK;
}

void mw_stream_free(mw_stream *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->nsources; i++)
        free(s->sources[i]);
    free(s->sources);
    free(s->src);
    free(s->off);
    free(s->image_key);
    free(s->err_msg);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* Room for one more entry in an array of *cap elements of size each (doubling). */
static int grow(void **p, uint32_t n, uint32_t *cap, size_t size)
{
    if (n < *cap)
        return 1;
    if (*cap >= UINT32_MAX / 2)
        return 0;
    const uint32_t c = *cap ? 2 * *cap : 256;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return 0;
    *p = q, *cap = c;
    return 1;
}

mw_status mw_stream_add_source(mw_stream *s, const char *path, uint32_t *index)
{
    char *copy = strdup(path);
    if (!copy || !grow((void **)&s->sources, s->nsources, &s->cap_sources, sizeof *s->sources)) {
        free(copy);
        return mw_err(MW_ENOMEM, "%s: out of memory for the file table (%u files)", s->what,
                      s->nsources);
    }
    s->sources[s->nsources] = copy;
    s->path_bytes += strlen(copy) + 1 + sizeof(char *);
    *index = s->nsources++;
    return MW_OK;
}

mw_status mw_stream_add_example(mw_stream *s, uint32_t src, uint64_t offset)
{
    uint32_t cap = s->cap;
    if (s->count == UINT32_MAX - 1 || !grow((void **)&s->src, s->count, &cap, sizeof *s->src) ||
        !grow((void **)&s->off, s->count, &s->cap, sizeof *s->off))
        return mw_err(MW_ENOMEM, "%s: out of memory for the example table (%u examples)", s->what,
                      s->count);
    s->src[s->count] = src;
    s->off[s->count++] = offset;
    return MW_OK;
}

uint32_t mw_stream_count(const mw_stream *s)
{
    return s->count;
}

uint32_t mw_stream_source_count(const mw_stream *s)
{
    return s->nsources;
}

int mw_stream_is_records(const mw_stream *s)
{
    return s->count > 0 && s->off[0] != MW_STREAM_WHOLE_FILE;
}

void mw_stream_note_size(mw_stream *s, uint64_t nbytes)
{
    s->largest = nbytes > s->largest ? nbytes : s->largest;
}

uint64_t mw_stream_nbytes(const mw_stream *s, uint64_t *largest)
{
    *largest = s->largest;
    return s->path_bytes + (uint64_t)s->cap * (sizeof *s->src + sizeof *s->off);
}

const char *mw_stream_source(const mw_stream *s, uint32_t src)
{
    return s->sources[src];
}

uint32_t mw_stream_source_of(const mw_stream *s, uint32_t id)
{
    return s->src[id];
}

mw_status mw_stream_set_key(mw_stream *s, const char *key)
{
    char *k = strdup(key);
    if (!k)
        return mw_err(MW_ENOMEM, "%s: out of memory", s->what);
    free(s->image_key);
    s->image_key = k, s->shape.image_key = k;
    return MW_OK;
}

void mw_stream_set_size(mw_stream *s, uint32_t height, uint32_t width)
{
    s->shape.height = height, s->shape.width = width;
}

void mw_stream_shape_of(const mw_stream *s, mw_stream_shape *shape)
{
    *shape = s->shape;
}

/* Record id's Example from its shard, its image feature's bytes copied into *buf. */
static mw_status read_record(const mw_stream *s, uint32_t id, uint8_t **buf, size_t *n)
{
    const char *path = s->sources[s->src[id]];
    mw_tfrecord *t;
    MW_TRY(mw_tfrecord_open(&t, path, MW_TFRECORD_PLAIN));
    const uint8_t *data;
    size_t nbytes;
    mw_example *e = NULL;
    char where[1100];
    snprintf(where, sizeof where, "%s: the record at byte offset %llu", path,
             (unsigned long long)s->off[id]);
    mw_status rc = mw_tfrecord_read_at(t, s->off[id], MW_TFRECORD_NO_INDEX, &data, &nbytes);
    if (rc == MW_OK)
        rc = mw_example_parse(&e, data, nbytes, where);
    if (rc == MW_OK)
        rc = mw_example_bytes(e, s->image_key, &data, &nbytes);
    if (rc == MW_OK && !(*buf = malloc(nbytes ? nbytes : 1)))
        rc = mw_err(MW_ENOMEM, "%s: out of memory for %zu bytes", where, nbytes);
    if (rc == MW_OK)
        memcpy(*buf, data, nbytes), *n = nbytes;
    mw_example_free(e);
    mw_tfrecord_close(t);
    return rc;
}

/* Example id's encoded bytes (malloc'ed) and a name for messages. */
static mw_status read_bytes(const mw_stream *s, uint32_t id, uint8_t **buf, size_t *n, char *name,
                            size_t cap)
{
    *buf = NULL;
    if (s->off[id] == MW_STREAM_WHOLE_FILE) {
        snprintf(name, cap, "%s", s->sources[s->src[id]]);
        char *text;
        MW_TRY(mw_fs_read_input(name, "an image file (JPEG, PNG, GIF or BMP)", MW_STREAM_MAX_FILE,
                                MW_EDATA, &text, n));
        *buf = (uint8_t *)text;
        return MW_OK;
    }
    snprintf(name, cap, "%s: the record at byte offset %llu", s->sources[s->src[id]],
             (unsigned long long)s->off[id]);
    return read_record(s, id, buf, n);
}

static mw_status decode(const mw_stream *s, uint32_t id, mw_image *img)
{
    uint8_t *buf;
    size_t n;
    char name[1100];
    MW_TRY(read_bytes(s, id, &buf, &n, name, sizeof name));
    mw_status rc = mw_image_decode(img, buf, n, s->shape.channels, name);
    free(buf);
    return rc;
}

mw_status mw_stream_probe(const mw_stream *s, uint32_t id, uint32_t *height, uint32_t *width)
{
    mw_image img = {0};
    MW_TRY(decode(s, id, &img));
    *height = img.height, *width = img.width;
    mw_image_free(&img);
    return MW_OK;
}

static void keep(mw_stream *s, mw_status rc)
{
    pthread_mutex_lock(&s->lock);
    if (s->err == MW_OK) {
        s->err = rc;
        s->err_msg = strdup(mw_err_msg());
    }
    pthread_mutex_unlock(&s->lock);
}

mw_status mw_stream_decode(mw_stream *s, float *dst, uint32_t id, int raw)
{
    const uint32_t H = s->shape.height, W = s->shape.width;
    const size_t count = (size_t)H * W * (size_t)s->shape.channels;
    mw_image img = {0};
    mw_status rc = decode(s, id, &img);
    if (rc != MW_OK) {
        memset(dst, 0, count * sizeof *dst);
        keep(s, rc);
        return rc;
    }
    const float div = raw ? 1.0f : 255.0f;   /* a division: x * (1 / 255) rounds apart */
    if (img.height == H && img.width == W) { /* what the resize gives, without the arithmetic */
#pragma omp simd
        for (size_t j = 0; j < count; j++)
            dst[j] = (float)img.pixels[j] / div;
    } else
        mw_image_resize_scaled(dst, &img, H, W, (mw_image_interp)s->shape.interp, s->shape.crop,
                               div);
    mw_image_free(&img);
    return MW_OK;
}

mw_status mw_stream_status(const mw_stream *s)
{
    mw_stream *m = (mw_stream *)s; /* the lock only */
    pthread_mutex_lock(&m->lock);
    const mw_status rc = s->err;
    mw_status out = rc == MW_OK ? MW_OK : mw_err(rc, "%s", s->err_msg ? s->err_msg : "");
    pthread_mutex_unlock(&m->lock);
    return out;
}

void mw_stream_clear(mw_stream *s)
{
    pthread_mutex_lock(&s->lock);
    s->err = MW_OK;
    free(s->err_msg);
    s->err_msg = NULL;
    pthread_mutex_unlock(&s->lock);
}

void mw_stream_drop(mw_stream *s, const uint8_t *drop)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->count; i++)
        if (!drop[i])
            s->src[n] = s->src[i], s->off[n++] = s->off[i];
    s->count = n;
}

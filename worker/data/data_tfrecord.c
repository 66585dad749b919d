/* TFRecord shards of tf.train.Example as --data (see data_tfrecord.h): the shards of each split
 * read once in order for the record offsets and the labels, the images left in the shards and
 * decoded as batches need them (worker/data/stream.h). */
#include "worker/data/data_tfrecord.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "worker/data/example.h"
#include "worker/data/shard_copy.h"
#include "worker/data/shard_index.h"
#include "worker/data/stream.h"
#include "worker/data/tfrecord.h"
#include "worker/data/tfrecord_shards.h"

/* The feature of the first example that key names: key itself when given, else the first of
 * the two conventional names the example has (the models garden's, then TFDS's). */
static const char *pick_key(const mw_example *e, const char *key, const char *garden,
                            const char *tfds)
{
    if (key)
        return key;
    for (size_t i = 0; i < mw_example_count(e); i++) {
        mw_example_kind k;
        size_t n;
        if (strcmp(mw_example_key(e, i, &k, &n), garden) == 0)
            return garden;
    }
    return tfds;
}

/* The number of values of the last feature named key (the one that counts), 0 when none. */
static size_t values_of(const mw_example *e, const char *key)
{
    for (size_t i = mw_example_count(e); i-- > 0;) {
        mw_example_kind k;
        size_t n;
        if (strcmp(mw_example_key(e, i, &k, &n), key) == 0)
            return n;
    }
    return 0;
}

/* One image and one label a record, as tf.io.parse_single_example with FixedLenFeature([])
 * requires of them: a list of more is refused, not read as its first value. */
static mw_status one_value(const mw_example *e, const char *key, const char *what,
                           const char *where)
{
    const size_t n = values_of(e, key);
    if (n != 1)
        return mw_err(MW_EDATA, "%s: feature '%s' holds %zu values; expected one (%s)", where, key,
                      n, what);
    return MW_OK;
}

typedef struct {
    const mw_data_opts *o;
    const char *image_key, *label_key; /* settled by the first record */
    int top;
    size_t cap;
    mw_shard_index *x; /* the shard's index being built */
    int clean;         /* every record of the shard so far was good */
} split_ctx;

/* One good record's example (at offset of source src) with its label, checked against the
 * classes, into d; where names the record. */
static mw_status add_example(mw_dataset *d, split_ctx *c, uint32_t src, uint64_t offset,
                             int64_t label, uint64_t nbytes, const char *where)
{
    const int64_t limit = c->o->classes > 0 ? c->o->classes : MW_DATA_MAX_CLASSES;
    if (label < 0 || label >= limit)
        return mw_err(MW_EDATA, "%s: label '%s' is %lld; expected 0..%lld%s", where, c->label_key,
                      (long long)label, (long long)limit - 1,
                      c->o->classes > 0 ? " (--classes)" : "");
    if (d->count == UINT32_MAX - 1)
        return mw_err(MW_EDATA, "%s: more than 2^32 - 2 examples", where);
    if (d->count == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 1024;
        int32_t *l = realloc(d->labels, c->cap * sizeof *l);
        if (!l)
            return mw_err(MW_ENOMEM, "%s: out of memory for %zu labels", where, c->cap);
        d->labels = l;
    }
    MW_TRY(mw_stream_add_example(d->stream, src, offset));
    mw_stream_note_size(d->stream, nbytes);
    d->labels[d->count++] = (int32_t)label;
    c->top = label > c->top ? (int)label : c->top;
    return MW_OK;
}

/* One record (its data at offset of shard src, record rec) into d: its label, checked, and its
 * image feature's presence. */
static mw_status take_record(mw_dataset *d, split_ctx *c, uint32_t src, const char *shard,
                             uint64_t rec, uint64_t offset, const uint8_t *data, size_t nbytes)
{
    char where[4200];
    snprintf(where, sizeof where, "%s: record %llu", shard, (unsigned long long)rec);
    mw_example *e;
    MW_TRY(mw_example_parse(&e, data, nbytes, where));
    if (!c->image_key) {
        c->image_key = pick_key(e, c->o->image_key, "image/encoded", "image");
        c->label_key = pick_key(e, c->o->label_key, "image/class/label", "label");
    }
    const uint8_t *img;
    size_t n, nl;
    const int64_t *label;
    mw_status rc = mw_example_bytes(e, c->image_key, &img, &n);
    if (rc == MW_OK)
        rc = mw_example_int64s(e, c->label_key, &label, &nl);
    if (rc == MW_OK)
        rc = one_value(e, c->image_key, "an encoded image", where);
    if (rc == MW_OK)
        rc = one_value(e, c->label_key, "a class index", where);
    if (rc == MW_OK)
        rc = add_example(d, c, src, offset, label[0], nbytes, where);
    if (rc == MW_OK && c->x)
        rc = mw_shard_index_add(c->x, offset, label[0], nbytes, shard);
    mw_example_free(e);
    return rc;
}

/* --skip-bad-examples: count a bad record (its message the first time) and go on, when the
 * shard can be read past it (*past: the record's framing was whole). */
static mw_status skip_or_fail(mw_dataset *d, split_ctx *c, mw_status rc, int past)
{
    if (rc == MW_OK || !c->o->skip_bad || !past || rc == MW_ENOMEM)
        return rc;
    if (d->skipped++ == 0)
        snprintf(d->skip_first, sizeof d->skip_first, "%s", mw_err_msg());
    c->clean = 0; /* no index is kept for a shard with a bad record */
    mw_err_clear();
    return MW_OK;
}

/* A compressed shard: its plain copy (shard_copy.h) opened instead when it exists, else begun in
 * *w (*copying) to be written as the shard is read; *src_path: the file examples point into. */
static mw_status plain_copy(mw_tfrecord **t, const split_ctx *c, const char *path, char *plain,
                            size_t cap, mw_shard_copy *w, int *copying)
{
    int exists;
    MW_TRY(mw_shard_copy_path(path, c->o->shard_cache, plain, cap, &exists));
    if (!exists) {
        MW_TRY(mw_shard_copy_begin(w, plain));
        *copying = 1;
        return MW_OK;
    }
    mw_tfrecord_close(*t);
    *t = NULL;
    return mw_tfrecord_open(t, plain, MW_TFRECORD_PLAIN);
}

/* The shard's examples from its kept index (shard_index.h) into d, when there is one for the
 * keys asked for: its labels checked as read ones are. *used: 1 when it was. */
static mw_status from_index(mw_dataset *d, split_ctx *c, uint32_t src, const char *path,
                            const char *ixpath, int *used)
{
    mw_shard_index x;
    mw_shard_index_init(&x);
    *used = mw_shard_index_load(&x, ixpath, c->image_key ? c->image_key : c->o->image_key,
                                c->label_key ? c->label_key : c->o->label_key);
    if (*used && !c->image_key) { /* the keys it was read with: the flags', or a default */
        c->image_key = c->o->image_key                     ? c->o->image_key
                       : strcmp(x.image_key, "image") == 0 ? "image"
                                                           : "image/encoded";
        c->label_key = c->o->label_key                     ? c->o->label_key
                       : strcmp(x.label_key, "label") == 0 ? "label"
                                                           : "image/class/label";
    }
    mw_status rc = MW_OK;
    for (uint64_t i = 0; *used && rc == MW_OK && i < x.n; i++) {
        char where[4200];
        snprintf(where, sizeof where, "%s: record %llu", path, (unsigned long long)i);
        rc = skip_or_fail(d, c, add_example(d, c, src, x.off[i], x.label[i], x.largest, where), 1);
    }
    mw_shard_index_free(&x);
    return rc;
}

/* Every record of one shard: from its kept index, or read in order (a compressed one into its
 * plain copy as it goes) and its index kept when every record was good. */
static mw_status read_shard(mw_dataset *d, split_ctx *c, const char *path)
{
    mw_tfrecord *t;
    MW_TRY(mw_tfrecord_open(&t, path, MW_TFRECORD_AUTO));
    char plain[4200], ixpath[4200];
    mw_shard_copy w = {0};
    int copying = 0, exists, used = 0;
    mw_status rc =
        mw_shard_cache_path(path, c->o->shard_cache, "mwex", ixpath, sizeof ixpath, &exists);
    const int compressed = mw_tfrecord_kind(t) != MW_TFRECORD_PLAIN;
    if (rc == MW_OK && compressed)
        rc = plain_copy(&t, c, path, plain, sizeof plain, &w, &copying);
    uint32_t src = 0;
    if (rc == MW_OK)
        rc = mw_stream_add_source(d->stream, compressed ? plain : path, &src);
    if (rc == MW_OK && exists && !copying) /* a compressed shard's index needs its copy */
        rc = from_index(d, c, src, path, ixpath, &used);
    mw_shard_index x;
    mw_shard_index_init(&x);
    c->x = &x, c->clean = 1;
    for (; !used;) {
        const uint8_t *data;
        size_t nbytes;
        uint64_t off;
        const uint64_t rec = t ? mw_tfrecord_position(t) : 0;
        if (rc == MW_OK) { /* a data CRC mismatch alone moves past the record */
            rc = mw_tfrecord_next(t, &data, &nbytes, &off);
            rc = skip_or_fail(d, c, rc, mw_tfrecord_position(t) > rec);
            if (rc == MW_OK && !data && mw_tfrecord_position(t) > rec)
                continue;
        }
        if (rc != MW_OK || !data)
            break;
        if (copying) /* the record's offset in the plain copy */
            rc = mw_shard_copy_add(&w, data, nbytes, &off);
        if (rc == MW_OK)
            rc = skip_or_fail(d, c, take_record(d, c, src, path, rec, off, data, nbytes), 1);
    }
    const mw_status end = mw_shard_copy_end(&w, rc == MW_OK);
    if (rc == MW_OK && end == MW_OK && !used && c->clean && c->image_key) {
        snprintf(x.image_key, sizeof x.image_key, "%s", c->image_key);
        snprintf(x.label_key, sizeof x.label_key, "%s", c->label_key);
        mw_shard_index_save(&x, ixpath);
    }
    c->x = NULL;
    mw_shard_index_free(&x);
    mw_tfrecord_close(t);
    return rc != MW_OK ? rc : end;
}

/* The shards of split into d. */
static mw_status read_split(mw_dataset *d, const char *path, const char *split,
                            const mw_data_opts *o, int *top, const char *what)
{
    mw_tfrecord_shards s;
    mw_status rc = mw_tfrecord_shards_find(&s, path, split);
    const mw_stream_shape shape = {.channels = o->color_channels ? o->color_channels : 3,
                                   .interp = o->interp,
                                   .crop = o->crop};
    if (rc == MW_OK)
        rc = mw_stream_new(&d->stream, &shape, what);
    d->type = MW_IMAGES_ENCODED;
    split_ctx c = {.o = o, .top = -1};
    for (size_t i = 0; rc == MW_OK && i < s.count; i++)
        rc = read_shard(d, &c, s.paths[i]);
    if (rc == MW_OK && d->count == 0)
        rc = mw_err(MW_EDATA, "%s: the %s shards hold no record", path, split);
    if (rc == MW_OK)
        rc = mw_stream_set_key(d->stream, c.image_key);
    if (rc == MW_OK)
        mw_log_debug("%s: %u %s examples in %zu shards, image '%s', label '%s'", path, d->count,
                     split, s.count, c.image_key, c.label_key);
    *top = c.top > *top ? c.top : *top;
    mw_tfrecord_shards_free(&s);
    return rc;
}

static int has_split(const char *path, const char *split)
{
    mw_tfrecord_shards s;
    const int ok = mw_tfrecord_shards_find(&s, path, split) == MW_OK && s.count > 0;
    mw_tfrecord_shards_free(&s);
    mw_err_clear();
    return ok;
}

static int tfrecord_claims(const char *path, int is_dir, const uint8_t *head, size_t got)
{
    (void)head, (void)got;
    return is_dir && has_split(path, "train");
}

/* The held-out split: "test", else "validation"; NULL when neither has shards. */
static const char *held_out(const char *path)
{
    return has_split(path, "test") ? "test" : has_split(path, "validation") ? "validation" : NULL;
}

/* Whether splits a and b are the same files: a directory of plain *.tfrecord names gives its
 * files for any split. */
static int same_shards(const char *path, const char *a, const char *b)
{
    mw_tfrecord_shards sa, sb;
    const mw_status ra = mw_tfrecord_shards_find(&sa, path, a);
    const mw_status rb = mw_tfrecord_shards_find(&sb, path, b); /* both set, freed below */
    int same = ra == MW_OK && rb == MW_OK && sa.count == sb.count;
    for (size_t i = 0; same && i < sa.count; i++)
        same = strcmp(sa.paths[i], sb.paths[i]) == 0;
    mw_tfrecord_shards_free(&sa);
    mw_tfrecord_shards_free(&sb);
    mw_err_clear();
    return same;
}

static mw_status tfrecord_read(mw_dataset *train, mw_dataset *test, const char *path,
                               const mw_data_opts *o, int *top, int *own)
{
    *own = 0;
    const char *held = held_out(path);
    if (!held)
        return mw_err(MW_EDATA,
                      "%s: training shards but no test or validation shards beside them; "
                      "expected the held-out split's shards too (NAME-test.tfrecord-00000-of-"
                      "0000N, test-00000-of-0000N)",
                      path);
    if (same_shards(path, "train", held))
        return mw_err(MW_EDATA,
                      "%s: shards not named by split (*.tfrecord), which would make the test "
                      "set the training set; expected NAME-train.tfrecord-IIIII-of-NNNNN and "
                      "NAME-test.tfrecord-IIIII-of-NNNNN (TFDS) or train-IIIII-of-NNNNN and "
                      "test-IIIII-of-NNNNN names",
                      path);
    MW_TRY(read_split(train, path, "train", o, top, "training set"));
    MW_TRY(read_split(test, path, held, o, top, "test set"));
    uint32_t h = o->image_h, w = o->image_w;
    if (!h || !w)
        MW_TRY(mw_stream_probe(train->stream, 0, &h, &w));
    for (mw_dataset *d = train; d; d = d == train ? test : NULL) {
        mw_stream_set_size(d->stream, h, w);
        d->rows = h, d->cols = w,
        d->channels = (uint32_t)(o->color_channels ? o->color_channels : 3);
    }
    return MW_OK;
}

const mw_data_reader mw_reader_tfrecord = {"TFRecord shards", tfrecord_claims, tfrecord_read};

/* Test driver of the TFRecord reader (worker/data/tfrecord.h, tfrecord_index.h,
 * tfrecord_shards.h, example.h): prints what it reads so that tests/tfrecord/test_tfrecord.py
 * can compare it with what TensorFlow wrote, or with the error a hostile shard must give.
 *
 *   tfrecord_dump dump PATH SPLIT          every record of every shard, in order
 *   tfrecord_dump random PATH SPLIT [DIR]  the same through each shard's record index (kept
 *                                          beside the shard, or in DIR), records read last to
 *                                          first by offset; a compressed shard in order
 *   tfrecord_dump get PATH SPLIT KEY KIND  feature KEY of every record as KIND (bytes, int64,
 *                                          float) through the by-key API
 *   tfrecord_dump count PATH SPLIT         every record read and parsed, nothing printed but
 *                                          "shard NAME records N bytes B" (to time the reader)
 *
 * Output lines: "shard NAME KIND", "index rebuilt|loaded N", "record I OFFSET", then one line
 * per feature "feature KEY KIND COUNT VALUES..." (bytes in hex, floats as their 32 bits in
 * hex, int64 in decimal); "shard NAME records N" at the end of a shard. An error prints
 * "tfrecord_dump: MESSAGE" on stderr and exits with the status's exit code (3 for bad data). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "worker/data/example.h"
#include "worker/data/tfrecord.h"
#include "worker/data/tfrecord_index.h"
#include "worker/data/tfrecord_shards.h"

static void hex(const uint8_t *p, size_t n)
{
    putchar(' ');
    if (n == 0)
        putchar('-');
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
}

static void print_feature(const mw_example *e, size_t i)
{
    mw_example_kind k;
    size_t count;
    const char *key = mw_example_key(e, i, &k, &count);
    static const char *const kinds[] = {"none", "bytes", "float", "int64"};
    printf("feature %s %s %zu", key, kinds[k], count);
    for (size_t j = 0; j < count; j++) {
        if (k == MW_EXAMPLE_BYTES) {
            size_t n;
            const uint8_t *p = mw_example_bytes_at(e, i, j, &n);
            hex(p, n);
        } else if (k == MW_EXAMPLE_FLOAT) {
            uint32_t bits;
            memcpy(&bits, &mw_example_floats_at(e, i)[j], 4);
            printf(" %08x", bits);
        } else {
            printf(" %" PRId64, mw_example_int64s_at(e, i)[j]);
        }
    }
    putchar('\n');
}

/* "SHARD: record I", for the example's messages. */
static mw_status print_record(const char *shard, uint64_t i, uint64_t off, const uint8_t *d,
                              size_t n)
{
    char where[4200];
    snprintf(where, sizeof where, "%s: record %" PRIu64, shard, i);
    mw_example *e;
    MW_TRY(mw_example_parse(&e, d, n, where));
    printf("record %" PRIu64 " %" PRIu64 "\n", i, off);
    for (size_t f = 0; f < mw_example_count(e); f++)
        print_feature(e, f);
    mw_example_free(e);
    return MW_OK;
}

static mw_status dump_in_order(mw_tfrecord *t)
{
    for (;;) {
        const uint8_t *d;
        size_t n;
        uint64_t off, i = mw_tfrecord_position(t);
        MW_TRY(mw_tfrecord_next(t, &d, &n, &off));
        if (!d)
            break;
        MW_TRY(print_record(mw_tfrecord_name(t), i, off, d, n));
    }
    printf("shard %s records %" PRIu64 "\n", mw_tfrecord_name(t), mw_tfrecord_position(t));
    return MW_OK;
}

static mw_status dump_random(mw_tfrecord *t, const char *dir)
{
    mw_tfrecord_index ix;
    int rebuilt;
    MW_TRY(mw_tfrecord_index_open(&ix, mw_tfrecord_name(t), dir, &rebuilt));
    printf("index %s %" PRIu64 "\n", rebuilt ? "rebuilt" : "loaded", ix.count);
    mw_status rc = MW_OK;
    for (uint64_t i = ix.count; rc == MW_OK && i-- > 0;) {
        const uint8_t *d;
        size_t n;
        rc = mw_tfrecord_read_at(t, ix.offsets[i], i, &d, &n);
        if (rc == MW_OK)
            rc = print_record(mw_tfrecord_name(t), i, ix.offsets[i], d, n);
    }
    if (rc == MW_OK)
        printf("shard %s records %" PRIu64 "\n", mw_tfrecord_name(t), ix.count);
    mw_tfrecord_index_free(&ix);
    return rc;
}

static mw_status count_records(mw_tfrecord *t)
{
    uint64_t bytes = 0;
    for (;;) {
        const uint8_t *d;
        size_t n;
        uint64_t off;
        MW_TRY(mw_tfrecord_next(t, &d, &n, &off));
        if (!d)
            break;
        mw_example *e;
        MW_TRY(mw_example_parse(&e, d, n, mw_tfrecord_name(t)));
        mw_example_free(e);
        bytes += n;
    }
    printf("shard %s records %" PRIu64 " bytes %" PRIu64 "\n", mw_tfrecord_name(t),
           mw_tfrecord_position(t), bytes);
    return MW_OK;
}

/* Feature key of every record of t as kind. */
static mw_status get(mw_tfrecord *t, const char *key, const char *kind)
{
    for (;;) {
        const uint8_t *d;
        size_t n;
        uint64_t off, i = mw_tfrecord_position(t);
        MW_TRY(mw_tfrecord_next(t, &d, &n, &off));
        if (!d)
            return MW_OK;
        char where[4200];
        snprintf(where, sizeof where, "%s: record %" PRIu64, mw_tfrecord_name(t), i);
        mw_example *e;
        MW_TRY(mw_example_parse(&e, d, n, where));
        mw_status rc;
        size_t count = 0;
        const uint8_t *b;
        const int64_t *iv;
        const float *fv;
        if (strcmp(kind, "bytes") == 0)
            rc = mw_example_bytes(e, key, &b, &count);
        else if (strcmp(kind, "int64") == 0)
            rc = mw_example_int64s(e, key, &iv, &count);
        else
            rc = mw_example_floats(e, key, &fv, &count);
        if (rc == MW_OK)
            printf("record %" PRIu64 " %s %s %zu\n", i, key, kind, count);
        mw_example_free(e);
        MW_TRY(rc);
    }
}

static mw_status run(int argc, char **argv)
{
    if (argc < 4)
        return mw_err(MW_EINVAL, "usage: tfrecord_dump dump|random|get|count PATH SPLIT [...]");
    const char *cmd = argv[1];
    if (strcmp(cmd, "get") == 0 && argc != 6)
        return mw_err(MW_EINVAL, "usage: tfrecord_dump get PATH SPLIT KEY bytes|int64|float");
    mw_tfrecord_shards s;
    mw_status rc = mw_tfrecord_shards_find(&s, argv[2], argv[3]);
    for (size_t k = 0; rc == MW_OK && k < s.count; k++) {
        mw_tfrecord *t;
        rc = mw_tfrecord_open(&t, s.paths[k], MW_TFRECORD_AUTO);
        if (rc != MW_OK)
            break;
        const char *slash = strrchr(s.paths[k], '/');
        printf("shard %s %s\n", slash ? slash + 1 : s.paths[k],
               mw_tfrecord_compression_name(mw_tfrecord_kind(t)));
        if (strcmp(cmd, "get") == 0)
            rc = get(t, argv[4], argv[5]);
        else if (strcmp(cmd, "count") == 0)
            rc = count_records(t);
        else if (strcmp(cmd, "random") == 0 && mw_tfrecord_kind(t) == MW_TFRECORD_PLAIN)
            rc = dump_random(t, argc > 4 ? argv[4] : NULL);
        else
            rc = dump_in_order(t);
        mw_tfrecord_close(t);
    }
    mw_tfrecord_shards_free(&s);
    return rc;
}

int main(int argc, char **argv)
{
    mw_status rc = run(argc, argv);
    if (rc != MW_OK) {
        fflush(stdout);
        fprintf(stderr, "tfrecord_dump: %s\n", mw_err_msg());
    }
    return mw_status_exit_code(rc);
}

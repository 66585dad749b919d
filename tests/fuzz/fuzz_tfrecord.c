/* libFuzzer target for the TFRecord reader (worker/data/tfrecord.h), its record index scan
 * (tfrecord_index.h), the tf.train.Example parser (example.h) and the sharded-name parser
 * (tfrecord_shards.h). The first input byte picks what the rest is: 0 a shard of any
 * compression (told from its first bytes), 1 a GZIP shard, 2 a ZLIB shard, 3 a shard file
 * name.
 *
 * Any bytes must either read as records, each parsing as an Example or failing, or fail with
 * MW_EDATA (MW_ENOMEM where the fuzzer's malloc limit refuses what the limits allow) and a
 * message naming the shard; a plain shard's records read again by offset from its index equal
 * those read in order. Never a crash, leak, hang or out-of-bounds read. Run it with
 * tests/fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "worker/data/example.h"
#include "worker/data/tfrecord.h"
#include "worker/data/tfrecord_index.h"
#include "worker/data/tfrecord_shards.h"

#define NAME "fuzz.tfrecord"
#define MAX_RECORDS 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink; /* values read, so that reading them is not optimised away */

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_tfrecord: invariant failed: %s (message: %s)\n", what, mw_err_msg());
        abort();
    }
}

static void check_failure(mw_status rc)
{
    check(rc == MW_EDATA || rc == MW_ENOMEM, "a failure is MW_EDATA");
    check(strstr(mw_err_msg(), NAME) != NULL, "the message names the shard");
    mw_err_clear();
}

/* Every accessor of an example, on the keys the data sets use and on each of its own. */
static void walk_example(const uint8_t *d, size_t n)
{
    mw_example *e;
    mw_status rc = mw_example_parse(&e, d, n, NAME ": record");
    if (rc != MW_OK) {
        check_failure(rc);
        return;
    }
    static const char *const keys[] = {"image", "label", "image/encoded", "image/class/label"};
    for (size_t k = 0; k < 4; k++) {
        const uint8_t *b;
        const int64_t *iv;
        const float *fv;
        size_t count;
        if (mw_example_bytes(e, keys[k], &b, &count) == MW_OK)
            for (size_t j = 0; j < count; j++)
                sink += b[j];
        if (mw_example_int64s(e, keys[k], &iv, &count) == MW_OK) {
            check(count >= 1, "an int64 list has a value");
            sink += (unsigned)iv[count - 1];
        }
        if (mw_example_floats(e, keys[k], &fv, &count) == MW_OK) {
            check(count >= 1, "a float list has a value");
            sink += (unsigned)(fv[count - 1] == fv[count - 1]);
        }
        mw_err_clear();
    }
    for (size_t i = 0; i < mw_example_count(e); i++) {
        mw_example_kind kind;
        size_t count, nb;
        const char *key = mw_example_key(e, i, &kind, &count);
        check(key != NULL, "a key");
        for (size_t j = 0; kind == MW_EXAMPLE_BYTES && j < count; j++)
            check(mw_example_bytes_at(e, i, j, &nb) != NULL || nb == 0, "a bytes value");
        if (kind == MW_EXAMPLE_FLOAT && count)
            check(mw_example_floats_at(e, i) != NULL, "a float list");
        if (kind == MW_EXAMPLE_INT64 && count)
            check(mw_example_int64s_at(e, i) != NULL, "an int64 list");
    }
    mw_example_free(e);
}

/* A plain shard's index: every record read by offset is the one read in order. */
static void check_index(const uint8_t *data, size_t size, uint64_t records)
{
    mw_tfrecord *t, *u;
    check(mw_tfrecord_open_buffer(&t, NAME, data, size, MW_TFRECORD_PLAIN) == MW_OK, "reopen");
    check(mw_tfrecord_open_buffer(&u, NAME, data, size, MW_TFRECORD_PLAIN) == MW_OK, "reopen");
    mw_tfrecord_index ix;
    check(mw_tfrecord_index_scan(&ix, t) == MW_OK, "a shard read whole has an index");
    check(ix.count == records, "the index counts the records read");
    for (uint64_t i = 0; i < ix.count; i++) {
        const uint8_t *a, *b;
        size_t na, nb;
        uint64_t off;
        check(mw_tfrecord_next(u, &a, &na, &off) == MW_OK && a, "read in order");
        check(off == ix.offsets[i], "the offset indexed is the one read");
        check(mw_tfrecord_read_at(t, ix.offsets[i], i, &b, &nb) == MW_OK, "read by offset");
        check(na == nb && memcmp(a, b, na) == 0, "the same record both ways");
    }
    mw_tfrecord_index_free(&ix);
    mw_tfrecord_close(t);
    mw_tfrecord_close(u);
}

static void fuzz_shard(const uint8_t *data, size_t size, mw_tfrecord_compression c)
{
    mw_tfrecord *t;
    mw_status rc = mw_tfrecord_open_buffer(&t, NAME, data, size, c);
    if (rc != MW_OK) {
        check_failure(rc);
        return;
    }
    uint64_t prev = 0;
    int errors = 0;
    for (int k = 0; k < MAX_RECORDS; k++) {
        const uint8_t *d;
        size_t n;
        uint64_t off;
        rc = mw_tfrecord_next(t, &d, &n, &off);
        if (rc != MW_OK) { /* past a data CRC mismatch reading goes on; else it stops */
            int stop = strstr(mw_err_msg(), "cannot read past") != NULL;
            check_failure(rc);
            errors++;
            if (stop)
                break;
            continue;
        }
        if (!d) {
            if (mw_tfrecord_kind(t) == MW_TFRECORD_PLAIN && errors == 0)
                check_index(data, size, mw_tfrecord_position(t));
            break;
        }
        check(n <= MW_TFRECORD_MAX_RECORD && (k == 0 || off > prev), "offsets ascend");
        prev = off;
        walk_example(d, n);
    }
    mw_tfrecord_close(t);
}

static void fuzz_name(const uint8_t *data, size_t size)
{
    char name[256];
    size_t n = size < sizeof name - 1 ? size : sizeof name - 1;
    memcpy(name, data, n);
    name[n] = '\0';
    unsigned idx, total;
    size_t plen, at, len;
    if (mw_tfrecord_shard_name(name, &idx, &total, &plen, &at, &len))
        check(idx < total && plen < strlen(name) && at + len <= plen && len > 0,
              "a sharded name's parts lie inside it");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    static const mw_tfrecord_compression modes[3] = {MW_TFRECORD_AUTO, MW_TFRECORD_GZIP,
                                                     MW_TFRECORD_ZLIB};
    if (data[0] % 4 == 3)
        fuzz_name(data + 1, size - 1);
    else
        fuzz_shard(data + 1, size - 1, modes[data[0] % 4]);
    mw_err_clear();
    return 0;
}

/* Unit tests of the TFRecord module's corners that the driver tests (tests/tfrecord/) do not
 * reach through files TensorFlow writes: the sharded-name parser's table, shards in memory
 * (empty, read by a wrong offset, past the end), compressed shards refusing random access and
 * an index, where index files go, and Examples TensorFlow would not write but protobuf
 * allows (a key twice, unpacked lists, a feature with no list, no features at all). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/crc32c.h"
#include "common/status.h"
#include "tests/util.h"
#include "worker/data/example.h"
#include "worker/data/tfrecord.h"
#include "worker/data/tfrecord_index.h"
#include "worker/data/tfrecord_shards.h"

static void test_shard_names(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int ok;
        unsigned index, total;
        const char *prefix, *split;
    } cases[] = {
        {"mnist-train.tfrecord-00003-of-00016", 1, 3, 16, "mnist-train.tfrecord", "train"},
        {"imagenet2012-validation.tfrecord-00000-of-00064", 1, 0, 64,
         "imagenet2012-validation.tfrecord", "validation"},
        {"train-01023-of-01024", 1, 1023, 1024, "train", "train"},
        {"data-test-0-of-1", 1, 0, 1, "data-test", "test"},
        {"a-b-c.tfrecord-00001-of-00002", 1, 1, 2, "a-b-c.tfrecord", "c"},
        {"train-00016-of-00016", 0, 0, 0, NULL, NULL},       /* index not below the total */
        {"train-0000001-of-0000002", 0, 0, 0, NULL, NULL},   /* 7 digits */
        {"train-00001-of-", 0, 0, 0, NULL, NULL},            /* no total */
        {"train.tfrecord", 0, 0, 0, NULL, NULL},             /* not sharded */
        {"-00000-of-00001", 0, 0, 0, NULL, NULL},            /* no prefix */
        {".tfrecord-00000-of-00001", 0, 0, 0, NULL, NULL},   /* no split */
        {"train-x0001-of-00002", 0, 0, 0, NULL, NULL},       /* not digits */
        {"train-00001-of-00002.mwidx", 0, 0, 0, NULL, NULL}, /* an index */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned idx = 99, tot = 99;
        size_t plen = 0, at = 0, len = 0;
        int ok = mw_tfrecord_shard_name(cases[i].name, &idx, &tot, &plen, &at, &len);
        if (ok != cases[i].ok)
            fprintf(stderr, "case %s: got %d\n", cases[i].name, ok);
        assert_int_equal(ok, cases[i].ok);
        if (!ok)
            continue;
        assert_int_equal(idx, cases[i].index);
        assert_int_equal(tot, cases[i].total);
        assert_int_equal(plen, strlen(cases[i].prefix));
        assert_memory_equal(cases[i].name, cases[i].prefix, plen);
        assert_int_equal(len, strlen(cases[i].split));
        assert_memory_equal(cases[i].name + at, cases[i].split, len);
    }
}

/* One framed record of data into out (room for n + 16 bytes); returns its size. */
static size_t frame(uint8_t *out, const void *data, size_t n)
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)((uint64_t)n >> (8 * i));
    uint32_t c = mw_crc32c_mask(mw_crc32c(0, out, 8));
    memcpy(out + 8, &c, 4);
    memcpy(out + 12, data, n);
    c = mw_crc32c_mask(mw_crc32c(0, data, n));
    memcpy(out + 12 + n, &c, 4);
    return n + 16;
}

static void test_buffers(void **state)
{
    (void)state;
    mw_tfrecord *t;
    const uint8_t *d;
    size_t n;
    uint64_t off;
    expect_err(mw_tfrecord_open_buffer(&t, "empty", "", 0, MW_TFRECORD_AUTO), MW_OK, "");
    assert_int_equal(mw_tfrecord_kind(t), MW_TFRECORD_PLAIN);
    expect_err(mw_tfrecord_next(t, &d, &n, &off), MW_OK, "");
    assert_null(d);
    mw_tfrecord_close(t);

    uint8_t shard[64];
    size_t a = frame(shard, "abc", 3), b = frame(shard + a, "hello", 5);
    expect_err(mw_tfrecord_open_buffer(&t, "mem", shard, a + b, MW_TFRECORD_AUTO), MW_OK, "");
    expect_err(mw_tfrecord_read_at(t, a, 1, &d, &n), MW_OK, "");
    assert_int_equal(n, 5);
    assert_memory_equal(d, "hello", 5);
    expect_err(mw_tfrecord_read_at(t, 3, 7, &d, &n), MW_EDATA,
               "mem: record 7 at byte offset 3: length CRC mismatch");
    mw_err_clear();
    expect_err(mw_tfrecord_read_at(t, a + b, 2, &d, &n), MW_EDATA,
               "mem: record 2 at byte offset 40: no record there: the shard is 40 bytes long");
    mw_err_clear();
    /* reads by offset leave the sequential cursor where it was */
    expect_err(mw_tfrecord_next(t, &d, &n, &off), MW_OK, "");
    assert_int_equal(n, 3);
    assert_int_equal(off, 0);
    mw_tfrecord_close(t);
}

/* A bad data CRC is skipped (the framing holds); a bad length CRC ends the shard. */
static void test_after_errors(void **state)
{
    (void)state;
    uint8_t shard[64];
    size_t a = frame(shard, "abc", 3), b = frame(shard + a, "hello", 5);
    shard[a - 1] ^= 1; /* record 0's data CRC */
    mw_tfrecord *t;
    const uint8_t *d;
    size_t n;
    uint64_t off;
    expect_err(mw_tfrecord_open_buffer(&t, "mem", shard, a + b, MW_TFRECORD_PLAIN), MW_OK, "");
    expect_err(mw_tfrecord_next(t, &d, &n, &off), MW_EDATA,
               "mem: record 0 at byte offset 0: data CRC");
    mw_err_clear();
    expect_err(mw_tfrecord_next(t, &d, &n, &off), MW_OK, "");
    assert_int_equal(n, 5);
    assert_int_equal(off, a);
    assert_int_equal(mw_tfrecord_position(t), 2);
    mw_tfrecord_close(t);

    shard[a - 1] ^= 1;
    shard[9] ^= 1; /* record 0's length CRC */
    expect_err(mw_tfrecord_open_buffer(&t, "mem", shard, a + b, MW_TFRECORD_PLAIN), MW_OK, "");
    expect_err(mw_tfrecord_next(t, &d, &n, &off), MW_EDATA,
               "mem: record 0 at byte offset 0: length CRC");
    mw_err_clear();
    expect_err(mw_tfrecord_next(t, &d, &n, &off), MW_EDATA,
               "mem: cannot read past the error at record 0");
    mw_err_clear();
    assert_null(d);
    mw_tfrecord_close(t);
}

/* shard[0..n) as one gzip stream (gzip: 1) or zlib stream into out; returns its size. */
static size_t compress_as(uint8_t *out, size_t cap, const uint8_t *shard, size_t n, int gzip)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, gzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)shard;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t got = cap - z.avail_out;
    deflateEnd(&z);
    return got;
}

static void test_compressed(void **state)
{
    (void)state;
    uint8_t shard[64], gz[256];
    size_t a = frame(shard, "abc", 3);
    for (int gzip = 0; gzip <= 1; gzip++) {
        size_t n = compress_as(gz, sizeof gz, shard, a, gzip);
        mw_tfrecord *t;
        expect_err(mw_tfrecord_open_buffer(&t, "z", gz, n, MW_TFRECORD_AUTO), MW_OK, "");
        assert_int_equal(mw_tfrecord_kind(t), gzip ? MW_TFRECORD_GZIP : MW_TFRECORD_ZLIB);
        const uint8_t *d;
        size_t nb;
        expect_err(mw_tfrecord_read_at(t, 0, 0, &d, &nb), MW_EUNSUPPORTED,
                   gzip ? "z: GZIP-compressed shard: records are read in order only"
                        : "z: ZLIB-compressed shard");
        mw_err_clear();
        mw_tfrecord_index ix;
        expect_err(mw_tfrecord_index_scan(&ix, t), MW_EUNSUPPORTED, "has no record index");
        mw_err_clear();
        uint64_t off;
        expect_err(mw_tfrecord_next(t, &d, &nb, &off), MW_OK, "");
        assert_int_equal(nb, 3);
        assert_memory_equal(d, "abc", 3);
        expect_err(mw_tfrecord_next(t, &d, &nb, &off), MW_OK, "");
        assert_null(d);
        mw_tfrecord_close(t);
    }
}

static void test_index_path(void **state)
{
    (void)state;
    char p[64];
    expect_err(mw_tfrecord_index_path(p, sizeof p, "d/s-00000-of-00001", NULL), MW_OK, "");
    assert_string_equal(p, "d/s-00000-of-00001.mwidx");
    expect_err(mw_tfrecord_index_path(p, sizeof p, "d/s-00000-of-00001", "/ck"), MW_OK, "");
    assert_string_equal(p, "/ck/s-00000-of-00001.mwidx");
    expect_err(mw_tfrecord_index_path(p, 8, "d/s-00000-of-00001", NULL), MW_EIO, "too long");
    mw_err_clear();
}

/* Examples in protobuf wire bytes: field 1 (features) of entries (field 1) of key (1) and
 * value (2, a Feature: 1 bytes_list, 2 float_list, 3 int64_list, each of values in field 1). */
static void test_examples(void **state)
{
    (void)state;
    /* "label" int64 [5] (packed), "label" again as int64 [7, 8] (unpacked: the last wins),
     * "nil" with no list */
    static const uint8_t ex[] = {
        0x0a, 0x2a,                                                           /* features, 42 */
        0x0a, 0x0e, 0x0a, 0x05, 'l',  'a', 'b', 'e',  'l',  0x12, 0x05, 0x1a, /* label: int64 */
        0x03, 0x0a, 0x01, 0x05,                                               /*   packed [5] */
        0x0a, 0x0f, 0x0a, 0x05, 'l',  'a', 'b', 'e',  'l',  0x12, 0x06, 0x1a, /* label again */
        0x04, 0x08, 0x07, 0x08, 0x08,                       /*   unpacked [7, 8] */
        0x0a, 0x07, 0x0a, 0x03, 'n',  'i', 'l', 0x12, 0x00, /* nil: no list */
    };
    mw_example *e;
    expect_err(mw_example_parse(&e, ex, sizeof ex, "x: record 4"), MW_OK, "");
    assert_int_equal(mw_example_count(e), 3);
    const int64_t *iv;
    size_t count;
    expect_err(mw_example_int64s(e, "label", &iv, &count), MW_OK, "");
    assert_int_equal(count, 2);
    assert_int_equal(iv[0], 7);
    assert_int_equal(iv[1], 8);
    const float *fv;
    expect_err(mw_example_floats(e, "nil", &fv, &count), MW_EDATA,
               "x: record 4: feature 'nil' is a feature with no list; expected a float list");
    mw_err_clear();
    expect_err(mw_example_floats(e, "image", &fv, &count), MW_EDATA,
               "x: record 4: no feature 'image' (features: label, label, nil)");
    mw_err_clear();
    mw_example_free(e);

    expect_err(mw_example_parse(&e, (const uint8_t *)"", 0, "x: record 0"), MW_OK, "");
    assert_int_equal(mw_example_count(e), 0);
    expect_err(mw_example_int64s(e, "label", &iv, &count), MW_EDATA,
               "x: record 0: no feature 'label' (features: none)");
    mw_err_clear();
    mw_example_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_names), cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_compressed),  cmocka_unit_test(test_index_path),
        cmocka_unit_test(test_examples),    cmocka_unit_test(test_after_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

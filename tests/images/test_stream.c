/* Unit tests of the encoded-image stream's failures that files given to --data cannot reach
 * from the command line (worker/data/stream.h): a shard that changed after it was listed (the
 * record read at training time no longer checks), an image file deleted after the listing,
 * and the first failure being the one kept when several examples fail. Each checks the status,
 * the message (the file, the record's byte offset, and no record number the stream does not
 * know) and that the failed example's pixels are zeros. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/status.h"
#include "tests/util.h"
#include "worker/data/stream.h"

/* One framed TFRecord record of data into out; returns its size. */
static size_t frame(uint8_t *out, const char *data)
{
    const uint64_t n = strlen(data);
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(n >> (8 * i));
    const uint32_t lc = mw_crc32c_mask(mw_crc32c(0, len, 8));
    const uint32_t dc = mw_crc32c_mask(mw_crc32c(0, (const uint8_t *)data, n));
    memcpy(out, len, 8);
    for (int i = 0; i < 4; i++)
        out[8 + i] = (uint8_t)(lc >> (8 * i));
    memcpy(out + 12, data, n);
    for (int i = 0; i < 4; i++)
        out[12 + n + i] = (uint8_t)(dc >> (8 * i));
    return 16 + n;
}

static mw_stream *new_stream(void)
{
    const mw_stream_shape shape = {.height = 2, .width = 2, .channels = 3, .image_key = "image"};
    mw_stream *s = NULL;
    assert_int_equal(mw_stream_new(&s, &shape, "training set"), MW_OK);
    return s;
}

/* dst[0..n) all zeros. */
static int zeros(const float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (dst[i] != 0.0f)
            return 0;
    return 1;
}

static void test_shard_changed(void **state)
{
    const char *dir = *state;
    uint8_t shard[64];
    size_t a = frame(shard, "hello");
    size_t b = frame(shard + a, "world!");
    char *path = mw_test_write_file(dir, "x-train.tfrecord-00000-of-00001", shard, a + b);
    mw_stream *s = new_stream();
    uint32_t src;
    assert_int_equal(mw_stream_add_source(s, path, &src), MW_OK);
    assert_int_equal(mw_stream_add_example(s, src, 0), MW_OK);
    assert_int_equal(mw_stream_add_example(s, src, 0), MW_OK);
    assert_int_equal(mw_stream_add_example(s, src, a), MW_OK); /* example 2: record 1 */
    shard[a + 12] ^= 1;                                        /* its data, changed on disk */
    free(mw_test_write_file(dir, "x-train.tfrecord-00000-of-00001", shard, a + b));
    float dst[12];
    for (int i = 0; i < 12; i++)
        dst[i] = 7.0f;
    char offset[64];
    snprintf(offset, sizeof offset, "the record at byte offset %zu", a);
    expect_err(mw_stream_decode(s, dst, 2, 0), MW_EDATA, path, offset, "CRC");
    assert_null(strstr(mw_err_msg(), ": record ")); /* the stream knows no record number */
    assert_true(zeros(dst, 12));
    mw_err_clear();
    expect_err(mw_stream_status(s), MW_EDATA, path, offset);
    mw_stream_free(s);
    free(path);
}

static void test_first_failure_kept(void **state)
{
    const char *dir = *state;
    char *text = mw_test_write_file(dir, "b.png", "text, not a PNG", 15);
    char *gone = mw_test_write_file(dir, "a.png", "\x89PNG", 4);
    assert_int_equal(unlink(gone), 0); /* deleted after the folder was listed */
    mw_stream *s = new_stream();
    uint32_t src;
    assert_int_equal(mw_stream_add_source(s, text, &src), MW_OK);
    assert_int_equal(mw_stream_add_example(s, src, MW_STREAM_WHOLE_FILE), MW_OK);
    assert_int_equal(mw_stream_add_source(s, gone, &src), MW_OK);
    assert_int_equal(mw_stream_add_example(s, src, MW_STREAM_WHOLE_FILE), MW_OK);
    float dst[12];
    expect_err(mw_stream_decode(s, dst, 0, 1), MW_EDATA, text, "not an image");
    mw_err_clear();
    for (int i = 0; i < 12; i++)
        dst[i] = 7.0f;
    expect_err(mw_stream_decode(s, dst, 1, 1), MW_EIO, gone, "cannot open");
    assert_true(zeros(dst, 12));
    mw_err_clear();
    expect_err(mw_stream_status(s), MW_EDATA, text, "not an image"); /* the first one */
    mw_err_clear();
    mw_stream_free(s);
    free(text);
    free(gone);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        mw_test_in_tmpdir(test_shard_changed),
        mw_test_in_tmpdir(test_first_failure_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

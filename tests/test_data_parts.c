/* Tests for several named inputs in a .npz (worker/data/data_parts.h, the .npz reader): the
 * arrays x_train.<name> and x_test.<name> packed into one row per example in the order of
 * their names, whatever their integer types (bool, uint8, int64), and each bad archive refused
 * with one message naming the member, the field or the value. The archives are written here
 * with libzip from .npy bytes made by hand. */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "common/status.h"
#include "tests/util.h"
#include "worker/data/data.h"
#include "worker/data/data_npz.h"
#include "worker/data/data_parts.h"

/* One member: its name, NumPy descr, shape (rows, cols; cols 0: 1-D) and values. */
typedef struct {
    const char *name, *descr;
    int rows, cols;
    const int64_t *v;
} member;

/* A .npy file of m's values in its descr's width (little-endian). */
static uint8_t *npy_bytes(const member *m, size_t *n)
{
    char hdr[128];
    int h = m->cols ? snprintf(hdr, sizeof hdr,
                               "{'descr': '%s', 'fortran_order': False, "
                               "'shape': (%d, %d), }",
                               m->descr, m->rows, m->cols)
                    : snprintf(hdr, sizeof hdr,
                               "{'descr': '%s', 'fortran_order': False, "
                               "'shape': (%d,), }",
                               m->descr, m->rows);
    const int pad = 64 - (10 + h + 1) % 64;
    const size_t hl = (size_t)h + (size_t)pad + 1, size = (size_t)(m->descr[2] - '0');
    const size_t count = (size_t)m->rows * (size_t)(m->cols ? m->cols : 1);
    *n = 10 + hl + count * size;
    uint8_t *b = calloc(1, *n);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)(hl & 0xff), b[9] = (uint8_t)(hl >> 8);
    memcpy(b + 10, hdr, (size_t)h);
    memset(b + 10 + h, ' ', (size_t)pad);
    b[10 + hl - 1] = '\n';
    for (size_t i = 0; i < count; i++)
        for (size_t k = 0; k < size; k++)
            b[10 + hl + i * size + k] = (uint8_t)((uint64_t)m->v[i] >> (8 * k));
    return b;
}

static char *write_npz(const char *dir, const member *ms, int n)
{
    char *path = malloc(strlen(dir) + 8);
    assert_non_null(path);
    sprintf(path, "%s/d.npz", dir);
    int err = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    assert_non_null(za);
    uint8_t *bufs[16];
    for (int k = 0; k < n; k++) {
        size_t nb;
        bufs[k] = npy_bytes(&ms[k], &nb);
        zip_source_t *src = zip_source_buffer(za, bufs[k], nb, 0);
        assert_non_null(src);
        assert_true(zip_file_add(za, ms[k].name, src, ZIP_FL_OVERWRITE) >= 0);
    }
    assert_int_equal(zip_close(za), 0);
    for (int k = 0; k < n; k++)
        free(bufs[k]);
    return path;
}

static const int64_t ids[] = {5, 0, 7, 1, 2, 3}, mask[] = {1, 0, 1}, labels[] = {0, 1, 2};
static const int64_t seg[] = {0, 1, 1};

/* x_train.token_ids (int64 (3, 2)), x_train.a_mask (bool (3, 1)), the same for x_test, labels. */
static int good_members(member *ms)
{
    const member m[] = {
        {"x_train.token_ids.npy", "<i8", 3, 2, ids}, {"x_train.a_mask.npy", "|b1", 3, 1, mask},
        {"y_train.npy", "<i4", 3, 0, labels},        {"x_test.a_mask.npy", "|b1", 3, 1, mask},
        {"x_test.token_ids.npy", "<i8", 3, 2, ids},  {"y_test.npy", "<i4", 3, 0, labels},
    };
    memcpy(ms, m, sizeof m);
    return 6;
}

static void test_good(void **state)
{
    member ms[8];
    const int n = good_members(ms);
    char *path = write_npz(*state, ms, n);
    mw_dataset tr, te;
    mw_dataset_init(&tr), mw_dataset_init(&te);
    int top = 0;
    assert_int_equal(mw_data_read_npz(&tr, &te, path, 0, &top), MW_OK);
    assert_int_equal(tr.count, 3);
    assert_int_equal(tr.type, MW_IMAGES_TOKENS);
    assert_int_equal(tr.rows * tr.cols * tr.channels, 3);
    assert_int_equal(tr.parts.n, 2); /* in the order of their names: a_mask, then token_ids */
    assert_string_equal(tr.parts.name[0], "a_mask");
    assert_string_equal(tr.parts.name[1], "token_ids");
    assert_int_equal(tr.parts.width[0], 1);
    assert_int_equal(tr.parts.width[1], 2);
    assert_int_equal(te.parts.n, 2);
    float x[9];
    int32_t y[3];
    const uint32_t order[3] = {2, 0, 1};
    mw_dataset_batch(&tr, x, y, order, 3);
    const float want[9] = {1, 2, 3, 1, 5, 0, 0, 7, 1}; /* each row: a_mask, token_ids */
    assert_memory_equal(x, want, sizeof want);
    uint32_t ex = 0, pos = 0;
    int64_t v = 0;
    /* the ids of token_ids (from column 1) at or above 6: example 1's 7, at its position 0 */
    assert_int_equal(mw_dataset_find_token_in(&tr, 1, 2, 6, &ex, &pos, &v), 1);
    assert_int_equal(ex, 1);
    assert_int_equal(pos, 0);
    assert_int_equal(v, 7);
    assert_int_equal(mw_dataset_find_token_in(&tr, 0, 1, 2, &ex, &pos, &v), 0); /* the mask */
    mw_dataset_free(&tr), mw_dataset_free(&te);
    free(path);
}

/* The good archive with member k replaced by r (or removed: r.name NULL); the read fails with
 * status want and a message holding each of the NULL-terminated subs. */
static void expect_bad(const char *dir, int k, member r, mw_status want, ...)
{
    member ms[8];
    int n = good_members(ms);
    if (r.name)
        ms[k] = r;
    else
        memmove(&ms[k], &ms[k + 1], (size_t)(--n - k) * sizeof *ms);
    char *path = write_npz(dir, ms, n);
    mw_dataset tr, te;
    mw_dataset_init(&tr), mw_dataset_init(&te);
    int top = 0;
    assert_int_equal(mw_data_read_npz(&tr, &te, path, 0, &top), want);
    va_list ap;
    va_start(ap, want);
    for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
        if (!strstr(mw_err_msg(), s))
            fail_msg("message \"%s\" lacks \"%s\"", mw_err_msg(), s);
    va_end(ap);
    mw_err_clear();
    mw_dataset_free(&tr), mw_dataset_free(&te);
    free(path);
}

static void test_bad(void **state)
{
    const char *d = *state;
    const int64_t neg[] = {5, 0, -7, 1, 2, 3}, big[] = {5, 0, 1 << 24, 1, 2, 3};
    expect_bad(d, 1, (member){"x_train.a-mask.npy", "|b1", 3, 1, mask}, MW_EDATA,
               "member 'x_train.a-mask.npy'", "letters, digits and '_' only", NULL);
    expect_bad(d, 0, (member){"x_train.token_ids.npy", "<i8", 3, 2, neg}, MW_EDATA,
               "x_train.token_ids.npy: example 1 has -7 at position 0",
               "expected a value in "
               "0..16777215",
               NULL);
    expect_bad(d, 0, (member){"x_train.token_ids.npy", "<i8", 3, 2, big}, MW_EDATA,
               "has 16777216 at position 0", NULL);
    expect_bad(d, 1, (member){"x_train.a_mask.npy", "|b1", 3, 0, mask}, MW_EDATA,
               "x_train.a_mask.npy: npy header field 'shape': 1 dimensions",
               "expected a named input of (N, T)", NULL);
    expect_bad(d, 1, (member){"x_train.a_mask.npy", "<f4", 3, 1, mask}, MW_EDATA,
               "x_train.a_mask.npy: npy header field 'descr': '<f4'",
               "expected integers or booleans", NULL);
    expect_bad(d, 1, (member){"x_train.a_mask.npy", "|b1", 2, 1, mask}, MW_EDATA,
               "x_train.a_mask.npy: npy header field 'shape': 2 examples; expected 3", NULL);
    expect_bad(d, 3, (member){"x_test.a_mask.npy", "<i4", 3, 2, ids}, MW_EDATA,
               "x_test.a_mask has 2 values per example, x_train.a_mask 1", NULL);
    expect_bad(d, 3, (member){"x_test.segment_ids.npy", "<i4", 3, 1, seg}, MW_EDATA,
               "x_train.a_mask has no x_test.a_mask beside it", NULL);
    expect_bad(d, 3, (member){NULL}, MW_EDATA, "x_train.a_mask has no x_test.a_mask beside it",
               NULL);
    expect_bad(d, 3, (member){"x_test.npy", "<i4", 3, 2, ids}, MW_EDATA,
               "both 'x_test.npy' and named inputs x_test.<name>", NULL);
    expect_bad(d, 1, (member){"x_train.a_mask.np", "|b1", 3, 1, mask}, MW_EDATA,
               "unexpected member 'x_train.a_mask.np'", "x_train.<input name>", NULL);
}

static void test_part_name(void **state)
{
    (void)state;
    char name[8];
    assert_int_equal(mw_data_part_name("x_train.ids.npy", "x_train", name, sizeof name), 1);
    assert_string_equal(name, "ids");
    assert_int_equal(mw_data_part_name("x_test.ids.npy", "x_train", name, sizeof name), 0);
    assert_int_equal(mw_data_part_name("x_train.npy", "x_train", name, sizeof name), 0);
    assert_int_equal(mw_data_part_name("x_train..npy", "x_train", name, sizeof name), 0);
    assert_int_equal(mw_data_part_name("x_train.a.b.npy", "x_train", name, sizeof name), -1);
    assert_int_equal(mw_data_part_name("x_train.abcdefgh.npy", "x_train", name, sizeof name), -1);
    assert_int_equal(mw_data_part_name("x_train.abcdefg.npy", "x_train", name, sizeof name), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        mw_test_in_tmpdir(test_good),
        mw_test_in_tmpdir(test_bad),
        cmocka_unit_test(test_part_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

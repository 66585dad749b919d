/* Tests for worker/checkpoint.c reading from disk: the header and the section table are read
 * and checked against the file's size before its body (a file that ends early or goes on for
 * gigabytes costs a few small reads: time and peak memory measured), and files that are not
 * checkpoints (a FIFO, a device, a directory, a symbolic link) are refused without blocking. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/status.h"
#include "tests/ckpt_util.h"
#include "tests/util.h"
#include "worker/checkpoint.h"
#include "worker/checkpoint_dir.h"

/* ---- header first, files that are not checkpoints ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long maxrss_kb(void)
{
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

/* The header and section table are checked against the file's size before the body is read: a
 * 5 GiB sparse file with a valid 16-byte header is rejected at once, without its memory. */
static void test_read_header_first(void **state)
{
    const char *dir = *state;
    mw_ckpt c, r;
    mw_test_ckpt_make_state(&c, 300, "adam", 2, 12);
    char *good = mw_test_ckpt_join(dir, "good");
    assert_int_equal(mw_ckpt_write(&c, good), MW_OK);
    size_t n;
    uint8_t *bytes = mw_test_ckpt_read_all(good, &n);
    free(mw_test_write_file(dir, "sparse", bytes, 16));
    char *sparse = mw_test_ckpt_join(dir, "sparse");
    if (truncate(sparse, (off_t)5 << 30) != 0)
        skip(); /* a file system without 5 GiB files */
    mw_ckpt_init(&r);
    long rss0 = maxrss_kb();
    double t0 = now_s();
    expect_err(mw_ckpt_read(&r, sparse), MW_ECKPT, sparse,
               ": file is 5368709120 bytes but its header and sections declare 156 (5368708964 "
               "trailing bytes after the last section; expected the file to end at byte 156)");
    mw_err_clear();
    double dt = now_s() - t0;
    long grew_kb = maxrss_kb() - rss0;
    if (dt > 1.0 || grew_kb > 64 * 1024)
        fail_msg("rejecting the sparse file took %.2f s and %ld KiB more memory", dt, grew_kb);
    assert_null(r.params);

    /* a valid file with bytes after it: both sizes named, by the path */
    uint8_t *more = malloc(n + 3);
    memcpy(more, bytes, n);
    memcpy(more + n, "abc", 3);
    char *p = mw_test_write_file(dir, "trailing", more, n + 3);
    char want[200];
    snprintf(want, sizeof want, ": file is %zu bytes but its header and sections declare %zu (3 ",
             n + 3, n);
    expect_err(mw_ckpt_read(&r, p), MW_ECKPT, p, want);
    mw_err_clear();
    free(p);

    /* a section that runs past the end: the file's size and at least what is declared */
    size_t comp1 = 0; /* meta's compressed size */
    for (int i = 7; i >= 0; i--)
        comp1 = comp1 << 8 | bytes[16 + 8 + i];
    size_t cut = 16 + 28 + comp1 + 28 + 2; /* two bytes into the model section's payload */
    p = mw_test_write_file(dir, "short", bytes, cut);
    snprintf(want, sizeof want, "(the file is %zu bytes; its sections declare at least ", cut);
    expect_err(mw_ckpt_read(&r, p), MW_ECKPT, p, ": truncated in section model: ", want);
    mw_err_clear();
    /* a compressed size of 2^40 in a small file */
    memcpy(more, bytes, n);
    mw_test_ckpt_le64(more + 16 + 8, (uint64_t)1 << 40);
    free(mw_test_write_file(dir, "short", more, n));
    snprintf(want, sizeof want,
             "truncated in section meta: 1099511627776 compressed bytes at "
             "byte 44 but only %zu left (the file is %zu bytes; its sections "
             "declare at least 1099511627820)",
             n - 44, n);
    expect_err(mw_ckpt_read(&r, p), MW_ECKPT, p, want);
    mw_err_clear();
    free(p);
    free(more);

    /* the whole file as the newest checkpoint of a directory: skipped for the previous one */
    char *ck = mw_test_ckpt_join(dir, "ck");
    assert_int_equal(mw_ckpt_save(ck, &c, 5, NULL), MW_OK);
    char *three = mw_test_ckpt_join(ck, "ckpt-3");
    assert_int_equal(rename(sparse, three), 0);
    char *used = NULL;
    assert_int_equal(mw_ckpt_load_latest(ck, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    free(used);
    free(three);
    free(ck);
    free(bytes);
    free(sparse);
    free(good);
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

/* FIFOs, devices and symbolic links are never read: no read blocks and no link is followed. */
static void test_read_special(void **state)
{
    const char *dir = *state;
    alarm(60); /* a blocked open would hang the test: end it instead */
    mw_ckpt c, r;
    mw_test_ckpt_make_state(&c, 30, "sgd", 1, 13);
    mw_ckpt_init(&r);
    assert_int_equal(mw_ckpt_save(dir, &c, 5, NULL), MW_OK);
    char *fifo = mw_test_ckpt_join(dir, "ckpt-9"), *link = mw_test_ckpt_join(dir, "ckpt-8");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    expect_err(mw_ckpt_read(&r, fifo), MW_EIO, fifo, ": is a FIFO (expected a checkpoint file)");
    mw_err_clear();
    assert_int_equal(symlink("ckpt-1", link), 0);
    expect_err(mw_ckpt_read(&r, link), MW_EIO, link,
               ": is a symbolic link (expected a regular file: checkpoints are never read "
               "through links)");
    mw_err_clear();
    expect_err(mw_ckpt_read(&r, "/dev/null"), MW_EIO,
               "/dev/null: is a character device (expected a checkpoint file)");
    mw_err_clear();

    /* the index names the FIFO: skipped (so is the link), the real one is used */
    const char *idx = "model_checkpoint_path: \"ckpt-9\"\n"
                      "all_model_checkpoint_paths: \"ckpt-1\"\n"
                      "all_model_checkpoint_paths: \"ckpt-8\"\n"
                      "all_model_checkpoint_paths: \"ckpt-9\"\n";
    free(mw_test_write_file(dir, "checkpoint", idx, strlen(idx)));
    char *used = NULL;
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    mw_test_ckpt_assert_same(&c, &r);
    free(used);
    /* the index itself as a FIFO: the ckpt-N files are found */
    char *ip = mw_test_ckpt_join(dir, "checkpoint");
    assert_int_equal(unlink(ip), 0);
    assert_int_equal(mkfifo(ip, 0644), 0);
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    free(used);
    alarm(0);
    free(ip);
    free(fifo);
    free(link);
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        mw_test_in_tmpdir(test_read_header_first),
        mw_test_in_tmpdir(test_read_special),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* common/: status table and first-error rule, RNG determinism and ranges,
 * arena layout and alignment, messages escaped, the temporary files a signal removes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/arena.h"
#include "common/preempt.h"
#include "common/rng.h"
#include "common/status.h"
#include "common/strfmt.h"
#include "common/timer.h"
#include "tests/util.h"

static void status_table(void **state)
{
    (void)state;
    assert_string_equal(mw_status_str(MW_OK), "MW_OK");
    assert_string_equal(mw_status_str(MW_EDATA), "MW_EDATA");
    assert_string_equal(mw_status_str((mw_status)999), "MW_E?");
    assert_int_equal(mw_status_exit_code(MW_OK), 0);
    assert_int_equal(mw_status_exit_code(MW_ECONFIG), 2);
    assert_int_equal(mw_status_exit_code(MW_EINVAL), 2);
    /* restartable outcomes are >= 128 (a preempted run too: --resume continues it), the
     * rest are not; no two statuses above 7 share a code, and none is a shell's 128 + a
     * signal that ends processes (137 SIGKILL, 143 SIGTERM, 130 SIGINT, 134 SIGABRT, 139
     * SIGSEGV) */
    for (int s = 0; s < MW_STATUS_COUNT; s++) {
        int code = mw_status_exit_code((mw_status)s);
        int retry = s == MW_EMPI || s == MW_ETIMEOUT || s == MW_EPREEMPTED;
        assert_true(retry ? code >= 128 : code < 128);
        assert_true(s == MW_OK ? code == 0 : code != 0);
        assert_true(code != 130 && code != 134 && code != 137 && code != 139 && code != 143);
        for (int t = 0; t < s; t++)
            assert_true(code <= 7 || code != mw_status_exit_code((mw_status)t));
    }
    assert_int_equal(mw_status_exit_code(MW_EPREEMPTED), 133);
    assert_int_equal(mw_status_exit_code(MW_EDIVERGED), 8);
}

static void first_error_wins(void **state)
{
    (void)state;
    mw_err_clear();
    assert_string_equal(mw_err_msg(), "");
    assert_int_equal(mw_err_status(), MW_OK);
    assert_int_equal(mw_err(MW_EDATA, "file %s: bad %d", "a.idx", 7), MW_EDATA);
    assert_int_equal(mw_err(MW_EIO, "later"), MW_EIO);
    assert_string_equal(mw_err_msg(), "file a.idx: bad 7");
    assert_int_equal(mw_err_status(), MW_EDATA);
    mw_err_clear();
    assert_int_equal(mw_err(MW_OK, "not an error"), MW_OK);
    assert_string_equal(mw_err_msg(), "");
    /* long messages are truncated, never overflow */
    char big[4000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mw_err(MW_EINVAL, "%s", big);
    assert_true(strlen(mw_err_msg()) < 2048);
    mw_err_clear();
}

static void rng_deterministic(void **state)
{
    (void)state;
    mw_rng a, b;
    mw_rng_seed(&a, 42, 1);
    mw_rng_seed(&b, 42, 1);
    for (int i = 0; i < 100; i++)
        assert_int_equal(mw_rng_u32(&a), mw_rng_u32(&b));
    mw_rng_seed(&b, 42, 2);
    int same = 0;
    for (int i = 0; i < 100; i++)
        same += mw_rng_u32(&a) == mw_rng_u32(&b);
    assert_true(same < 3);
    /* Known first output of PCG32 (seed 42, stream 54) from the reference implementation */
    mw_rng_seed(&a, 42, 54);
    assert_int_equal(mw_rng_u32(&a), 0xa15c02b7u);
}

static void rng_ranges(void **state)
{
    (void)state;
    mw_rng r;
    mw_rng_seed(&r, 1, 1);
    double sum = 0, sq = 0;
    int counts[7] = {0};
    for (int i = 0; i < 70000; i++) {
        float u = mw_rng_uniform(&r);
        assert_true(u >= 0.0f && u < 1.0f);
        uint32_t k = mw_rng_below(&r, 7);
        assert_true(k < 7);
        counts[k]++;
        float z = mw_rng_normal(&r);
        sum += z, sq += (double)z * z;
    }
    for (int k = 0; k < 7; k++)
        assert_true(counts[k] > 9000 && counts[k] < 11000);
    assert_true(sum / 70000 > -0.03 && sum / 70000 < 0.03);
    assert_true(sq / 70000 > 0.95 && sq / 70000 < 1.05);
}

static void shuffle_is_permutation(void **state)
{
    (void)state;
    for (uint32_t n = 0; n < 50; n += 7) {
        uint32_t ids[64];
        for (uint32_t i = 0; i < n; i++)
            ids[i] = i;
        mw_rng r;
        mw_rng_seed(&r, 5, n);
        mw_rng_shuffle(&r, ids, n);
        int seen[64] = {0};
        for (uint32_t i = 0; i < n; i++) {
            assert_true(ids[i] < n);
            seen[ids[i]]++;
        }
        for (uint32_t i = 0; i < n; i++)
            assert_int_equal(seen[i], 1);
    }
    assert_int_equal(mw_rng_hash(1, 2, 3), mw_rng_hash(1, 2, 3));
    assert_true(mw_rng_hash(1, 2, 3) != mw_rng_hash(1, 2, 4));
}

static void arena_layout(void **state)
{
    (void)state;
    mw_arena a;
    mw_arena_init(&a);
    size_t o1 = mw_arena_reserve(&a, 3), o2 = mw_arena_reserve(&a, 17),
           o3 = mw_arena_reserve(&a, 0);
    assert_int_equal(o1, 0);
    assert_int_equal(o2, MW_ARENA_ALIGN);
    assert_int_equal(o3, 3 * MW_ARENA_ALIGN);
    mw_arena_pad_to(&a, 5 * MW_ARENA_ALIGN);
    assert_int_equal(a.count, 5 * MW_ARENA_ALIGN);
    assert_int_equal(mw_arena_alloc(&a), MW_OK);
    assert_int_equal((uintptr_t)a.data % 64, 0);
    for (size_t i = 0; i < a.count; i++)
        assert_true(a.data[i] == 0.0f);
    mw_arena_free(&a);
    assert_null(a.data);
    mw_arena_free(&a); /* twice is safe */
}

static void str_quote_escape(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(mw_str_quote(b, sizeof b, "a\"b\\c\n\t\x01", 40),
                        "\"a\\\"b\\\\c\\n\\t\\x01\"");
    assert_string_equal(mw_str_quote(b, sizeof b, "abcdefgh", 3), "\"abc...\"");
    mw_str_escape(b, sizeof b, "h\xc3\xa9", 10, 0); /* parser text: bytes >= 0x80 escaped */
    assert_string_equal(b, "h\\xc3\\xa9");
    mw_str_escape(b, sizeof b, "h\xc3\xa9", 10, 1); /* user text: UTF-8 kept */
    assert_string_equal(b, "h\xc3\xa9");
    char tiny[6];
    mw_str_quote(tiny, sizeof tiny, "abcdefgh", 40); /* never overflows, stays terminated */
    assert_true(strlen(tiny) < sizeof tiny && tiny[0] == '"');
    mw_str_quote(tiny, 2, "abc", 40);
    assert_string_equal(tiny, "");
}

/* Every stored message has its control bytes escaped, whatever it quotes: an ESC ] 0 ; ... BEL
 * (a terminal's title) and an ESC [ 2 J (clear) from a file's field come out as text, \n and
 * \t readable, quotes and UTF-8 as they were, a C1 control's UTF-8 (0xc2 0x9b, CSI) escaped. */
static void err_controls_escaped(void **state)
{
    (void)state;
    mw_err_clear();
    assert_int_equal(mw_err(MW_EDATA, "line 2: found '%s'; expected a number",
                            "x\x1b]0;pwned\x07\x1b[2J\n\t\x7f\"\xc3\xa9\xc2\x9b"
                            "1"),
                     MW_EDATA);
    assert_string_equal(mw_err_msg(), "line 2: found 'x\\x1b]0;pwned\\x07\\x1b[2J\\n\\t\\x7f\""
                                      "\xc3\xa9\\xc2\\x9b1'; expected a number");
    mw_err_clear();
    char b[8];
    mw_str_controls(b, sizeof b, "\x1b\x1b\x1b"); /* cut, never a raw byte, terminated */
    assert_string_equal(b, "\\x1b...");
    mw_err_clear();
}

/* The temporary files a signal removes: four at a time (a fifth is ENFILE until one is done),
 * created new (an existing name is EEXIST and takes no place), a name over PATH_MAX refused. */
static void temp_registry(void **state)
{
    (void)state;
    char dir[] = "/tmp/mw_temp_XXXXXX", path[5][64];
    assert_non_null(mkdtemp(dir));
    int fd[5];
    for (int i = 0; i < 5; i++) {
        snprintf(path[i], sizeof path[i], "%s/f%d.tmp", dir, i);
        fd[i] = mw_preempt_temp_create(path[i], O_WRONLY, 0600);
    }
    assert_true(fd[0] >= 0 && fd[1] >= 0 && fd[2] >= 0 && fd[3] >= 0);
    assert_true(fd[4] < 0 && errno == ENFILE);
    assert_true(mw_preempt_temp_create(path[0], O_WRONLY, 0600) < 0 && errno == ENFILE);
    mw_preempt_temp_done(path[0]);
    assert_true(mw_preempt_temp_create(path[1], O_WRONLY, 0600) < 0 && errno == EEXIST);
    fd[4] = mw_preempt_temp_create(path[4], O_WRONLY, 0600);
    assert_true(fd[4] >= 0);
    char long_name[PATH_MAX + 8];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    mw_preempt_temp_done(path[1]);
    assert_true(mw_preempt_temp_create(long_name, O_WRONLY, 0600) < 0 && errno == ENAMETOOLONG);
    for (int i = 0; i < 5; i++) {
        close(fd[i]);
        mw_preempt_temp_done(path[i]);
        unlink(path[i]);
    }
    mw_preempt_temp_done(NULL); /* nothing */
    assert_int_equal(rmdir(dir), 0);
}

/* The process's own directory: removed with everything under it (300 files, more than one
 * read of the directory's entries, and 8 levels of directories), a symbolic link removed as a
 * link (its target kept); a second removal is nothing; 9 levels deep the last one stays (and
 * so every directory above it). */
static void own_dir_removed(void **state)
{
    (void)state;
    char top[] = "/tmp/mw_own_XXXXXX", keep[] = "/tmp/mw_keep_XXXXXX", p[512];
    assert_non_null(mkdtemp(top));
    assert_non_null(mkdtemp(keep));
    for (int i = 0; i < 300; i++) {
        snprintf(p, sizeof p, "%s/a_fairly_long_file_name_%03d", top, i);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fclose(f);
    }
    snprintf(p, sizeof p, "%s/link", top);
    assert_int_equal(symlink(keep, p), 0);
    snprintf(p, sizeof p, "%s", top);
    for (int d = 1; d < 8; d++) { /* top is level 1: 7 more */
        strcat(p, "/d");
        assert_int_equal(mkdir(p, 0700), 0);
    }
    strcat(p, "/f");
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
    mw_preempt_dir_register(top);
    mw_preempt_dir_remove();
    struct stat st;
    assert_int_equal(stat(top, &st), -1);
    assert_int_equal(stat(keep, &st), 0);
    mw_preempt_dir_remove(); /* nothing registered */

    assert_non_null(mkdtemp(strcpy(top, "/tmp/mw_own_XXXXXX")));
    snprintf(p, sizeof p, "%s", top);
    for (int d = 1; d < 9; d++) {
        strcat(p, "/d");
        assert_int_equal(mkdir(p, 0700), 0);
    }
    mw_preempt_dir_register(top);
    mw_preempt_dir_remove();
    assert_int_equal(stat(p, &st), 0); /* level 9: past the 8 levels removed */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", top, keep);
    assert_int_equal(system(cmd), 0);
}

/* mw_median: odd and even counts (unsorted input, sorted on return), one value, none. */
static void median_counts(void **state)
{
    (void)state;
    double odd[5] = {3, 1, 5, 2, 4}, even[4] = {4, 1, 3, 2}, one[1] = {7};
    assert_true(mw_median(odd, 5) == 3.0);
    assert_true(odd[0] == 1.0 && odd[4] == 5.0);
    assert_true(mw_median(even, 4) == 2.5);
    assert_true(mw_median(one, 1) == 7.0);
    assert_true(mw_median(NULL, 0) == 0.0);
}

static void nap_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) { /* the rest, after a signal */
    }
}

/* mw_stall: the idle time grows while the count stands still, restarts when it moves (to any
 * other value), and is measured from the start when it never moves. */
static void stall_clock(void **state)
{
    (void)state;
    mw_stall st;
    mw_stall_start(&st, 5);
    nap_ms(300);
    const double still = mw_stall_idle(&st, 5);
    assert_true(still >= 0.299 && still < 30.0);
    assert_true(mw_stall_idle(&st, 6) < 0.2); /* moved: the clock restarts */
    nap_ms(50);
    assert_true(mw_stall_idle(&st, 6) >= 0.049); /* and runs again while it stands still */
    assert_true(mw_stall_idle(&st, 3) < 0.2);    /* any change is progress (a sum of counts) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_table),
        cmocka_unit_test(first_error_wins),
        cmocka_unit_test(rng_deterministic),
        cmocka_unit_test(rng_ranges),
        cmocka_unit_test(shuffle_is_permutation),
        cmocka_unit_test(arena_layout),
        cmocka_unit_test(str_quote_escape),
        cmocka_unit_test(median_counts),
        cmocka_unit_test(stall_clock),
        cmocka_unit_test(err_controls_escaped),
        cmocka_unit_test(temp_registry),
        cmocka_unit_test(own_dir_removed),
    };
    return cmocka_run_group_tests_name("common", tests, NULL, NULL);
}

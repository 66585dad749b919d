/* The --timeline recorder (common/timeline.h) and the chief's straggler note (worker/chief.h):
 * the per-rank path rule, the errors (file, what), a trace that closes as valid JSON with
 * nested B/E events and non-decreasing timestamps (read back by python3's json in the mpi
 * test; here the text itself), the buffer written out when full, and the note's threshold,
 * rank and numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/timeline.h"
#include "tests/util.h"
#include "worker/chief.h"

static void test_path(void **state)
{
    (void)state;
    char p[64];
    assert_int_equal(mw_timeline_path(p, sizeof p, "t-%r.json", 3, 4), MW_OK);
    assert_string_equal(p, "t-3.json");
    assert_int_equal(mw_timeline_path(p, sizeof p, "dir.d/trace.json", 1, 2), MW_OK);
    assert_string_equal(p, "dir.d/trace.rank1.json");
    assert_int_equal(mw_timeline_path(p, sizeof p, "dir.d/trace", 0, 2), MW_OK);
    assert_string_equal(p, "dir.d/trace.rank0");
    assert_int_equal(mw_timeline_path(p, sizeof p, ".hidden", 5, 8), MW_OK);
    assert_string_equal(p, ".hidden.rank5");
    assert_int_equal(mw_timeline_path(p, sizeof p, "one.json", 0, 1), MW_OK);
    assert_string_equal(p, "one.json");
    mw_err_clear();
    assert_int_equal(mw_timeline_path(p, 8, "long-name.json", 0, 1), MW_EINVAL);
    assert_string_equal(mw_err_msg(), "--timeline 'long-name.json': the path is too long");
    mw_err_clear();
}

static void test_open_errors(void **state)
{
    (void)state;
    mw_err_clear();
    assert_int_equal(mw_timeline_open("/nonexistent-dir/t.json", 0, "r"), MW_EIO);
    assert_string_equal(mw_err_msg(), "--timeline /nonexistent-dir/t.json: cannot create the "
                                      "file: No such file or directory");
    assert_int_equal(mw_timeline_on, 0);
    mw_err_clear();
    assert_int_equal(mw_timeline_close(), MW_OK); /* none open: a no-op */
    /* a rank's file that is a device: refused, never written; (a FIFO without a reader fails
     * the non-blocking open at once: common/fs.h's test) */
    assert_int_equal(mw_timeline_open("/dev/full", 0, "r"), MW_EIO);
    assert_string_equal(mw_err_msg(),
                        "--timeline /dev/full: is a character device, not a regular file: not "
                        "written");
    assert_int_equal(mw_timeline_on, 0);
    mw_err_clear();
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    return b;
}

/* More events than the buffer holds, a name with JSON's special characters, steps: the file
 * holds them all in order, each "ts" no smaller than the one before. */
static void test_trace(void **state)
{
    (void)state;
    char path[] = "/tmp/mw_test_timeline_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(mw_timeline_open(path, 7, "rank 7 \"x\\y\""), MW_OK);
    assert_int_equal(mw_timeline_open(path, 7, "again"), MW_EINTERNAL);
    mw_err_clear();
    const int steps = MW_TIMELINE_EVENTS; /* 4 events a step: written out 3 times on the way */
    for (int k = 0; k < steps; k++) {
        mw_timeline_step(k);
        MW_TL_BEGIN("step", "step");
        MW_TL_BEGIN("forward/backward", "compute");
        MW_TL_END("forward/backward", "compute");
        MW_TL_END("step", "step");
    }
    mw_timeline_step(-1);
    double since = mw_timeline_now();
    mw_timeline_span("wait: a \"quoted\" op", "wait", since);
    assert_int_equal(mw_timeline_close(), MW_OK);
    assert_int_equal(mw_timeline_on, 0);
    char *b = slurp(path);
    remove(path);
    expect_contains(b, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    expect_contains(b, "\"args\": {\"name\": \"rank 7 \\\"x\\\\y\\\"\"}");
    expect_contains(b, "\"name\": \"wait: a \\\"quoted\\\" op\", \"cat\": \"wait\", "
                       "\"ph\": \"B\"");
    expect_contains(b, "\"args\": {\"step\": 8191}}");
    const size_t len = strlen(b);
    assert_string_equal(b + len - 4, "\n]}\n");
    /* One event a line: each line is searched on its own (a strstr over the whole file per
     * event is quadratic under ASan, whose interceptor measures the haystack every call). */
    int begins = 0, ends = 0;
    double last = 0;
    for (char *line = b, *end; *line; line = end) {
        for (end = line; *end && *end != '\n';)
            end++;
        if (*end)
            *end++ = '\0';
        const char *ts = strstr(line, "\"ts\": "), *ph = strstr(line, "\"ph\": \"");
        if (ts) {
            assert_true(strtod(ts + 6, NULL) >= last);
            last = strtod(ts + 6, NULL);
        }
        if (ph)
            begins += ph[7] == 'B', ends += ph[7] == 'E';
    }
    assert_int_equal(begins, 2 * steps + 1);
    assert_int_equal(ends, 2 * steps + 1);
    free(b);
}

static void test_straggler(void **state)
{
    (void)state;
    char note[200];
    const double even[4] = {0.010, 0.011, 0.0105, 0.0119};
    mw_chief_straggler_note(note, sizeof note, even, 4);
    assert_string_equal(note, ""); /* 0.0119 / 0.01075 = 1.107 */
    const double slow[4] = {0.010, 0.011, 0.020, 0.012};
    mw_chief_straggler_note(note, sizeof note, slow, 4);
    assert_string_equal(note, ", straggler: rank 2's median step (without the all-reduce) "
                              "20.0 ms, 74% slower than the median rank's 11.5 ms");
    const double two[2] = {0.030, 0.010}; /* the median of two is their mean, 20 ms */
    mw_chief_straggler_note(note, sizeof note, two, 2);
    assert_string_equal(note, ", straggler: rank 0's median step (without the all-reduce) "
                              "30.0 ms, 50% slower than the median rank's 20.0 ms");
    const double edge[3] = {0.010, 0.0119, 0.010}; /* 19 % slower: no note */
    mw_chief_straggler_note(note, sizeof note, edge, 3);
    assert_string_equal(note, "");
    const double one[1] = {0.5}, none[3] = {0, 0, 0};
    mw_chief_straggler_note(note, sizeof note, one, 1);
    assert_string_equal(note, "");
    mw_chief_straggler_note(note, sizeof note, none, 3);
    assert_string_equal(note, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_straggler),
    };
    return cmocka_run_group_tests_name("timeline", tests, NULL, NULL);
}

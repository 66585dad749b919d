/* Helpers shared by the cmocka tests: float comparisons that print the first
 * bad index, both values and the max error; status and message checks that print
 * what was got; tables of cases kept in directories; temp directories (and a
 * fixture pair for them); small files. */
#ifndef MW_TESTS_UTIL_H
#define MW_TESTS_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/status.h"

/* Fail unless |got[i]-ref[i]| <= atol + rtol*|ref[i]| for all i < count. */
#define expect_close(got, ref, count, atol, rtol)                                                  \
    assert_true(mw_test_close_(got, ref, count, atol, rtol, #got, __FILE__, __LINE__))
int mw_test_close_(const float *got, const float *ref, size_t count, float atol, float rtol,
                   const char *what, const char *file, int line);

/* Fail unless the string hay contains needle; on failure print the place, both strings. */
#define expect_contains(hay, needle)                                                               \
    assert_true(mw_test_contains_((hay), (needle), #hay, __FILE__, __LINE__))
int mw_test_contains_(const char *hay, const char *needle, const char *what, const char *file,
                      int line);

/* Fail unless rc == want and the recorded first-error message (mw_err_msg) contains every
 * given string (at least one; "" for none in particular). On failure print the place, the
 * status got and wanted by name, the message and each string it lacks. The message is left
 * recorded (call mw_err_clear for the next check).
 *     expect_err(mw_dataset_load(&d, img, lbl, 3), MW_EDATA, img, "truncated header"); */
#define expect_err(rc, want, ...)                                                                  \
    mw_test_expect_err_((rc), (want), (const char *const[]){__VA_ARGS__, NULL}, __FILE__, __LINE__)
void mw_test_expect_err_(mw_status rc, mw_status want, const char *const *subs, const char *file,
                         int line);
/* The check of expect_err without failing the test, for loops over cases: 1 when it holds;
 * otherwise print what differs on stderr, starting "who: ", and return 0. subs is
 * NULL-terminated. */
int mw_test_err_matches(const char *who, mw_status rc, mw_status want, const char *const *subs);

/* Tables of cases in directories: <table>/<case>/input.json and <table>/<case>/expected,
 * the message (or a part of it) the input must produce, on one line.
 *
 * A case function runs the code under test on input (nbytes, NUL-terminated) and checks
 * what the table cannot say (the status, what the call left behind); it returns 1 when those
 * hold, else 0 after printing why (starting "case <name>: "). It leaves the first-error
 * message recorded. */
typedef int (*mw_test_case_fn)(void *ctx, const char *name, const char *input, size_t nbytes);
/* One case: clear the message, run fn, require the message to contain `expected`; on failure
 * print the case name, the expected text and the status and message got. Returns 1 when the
 * case passes, else 0; clears the message either way. */
int mw_test_case_check(const char *name, mw_test_case_fn fn, void *ctx, const char *input,
                       size_t nbytes, const char *expected);
/* Every case of the table $MW_SRCDIR/<rel>, in name order (subdirectories only), through
 * mw_test_case_check; `expected` loses its trailing line breaks. Runs them all, prints the
 * count, then fails the test if any case failed, lacks a file or has an empty `expected`, or
 * if the table is missing or has no case. Returns the number of cases. */
int mw_test_cases(const char *rel, mw_test_case_fn fn, void *ctx);

/* Make a fresh directory under $TMPDIR (or /tmp); returns a static path. The directory and
 * what is under it are removed when the test program exits. */
const char *mw_test_tmpdir(const char *tag);
/* cmocka fixture pair: setup makes a fresh directory and sets *state to its path (malloc'ed);
 * teardown removes the tree under it, frees the path and fails when something could not be
 * removed. Both clear the recorded error message. */
int mw_test_tmpdir_setup(void **state);
int mw_test_tmpdir_teardown(void **state);
/* A cmocka test run in a fresh directory (*state), removed after it. */
#define mw_test_in_tmpdir(f)                                                                       \
    cmocka_unit_test_setup_teardown(f, mw_test_tmpdir_setup, mw_test_tmpdir_teardown)
/* Write nbytes to dir/name; returns the malloc'ed full path. */
char *mw_test_write_file(const char *dir, const char *name, const void *data, size_t nbytes);
/* gzip-compress data into dir/name; returns the malloc'ed full path. */
char *mw_test_write_gz(const char *dir, const char *name, const void *data, size_t nbytes);
/* Fill with uniform values in [lo, hi) from a seeded generator. */
void mw_test_fill_uniform(float *x, size_t count, uint64_t seed, float lo, float hi);
/* The whole file, NUL-terminated (malloc'ed); *nbytes its size; NULL when it
 * cannot be read. */
char *mw_test_read_file(const char *path, size_t *nbytes);
/* Path of a source-tree file: $MW_SRCDIR/rel (malloc'ed). */
char *mw_test_srcpath(const char *rel);

/* "Nothing outside the target was touched": an inotify watch on path (a file, FIFO or device
 * node) for any open, read, write or attribute change by anyone. mw_test_watch returns the
 * watch's descriptor (fails the test when it cannot be made); mw_test_watch_events returns the
 * events seen since, as IN_* bits (0: untouched), and closes it. */
int mw_test_watch(const char *path);
unsigned mw_test_watch_events(int fd);

/* Run group name's count tests, or one shard of them: with "K/N" as argv[1] (1 <= K <= N), the
 * tests whose index is K - 1 modulo N, so that meson can run a long group as N tests side by
 * side. cmocka's exit status; 2 and a message for a malformed shard. */
int mw_test_run_shard(const char *name, const struct CMUnitTest *tests, size_t count, int argc,
                      char **argv);

#endif

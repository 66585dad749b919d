/* Helpers shared by the cmocka tests: float comparisons that print the first
 * bad index, both values and the max error; temp directories; small files. */
#ifndef MW_TESTS_UTIL_H
#define MW_TESTS_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* Fail unless |got[i]-ref[i]| <= atol + rtol*|ref[i]| for all i < count. */
#define expect_close(got, ref, count, atol, rtol)                                            \
    assert_true(mw_test_close_(got, ref, count, atol, rtol, #got, __FILE__, __LINE__))
int mw_test_close_(const float *got, const float *ref, size_t count, float atol, float rtol,
                   const char *what, const char *file, int line);

/* Make a fresh directory under $TMPDIR (or /tmp); returns a static path. */
const char *mw_test_tmpdir(const char *tag);
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

#endif

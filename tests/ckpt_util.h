/* Helpers of the checkpoint tests: tests/ckpt_util.c. */
#ifndef MW_TESTS_CKPT_UTIL_H
#define MW_TESTS_CKPT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "worker/checkpoint.h"

/* "DIR/NAME", malloc'ed. */
char *mw_test_ckpt_join(const char *dir, const char *name);
/* The whole file, malloc'ed; its size into *nbytes. */
void *mw_test_ckpt_read_all(const char *path, size_t *nbytes);
/* Whether dir/name exists. */
int mw_test_ckpt_exists(const char *dir, const char *name);
/* The file names in dir, sorted, joined by spaces (static buffer). */
const char *mw_test_ckpt_listing(const char *dir);
/* A filled state: nparams values with special bit patterns among them, and its slots. */
void mw_test_ckpt_make_state(mw_ckpt *c, size_t nparams, const char *opt, int nslot_arrays,
                             uint64_t seed);
/* a and b hold the same state, bit for bit. */
void mw_test_ckpt_assert_same(const mw_ckpt *a, const mw_ckpt *b);
/* Little-endian fields at p. */
void mw_test_ckpt_le32(uint8_t *p, uint32_t v);
void mw_test_ckpt_le64(uint8_t *p, uint64_t v);

#endif

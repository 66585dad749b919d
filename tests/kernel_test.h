/* The helpers of the kernel unit tests (tests/test_kernels.c, tests/test_attention.c):
 * buffers freed together, the two kernel tables, a kernel context whose scratch has a guard
 * band, a check that prints both values, and central differences in double precision. */
#ifndef MW_TESTS_KERNEL_TEST_H
#define MW_TESTS_KERNEL_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "tests/util.h"

/* The value of unwritten floats: the scratch's guard band, outputs a kernel must not touch. */
#define SENTINEL 12345.0f

/* Buffers of one test, freed together (a failed assert leaks them; fine in a test). */
typedef struct {
    void *p[64];
    int n;
} pool;

void *keep(pool *P, void *p);
void pool_free(pool *P);
/* Exactly count floats (malloc'ed, not rounded up, so ASan sees overruns), zeroed. */
float *fzero(pool *P, size_t count);
/* count floats uniform in [lo, hi) from seed. */
float *frand(pool *P, size_t count, uint64_t seed, float lo, float hi);
float *fcopy(pool *P, const float *src, size_t count);
void fill_const(float *x, size_t count, float v);
/* A shuffled arithmetic sequence: all values distinct, spaced by `step`, centered on 0. */
float *fdistinct(pool *P, size_t count, uint64_t seed, float step);
/* The fast CPU table (cpu 1) or the reference (0). */
void table(mw_kernels *t, int cpu);

/* A kernel context with ws_count floats of 64-byte-aligned scratch, then a guard band as long
 * again (so a chunk one image too large lands in it rather than in the heap) that no kernel
 * may write. */
typedef struct {
    mw_kctx k;
    float *mem;
    size_t guard;
} ctx;

void ctx_open(ctx *c, size_t ws_count, int nthreads);
/* Fail if a kernel wrote past k->ws_count. */
void ctx_check(const ctx *c, const char *what);
void ctx_close(ctx *c);
/* sum of r_i y_i in double. */
double dot_r(const float *r, const float *y, size_t count);

/* Fail unless |got - want| <= tol, printing both. */
#define expect_near(got, want, tol) expect_near_(got, want, tol, #got, __LINE__)
void expect_near_(double got, double want, double tol, const char *what, int line);

/* Recompute the forward from the current inputs; return L in double. */
typedef double (*loss_fn)(void *env);

/* Compare ana[i] with (L(v+h) - L(v-h)) / (2h) for the elements of v (all of them up to 256,
 * else 64 distinct ones drawn from seed); kernel_test.c argues the tolerance. */
void grad_check(loss_fn f, void *env, float *v, size_t count, const float *ana, float h,
                uint64_t seed, const char *what);

#endif

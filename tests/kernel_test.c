/* The helpers of the kernel unit tests (tests/kernel_test.h). */
#include "tests/kernel_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/rng.h"
#include "kernels/cpu/table.h"
#include "kernels/ref/table.h"

void *keep(pool *P, void *p)
{
    assert_non_null(p);
    assert_true(P->n < 64);
    return P->p[P->n++] = p;
}

void pool_free(pool *P)
{
    while (P->n > 0)
        free(P->p[--P->n]);
}

/* Exactly count floats (malloc'ed, not rounded up, so ASan sees overruns), zeroed. */
float *fzero(pool *P, size_t count)
{
    return keep(P, calloc(count ? count : 1, sizeof(float)));
}

float *frand(pool *P, size_t count, uint64_t seed, float lo, float hi)
{
    float *p = fzero(P, count);
    mw_test_fill_uniform(p, count, seed, lo, hi);
    return p;
}

float *fcopy(pool *P, const float *src, size_t count)
{
    float *p = fzero(P, count);
    memcpy(p, src, count * sizeof(float));
    return p;
}

void fill_const(float *x, size_t count, float v)
{
    for (size_t i = 0; i < count; i++)
        x[i] = v;
}

/* A shuffled arithmetic sequence: all values distinct, spaced by `step`, centered on 0. */
float *fdistinct(pool *P, size_t count, uint64_t seed, float step)
{
    uint32_t *ids = keep(P, malloc((count ? count : 1) * sizeof(uint32_t)));
    for (size_t i = 0; i < count; i++)
        ids[i] = (uint32_t)i;
    mw_rng r;
    mw_rng_seed(&r, seed, 3);
    mw_rng_shuffle(&r, ids, (uint32_t)count);
    float *x = fzero(P, count);
    for (size_t i = 0; i < count; i++)
        x[i] = ((float)ids[i] - (float)count / 2) * step;
    return x;
}

void table(mw_kernels *t, int cpu)
{
    (cpu ? mw_kernels_init_cpu : mw_kernels_init_ref)(t);
}

void ctx_open(ctx *c, size_t ws_count, int nthreads)
{
    c->guard = ws_count + 16;
    c->mem = mw_alloc_aligned((ws_count + c->guard) * sizeof(float));
    assert_non_null(c->mem);
    fill_const(c->mem + ws_count, c->guard, SENTINEL);
    c->k = (mw_kctx){.nthreads = nthreads, .ws = c->mem, .ws_count = ws_count, .dev = NULL};
}

/* Fail if a kernel wrote past k->ws_count. */
void ctx_check(const ctx *c, const char *what)
{
    for (size_t i = 0; i < c->guard; i++)
        if (c->mem[c->k.ws_count + i] != SENTINEL)
            fail_msg("%s: scratch written past ws_count %zu (guard float %zu)", what, c->k.ws_count,
                     i);
}

void ctx_close(ctx *c)
{
    free(c->mem);
    c->mem = NULL;
}

double dot_r(const float *r, const float *y, size_t count)
{
    double s = 0.0;
    for (size_t i = 0; i < count; i++)
        s += (double)r[i] * (double)y[i];
    return s;
}

/* Fail unless |got - want| <= tol, printing both. */
void expect_near_(double got, double want, double tol, const char *what, int line)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("line %d: %s: got %.9g, want %.9g (|err| %.3g > %.3g)", line, what, got, want,
                 fabs(got - want), tol);
}

/* ---- central differences ---- */

#define GC_ALL 256   /* tensors up to this size: perturb every element */
#define GC_SAMPLE 64 /* larger ones: this many distinct random elements */

/* Compare ana[i] with (L(v+h) - L(v-h)) / (2h) for the elements of v.
 *
 * Tolerance |num - ana| <= 1e-3 + 1e-2 |ana|. The forward runs in float, so L
 * carries rounding of about 6e-8 |y| for each output the element feeds (the
 * others cancel exactly between L+ and L-); with a few dozen outputs of size
 * ~1 and 2h = 2e-2 (conv, dense) that is below ~2e-4 in the quotient. ReLU and
 * maxpool select floats exactly, so their L differences are exact; for
 * cross-entropy only the perturbed example's float loss changes (~2e-7 / 2e-3
 * = 1e-4). The 1e-2 relative part covers float accumulation in the analytic
 * sums and the O(h^2) curvature of softmax. The step is the float-rounded one,
 * (v+h) - (v-h) as stored, not 2h. */
void grad_check(loss_fn f, void *env, float *v, size_t count, const float *ana, float h,
                uint64_t seed, const char *what)
{
    uint32_t *ids = malloc((count ? count : 1) * sizeof(uint32_t));
    assert_non_null(ids);
    for (size_t i = 0; i < count; i++)
        ids[i] = (uint32_t)i;
    size_t m = count;
    if (count > GC_ALL) {
        mw_rng r;
        mw_rng_seed(&r, seed, 11);
        mw_rng_shuffle(&r, ids, (uint32_t)count);
        m = GC_SAMPLE;
    }
    size_t bad = 0, first = 0;
    double first_num = 0.0, maxerr = 0.0;
    for (size_t j = 0; j < m; j++) {
        size_t i = ids[j];
        float save = v[i], hi = save + h, lo = save - h;
        v[i] = hi;
        double lp = f(env);
        v[i] = lo;
        double lm = f(env);
        v[i] = save;
        double num = (lp - lm) / ((double)hi - (double)lo);
        double err = fabs(num - (double)ana[i]);
        if (!(err <= 1e-3 + 1e-2 * fabs((double)ana[i]))) {
            if (!bad)
                first = i, first_num = num;
            bad++;
        }
        if (err > maxerr || isnan(err))
            maxerr = err;
    }
    free(ids);
    if (bad)
        fail_msg("%s: %zu of %zu gradients off; first at [%zu]: numeric %.9g, analytic %.9g; "
                 "max |err| %.3g",
                 what, bad, m, first, first_num, (double)ana[first], maxerr);
}

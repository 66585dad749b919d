/* Suite 'unit': every kernel of the reference table (kernels/ref) and the fast
 * CPU table (kernels/cpu).
 *
 * - Every backward, in both tables, passes a central-difference check in double
 *   precision against L = sum_i r_i y_i with a fixed random projection r, so
 *   the analytic gradient is bwd(dy = r).
 * - Layer backward accumulates (a second call adds again, onto non-zero
 *   starting values); ReLU and cross-entropy backward work in place.
 * - cpu == ref on odd shapes, padding and strides, with conv scratch of exactly
 *   mw_conv2d_ws_min (one image per chunk), an uneven chunking, and the full
 *   mw_conv2d_ws_count. Scratch has a guard band checked after every call.
 * - Adam and SGD against steps written out by hand.
 * - TF's padding arithmetic for conv and pool geometry.
 * - An empty batch (N = 0, count = 0) leaves every output untouched.
 * - The graph ops (BatchNormalization, average pooling, zero padding, Multiply,
 *   Concatenate, the activations, a softmax layer): values against formulas and every
 *   backward against central differences; BN's moving-statistics entries bitwise against
 *   their float expressions.
 * - The fast graph ops against the reference with 1 and 3 threads on odd shapes: bitwise
 *   (BatchNormalization: to rounding, and bitwise across thread counts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/rng.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cast.h"
#include "kernels/conv2d.h"
#include "kernels/cpu/cpu.h"
#include "kernels/dense.h"
#include "kernels/dropout.h"
#include "kernels/graphops.h"
#include "kernels/maxpool.h"
#include "kernels/optim.h"
#include "tests/util.h"

/* ---- helpers ---- */

#define SENTINEL 12345.0f

/* Buffers of one test, freed together (a failed assert leaks them; fine in a test). */
typedef struct {
    void *p[64];
    int n;
} pool;

static void *keep(pool *P, void *p)
{
    assert_non_null(p);
    assert_true(P->n < 64);
    return P->p[P->n++] = p;
}

static void pool_free(pool *P)
{
    while (P->n > 0)
        free(P->p[--P->n]);
}

/* Exactly count floats (malloc'ed, not rounded up, so ASan sees overruns), zeroed. */
static float *fzero(pool *P, size_t count)
{
    return keep(P, calloc(count ? count : 1, sizeof(float)));
}

static float *frand(pool *P, size_t count, uint64_t seed, float lo, float hi)
{
    float *p = fzero(P, count);
    mw_test_fill_uniform(p, count, seed, lo, hi);
    return p;
}

static float *fcopy(pool *P, const float *src, size_t count)
{
    float *p = fzero(P, count);
    memcpy(p, src, count * sizeof(float));
    return p;
}

static void fill_const(float *x, size_t count, float v)
{
    for (size_t i = 0; i < count; i++)
        x[i] = v;
}

/* A shuffled arithmetic sequence: all values distinct, spaced by `step`, centered on 0. */
static float *fdistinct(pool *P, size_t count, uint64_t seed, float step)
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

static void table(mw_kernels *t, int cpu)
{
    if (cpu)
        mw_kernels_init_cpu(t);
    else
        mw_kernels_init_ref(t);
}

/* A kernel context with ws_count floats of 64-byte-aligned scratch, then a
 * guard band as long again (so a chunk one image too large lands in it
 * rather than in the heap) that no kernel may write. */
typedef struct {
    mw_kctx k;
    float *mem;
    size_t guard;
} ctx;

static void ctx_open(ctx *c, size_t ws_count, int nthreads)
{
    c->guard = ws_count + 16;
    c->mem = mw_alloc_aligned((ws_count + c->guard) * sizeof(float));
    assert_non_null(c->mem);
    fill_const(c->mem + ws_count, c->guard, SENTINEL);
    c->k = (mw_kctx){.nthreads = nthreads, .ws = c->mem, .ws_count = ws_count, .dev = NULL};
}

/* Fail if a kernel wrote past k->ws_count. */
static void ctx_check(const ctx *c, const char *what)
{
    for (size_t i = 0; i < c->guard; i++)
        if (c->mem[c->k.ws_count + i] != SENTINEL)
            fail_msg("%s: scratch written past ws_count %zu (guard float %zu)", what, c->k.ws_count,
                     i);
}

static void ctx_close(ctx *c)
{
    free(c->mem);
    c->mem = NULL;
}

static double dot_r(const float *r, const float *y, size_t count)
{
    double s = 0.0;
    for (size_t i = 0; i < count; i++)
        s += (double)r[i] * (double)y[i];
    return s;
}

/* Fail unless |got - want| <= tol, printing both. */
#define expect_near(got, want, tol) expect_near_(got, want, tol, #got, __LINE__)
static void expect_near_(double got, double want, double tol, const char *what, int line)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("line %d: %s: got %.9g, want %.9g (|err| %.3g > %.3g)", line, what, got, want,
                 fabs(got - want), tol);
}

/* ---- central differences ---- */

/* Recompute the forward from the current inputs; return L in double. */
typedef double (*loss_fn)(void *env);

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
static void grad_check(loss_fn f, void *env, float *v, size_t count, const float *ana, float h,
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

/* ---- geometry ---- */

typedef struct {
    int in, k, s, same;
    int out, pad; /* out 0: the init must fail */
} dim_case;

/* TF: same -> out = ceil(in/s), total = max((out-1)s + k - in, 0), before = total/2;
 * valid -> out = floor((in-k)/s) + 1, empty when k > in. Worked by hand. */
static const dim_case dim_cases[] = {
    {6, 3, 1, 0, 4, 0}, {5, 3, 1, 0, 3, 0}, {9, 5, 2, 0, 3, 0}, {7, 5, 2, 0, 2, 0},
    {7, 2, 2, 0, 3, 0}, {8, 3, 3, 0, 2, 0}, {6, 2, 2, 0, 3, 0}, {5, 2, 2, 0, 2, 0},
    {3, 3, 1, 0, 1, 0}, {2, 3, 1, 0, 0, 0}, {1, 5, 2, 0, 0, 0}, {4, 1, 3, 0, 2, 0},
    {9, 5, 2, 1, 5, 2}, {7, 5, 2, 1, 4, 2}, {5, 3, 1, 1, 5, 1}, {8, 3, 2, 1, 4, 0},
    {6, 4, 1, 1, 6, 1}, {7, 3, 2, 1, 4, 1}, {5, 2, 2, 1, 3, 0}, {12, 1, 5, 1, 3, 0},
    {7, 1, 3, 1, 3, 0}, {2, 5, 1, 1, 2, 2}, {1, 3, 2, 1, 1, 1}, {28, 5, 1, 1, 28, 2},
};

static void test_conv_geom(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof dim_cases / sizeof dim_cases[0]; i++) {
        const dim_case *d = &dim_cases[i];
        mw_conv2d_geom g;
        /* The case on H with W fixed (10, k 1, s 1), then on W with H fixed. */
        int rc = mw_conv2d_geom_init(&g, d->in, 10, 3, 4, d->k, 1, d->s, 1, d->same);
        if (!d->out) {
            assert_int_equal(rc, -1);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(g.OH, d->out);
            assert_int_equal(g.PT, d->pad);
            assert_int_equal(g.OW, 10);
            assert_int_equal(g.PL, 0);
            assert_int_equal(g.C, 3);
            assert_int_equal(g.O, 4);
        }
        rc = mw_conv2d_geom_init(&g, 10, d->in, 2, 5, 1, d->k, 1, d->s, d->same);
        if (!d->out) {
            assert_int_equal(rc, -1);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(g.OW, d->out);
            assert_int_equal(g.PL, d->pad);
            assert_int_equal(g.OH, 10);
            assert_int_equal(g.PT, 0);
        }
    }
    /* Both dimensions at once (the 'same' 5x5/2 on 9x7 used below). */
    mw_conv2d_geom g;
    assert_int_equal(mw_conv2d_geom_init(&g, 9, 7, 2, 3, 5, 5, 2, 2, 1), 0);
    assert_int_equal(g.OH, 5);
    assert_int_equal(g.OW, 4);
    assert_int_equal(g.PT, 2);
    assert_int_equal(g.PL, 2);
    assert_int_equal(mw_conv2d_geom_init(&g, 7, 6, 2, 3, 2, 3, 2, 1, 0), 0);
    assert_int_equal(g.OH, 3);
    assert_int_equal(g.OW, 4);
    /* A kernel larger than a 'valid' input, and non-positive sizes. */
    assert_int_equal(mw_conv2d_geom_init(&g, 2, 7, 1, 1, 3, 3, 1, 1, 0), -1);
    assert_int_equal(mw_conv2d_geom_init(&g, 7, 2, 1, 1, 3, 3, 1, 1, 0), -1);
    assert_int_equal(mw_conv2d_geom_init(&g, 0, 7, 1, 1, 3, 3, 1, 1, 1), -1);
    assert_int_equal(mw_conv2d_geom_init(&g, 7, 7, 0, 1, 3, 3, 1, 1, 1), -1);
    assert_int_equal(mw_conv2d_geom_init(&g, 7, 7, 1, 0, 3, 3, 1, 1, 1), -1);
    assert_int_equal(mw_conv2d_geom_init(&g, 7, 7, 1, 1, 3, 3, 0, 1, 1), -1);
    /* Scratch sizes: one image's im2col matrix, times N. */
    assert_int_equal(mw_conv2d_geom_init(&g, 9, 7, 2, 3, 5, 5, 2, 2, 1), 0);
    assert_int_equal(mw_conv2d_ws_min(&g), (size_t)5 * 4 * 5 * 5 * 2);
    assert_int_equal(mw_conv2d_ws_count(&g, 3), (size_t)3 * 5 * 4 * 5 * 5 * 2);
}

static void test_pool_geom(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof dim_cases / sizeof dim_cases[0]; i++) {
        const dim_case *d = &dim_cases[i];
        mw_pool_geom g;
        int rc = mw_pool_geom_init(&g, d->in, 6, 2, d->k, 2, d->s, 2, d->same);
        if (!d->out) {
            assert_int_equal(rc, -1);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(g.OH, d->out);
            assert_int_equal(g.PT, d->pad);
            assert_int_equal(g.OW, 3);
            assert_int_equal(g.PL, 0);
        }
        rc = mw_pool_geom_init(&g, 6, d->in, 2, 2, d->k, 2, d->s, d->same);
        if (!d->out) {
            assert_int_equal(rc, -1);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(g.OW, d->out);
            assert_int_equal(g.PL, d->pad);
            assert_int_equal(g.OH, 3);
            assert_int_equal(g.PT, 0);
        }
    }
    mw_pool_geom g;
    assert_int_equal(mw_pool_geom_init(&g, 28, 28, 32, 2, 2, 2, 2, 0), 0); /* MNIST-sized */
    assert_int_equal(g.OH, 14);
    assert_int_equal(g.OW, 14);
    assert_int_equal(mw_pool_geom_init(&g, 7, 5, 2, 3, 3, 2, 2, 1), 0);
    assert_int_equal(g.OH, 4);
    assert_int_equal(g.OW, 3);
    assert_int_equal(g.PT, 1);
    assert_int_equal(g.PL, 1);
    assert_int_equal(mw_pool_geom_init(&g, 1, 5, 2, 2, 2, 2, 2, 0), -1);
    assert_int_equal(mw_pool_geom_init(&g, 5, 5, 2, 0, 2, 2, 2, 0), -1);
}

/* ---- conv2d ---- */

typedef struct {
    const char *name;
    int H, W, C, O, KH, KW, SH, SW, same, N;
} conv_case;

static const conv_case conv_cases[] = {
    {"valid 3x3/1 C=1", 6, 5, 1, 4, 3, 3, 1, 1, 0, 2},
    {"valid 3x3/1 C=3", 5, 6, 3, 4, 3, 3, 1, 1, 0, 2},
    {"same 3x3/1", 5, 4, 2, 3, 3, 3, 1, 1, 1, 2},
    {"same 5x5/2 on 9x7", 9, 7, 2, 3, 5, 5, 2, 2, 1, 3},
    {"same 3x3/2 on 8x6", 8, 6, 2, 3, 3, 3, 2, 2, 1, 2},
    {"same 4x4/1 (pad 1 before, 2 after)", 5, 6, 2, 2, 4, 4, 1, 1, 1, 2},
    {"valid 2x3/(2,1)", 7, 6, 2, 3, 2, 3, 2, 1, 0, 2},
    {"pointwise 1x1", 4, 5, 3, 4, 1, 1, 1, 1, 0, 3},
    {"1x1/2 (strided, im2col)", 5, 5, 3, 2, 1, 1, 2, 2, 0, 2},
    {"same 5x5/1 C=4 (long rows)", 12, 10, 4, 6, 5, 5, 1, 1, 1, 2},
};
#define N_CONV (sizeof conv_cases / sizeof conv_cases[0])

static void conv_geom(mw_conv2d_geom *g, const conv_case *c)
{
    assert_int_equal(
        mw_conv2d_geom_init(g, c->H, c->W, c->C, c->O, c->KH, c->KW, c->SH, c->SW, c->same), 0);
}

typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    const mw_conv2d_geom *g;
    int N;
    float *y;
    const float *x, *w, *b, *r;
    size_t ny;
} conv_env;

static double conv_loss(void *env)
{
    conv_env *e = env;
    e->t->conv2d_fwd(e->k, e->y, e->x, e->w, e->b, e->g, e->N);
    return dot_r(e->r, e->y, e->ny);
}

static void conv_grad(int cpu)
{
    mw_kernels t;
    table(&t, cpu);
    for (size_t ci = 0; ci < N_CONV; ci++) {
        const conv_case *c = &conv_cases[ci];
        mw_conv2d_geom g;
        conv_geom(&g, c);
        const int N = c->N;
        size_t nx = (size_t)N * g.H * g.W * g.C, nw = (size_t)g.KH * g.KW * g.C * g.O;
        size_t ny = (size_t)N * g.OH * g.OW * g.O;
        pool P = {0};
        float *x = frand(&P, nx, 100 + ci, -1.0f, 1.0f);
        float *w = frand(&P, nw, 200 + ci, -0.5f, 0.5f);
        float *b = frand(&P, g.O, 300 + ci, -0.5f, 0.5f);
        float *r = frand(&P, ny, 400 + ci, -1.0f, 1.0f);
        float *y = fzero(&P, ny), *dx = fzero(&P, nx), *dw = fzero(&P, nw);
        float *db = fzero(&P, g.O), *dw2 = fzero(&P, nw), *db2 = fzero(&P, g.O);
        ctx C;
        ctx_open(&C, mw_conv2d_ws_count(&g, N), 1 + (int)(ci % 2));
        t.conv2d_bwd(&C.k, dx, dw, db, r, x, w, &g, N);
        conv_env e = {&t, &C.k, &g, N, y, x, w, b, r, ny};
        char what[160];
        snprintf(what, sizeof what, "%s conv %s dx", t.name, c->name);
        grad_check(conv_loss, &e, x, nx, dx, 1e-2f, 1, what);
        snprintf(what, sizeof what, "%s conv %s dw", t.name, c->name);
        grad_check(conv_loss, &e, w, nw, dw, 1e-2f, 2, what);
        snprintf(what, sizeof what, "%s conv %s db", t.name, c->name);
        grad_check(conv_loss, &e, b, g.O, db, 1e-2f, 3, what);
        /* dx = NULL (first layer): the same dw and db. */
        t.conv2d_bwd(&C.k, NULL, dw2, db2, r, x, w, &g, N);
        expect_close(dw2, dw, nw, 1e-5f, 1e-4f);
        expect_close(db2, db, g.O, 1e-5f, 1e-4f);
        ctx_check(&C, what);
        ctx_close(&C);
        pool_free(&P);
    }
}

static void test_conv_grad_ref(void **state)
{
    (void)state;
    conv_grad(0);
}

static void test_conv_grad_cpu(void **state)
{
    (void)state;
    conv_grad(1);
}

/* A second backward call adds again: start from random dx/dw/db = s, call twice,
 * expect s + 2 * (one call from zero). Run with chunked scratch on the cpu. */
static void test_conv_accumulate(void **state)
{
    (void)state;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        for (size_t ci = 0; ci < N_CONV; ci++) {
            const conv_case *c = &conv_cases[ci];
            mw_conv2d_geom g;
            conv_geom(&g, c);
            const int N = 3;
            size_t nx = (size_t)N * g.H * g.W * g.C, nw = (size_t)g.KH * g.KW * g.C * g.O;
            size_t ny = (size_t)N * g.OH * g.OW * g.O;
            pool P = {0};
            float *x = frand(&P, nx, 10 + ci, -1.0f, 1.0f);
            float *w = frand(&P, nw, 20 + ci, -0.5f, 0.5f);
            float *dy = frand(&P, ny, 30 + ci, -1.0f, 1.0f);
            float *dx1 = fzero(&P, nx), *dw1 = fzero(&P, nw), *db1 = fzero(&P, g.O);
            float *dx = frand(&P, nx, 40 + ci, -1.0f, 1.0f);
            float *dw = frand(&P, nw, 50 + ci, -1.0f, 1.0f);
            float *db = frand(&P, g.O, 60 + ci, -1.0f, 1.0f);
            float *ex = fcopy(&P, dx, nx), *ew = fcopy(&P, dw, nw), *eb = fcopy(&P, db, g.O);
            ctx C;
            ctx_open(&C, mw_conv2d_ws_min(&g), 2);
            t.conv2d_bwd(&C.k, dx1, dw1, db1, dy, x, w, &g, N);
            t.conv2d_bwd(&C.k, dx, dw, db, dy, x, w, &g, N);
            t.conv2d_bwd(&C.k, dx, dw, db, dy, x, w, &g, N);
            for (size_t i = 0; i < nx; i++)
                ex[i] += 2.0f * dx1[i];
            for (size_t i = 0; i < nw; i++)
                ew[i] += 2.0f * dw1[i];
            for (int i = 0; i < g.O; i++)
                eb[i] += 2.0f * db1[i];
            expect_close(dx, ex, nx, 1e-5f, 1e-4f);
            expect_close(dw, ew, nw, 1e-5f, 1e-4f);
            expect_close(db, eb, g.O, 1e-5f, 1e-4f);
            ctx_check(&C, c->name);
            ctx_close(&C);
            pool_free(&P);
        }
    }
}

/* cpu == ref for fwd and bwd (bwd from non-zero starting gradients), at batch
 * N with scratch ws. */
static void conv_compare(const conv_case *c, int N, size_t ws, int nt, uint64_t seed)
{
    mw_kernels ref, cpu;
    mw_kernels_init_ref(&ref);
    mw_kernels_init_cpu(&cpu);
    mw_conv2d_geom g;
    conv_geom(&g, c);
    size_t nx = (size_t)N * g.H * g.W * g.C, nw = (size_t)g.KH * g.KW * g.C * g.O;
    size_t ny = (size_t)N * g.OH * g.OW * g.O;
    pool P = {0};
    float *x = frand(&P, nx, seed, -1.0f, 1.0f);
    float *w = frand(&P, nw, seed + 1, -0.5f, 0.5f);
    float *b = frand(&P, g.O, seed + 2, -0.5f, 0.5f);
    /* dw and db sum over all N*OH*OW output pixels, which the two paths add in
     * different orders; scale dy like a mean loss would, so those sums stay
     * O(1) and the float rounding stays well inside the tolerance. */
    float dys = fminf(1.0f, 8.0f / sqrtf((float)N * g.OH * g.OW));
    float *dy = frand(&P, ny, seed + 3, -dys, dys);
    float *y_ref = fzero(&P, ny), *y_cpu = fzero(&P, ny);
    float *dx_ref = frand(&P, nx, seed + 4, -1.0f, 1.0f), *dx_cpu = fcopy(&P, dx_ref, nx);
    float *dw_ref = frand(&P, nw, seed + 5, -1.0f, 1.0f), *dw_cpu = fcopy(&P, dw_ref, nw);
    float *db_ref = frand(&P, g.O, seed + 6, -1.0f, 1.0f), *db_cpu = fcopy(&P, db_ref, g.O);
    ctx R, C;
    ctx_open(&R, 0, 1);
    ctx_open(&C, ws, nt);
    char what[160];
    snprintf(what, sizeof what, "conv %s N=%d ws=%zu", c->name, N, ws);

    ref.conv2d_fwd(&R.k, y_ref, x, w, b, &g, N);
    fill_const(y_cpu, ny, SENTINEL); /* fwd overwrites every output */
    cpu.conv2d_fwd(&C.k, y_cpu, x, w, b, &g, N);
    expect_close(y_cpu, y_ref, ny, 1e-5f, 1e-4f);
    /* Without a bias. */
    ref.conv2d_fwd(&R.k, y_ref, x, w, NULL, &g, N);
    cpu.conv2d_fwd(&C.k, y_cpu, x, w, NULL, &g, N);
    expect_close(y_cpu, y_ref, ny, 1e-5f, 1e-4f);

    ref.conv2d_bwd(&R.k, dx_ref, dw_ref, db_ref, dy, x, w, &g, N);
    cpu.conv2d_bwd(&C.k, dx_cpu, dw_cpu, db_cpu, dy, x, w, &g, N);
    expect_close(dx_cpu, dx_ref, nx, 1e-5f, 1e-4f);
    expect_close(dw_cpu, dw_ref, nw, 1e-5f, 1e-4f);
    expect_close(db_cpu, db_ref, g.O, 1e-5f, 1e-4f);
    /* dx = NULL: the same dw, db again. */
    ref.conv2d_bwd(&R.k, NULL, dw_ref, db_ref, dy, x, w, &g, N);
    cpu.conv2d_bwd(&C.k, NULL, dw_cpu, db_cpu, dy, x, w, &g, N);
    expect_close(dw_cpu, dw_ref, nw, 1e-5f, 1e-4f);
    expect_close(db_cpu, db_ref, g.O, 1e-5f, 1e-4f);
    ctx_check(&C, what);
    ctx_close(&R);
    ctx_close(&C);
    pool_free(&P);
}

static void test_conv_cpu_vs_ref(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < N_CONV; ci++) {
        const conv_case *c = &conv_cases[ci];
        mw_conv2d_geom g;
        conv_geom(&g, c);
        conv_compare(c, c->N, mw_conv2d_ws_count(&g, c->N), 1 + (int)(ci % 2), 1000 + 10 * ci);
    }
}

/* N = 5 with scratch for exactly one image (five chunks), for two images and a
 * bit (chunks 2, 2, 1), and for all five. */
static void test_conv_chunking(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < N_CONV; ci++) {
        const conv_case *c = &conv_cases[ci];
        mw_conv2d_geom g;
        conv_geom(&g, c);
        size_t min = mw_conv2d_ws_min(&g);
        conv_compare(c, 5, min, 2, 2000 + 10 * ci);
        conv_compare(c, 5, 2 * min + 1, 1, 3000 + 10 * ci);
        conv_compare(c, 5, mw_conv2d_ws_count(&g, 5), 2, 4000 + 10 * ci);
    }
}

/* The GPU backend's scratch reservation (mw_conv2d_ws_capped): an ImageNet-sized 224x224x64 3x3
 * 'same' layer at 1024 images wants ~59 GB un-chunked; capped, it is whole images that fit the
 * cap (at least one, at most the batch), and the kernels compute the same with it. */
static void test_conv_ws_capped(void **state)
{
    (void)state;
    mw_conv2d_geom big;
    assert_int_equal(mw_conv2d_geom_init(&big, 224, 224, 64, 64, 3, 3, 1, 1, 1), 0);
    const size_t per = mw_conv2d_ws_min(&big), cap = (size_t)1 << 26;
    assert_true(mw_conv2d_ws_count(&big, 1024) > (size_t)14 << 30); /* floats: > 56 GiB */
    size_t got = mw_conv2d_ws_capped(&big, 1024, cap);
    assert_int_equal(got, cap / per * per);
    assert_true(got <= cap && got >= per);
    /* a cap below one image: one image; a cap above the batch: the batch */
    assert_int_equal(mw_conv2d_ws_capped(&big, 1024, per - 1), per);
    assert_int_equal(mw_conv2d_ws_capped(&big, 3, 10 * per), 3 * per);
    assert_int_equal(mw_conv2d_ws_capped(&big, 0, cap), per);
    for (size_t ci = 0; ci < N_CONV; ci++) {
        const conv_case *c = &conv_cases[ci];
        mw_conv2d_geom g;
        conv_geom(&g, c);
        size_t min = mw_conv2d_ws_min(&g), two = mw_conv2d_ws_capped(&g, 5, 2 * min + min / 2);
        assert_int_equal(two, 2 * min);
        conv_compare(c, 5, two, 1, 5000 + 10 * ci); /* chunks of 2, 2, 1 */
    }
}

/* ---- maxpool ---- */

typedef struct {
    const char *name;
    int H, W, C, PH, PW, SH, SW, same, N;
} pool_case;

static const pool_case pool_cases[] = {
    {"valid 2x2/2 on 6x6", 6, 6, 3, 2, 2, 2, 2, 0, 2},
    {"valid 2x2/2 on 7x5 (floor)", 7, 5, 2, 2, 2, 2, 2, 0, 2},
    {"same 3x3/2 on 7x5", 7, 5, 2, 3, 3, 2, 2, 1, 2},
    {"valid 3x3/1 (overlapping)", 6, 5, 2, 3, 3, 1, 1, 0, 2},
    {"same 2x2/2 on 5x7", 5, 7, 3, 2, 2, 2, 2, 1, 2},
    {"same 3x3/1 (overlapping, padded)", 5, 4, 2, 3, 3, 1, 1, 1, 3},
    {"valid 2x3/(1,2)", 5, 8, 1, 2, 3, 1, 2, 0, 2},
};
#define N_POOL (sizeof pool_cases / sizeof pool_cases[0])

static void pool_geom(mw_pool_geom *g, const pool_case *c)
{
    assert_int_equal(mw_pool_geom_init(g, c->H, c->W, c->C, c->PH, c->PW, c->SH, c->SW, c->same),
                     0);
}

typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    const mw_pool_geom *g;
    int N;
    float *y;
    int32_t *arg;
    const float *x, *r;
    size_t ny;
} pool_env;

static double pool_loss(void *env)
{
    pool_env *e = env;
    e->t->maxpool_fwd(e->k, e->y, e->arg, e->x, e->g, e->N);
    return dot_r(e->r, e->y, e->ny);
}

/* Inputs are a shuffled sequence spaced 1e-2 > 4h, so no window's winner
 * changes under the +-h perturbation. With stride < window a value can win
 * several windows, and its gradient is the sum. */
static void pool_grad(int cpu)
{
    mw_kernels t;
    table(&t, cpu);
    for (size_t pi = 0; pi < N_POOL; pi++) {
        const pool_case *c = &pool_cases[pi];
        mw_pool_geom g;
        pool_geom(&g, c);
        const int N = c->N;
        size_t nx = (size_t)N * g.H * g.W * g.C, ny = (size_t)N * g.OH * g.OW * g.C;
        pool P = {0};
        float *x = fdistinct(&P, nx, 500 + pi, 1e-2f);
        float *r = frand(&P, ny, 600 + pi, -1.0f, 1.0f);
        float *y = fzero(&P, ny), *dx = fzero(&P, nx);
        int32_t *arg = keep(&P, calloc(ny, sizeof(int32_t)));
        ctx C;
        ctx_open(&C, 0, 1 + (int)(pi % 2));
        t.maxpool_fwd(&C.k, y, arg, x, &g, N);
        t.maxpool_bwd(&C.k, dx, r, arg, &g, N);
        pool_env e = {&t, &C.k, &g, N, y, arg, x, r, ny};
        char what[160];
        snprintf(what, sizeof what, "%s maxpool %s dx", t.name, c->name);
        grad_check(pool_loss, &e, x, nx, dx, 1e-3f, 4, what);
        ctx_close(&C);
        pool_free(&P);
    }
}

static void test_maxpool_grad_ref(void **state)
{
    (void)state;
    pool_grad(0);
}

static void test_maxpool_grad_cpu(void **state)
{
    (void)state;
    pool_grad(1);
}

/* Fail unless two maxpool outputs agree exactly, printing the first bad output. */
static void expect_same_pool(const float *y, const int32_t *arg, const float *y_ref,
                             const int32_t *arg_ref, size_t count, const char *what)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp(&y[i], &y_ref[i], sizeof(float)) || arg[i] != arg_ref[i])
            if (!bad++)
                first = i;
    if (bad)
        fail_msg("%s: %zu of %zu outputs differ; first at [%zu]: got %.9g at %d, want %.9g at %d",
                 what, bad, count, first, (double)y[first], (int)arg[first], (double)y_ref[first],
                 (int)arg_ref[first]);
}

/* Check a forward against the definition: each argmax is a cell of its own
 * window inside the image (padding never wins), same channel, y = x there,
 * and no cell of the window is larger. */
static void check_pool_def(const float *y, const int32_t *arg, const float *x,
                           const mw_pool_geom *g, int N, const char *what)
{
    const size_t img = (size_t)g->H * g->W * g->C;
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++)
                for (int c = 0; c < g->C; c++) {
                    size_t o = (((size_t)n * g->OH + oh) * g->OW + ow) * g->C + c;
                    const float *xi = x + (size_t)n * img;
                    int h0 = oh * g->SH - g->PT, w0 = ow * g->SW - g->PL;
                    int32_t a = arg[o];
                    int ah = a >= 0 ? a / g->C / g->W : -1, aw = a >= 0 ? a / g->C % g->W : -1;
                    if (a < 0 || (size_t)a >= img || a % g->C != c || ah < h0 || ah >= h0 + g->PH ||
                        aw < w0 || aw >= w0 + g->PW)
                        fail_msg("%s: out %zu (n %d, oh %d, ow %d, c %d): argmax %d (row %d, "
                                 "col %d) is outside the window rows [%d,%d) cols [%d,%d) or "
                                 "the image",
                                 what, o, n, oh, ow, c, (int)a, ah, aw, h0, h0 + g->PH, w0,
                                 w0 + g->PW);
                    if (y[o] != xi[a])
                        fail_msg("%s: out %zu: y %.9g but x[argmax %d] = %.9g", what, o,
                                 (double)y[o], (int)a, (double)xi[a]);
                    for (int ih = h0 < 0 ? 0 : h0; ih < h0 + g->PH && ih < g->H; ih++)
                        for (int iw = w0 < 0 ? 0 : w0; iw < w0 + g->PW && iw < g->W; iw++)
                            if (xi[((size_t)ih * g->W + iw) * g->C + c] > y[o])
                                fail_msg("%s: out %zu: y %.9g < x at row %d col %d = %.9g", what, o,
                                         (double)y[o], ih, iw,
                                         (double)xi[((size_t)ih * g->W + iw) * g->C + c]);
                }
}

/* Values and argmax match exactly (inputs without ties); bwd adds onto a
 * non-zero dx. */
static void test_maxpool_cpu_vs_ref(void **state)
{
    (void)state;
    mw_kernels ref, cpu;
    mw_kernels_init_ref(&ref);
    mw_kernels_init_cpu(&cpu);
    for (size_t pi = 0; pi < N_POOL; pi++) {
        const pool_case *c = &pool_cases[pi];
        mw_pool_geom g;
        pool_geom(&g, c);
        for (int ni = 0; ni < 2; ni++) {
            const int N = ni ? 5 : c->N;
            size_t nx = (size_t)N * g.H * g.W * g.C, ny = (size_t)N * g.OH * g.OW * g.C;
            pool P = {0};
            float *x = fdistinct(&P, nx, 700 + pi + N, 1e-3f);
            float *dy = frand(&P, ny, 800 + pi + N, -1.0f, 1.0f);
            float *y_ref = fzero(&P, ny), *y_cpu = fzero(&P, ny);
            int32_t *a_ref = keep(&P, calloc(ny, sizeof(int32_t)));
            int32_t *a_cpu = keep(&P, calloc(ny, sizeof(int32_t)));
            float *dx_ref = frand(&P, nx, 900 + pi + N, -1.0f, 1.0f);
            float *dx_cpu = fcopy(&P, dx_ref, nx);
            ctx R, C;
            ctx_open(&R, 0, 1);
            ctx_open(&C, 0, 2);
            fill_const(y_cpu, ny, SENTINEL);
            ref.maxpool_fwd(&R.k, y_ref, a_ref, x, &g, N);
            cpu.maxpool_fwd(&C.k, y_cpu, a_cpu, x, &g, N);
            char what[128];
            snprintf(what, sizeof what, "maxpool %s N=%d", c->name, N);
            expect_same_pool(y_cpu, a_cpu, y_ref, a_ref, ny, what);
            ref.maxpool_bwd(&R.k, dx_ref, dy, a_ref, &g, N);
            cpu.maxpool_bwd(&C.k, dx_cpu, dy, a_cpu, &g, N);
            expect_close(dx_cpu, dx_ref, nx, 1e-5f, 1e-4f);
            ctx_close(&R);
            ctx_close(&C);
            pool_free(&P);
        }
    }
}

/* The definition (random all-negative inputs, so zero padding would win if
 * it were counted) and the tie rule, in both tables: on a constant input each
 * window's winner is its first valid cell in row-major window order. */
static void test_maxpool_definition(void **state)
{
    (void)state;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        for (size_t pi = 0; pi < N_POOL; pi++) {
            const pool_case *c = &pool_cases[pi];
            mw_pool_geom g;
            pool_geom(&g, c);
            const int N = c->N;
            size_t nx = (size_t)N * g.H * g.W * g.C, ny = (size_t)N * g.OH * g.OW * g.C;
            pool P = {0};
            float *x = frand(&P, nx, 77 + pi, -2.0f, -1.0f), *y = fzero(&P, ny);
            int32_t *arg = keep(&P, calloc(ny, sizeof(int32_t)));
            char what[128];
            snprintf(what, sizeof what, "%s maxpool %s", t.name, c->name);
            ctx C;
            ctx_open(&C, 0, 2);
            t.maxpool_fwd(&C.k, y, arg, x, &g, N);
            check_pool_def(y, arg, x, &g, N, what);

            fill_const(x, nx, 0.5f);
            t.maxpool_fwd(&C.k, y, arg, x, &g, N);
            for (int n = 0; n < N; n++)
                for (int oh = 0; oh < g.OH; oh++)
                    for (int ow = 0; ow < g.OW; ow++)
                        for (int ch = 0; ch < g.C; ch++) {
                            int ih = oh * g.SH - g.PT, iw = ow * g.SW - g.PL;
                            ih = ih < 0 ? 0 : ih;
                            iw = iw < 0 ? 0 : iw;
                            size_t o = (((size_t)n * g.OH + oh) * g.OW + ow) * g.C + ch;
                            int32_t want = (ih * g.W + iw) * g.C + ch;
                            if (arg[o] != want || y[o] != 0.5f)
                                fail_msg("%s, tie at out %zu: argmax %d (want %d), y %g", what, o,
                                         (int)arg[o], (int)want, (double)y[o]);
                        }
            ctx_close(&C);
            pool_free(&P);
        }
    }
}

/* ---- embedding ---- */

typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    int n, T, D, V;
    float *y;
    const float *ids, *table, *r;
} embed_env;

static double embed_loss(void *env)
{
    embed_env *e = env;
    e->t->embed_fwd(e->k, e->y, e->ids, e->table, e->n, e->T, e->D, e->V);
    return dot_r(e->r, e->y, (size_t)e->n * e->T * e->D);
}

/* n=3 sequences of T=5 ids into a V=7 x D=4 table, ids repeating (their rows' gradients
 * add): the gather exact, the table's gradient by central differences of sum(r * y); ids that
 * are no row (V, -1, 2.5: never in checked data) give zero rows and no gradient. */
static void test_embed(void **state)
{
    (void)state;
    const int n = 3, T = 5, D = 4, V = 7;
    const float ids[] = {0, 6, 2, 2, 5, 1, 1, 1, 0, 3, 6, 5, 4, 4, 0};
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        ctx C;
        ctx_open(&C, 0, 2);
        const size_t ny = (size_t)n * T * D, nt = (size_t)V * D;
        float *tab = frand(&P, nt, 91, -1.0f, 1.0f), *y = fzero(&P, ny);
        float *r = frand(&P, ny, 92, -1.0f, 1.0f), *g = fzero(&P, nt);
        t.embed_fwd(&C.k, y, ids, tab, n, T, D, V);
        for (size_t p = 0; p < (size_t)n * T; p++)
            assert_memory_equal(y + p * D, tab + (size_t)ids[p] * D, D * sizeof(float));
        t.embed_bwd(&C.k, g, r, ids, n, T, D, V);
        embed_env e = {&t, &C.k, n, T, D, V, fzero(&P, ny), ids, tab, r};
        char what[64];
        snprintf(what, sizeof what, "%s embedding dtable", t.name);
        grad_check(embed_loss, &e, tab, nt, g, 1e-2f, 93, what);
        const float bad[] = {7, -1, 2.5f};
        float *yb = frand(&P, 3 * (size_t)D, 94, 1.0f, 2.0f), *gb = fzero(&P, nt);
        t.embed_fwd(&C.k, yb, bad, tab, 3, 1, D, V);
        t.embed_bwd(&C.k, gb, r, bad, 3, 1, D, V);
        for (size_t i = 0; i < 3 * (size_t)D; i++)
            assert_true(yb[i] == 0.0f);
        for (size_t i = 0; i < nt; i++)
            assert_true(gb[i] == 0.0f);
        ctx_close(&C);
        pool_free(&P);
    }
}

/* The padding mask's mean (GlobalAveragePooling1D after Embedding(mask_zero=True)): n=3
 * sequences of T=4 steps, D=5, ids 0 padding (the second has one real step); the mean of the
 * unmasked steps, the gradient by central differences; a sequence of padding only is 0 / 0. */
typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    float *y;
    const float *x, *ids, *r;
} mmean_env;

static double mmean_loss(void *env)
{
    mmean_env *e = env;
    e->t->masked_mean_fwd(e->k, e->y, e->x, e->ids, 3, 4, 5);
    return dot_r(e->r, e->y, 15);
}

static void test_masked_mean(void **state)
{
    (void)state;
    const float ids[] = {3, 0, 7, 1, 0, 0, 2, 0, 5, 5, 5, 5};
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        ctx C;
        ctx_open(&C, 0, 2);
        float *x = frand(&P, 60, 95, -1.0f, 1.0f), *y = fzero(&P, 15);
        float *r = frand(&P, 15, 96, -1.0f, 1.0f), *dx = frand(&P, 60, 97, -1.0f, 1.0f);
        float *dx0 = fcopy(&P, dx, 60);
        t.masked_mean_fwd(&C.k, y, x, ids, 3, 4, 5);
        for (int j = 0; j < 5; j++) {
            expect_near(y[j], ((double)x[j] + x[10 + j] + x[15 + j]) / 3, 1e-6);
            expect_near(y[5 + j], x[20 + 10 + j], 0);
        }
        t.masked_mean_bwd(&C.k, dx, r, ids, 3, 4, 5);
        for (size_t i = 0; i < 60; i++) /* accumulated: the analytic gradient is dx - dx0 */
            dx[i] -= dx0[i];
        mmean_env e = {&t, &C.k, fzero(&P, 15), x, ids, r};
        char what[64];
        snprintf(what, sizeof what, "%s masked mean dx", t.name);
        grad_check(mmean_loss, &e, x, 60, dx, 1e-2f, 98, what);
        const float pad[] = {0, 0, 0, 0};
        float *yp = fzero(&P, 5);
        t.masked_mean_fwd(&C.k, yp, x, pad, 1, 4, 5);
        assert_true(isnan(yp[0])); /* Keras: 0 / 0 */
        ctx_close(&C);
        pool_free(&P);
    }
}

/* LayerNormalization over the last axis: rows=6 of D=5 (values far from 0 mean: the
 * centring matters), with gamma and beta, then without either; every gradient (the input's,
 * gamma's, beta's) by central differences of sum(r * y); each row's mean 0 and variance
 * 1 / (1 + eps / var) before gamma and beta. */
typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    float *y, *stat;
    const float *x, *gamma, *beta, *r;
    int rows, D;
} ln_env;

static double ln_loss(void *env)
{
    ln_env *e = env;
    e->t->layernorm_fwd(e->k, e->y, e->stat, e->x, e->gamma, e->beta, e->rows, e->D, 1e-3f);
    return dot_r(e->r, e->y, (size_t)e->rows * e->D);
}

static void test_layernorm(void **state)
{
    (void)state;
    const int rows = 6, D = 5;
    const size_t nx = (size_t)rows * D;
    for (int cpu = 0; cpu < 2; cpu++)
        for (int affine = 1; affine >= 0; affine--) {
            mw_kernels t;
            table(&t, cpu);
            pool P = {0};
            ctx C;
            ctx_open(&C, 0, 2);
            float *x = frand(&P, nx, 101, 2.0f, 4.0f), *y = fzero(&P, nx);
            float *stat = fzero(&P, 2 * (size_t)rows), *r = frand(&P, nx, 102, -1.0f, 1.0f);
            float *gamma = affine ? frand(&P, D, 103, 0.5f, 1.5f) : NULL;
            float *beta = affine ? frand(&P, D, 104, -0.5f, 0.5f) : NULL;
            float *dx = fzero(&P, nx), *dg = affine ? fzero(&P, D) : NULL;
            float *db = affine ? fzero(&P, D) : NULL;
            t.layernorm_fwd(&C.k, y, stat, x, gamma, beta, rows, D, 1e-3f);
            if (!affine)
                for (int rr = 0; rr < rows; rr++) {
                    double s = 0, v = 0;
                    for (int j = 0; j < D; j++)
                        s += y[(size_t)rr * D + j],
                            v += (double)y[(size_t)rr * D + j] * y[(size_t)rr * D + j];
                    expect_near(s / D, 0.0, 1e-6);
                    expect_near(v / D, 1.0, 2e-2); /* var / (var + 1e-3), var ~ 1/3 */
                }
            t.layernorm_bwd(&C.k, dx, dg, db, r, x, stat, gamma, rows, D);
            ln_env e = {&t,   &C.k, fzero(&P, nx), fzero(&P, 2 * (size_t)rows), x, gamma, beta, r,
                        rows, D};
            char what[64];
            snprintf(what, sizeof what, "%s layernorm dx (affine %d)", t.name, affine);
            grad_check(ln_loss, &e, x, nx, dx, 1e-2f, 105, what);
            if (affine) {
                snprintf(what, sizeof what, "%s layernorm dgamma", t.name);
                grad_check(ln_loss, &e, gamma, D, dg, 1e-2f, 106, what);
                snprintf(what, sizeof what, "%s layernorm dbeta", t.name);
                grad_check(ln_loss, &e, beta, D, db, 1e-2f, 107, what);
            }
            ctx_close(&C);
            pool_free(&P);
        }
}

/* KerasHub's SinePositionEncoding (kernels.h: mw_sine_pos_fn): every example the same, and
 * each value sin or cos of t w_j, w_j = 1e-4^(2 floor(j / 2) / D), against the same in double
 * (float32's rounding of w_j and of the angle, up to 40: 1e-5). */
static void test_sine_pos(void **state)
{
    (void)state;
    mw_kernels t;
    mw_kernels_init_cpu(&t);
    const int n = 3, T = 41, D = 10;
    float *y = malloc((size_t)n * T * D * sizeof(float));
    assert_non_null(y);
    t.sine_pos(NULL, y, n, T, D, 10000.0f);
    for (int i = 0; i < n; i++)
        for (int s = 0; s < T; s++)
            for (int j = 0; j < D; j++) {
                const double w = pow(1e-4, 2.0 * (j / 2) / D), a = s * w;
                expect_near(y[((size_t)i * T + s) * D + j], j % 2 ? cos(a) : sin(a), 1e-5);
            }
    assert_memory_equal(y, y + (size_t)2 * T * D, (size_t)T * D * sizeof(float));
    free(y);
}

/* The fast CPU LayerNormalization runs the reference's rows and sums each feature's gradient
 * over the rows in the reference's order: bitwise equal, here on 300 rows of 100 features (the
 * features go 32 at a time: a last partial group), with 2 threads, affine and not. */
static void test_layernorm_cpu_vs_ref(void **state)
{
    (void)state;
    const int rows = 300, D = 100;
    const size_t nx = (size_t)rows * D;
    for (int affine = 1; affine >= 0; affine--) {
        mw_kernels ref, cpu;
        mw_kernels_init_ref(&ref);
        mw_kernels_init_cpu(&cpu);
        pool P = {0};
        ctx C;
        ctx_open(&C, 0, 2);
        float *x = frand(&P, nx, 111, -2.0f, 3.0f), *dy = frand(&P, nx, 112, -1.0f, 1.0f);
        float *g = affine ? frand(&P, D, 113, 0.5f, 1.5f) : NULL;
        float *b = affine ? frand(&P, D, 114, -0.5f, 0.5f) : NULL;
        float *y[2], *st[2], *dx[2], *dg[2], *db[2];
        for (int t = 0; t < 2; t++) {
            const mw_kernels *kt = t ? &cpu : &ref;
            y[t] = fzero(&P, nx), st[t] = fzero(&P, 2 * (size_t)rows);
            dx[t] = frand(&P, nx, 115, -1.0f, 1.0f); /* accumulated into */
            dg[t] = frand(&P, D, 116, -1.0f, 1.0f), db[t] = frand(&P, D, 117, -1.0f, 1.0f);
            kt->layernorm_fwd(&C.k, y[t], st[t], x, g, b, rows, D, 1e-5f);
            kt->layernorm_bwd(&C.k, dx[t], affine ? dg[t] : NULL, affine ? db[t] : NULL, dy, x,
                              st[t], g, rows, D);
        }
        assert_memory_equal(y[0], y[1], nx * sizeof(float));
        assert_memory_equal(st[0], st[1], 2 * (size_t)rows * sizeof(float));
        assert_memory_equal(dx[0], dx[1], nx * sizeof(float));
        assert_memory_equal(dg[0], dg[1], D * sizeof(float));
        assert_memory_equal(db[0], db[1], D * sizeof(float));
        ctx_close(&C);
        pool_free(&P);
    }
}

/* ---- MultiHeadAttention's core ---- */

/* The attention core (kernels.h: mw_attn_geom) on n = 2 examples, H = 2 heads, dk = 3, dv = 2,
 * in five geometries: self-attention of 5 steps unmasked; causal; causal with padding masks
 * (example 1's steps 3 and 4 are padding, so its query rows 3 and 4 are masked everywhere);
 * cross-attention of 4 queries on 6 values with a value mask; 70 causal steps with padding
 * (the fast CPU twin's row blocks, a partial one last); and dropout of the
 * probabilities (rate 0.3, example ids 7 and 9). Asserted, for the reference and the fast CPU
 * twin: each probability row sums to 1; a masked entry of a row with an unmasked one is 0
 * exactly (exp of -1e9); a row masked everywhere is 0 (Keras 3.15's Softmax(mask)), so a
 * padded query step's output is 0 and its gradient too (central differences agree: its
 * scores are replaced, not used); o equals the contract's sum over u of p drop
 * v with the multipliers recomputed here from mw_rng_hash as kernels.h states them; every
 * gradient (q, k, v) by central differences of sum(r * o); and the CPU twin against the
 * reference within float32 rounding of sums of S products (2e-6 of the output's scale). */
typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    float *o, *p;
    const float *q, *kk, *v, *r;
    const mw_attn_geom *g;
    int n;
} attn_env;

static double attn_loss(void *env)
{
    attn_env *e = env;
    e->t->attn_fwd(e->k, e->o, e->p, e->q, e->kk, e->v, e->g, e->n);
    return dot_r(e->r, e->o, (size_t)e->n * e->g->T * e->g->H * e->g->dv);
}

/* The dropout multiplier of p[i, h, t, u] as kernels.h states it. */
static float attn_drop_spec(const mw_attn_geom *g, int i, int h, int t, int u)
{
    if (!(g->rate > 0.0f))
        return 1.0f;
    const uint64_t id = g->ids ? g->ids[i] : (uint32_t)i;
    const uint64_t c = id * ((uint64_t)g->H * g->T * g->S) + ((uint64_t)h * g->T + t) * g->S + u;
    return (uint32_t)(mw_rng_hash(g->seed, g->stream, c) >> 40) >= mw_dropout_threshold(g->rate)
               ? 1.0f / (1.0f - g->rate)
               : 0.0f;
}

static void test_attention(void **state)
{
    (void)state;
    const int n = 2, H = 2, dk = 3, dv = 2;
    /* ids as floats: example 1 ends in two padding steps */
    const float qid[2 * 5] = {3, 1, 4, 1, 5, 9, 2, 6, 0, 0};
    const float vid[2 * 6] = {2, 7, 1, 8, 2, 8, 1, 0, 3, 3, 0, 4};
    const uint32_t eids[2] = {7, 9};
    float q70[2 * 70]; /* 70 steps: example 1's last 10 are padding */
    for (int j = 0; j < 2 * 70; j++)
        q70[j] = j >= 70 + 60 ? 0.0f : (float)(1 + j % 7);
    /* uniform: a row masked everywhere (example 1's padded query steps) is 1 / S, Keras 3.15's
     * without dropout; its output then reads every key, past the causal blocks' */
    struct {
        int T, S, causal, qmask, vmask;
        float rate;
        int uniform;
    } cases[] = {{5, 5, 0, 0, 0, 0.0f, 0},  {5, 5, 1, 0, 0, 0.0f, 0},
                 {5, 5, 1, 1, 1, 0.0f, 0},  {4, 6, 0, 0, 1, 0.0f, 0},
                 {5, 5, 1, 0, 0, 0.3f, 0},  {70, 70, 1, 1, 1, 0.0f, 0},
                 {5, 5, 1, 1, 1, 0.0f, 1},  {5, 5, 0, 1, 0, 0.0f, 1},
                 {70, 70, 1, 1, 1, 0.0f, 1}}; /* the CPU twin's causal row blocks: 32, 32, 6 */
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int T = cases[ci].T, S = cases[ci].S;
        mw_attn_geom g = {.T = T,
                          .S = S,
                          .H = H,
                          .dk = dk,
                          .dv = dv,
                          .scale = (float)(1.0 / sqrt(3.0)),
                          .causal = cases[ci].causal,
                          .qids = cases[ci].qmask ? (T == 70 ? q70 : qid) : NULL,
                          .vids = cases[ci].vmask ? (S == 70  ? q70
                                                     : S == 5 ? qid
                                                              : vid)
                                                  : NULL,
                          .empty_uniform = cases[ci].uniform,
                          .rate = cases[ci].rate,
                          .seed = 42,
                          .stream = 3,
                          .ids = cases[ci].rate > 0 ? eids : NULL};
        const size_t nq = (size_t)n * T * H * dk, nk = (size_t)n * S * H * dk,
                     nv = (size_t)n * S * H * dv, no = (size_t)n * T * H * dv,
                     np = (size_t)n * H * T * S;
        float *out[2][4]; /* per table: o, dq, dk, dv */
        for (int cpu = 0; cpu < 2; cpu++) {
            mw_kernels t;
            table(&t, cpu);
            pool P = {0};
            ctx C;
            ctx_open(&C, (size_t)MW_ATTN_WS_SLOTS * T * S, 2);
            float *q = frand(&P, nq, 201 + ci, -1.5f, 1.5f),
                  *kk = frand(&P, nk, 211 + ci, -1.5f, 1.5f);
            float *v = frand(&P, nv, 221 + ci, -1.0f, 1.0f),
                  *r = frand(&P, no, 231 + ci, -1.0f, 1.0f);
            float *o = fzero(&P, no), *p = fzero(&P, np);
            t.attn_fwd(&C.k, o, p, q, kk, v, &g, n);
            ctx_check(&C, "attn_fwd");
            char what[96];
            for (int i = 0; i < n; i++)
                for (int h = 0; h < H; h++)
                    for (int tt = 0; tt < T; tt++) {
                        const float *pr = p + (((size_t)i * H + h) * T + tt) * S;
                        double sum = 0;
                        int any = 0;
                        for (int u = 0; u < S; u++) {
                            sum += pr[u];
                            any |= !((g.causal && u > tt) || (g.qids && g.qids[i * T + tt] == 0) ||
                                     (g.vids && g.vids[i * S + u] == 0));
                        }
                        expect_near(sum, any || g.empty_uniform ? 1.0 : 0.0, 1e-6);
                        for (int u = 0; u < S; u++) {
                            const int masked = (g.causal && u > tt) ||
                                               (g.qids && g.qids[i * T + tt] == 0) ||
                                               (g.vids && g.vids[i * S + u] == 0);
                            if (masked && any && pr[u] != 0.0f)
                                fail_msg("%s case %zu: p[%d,%d,%d,%d] = %g, masked", t.name, ci, i,
                                         h, tt, u, (double)pr[u]);
                            if (!any && pr[u] != (g.empty_uniform ? 1.0f / (float)S : 0.0f))
                                fail_msg("%s case %zu: p[%d,%d,%d,%d] = %g in a row masked "
                                         "everywhere (uniform %d)",
                                         t.name, ci, i, h, tt, u, (double)pr[u], g.empty_uniform);
                        }
                        for (int d = 0; d < dv; d++) { /* o by the contract */
                            double want = 0;
                            for (int u = 0; u < S; u++)
                                want += (double)pr[u] * attn_drop_spec(&g, i, h, tt, u) *
                                        v[(((size_t)i * S + u) * H + h) * dv + d];
                            expect_near(o[(((size_t)i * T + tt) * H + h) * dv + d], want, 2e-6);
                        }
                    }
            float *dq = fzero(&P, nq), *dkk = fzero(&P, nk), *dvv = fzero(&P, nv);
            t.attn_bwd(&C.k, dq, dkk, dvv, p, r, q, kk, v, &g, n);
            ctx_check(&C, "attn_bwd");
            attn_env e = {&t, &C.k, fzero(&P, no), fzero(&P, np), q, kk, v, r, &g, n};
            snprintf(what, sizeof what, "%s attention dq (case %zu)", t.name, ci);
            grad_check(attn_loss, &e, q, nq, dq, 1e-2f, 241, what);
            snprintf(what, sizeof what, "%s attention dk (case %zu)", t.name, ci);
            grad_check(attn_loss, &e, kk, nk, dkk, 1e-2f, 242, what);
            snprintf(what, sizeof what, "%s attention dv (case %zu)", t.name, ci);
            grad_check(attn_loss, &e, v, nv, dvv, 1e-2f, 243, what);
            const float *res[4] = {o, dq, dkk, dvv};
            const size_t cnt[4] = {no, nq, nk, nv};
            for (int j = 0; j < 4; j++) {
                out[cpu][j] = malloc(cnt[j] * sizeof(float));
                assert_non_null(out[cpu][j]);
                memcpy(out[cpu][j], res[j], cnt[j] * sizeof(float));
            }
            ctx_close(&C);
            pool_free(&P);
        }
        const size_t cnt[4] = {no, nq, nk, nv};
        for (int j = 0; j < 4; j++) {
            for (size_t x = 0; x < cnt[j]; x++)
                expect_near(out[1][j][x], out[0][j][x], 2e-6 * (1.0 + fabs(out[0][j][x])));
            free(out[0][j]);
            free(out[1][j]);
        }
    }
}

/* ---- dense ---- */

typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    int N, I, O;
    float *y;
    const float *x, *w, *b, *r;
} dense_env;

static double dense_loss(void *env)
{
    dense_env *e = env;
    e->t->dense_fwd(e->k, e->y, e->x, e->w, e->b, e->N, e->I, e->O);
    return dot_r(e->r, e->y, (size_t)e->N * e->O);
}

/* N=3, I=7, O=5 with a bias, then without (b = db = NULL), then dx = NULL. */
static void dense_grad(int cpu)
{
    mw_kernels t;
    table(&t, cpu);
    const int N = 3, I = 7, O = 5;
    for (int bias = 1; bias >= 0; bias--) {
        pool P = {0};
        float *x = frand(&P, (size_t)N * I, 31 + bias, -1.0f, 1.0f);
        float *w = frand(&P, (size_t)I * O, 32 + bias, -0.5f, 0.5f);
        float *b = bias ? frand(&P, O, 33, -0.5f, 0.5f) : NULL;
        float *r = frand(&P, (size_t)N * O, 34 + bias, -1.0f, 1.0f);
        float *y = fzero(&P, (size_t)N * O), *dx = fzero(&P, (size_t)N * I);
        float *dw = fzero(&P, (size_t)I * O), *db = bias ? fzero(&P, O) : NULL;
        float *dw2 = fzero(&P, (size_t)I * O), *db2 = bias ? fzero(&P, O) : NULL;
        ctx C;
        ctx_open(&C, 0, 2 - bias);
        t.dense_bwd(&C.k, dx, dw, db, r, x, w, N, I, O);
        dense_env e = {&t, &C.k, N, I, O, y, x, w, b, r};
        char what[96];
        snprintf(what, sizeof what, "%s dense bias=%d dx", t.name, bias);
        grad_check(dense_loss, &e, x, (size_t)N * I, dx, 1e-2f, 5, what);
        snprintf(what, sizeof what, "%s dense bias=%d dw", t.name, bias);
        grad_check(dense_loss, &e, w, (size_t)I * O, dw, 1e-2f, 6, what);
        if (bias) {
            snprintf(what, sizeof what, "%s dense db", t.name);
            grad_check(dense_loss, &e, b, O, db, 1e-2f, 7, what);
        }
        t.dense_bwd(&C.k, NULL, dw2, db2, r, x, w, N, I, O);
        expect_close(dw2, dw, (size_t)I * O, 1e-5f, 1e-4f);
        if (bias)
            expect_close(db2, db, O, 1e-5f, 1e-4f);
        ctx_close(&C);
        pool_free(&P);
    }
}

static void test_dense_grad_ref(void **state)
{
    (void)state;
    dense_grad(0);
}

static void test_dense_grad_cpu(void **state)
{
    (void)state;
    dense_grad(1);
}

/* Start from random gradients s, call twice: s + 2 * (one call from zero). */
static void test_dense_accumulate(void **state)
{
    (void)state;
    const int N = 4, I = 9, O = 6;
    const size_t nx = (size_t)N * I, nw = (size_t)I * O;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        float *x = frand(&P, nx, 41, -1.0f, 1.0f), *w = frand(&P, nw, 42, -0.5f, 0.5f);
        float *dy = frand(&P, (size_t)N * O, 43, -1.0f, 1.0f);
        float *dx1 = fzero(&P, nx), *dw1 = fzero(&P, nw), *db1 = fzero(&P, O);
        float *dx = frand(&P, nx, 44, -1.0f, 1.0f), *dw = frand(&P, nw, 45, -1.0f, 1.0f);
        float *db = frand(&P, O, 46, -1.0f, 1.0f);
        float *ex = fcopy(&P, dx, nx), *ew = fcopy(&P, dw, nw), *eb = fcopy(&P, db, O);
        ctx C;
        ctx_open(&C, 0, 2);
        t.dense_bwd(&C.k, dx1, dw1, db1, dy, x, w, N, I, O);
        t.dense_bwd(&C.k, dx, dw, db, dy, x, w, N, I, O);
        t.dense_bwd(&C.k, dx, dw, db, dy, x, w, N, I, O);
        for (size_t i = 0; i < nx; i++)
            ex[i] += 2.0f * dx1[i];
        for (size_t i = 0; i < nw; i++)
            ew[i] += 2.0f * dw1[i];
        for (int i = 0; i < O; i++)
            eb[i] += 2.0f * db1[i];
        expect_close(dx, ex, nx, 1e-5f, 1e-4f);
        expect_close(dw, ew, nw, 1e-5f, 1e-4f);
        expect_close(db, eb, O, 1e-5f, 1e-4f);
        ctx_close(&C);
        pool_free(&P);
    }
}

static void test_dense_cpu_vs_ref(void **state)
{
    (void)state;
    mw_kernels ref, cpu;
    mw_kernels_init_ref(&ref);
    mw_kernels_init_cpu(&cpu);
    static const int shapes[][3] = {{3, 7, 5}, {1, 1, 1}, {13, 37, 11}, {32, 200, 10}, {5, 3, 64}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int bias = 0; bias < 2; bias++) {
            const int N = shapes[si][0], I = shapes[si][1], O = shapes[si][2];
            const size_t nx = (size_t)N * I, nw = (size_t)I * O, ny = (size_t)N * O;
            uint64_t s = 60 + 10 * si + bias;
            pool P = {0};
            float *x = frand(&P, nx, s, -1.0f, 1.0f), *w = frand(&P, nw, s + 1, -0.5f, 0.5f);
            float *b = bias ? frand(&P, O, s + 2, -0.5f, 0.5f) : NULL;
            float *dy = frand(&P, ny, s + 3, -1.0f, 1.0f);
            float *y_ref = fzero(&P, ny), *y_cpu = fzero(&P, ny);
            float *dx_ref = frand(&P, nx, s + 4, -1.0f, 1.0f), *dx_cpu = fcopy(&P, dx_ref, nx);
            float *dw_ref = frand(&P, nw, s + 5, -1.0f, 1.0f), *dw_cpu = fcopy(&P, dw_ref, nw);
            float *db_ref = bias ? frand(&P, O, s + 6, -1.0f, 1.0f) : NULL;
            float *db_cpu = bias ? fcopy(&P, db_ref, O) : NULL;
            ctx R, C;
            ctx_open(&R, 0, 1);
            ctx_open(&C, 0, 2);
            fill_const(y_cpu, ny, SENTINEL);
            ref.dense_fwd(&R.k, y_ref, x, w, b, N, I, O);
            cpu.dense_fwd(&C.k, y_cpu, x, w, b, N, I, O);
            expect_close(y_cpu, y_ref, ny, 1e-5f, 1e-4f);
            ref.dense_bwd(&R.k, dx_ref, dw_ref, db_ref, dy, x, w, N, I, O);
            cpu.dense_bwd(&C.k, dx_cpu, dw_cpu, db_cpu, dy, x, w, N, I, O);
            expect_close(dx_cpu, dx_ref, nx, 1e-5f, 1e-4f);
            expect_close(dw_cpu, dw_ref, nw, 1e-5f, 1e-4f);
            if (bias)
                expect_close(db_cpu, db_ref, O, 1e-5f, 1e-4f);
            ref.dense_bwd(&R.k, NULL, dw_ref, db_ref, dy, x, w, N, I, O);
            cpu.dense_bwd(&C.k, NULL, dw_cpu, db_cpu, dy, x, w, N, I, O);
            expect_close(dw_cpu, dw_ref, nw, 1e-5f, 1e-4f);
            if (bias)
                expect_close(db_cpu, db_ref, O, 1e-5f, 1e-4f);
            ctx_close(&R);
            ctx_close(&C);
            pool_free(&P);
        }
}

/* ---- ReLU ---- */

typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    float *y;
    const float *x, *r;
    size_t count;
} relu_env;

static double relu_loss(void *env)
{
    relu_env *e = env;
    e->t->relu_fwd(e->k, e->y, e->x, e->count);
    return dot_r(e->r, e->y, e->count);
}

/* Inputs with 0.05 <= |x| <= 1 and h = 1e-3: no perturbation crosses the kink.
 * The analytic gradient comes from the forward OUTPUT; then the same backward
 * in place (dx == dy) and the forward in place (y == x). */
static void test_relu_grad(void **state)
{
    (void)state;
    const size_t n = 121;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        float *x = frand(&P, n, 51, 0.05f, 1.0f), *sign = frand(&P, n, 52, -1.0f, 1.0f);
        for (size_t i = 0; i < n; i++)
            x[i] = sign[i] < 0.0f ? -x[i] : x[i];
        float *r = frand(&P, n, 53, -1.0f, 1.0f), *y = fzero(&P, n), *dx = fzero(&P, n);
        ctx C;
        ctx_open(&C, 0, 2);
        t.relu_fwd(&C.k, y, x, n);
        fill_const(dx, n, SENTINEL); /* bwd overwrites */
        t.relu_bwd(&C.k, dx, r, y, n);
        relu_env e = {&t, &C.k, y, x, r, n};
        char what[64];
        snprintf(what, sizeof what, "%s relu dx", t.name);
        grad_check(relu_loss, &e, x, n, dx, 1e-3f, 8, what);

        t.relu_fwd(&C.k, y, x, n);
        float *d = fcopy(&P, r, n);
        t.relu_bwd(&C.k, d, d, y, n);
        expect_close(d, dx, n, 0.0f, 0.0f); /* exactly */
        float *xi = fcopy(&P, x, n);
        t.relu_fwd(&C.k, xi, xi, n);
        expect_close(xi, y, n, 0.0f, 0.0f);
        ctx_close(&C);
        pool_free(&P);
    }
}

static void test_relu_cpu_vs_ref(void **state)
{
    (void)state;
    mw_kernels ref, cpu;
    mw_kernels_init_ref(&ref);
    mw_kernels_init_cpu(&cpu);
    const size_t n = 1037; /* odd: vector tails */
    pool P = {0};
    float *x = frand(&P, n, 61, -1.0f, 1.0f), *dy = frand(&P, n, 62, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i += 7)
        x[i] = (i / 7) % 2 ? 0.0f : -0.0f; /* zeros of both signs do not pass gradient */
    float *y_ref = fzero(&P, n), *y_cpu = fzero(&P, n);
    float *dx_ref = fzero(&P, n), *dx_cpu = fzero(&P, n);
    ctx R, C;
    ctx_open(&R, 0, 1);
    ctx_open(&C, 0, 2);
    fill_const(y_cpu, n, SENTINEL);
    fill_const(dx_cpu, n, SENTINEL);
    ref.relu_fwd(&R.k, y_ref, x, n);
    cpu.relu_fwd(&C.k, y_cpu, x, n);
    expect_close(y_cpu, y_ref, n, 1e-5f, 1e-4f);
    ref.relu_bwd(&R.k, dx_ref, dy, y_ref, n);
    cpu.relu_bwd(&C.k, dx_cpu, dy, y_cpu, n);
    expect_close(dx_cpu, dx_ref, n, 1e-5f, 1e-4f);
    for (size_t i = 0; i < n; i += 7) {
        expect_near(dx_cpu[i], 0.0, 0.0);
        expect_near(dx_ref[i], 0.0, 0.0);
    }
    ctx_close(&R);
    ctx_close(&C);
    pool_free(&P);
}

/* ---- softmax cross-entropy ---- */

typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    float *loss, *prob;
    const float *z;
    const int32_t *labels;
    int N, K;
    float scale;
} xent_env;

static double xent_loss(void *env)
{
    xent_env *e = env;
    e->t->xent_fwd(e->k, e->loss, e->prob, e->z, e->labels, e->N, e->K);
    double s = 0.0;
    for (int n = 0; n < e->N; n++)
        s += e->loss[n];
    return e->scale * s;
}

/* L = scale * sum of per-example losses, h = 1e-3 on the logits; then the
 * forward's own definitions, in-place backward, and a large logit offset. */
static void test_xent(void **state)
{
    (void)state;
    const int N = 4, K = 7;
    const size_t nz = (size_t)N * K;
    const int32_t labels[] = {0, 6, 3, 3};
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        float *z = frand(&P, nz, 71, -3.0f, 3.0f);
        float *loss = fzero(&P, N), *prob = fzero(&P, nz), *dz = fzero(&P, nz);
        const float scale = 1.0f / (float)N;
        ctx C;
        ctx_open(&C, 0, 2);
        t.xent_fwd(&C.k, loss, prob, z, labels, N, K);
        fill_const(dz, nz, SENTINEL); /* bwd overwrites */
        t.xent_bwd(&C.k, dz, prob, labels, scale, N, K);
        xent_env e = {&t, &C.k, fzero(&P, N), fzero(&P, nz), z, labels, N, K, scale};
        char what[64];
        snprintf(what, sizeof what, "%s xent dlogits", t.name);
        grad_check(xent_loss, &e, z, nz, dz, 1e-3f, 9, what);

        /* prob = softmax(z) sums to 1; loss = -log prob[label] = logsumexp(z) - z[label]. */
        for (int n = 0; n < N; n++) {
            double sum = 0.0, lse = 0.0;
            for (int j = 0; j < K; j++) {
                sum += prob[(size_t)n * K + j];
                lse += exp((double)z[(size_t)n * K + j]);
            }
            lse = log(lse);
            expect_near(sum, 1.0, 1e-6);
            expect_near(loss[n], lse - z[(size_t)n * K + labels[n]], 1e-5);
            expect_near(loss[n], -log(prob[(size_t)n * K + labels[n]]), 1e-5);
        }
        /* In place: dlogits == prob. */
        float *d = fcopy(&P, prob, nz);
        t.xent_bwd(&C.k, d, d, labels, scale, N, K);
        expect_close(d, dz, nz, 0.0f, 0.0f);
        /* Stable for large logits: shift by 80 (exp overflows float at ~88.7) and by 1e4. */
        for (int s = 0; s < 2; s++) {
            float shift = s ? 1e4f : 80.0f;
            float *zs = fcopy(&P, z, nz), *ls = fzero(&P, N), *ps = fzero(&P, nz);
            for (size_t i = 0; i < nz; i++)
                zs[i] += shift;
            t.xent_fwd(&C.k, ls, ps, zs, labels, N, K);
            /* The shifted logits lose low bits: 1e4 has an ulp of ~1e-3. */
            expect_close(ls, loss, N, s ? 5e-3f : 1e-5f, 1e-4f);
            expect_close(ps, prob, nz, s ? 5e-3f : 1e-5f, 1e-4f);
        }
        /* ignore_class labels outside [0, K) (K and 255): loss 0, dlogits scale x prob */
        const int32_t ign[] = {0, K, 3, 255};
        float *li = fzero(&P, N), *pi = fzero(&P, nz), *di = fzero(&P, nz);
        t.xent_fwd(&C.k, li, pi, z, ign, N, K);
        t.xent_bwd(&C.k, di, pi, ign, scale, N, K);
        expect_close(pi, prob, nz, 0.0f, 0.0f);
        assert_true(li[0] == loss[0] && li[1] == 0.0f && li[2] == loss[2] && li[3] == 0.0f);
        for (int j = 0; j < K; j++) {
            assert_true(di[K + j] == scale * prob[K + j]);
            assert_true(di[3 * K + j] == scale * prob[3 * K + j]);
        }
        if (cpu) { /* the fast path's row chunks (37 rows on 2 threads) equal the reference */
            mw_kernels r;
            mw_kernels_init_ref(&r);
            const int M = 37;
            float *zz = frand(&P, (size_t)M * K, 72, -3.0f, 3.0f);
            int32_t lab[37];
            for (int n = 0; n < M; n++)
                lab[n] = (n * 5) % (K + 1); /* K: ignored */
            float *l1 = fzero(&P, M), *l2 = fzero(&P, M), *p1 = fzero(&P, (size_t)M * K);
            float *p2 = fzero(&P, (size_t)M * K), *d1 = fzero(&P, (size_t)M * K);
            float *d2 = fzero(&P, (size_t)M * K);
            t.xent_fwd(&C.k, l1, p1, zz, lab, M, K);
            r.xent_fwd(&C.k, l2, p2, zz, lab, M, K);
            t.xent_bwd(&C.k, d1, p1, lab, scale, M, K);
            r.xent_bwd(&C.k, d2, p2, lab, scale, M, K);
            assert_memory_equal(l1, l2, M * sizeof(float));
            assert_memory_equal(p1, p2, (size_t)M * K * sizeof(float));
            assert_memory_equal(d1, d2, (size_t)M * K * sizeof(float));
        }
        ctx_close(&C);
        pool_free(&P);
    }
}

/* ---- optimizers ---- */

/* Keras Adam (the adam_step rule), written out in double: m = b1 m + (1-b1) g,
 * v = b2 v + (1-b2) g^2, lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), p -= lr_t m / (sqrt(v) + eps).
 * Element 0 is the worked example p = 1, g = 0.5, t = 1: m = 0.05,
 * v = 0.00025, p1 = 1 - lr_t 0.05 / (sqrt(0.00025) + 1e-7). Element 2 has
 * |g| ~ eps, where eps inside the sqrt would change the step ~2400x.
 * The kernel gets float hyperparameters (0.999f is 0.99899995, so 1 - b2 is
 * off by 5e-5 relative), so the exact expectation uses those same values. */
static void test_adam_by_hand(void **state)
{
    (void)state;
    enum { n = 5 };
    const float b1f = 0.9f, b2f = 0.999f, epsf = 1e-7f;
    const double b1 = b1f, b2 = b2f, eps = epsf;
    const double p0[n] = {1.0, 0.0, 0.0, -2.0, 0.5};
    const double g1[n] = {0.5, -0.25, 1e-6, 0.0, 3.0};
    const double g2[n] = {-0.25, 0.5, 1e-6, 0.0, -3.0};
    /* The worked example, element 0 at step 1, with the decimal constants. */
    const double lr_t = 1e-3 * sqrt(1.0 - 0.999) / (1.0 - 0.9);
    const double p1_hand = 1.0 - lr_t * 0.05 / (sqrt(0.00025) + 1e-7);
    const float lr_t1 = (float)lr_t;
    const float lr_t2 = (float)(1e-3 * sqrt(1.0 - 0.999 * 0.999) / (1.0 - 0.9 * 0.9));

    double em[n], ev[n], ep1[n], ep2[n];
    for (int i = 0; i < n; i++) {
        double m = (1 - b1) * (float)g1[i], v = (1 - b2) * (float)g1[i] * (float)g1[i];
        ep1[i] = (float)p0[i] - (double)lr_t1 * m / (sqrt(v) + eps);
        m = b1 * m + (1 - b1) * (float)g2[i];
        v = b2 * v + (1 - b2) * (float)g2[i] * (float)g2[i];
        ep2[i] = ep1[i] - (double)lr_t2 * m / (sqrt(v) + eps);
        em[i] = m, ev[i] = v;
    }

    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        float p[n], m[n] = {0}, v[n] = {0}, g[n], want[n];
        for (int i = 0; i < n; i++)
            p[i] = (float)p0[i], g[i] = (float)g1[i];
        ctx C;
        ctx_open(&C, 0, 2);
        mw_optim_hyper h = {.lr = lr_t1, .gscale = 1.0f, .epsilon = epsf};
        h.one_minus_beta1 = (float)(1.0 - b1), h.one_minus_beta2 = (float)(1.0 - b2);
        t.adam_step(&C.k, p, m, v, NULL, g, n, &h);
        /* The worked example (float hyperparameters move v by 5e-5 relative). */
        expect_near(m[0], 0.05, 1e-7);
        expect_near(v[0], 0.00025, 1e-4 * 0.00025);
        expect_near(p[0], p1_hand, 1e-7);
        for (int i = 0; i < n; i++)
            want[i] = (float)ep1[i];
        expect_close(p, want, n, 1e-7f, 1e-5f);
        for (int i = 0; i < n; i++)
            g[i] = (float)g2[i];
        h.lr = lr_t2;
        t.adam_step(&C.k, p, m, v, NULL, g, n, &h);
        for (int i = 0; i < n; i++)
            want[i] = (float)ep2[i];
        expect_close(p, want, n, 1e-7f, 1e-5f);
        for (int i = 0; i < n; i++)
            want[i] = (float)em[i];
        expect_close(m, want, n, 0.0f, 1e-5f);
        for (int i = 0; i < n; i++)
            want[i] = (float)ev[i];
        expect_close(v, want, n, 0.0f, 1e-5f);
        ctx_close(&C);
    }
}

/* Keras SGD (the sgd_step rule): vel = mu vel - lr g; p += vel. mu = 0.9, lr = 0.1 from
 * p = 1, 0, -1:
 *   g1 = 0.5, -1, 0:    vel = -0.05, 0.1, 0;          p = 0.95, 0.1, -1
 *   g2 = -0.2, 0.3, 2:  vel = -0.025, 0.06, -0.2;     p = 0.925, 0.16, -1.2
 * and mu = 0 is plain p -= lr g. */
static void test_sgd_by_hand(void **state)
{
    (void)state;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        ctx C;
        ctx_open(&C, 0, 2);
        float p[3] = {1.0f, 0.0f, -1.0f}, vel[3] = {0}, g1[3] = {0.5f, -1.0f, 0.0f};
        float g2[3] = {-0.2f, 0.3f, 2.0f};
        mw_optim_hyper h = {.lr = 0.1f, .gscale = 1.0f, .momentum = 0.9f};
        t.sgd_step(&C.k, p, vel, NULL, NULL, g1, 3, &h);
        expect_close(vel, ((float[]){-0.05f, 0.1f, 0.0f}), 3, 1e-7f, 1e-6f);
        expect_close(p, ((float[]){0.95f, 0.1f, -1.0f}), 3, 1e-7f, 1e-6f);
        t.sgd_step(&C.k, p, vel, NULL, NULL, g2, 3, &h);
        expect_close(vel, ((float[]){-0.025f, 0.06f, -0.2f}), 3, 1e-7f, 1e-6f);
        expect_close(p, ((float[]){0.925f, 0.16f, -1.2f}), 3, 1e-7f, 1e-6f);
        float q[3] = {1.0f, 0.0f, -1.0f};
        h.momentum = 0.0f; /* no momentum slot */
        t.sgd_step(&C.k, q, NULL, NULL, NULL, g1, 3, &h);
        expect_close(q, ((float[]){0.95f, 0.1f, -1.0f}), 3, 1e-7f, 1e-6f);
        ctx_close(&C);
    }
}

/* Keras 3's rules (kernels/optim_rules.h): the fast path equals the reference bitwise with
 * several threads, for every option that changes the arithmetic; the slots a rule does not
 * use may be NULL; count 0 touches nothing. */
static void test_optim_rules_cpu_vs_ref(void **state)
{
    (void)state;
    mw_kernels ref, cpu;
    mw_kernels_init_ref(&ref);
    mw_kernels_init_cpu(&cpu);
    const mw_optim_hyper base = {.lr = 0.01f,
                                 .gscale = 1.0f,
                                 .one_minus_beta1 = 0.1f,
                                 .one_minus_beta2 = 0.001f,
                                 .epsilon = 1e-7f,
                                 .rho = 0.9f,
                                 .beta2 = 0.999f,
                                 .bias1 = 0.271f};
    mw_optim_hyper hs[5] = {base, base, base, base, base};
    hs[1].momentum = 0.9f, hs[1].nesterov = 1, hs[1].weight_decay = 0.01f, hs[1].decay_lr = 0.1f;
    hs[2].amsgrad = 1, hs[2].clipvalue = 0.3f;
    hs[3].momentum = 0.5f, hs[3].centered = 1, hs[3].gscale = 0.5f;
    hs[4].weight_decay = 0.004f, hs[4].decay_lr = 0.01f, hs[4].epsilon = 0.1f;
    const mw_optim_fn rr[5] = {ref.sgd_step, ref.adam_step, ref.rmsprop_step, ref.adagrad_step,
                               ref.adamax_step};
    const mw_optim_fn cc[5] = {cpu.sgd_step, cpu.adam_step, cpu.rmsprop_step, cpu.adagrad_step,
                               cpu.adamax_step};
    const size_t n = 1031;
    ctx R, C;
    ctx_open(&R, 0, 1);
    ctx_open(&C, 0, 3);
    for (int r = 0; r < 5; r++)
        for (int i = 0; i < 5; i++) {
            pool P = {0};
            float *a[4], *b[4]; /* p, s1, s2, s3 */
            for (int j = 0; j < 4; j++) {
                a[j] = frand(&P, n, 500 + j,
                             j == 0   ? -1.0f
                             : j == 1 ? 0.05f
                                      : 0.0f,
                             j == 3 ? 0.01f : 0.1f);
                b[j] = fcopy(&P, a[j], n);
            }
            /* the slots each rule may leave NULL: SGD without momentum uses none */
            int unused2 = r == 0 || r == 3 || (r == 2 && hs[i].momentum == 0);
            int unused3 = r == 0 || r == 3 || r == 4 || (r == 1 && !hs[i].amsgrad) ||
                          (r == 2 && !hs[i].centered);
            int unused1 = r == 0 && hs[i].momentum == 0;
            float *g = fzero(&P, n);
            for (int step = 1; step <= 3; step++) {
                mw_test_fill_uniform(g, n, 510 + step, -1.0f, 1.0f);
                rr[r](&R.k, a[0], unused1 ? NULL : a[1], unused2 ? NULL : a[2],
                      unused3 ? NULL : a[3], g, n, &hs[i]);
                cc[r](&C.k, b[0], unused1 ? NULL : b[1], unused2 ? NULL : b[2],
                      unused3 ? NULL : b[3], g, n, &hs[i]);
            }
            for (int j = 0; j < 4; j++)
                assert_memory_equal(a[j], b[j], n * sizeof(float));
            float before = a[0][0];
            cc[r](&C.k, a[0], a[1], a[2], a[3], NULL, 0, &hs[i]);
            assert_true(a[0][0] == before);
            pool_free(&P);
        }
    ctx_close(&R);
    ctx_close(&C);
}

/* Two rules by hand, in double from Keras' formulas, one element over two steps: centered
 * RMSprop with momentum, and Adagrad with weight decay. (The whole family is checked against
 * Keras itself in the keras suite.) */
static void test_rmsprop_adagrad_by_hand(void **state)
{
    (void)state;
    mw_kernels t;
    mw_kernels_init_ref(&t);
    const double gs[2] = {0.5, -0.25}, lr = 0.01, rho = 0.9, mu = 0.5, eps = 1e-7;
    double p = 0.3, ms = 0, mom = 0, mg = 0;
    for (int k = 0; k < 2; k++) {
        ms = rho * ms + (1 - rho) * gs[k] * gs[k];
        mg = rho * mg + (1 - rho) * gs[k];
        mom = mu * mom + lr * gs[k] / sqrt(ms - mg * mg + eps);
        p -= mom;
    }
    mw_optim_hyper h = {.lr = 0.01f,
                        .gscale = 1.0f,
                        .epsilon = 1e-7f,
                        .rho = 0.9f,
                        .momentum = 0.5f,
                        .centered = 1};
    float fp = 0.3f, s1 = 0, s2 = 0, s3 = 0;
    for (int k = 0; k < 2; k++) {
        float g = (float)gs[k];
        t.rmsprop_step(NULL, &fp, &s1, &s2, &s3, &g, 1, &h);
    }
    assert_true(fabs(fp - p) <= 1e-6 && fabs(s1 - ms) <= 1e-7 && fabs(s3 - mg) <= 1e-7);
    double q = 0.3, acc = 0.1, wd = 0.01, alr = 0.05, aeps = 1e-3;
    for (int k = 0; k < 2; k++) {
        q -= q * wd * alr;
        acc += gs[k] * gs[k];
        q -= alr * gs[k] / sqrt(acc + aeps);
    }
    mw_optim_hyper a = {
        .lr = 0.05f, .decay_lr = 0.05f, .weight_decay = 0.01f, .gscale = 1.0f, .epsilon = 1e-3f};
    float fq = 0.3f, facc = 0.1f;
    for (int k = 0; k < 2; k++) {
        float g = (float)gs[k];
        t.adagrad_step(NULL, &fq, &facc, NULL, NULL, &g, 1, &a);
    }
    assert_true(fabs(fq - q) <= 1e-6 && fabs(facc - acc) <= 1e-6);
}

/* Adam as keras/src/optimizers/adam.py computes it, one float32 operation at a time, with
 * 1 - beta rounded once from Python's double: the reference rule equals it bitwise over three
 * steps. And a steady gradient (g == m, g^2 == v) leaves both moments exactly where they are,
 * for every value tried, which Keras' m += (g - m)(1 - b1) promises and b1 m + (1 - b1) g does
 * not (0.9f x + (1.0f - 0.9f) x is not x for x = 0.437166423f). */
static void test_adam_keras_order(void **state)
{
    (void)state;
    mw_kernels t;
    mw_kernels_init_ref(&t);
    const float c1 = (float)(1.0 - 0.9), c2 = (float)(1.0 - 0.999), eps = 1e-7f, alpha = 1e-3f;
    const mw_optim_hyper h = {
        .lr = alpha, .gscale = 1.0f, .one_minus_beta1 = c1, .one_minus_beta2 = c2, .epsilon = eps};
    const float gs[3] = {0.3f, -0.02f, 1.5e-4f};
    float p = 0.5f, m = 0.0f, v = 0.0f, fp = 0.5f, s1 = 0.0f, s2 = 0.0f;
    for (int k = 0; k < 3; k++) {
        float g = gs[k];
        m = m + (g - m) * c1;
        v = v + (g * g - v) * c2;
        p = p - m * alpha / (sqrtf(v) + eps);
        t.adam_step(NULL, &fp, &s1, &s2, NULL, &g, 1, &h);
        if (fp != p || s1 != m || s2 != v)
            fail_msg("step %d: p %.9g m %.9g v %.9g, Keras' order gives %.9g %.9g %.9g", k + 1, fp,
                     s1, s2, p, m, v);
    }
    int moved = 0;
    for (float x = 1e-3f; x < 4.0f; x *= 1.37f) {
        float q = 0.5f, sm = x, sv = x * x;
        t.adam_step(NULL, &q, &sm, &sv, NULL, &x, 1, &h);
        moved += sm != x || sv != x * x;
    }
    assert_int_equal(moved, 0);
}

/* ---- empty batch ---- */

/* N = 0 (count = 0): no kernel touches any output, scratch included. */
static void test_empty_batch(void **state)
{
    (void)state;
    enum { n = 256 };
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        float *in = frand(&P, n, 99, -1.0f, 1.0f), *out = fzero(&P, n), *out2 = fzero(&P, n);
        float *out3 = fzero(&P, n), *want = fzero(&P, n);
        int32_t *arg = keep(&P, calloc(n, sizeof(int32_t)));
        int32_t labels[4] = {0};
        fill_const(want, n, SENTINEL);
#define RESET()                                                                                    \
    do {                                                                                           \
        fill_const(out, n, SENTINEL);                                                              \
        fill_const(out2, n, SENTINEL);                                                             \
        fill_const(out3, n, SENTINEL);                                                             \
        memset(arg, 0x5a, n * sizeof(int32_t));                                                    \
    } while (0)
#define UNTOUCHED(what)                                                                            \
    do {                                                                                           \
        if (memcmp(out, want, n * sizeof(float)) || memcmp(out2, want, n * sizeof(float)) ||       \
            memcmp(out3, want, n * sizeof(float)))                                                 \
            fail_msg("%s %s with an empty batch wrote an output", t.name, what);                   \
        for (int i = 0; i < n; i++)                                                                \
            if (arg[i] != 0x5a5a5a5a)                                                              \
                fail_msg("%s %s with an empty batch wrote argmax", t.name, what);                  \
        ctx_check(&C, what);                                                                       \
    } while (0)
        for (size_t ci = 0; ci < N_CONV; ci++) {
            mw_conv2d_geom g;
            conv_geom(&g, &conv_cases[ci]);
            ctx C;
            ctx_open(&C, mw_conv2d_ws_min(&g), 2);
            fill_const(C.k.ws, C.k.ws_count, SENTINEL);
            RESET();
            t.conv2d_fwd(&C.k, out, in, in, in, &g, 0);
            t.conv2d_bwd(&C.k, out, out2, out3, in, in, in, &g, 0);
            t.conv2d_bwd(&C.k, NULL, out2, out3, in, in, in, &g, 0);
            UNTOUCHED(conv_cases[ci].name);
            for (size_t i = 0; i < C.k.ws_count; i++)
                if (C.k.ws[i] != SENTINEL)
                    fail_msg("%s conv %s with an empty batch wrote scratch", t.name,
                             conv_cases[ci].name);
            ctx_close(&C);
        }
        ctx C;
        ctx_open(&C, 0, 2);
        for (size_t pi = 0; pi < N_POOL; pi++) {
            mw_pool_geom g;
            pool_geom(&g, &pool_cases[pi]);
            RESET();
            t.maxpool_fwd(&C.k, out, arg, in, &g, 0);
            t.maxpool_bwd(&C.k, out2, in, arg, &g, 0);
            UNTOUCHED(pool_cases[pi].name);
        }
        RESET();
        t.dense_fwd(&C.k, out, in, in, in, 0, 7, 5);
        t.dense_fwd(&C.k, out, in, in, NULL, 0, 7, 5);
        t.dense_bwd(&C.k, out, out2, out3, in, in, in, 0, 7, 5);
        t.dense_bwd(&C.k, NULL, out2, NULL, in, in, in, 0, 7, 5);
        UNTOUCHED("dense");
        t.relu_fwd(&C.k, out, in, 0);
        t.relu_bwd(&C.k, out, in, in, 0);
        UNTOUCHED("relu");
        t.xent_fwd(&C.k, out, out2, in, labels, 0, 7);
        t.xent_bwd(&C.k, out, in, labels, 0.5f, 0, 7);
        UNTOUCHED("xent");
        mw_optim_hyper h = {.lr = 1e-3f, .gscale = 1.0f, .momentum = 0.9f};
        h.one_minus_beta1 = 0.1f, h.one_minus_beta2 = 1e-3f, h.epsilon = 1e-7f;
        t.adam_step(&C.k, out, out2, out3, NULL, in, 0, &h);
        t.sgd_step(&C.k, out, out2, NULL, NULL, in, 0, &h);
        UNTOUCHED("optimizers");
#undef RESET
#undef UNTOUCHED
        ctx_close(&C);
        pool_free(&P);
    }
}

/* The weight penalty (kernels.h): its gradient term is the derivative of the penalty it
 * adds (central differences of the kernel's own penalty, away from the kink of |w| at 0; the
 * penalty itself against a sum in double), it accumulates into
 * g and *acc, scale multiplies both, and g NULL adds the penalty alone. Both tables use it. */
static double penalty(const float *w, size_t n, double l1, double l2)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += l1 * fabs((double)w[i]) + l2 * (double)w[i] * w[i];
    return s;
}

static void test_regularize(void **state)
{
    (void)state;
    static const double cases[][2] = {{0.01, 0.0}, {0.0, 0.003}, {0.02, 0.5}};
    for (int cpu = 0; cpu < 2; cpu++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            mw_kernels t;
            table(&t, cpu);
            assert_ptr_equal(t.regularize, mw_regularize_ref);
            const double l1 = cases[c][0], l2 = cases[c][1];
            const size_t n = 257;
            const float scale = 0.25f;
            pool P = {0};
            float *w = frand(&P, n, 300 + c, -1.0f, 1.0f);
            for (size_t i = 0; i < n; i++) /* keep |w| >= 0.05: the FD step stays off 0 */
                if (fabsf(w[i]) < 0.05f)
                    w[i] = w[i] < 0 ? w[i] - 0.05f : w[i] + 0.05f;
            w[7] = 0.0f; /* sign(0) = 0: no L1 gradient there, as TensorFlow */
            float *g = frand(&P, n, 310 + c, -1.0f, 1.0f), *g0 = fcopy(&P, g, n);
            double acc = 1.5;
            t.regularize(NULL, g, &acc, w, n, l1, l2, scale);
            const double want = penalty(w, n, l1, l2);
            assert_true(fabs((acc - 1.5) - scale * want) <= 1e-12 * (1.0 + want));
            for (size_t i = 0; i < n; i++) {
                double d = 0.0; /* sign(0) = 0: no L1 gradient at 0, as TensorFlow */
                if (i != 7) {
                    /* the kernel's own penalty at w[i] +- h (the floats actually used) */
                    const float x = w[i], xp = x + 1e-3f, xm = x - 1e-3f;
                    double fp = 0.0, fm = 0.0;
                    w[i] = xp;
                    t.regularize(NULL, NULL, &fp, w, n, l1, l2, 1.0f);
                    w[i] = xm;
                    t.regularize(NULL, NULL, &fm, w, n, l1, l2, 1.0f);
                    w[i] = x;
                    d = (fp - fm) / ((double)xp - (double)xm);
                }
                double got = (double)g[i] - (double)g0[i];
                assert_true(fabs(got - scale * d) <= 1e-5 * (1.0 + fabs(scale * d)));
            }
            double loss_only = 0.0;
            float *g1 = fcopy(&P, g, n);
            t.regularize(NULL, NULL, &loss_only, w, n, l1, l2, 1.0f);
            assert_true(fabs(loss_only - want) <= 1e-12 * (1.0 + want));
            assert_memory_equal(g1, g, n * sizeof(float)); /* untouched */
            double none = 0.0;
            t.regularize(NULL, g, &none, w, 0, l1, l2, 1.0f);
            assert_true(none == 0.0);
            pool_free(&P);
        }
}

/* ---- graph ops (kernels/graphops.h) ---- */

enum { OP_BN, OP_AVGPOOL, OP_PAD, OP_MUL, OP_CONCAT, OP_ACT, OP_SOFTMAX };

/* One op's forward from the current inputs, for central differences. */
typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    int op;
    float *y, *x, *x2, *g, *b, *st; /* output; inputs; BN gamma, beta, statistics (3 C) */
    const float *r;
    size_t ycount, rows;
    int C, C2; /* channels (concat: of x and of x2) */
    mw_pool_geom pg;
    int H, W, pad[4], N;
    mw_act_kind act;
    float alpha;
} gop_env;

static double gop_loss(void *env)
{
    gop_env *e = env;
    const mw_kernels *t = e->t;
    switch (e->op) {
    case OP_BN:
        t->bn_fwd_train(e->k, e->y, e->st, e->st + e->C, e->st + 2 * e->C, e->x, e->g, e->b,
                        e->rows, e->C, 1e-3f);
        break;
    case OP_AVGPOOL:
        t->avgpool_fwd(e->k, e->y, e->x, &e->pg, e->N);
        break;
    case OP_PAD:
        t->pad2d_fwd(e->k, e->y, e->x, e->H, e->W, e->C, e->pad[0], e->pad[1], e->pad[2], e->pad[3],
                     e->N);
        break;
    case OP_MUL:
        t->mul_fwd(e->k, e->y, e->x, e->x2, e->ycount);
        break;
    case OP_CONCAT:
        t->concat_fwd(e->k, e->y, e->x, e->rows, e->C, e->C + e->C2, 0);
        t->concat_fwd(e->k, e->y, e->x2, e->rows, e->C2, e->C + e->C2, e->C);
        break;
    case OP_ACT:
        t->act_fwd(e->k, e->y, e->x, e->ycount, e->act, e->alpha);
        break;
    case OP_SOFTMAX:
        t->softmax_fwd(e->k, e->y, e->x, e->rows, e->C);
        break;
    }
    return dot_r(e->r, e->y, e->ycount);
}

static void gop_check(gop_env *e, float *v, size_t n, const float *ana, float h, const char *what)
{
    char buf[96];
    snprintf(buf, sizeof buf, "%s %s", e->t->name, what);
    grad_check(gop_loss, e, v, n, ana, h, 17, buf);
}

/* BatchNormalization (training) backward: dx, dgamma, dbeta against central differences,
 * with and without gamma / beta; a second backward adds onto the first (accumulates). */
static void test_bn_grad(void **state)
{
    (void)state;
    const size_t rows = 10;
    const int C = 3;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        const size_t n = rows * C;
        gop_env e = {.t = &t, .op = OP_BN, .rows = rows, .C = C, .ycount = n};
        e.y = fzero(&P, n), e.x = frand(&P, n, 61, -1.0f, 2.0f);
        e.g = frand(&P, C, 62, 0.5f, 1.5f), e.b = frand(&P, C, 63, -0.5f, 0.5f);
        e.st = fzero(&P, 3 * C), e.r = frand(&P, n, 64, -1.0f, 1.0f);
        ctx X;
        ctx_open(&X, 0, 1);
        e.k = &X.k;
        float *dx = fzero(&P, n), *dg = fzero(&P, C), *db = fzero(&P, C);
        gop_loss(&e);
        t.bn_bwd(&X.k, dx, dg, db, e.r, e.x, e.st, e.st + 2 * C, e.g, rows, C);
        gop_check(&e, e.x, n, dx, 1e-3f, "bn dx");
        gop_check(&e, e.g, C, dg, 1e-3f, "bn dgamma");
        gop_check(&e, e.b, C, db, 1e-3f, "bn dbeta");
        /* the statistics: mean, biased variance, 1/sqrt(var + eps) */
        for (int c = 0; c < C; c++) {
            double s = 0, q = 0;
            for (size_t i = 0; i < rows; i++)
                s += e.x[i * C + c];
            for (size_t i = 0; i < rows; i++)
                q += (e.x[i * C + c] - s / rows) * (e.x[i * C + c] - s / rows);
            expect_near(e.st[c], s / rows, 1e-6);
            expect_near(e.st[C + c], q / rows, 1e-6);
            expect_near(e.st[2 * C + c], 1.0 / sqrt(q / rows + 1e-3), 1e-5);
        }
        float *dx2 = fcopy(&P, dx, n);
        t.bn_bwd(&X.k, dx2, NULL, NULL, e.r, e.x, e.st, e.st + 2 * C, e.g, rows, C);
        for (size_t i = 0; i < n; i++)
            expect_near(dx2[i], 2.0 * dx[i], 1e-6);
        e.g = NULL, e.b = NULL; /* center and scale off */
        gop_loss(&e);
        memset(dx, 0, n * sizeof *dx);
        t.bn_bwd(&X.k, dx, NULL, NULL, e.r, e.x, e.st, e.st + 2 * C, NULL, rows, C);
        gop_check(&e, e.x, n, dx, 1e-3f, "bn dx (no gamma, beta)");
        ctx_close(&X);
        pool_free(&P);
    }
}

/* Synchronized BatchNormalization over three replica slices of 5, 0 and 7 rows (the middle
 * one empty): each slice's sums (bn_sums), added, then each slice's pass. */
typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    float *y, *x, *g, *b, *st; /* st: 3 C per slice */
    const float *r;
    int C;
} sbn_env;

static const size_t sbn_rows[3] = {5, 0, 7}; /* 12 in all */

static double sbn_loss(void *env)
{
    sbn_env *e = env;
    const int C = e->C;
    double tot[8] = {0}, s[8];
    for (int p = 0, off = 0; p < 3; off += (int)sbn_rows[p++]) {
        e->t->bn_sums(e->k, s, e->x + off * C, NULL, NULL, NULL, NULL, NULL, sbn_rows[p], C);
        for (int c = 0; c < 2 * C; c++)
            tot[c] += s[c];
    }
    for (int p = 0, off = 0; p < 3; off += (int)sbn_rows[p++]) {
        float *st = e->st + 3 * C * p;
        e->t->bn_sync_fwd(e->k, e->y + off * C, st, st + C, st + 2 * C, e->x + off * C, e->g, e->b,
                          tot, 12.0, sbn_rows[p], C, 1e-3f);
    }
    return dot_r(e->r, e->y, 12 * (size_t)C);
}

/* dx, dgamma, dbeta of the synchronized layer (the slices' own gamma / beta sums added, as the
 * gradient all-reduce does) against central differences of the sum of every slice's loss; and
 * the whole layer equals one BatchNormalization over the 12 rows (bn_fwd_train, bn_bwd). */
static void test_bn_sync(void **state)
{
    (void)state;
    const int C = 4;
    const size_t n = 12 * (size_t)C;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        ctx X;
        ctx_open(&X, 0, 1);
        sbn_env e = {.t = &t, .k = &X.k, .C = C};
        e.y = fzero(&P, n), e.x = frand(&P, n, 71, -1.0f, 2.0f), e.st = fzero(&P, 9 * C);
        e.g = frand(&P, C, 72, 0.5f, 1.5f), e.b = frand(&P, C, 73, -0.5f, 0.5f);
        e.r = frand(&P, n, 74, -1.0f, 1.0f);
        float *dx = fzero(&P, n), *dg = fzero(&P, C), *db = fzero(&P, C);
        sbn_loss(&e);
        double tot[8] = {0}, s[8];
        for (int p = 0, off = 0; p < 3; off += (int)sbn_rows[p++]) {
            const float *st = e.st + 3 * C * p;
            /* the backward sums add the slice's dgamma, dbeta */
            t.bn_sums(&X.k, s, e.x + off * C, e.r + off * C, st, st + 2 * C, dg, db, sbn_rows[p],
                      C);
            for (int c = 0; c < 2 * C; c++)
                tot[c] += s[c];
        }
        for (int p = 0, off = 0; p < 3; off += (int)sbn_rows[p++]) {
            const float *st = e.st + 3 * C * p;
            t.bn_sync_bwd(&X.k, dx + off * C, e.r + off * C, e.x + off * C, st, st + 2 * C, e.g,
                          tot, 12.0, sbn_rows[p], C);
        }
        char what[64];
        snprintf(what, sizeof what, "%s synchronized bn", t.name);
        grad_check(sbn_loss, &e, e.x, n, dx, 1e-3f, 18, what);
        grad_check(sbn_loss, &e, e.g, C, dg, 1e-3f, 18, what);
        grad_check(sbn_loss, &e, e.b, C, db, 1e-3f, 18, what);
        /* one BatchNormalization over all 12 rows: the same outputs, statistics and dx */
        float *y1 = fzero(&P, n), *st1 = fzero(&P, 3 * C), *dx1 = fzero(&P, n);
        float *dg1 = fzero(&P, C), *db1 = fzero(&P, C);
        sbn_loss(&e);
        t.bn_fwd_train(&X.k, y1, st1, st1 + C, st1 + 2 * C, e.x, e.g, e.b, 12, C, 1e-3f);
        t.bn_bwd(&X.k, dx1, dg1, db1, e.r, e.x, st1, st1 + 2 * C, e.g, 12, C);
        expect_close(e.y, y1, n, 1e-5f, 1e-5f);
        for (int p = 0; p < 3; p++)
            expect_close(e.st + 3 * C * p, st1, 3 * (size_t)C, 1e-6f, 1e-5f);
        expect_close(dx, dx1, n, 1e-5f, 1e-4f);
        expect_close(dg, dg1, C, 1e-5f, 1e-4f);
        expect_close(db, db1, C, 1e-5f, 1e-4f);
        ctx_close(&X);
        pool_free(&P);
    }
}

/* The fast synchronized BN against the reference on a shape with several channel blocks and
 * leftover channels: the sums (forward and backward), the forward from sums and dx; with 3
 * threads bitwise what 1 thread gives (each channel is summed on its own, in row order). */
static void test_bn_sync_cpu_vs_ref(void **state)
{
    (void)state;
    mw_kernels ref, cpu;
    table(&ref, 0);
    table(&cpu, 1);
    pool P = {0};
    const size_t rows = 101;
    const int C = 67;
    const size_t n = rows * C;
    const double M = 3.0 * rows;
    float *x = frand(&P, n, 81, -2.0f, 3.0f), *dy = frand(&P, n, 82, -1.0f, 1.0f);
    float *g = frand(&P, C, 83, 0.5f, 1.5f), *b = frand(&P, C, 84, -1.0f, 1.0f);
    double *sf[3], *sb[3];
    float *y[3], *st[3], *dx[3];
    for (int t = 0; t < 3; t++) { /* the reference, cpu x 1 thread, cpu x 3 threads */
        const mw_kernels *k = t ? &cpu : &ref;
        ctx X;
        ctx_open(&X, 0, t == 2 ? 3 : 1);
        sf[t] = keep(&P, calloc(2 * (size_t)C, sizeof(double)));
        sb[t] = keep(&P, calloc(2 * (size_t)C, sizeof(double)));
        y[t] = fzero(&P, n), st[t] = fzero(&P, 3 * C), dx[t] = frand(&P, n, 85, -1.0f, 1.0f);
        k->bn_sums(&X.k, sf[t], x, NULL, NULL, NULL, NULL, NULL, rows, C);
        for (int c = 0; c < 2 * C; c++)
            sf[t][c] *= 3.0;
        k->bn_sync_fwd(&X.k, y[t], st[t], st[t] + C, st[t] + 2 * C, x, g, b, sf[t], M, rows, C,
                       1e-3f);
        k->bn_sums(&X.k, sb[t], x, dy, st[t], st[t] + 2 * C, NULL, NULL, rows, C);
        k->bn_sync_bwd(&X.k, dx[t], dy, x, st[t], st[t] + 2 * C, g, sb[t], M, rows, C);
        ctx_close(&X);
    }
    for (int c = 0; c < 2 * C; c++) {
        expect_near(sf[1][c], sf[0][c], 1e-9 * (1.0 + fabs(sf[0][c])));
        expect_near(sb[1][c], sb[0][c], 1e-6 * (1.0 + fabs(sb[0][c])));
    }
    expect_close(st[1], st[0], 3 * (size_t)C, 1e-6f, 1e-5f);
    expect_close(y[1], y[0], n, 1e-5f, 1e-5f);
    expect_close(dx[1], dx[0], n, 1e-5f, 1e-4f);
    assert_memory_equal(sf[2], sf[1], 2 * (size_t)C * sizeof(double));
    assert_memory_equal(sb[2], sb[1], 2 * (size_t)C * sizeof(double));
    assert_memory_equal(y[2], y[1], n * sizeof(float));
    assert_memory_equal(dx[2], dx[1], n * sizeof(float));
    pool_free(&P);
}

/* AveragePooling2D with 'same' padding and strides (edge windows count only their cells),
 * ZeroPadding2D, Multiply, Concatenate, Softmax: central differences of each backward. */
static void test_graph_ops_grad(void **state)
{
    (void)state;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        ctx X;
        ctx_open(&X, 0, 1);
        gop_env e = {.t = &t, .k = &X.k, .N = 2, .H = 5, .W = 4, .C = 3};
        const size_t nin = (size_t)e.N * e.H * e.W * e.C;
        e.x = frand(&P, nin, 71, -1.0f, 1.0f);
        /* avgpool 3x3 stride 2 'same': 5x4 -> 3x2 */
        assert_int_equal(mw_pool_geom_init(&e.pg, e.H, e.W, e.C, 3, 3, 2, 2, 1), 0);
        e.op = OP_AVGPOOL, e.ycount = (size_t)e.N * e.pg.OH * e.pg.OW * e.C;
        e.y = fzero(&P, e.ycount), e.r = frand(&P, e.ycount, 72, -1.0f, 1.0f);
        float *dx = fzero(&P, nin);
        t.avgpool_bwd(&X.k, dx, e.r, &e.pg, e.N);
        gop_check(&e, e.x, nin, dx, 1e-2f, "avgpool dx");
        gop_loss(&e); /* PT 1, PL 0: window (0, 0) of channel 0 holds rows 0..1, columns 0..2 */
        double s = (e.x[0] + e.x[3] + e.x[6] + e.x[12] + e.x[15] + e.x[18]) / 6.0;
        expect_near(e.y[0], s, 1e-6);
        /* zero padding 1, 2, 0, 3 */
        e.op = OP_PAD, e.pad[0] = 1, e.pad[1] = 2, e.pad[2] = 0, e.pad[3] = 3;
        e.ycount = (size_t)e.N * (e.H + 3) * (e.W + 3) * e.C;
        e.y = fzero(&P, e.ycount), e.r = frand(&P, e.ycount, 73, -1.0f, 1.0f);
        dx = fzero(&P, nin);
        t.pad2d_bwd(&X.k, dx, e.r, e.H, e.W, e.C, 1, 2, 0, 3, e.N);
        gop_check(&e, e.x, nin, dx, 1e-2f, "pad2d dx");
        /* multiply, concatenate, softmax on rows of C */
        e.x2 = frand(&P, nin, 74, -1.0f, 1.0f), e.rows = (size_t)e.N * e.H * e.W;
        e.op = OP_MUL, e.ycount = nin, e.y = fzero(&P, nin), e.r = frand(&P, nin, 75, -1, 1);
        float *da = fzero(&P, nin), *db = fzero(&P, nin);
        t.mul_bwd(&X.k, da, db, e.r, e.x, e.x2, nin);
        gop_check(&e, e.x, nin, da, 1e-2f, "mul da");
        gop_check(&e, e.x2, nin, db, 1e-2f, "mul db");
        e.op = OP_CONCAT, e.C2 = 3, e.ycount = 2 * nin, e.y = fzero(&P, 2 * nin);
        e.r = frand(&P, 2 * nin, 76, -1.0f, 1.0f);
        memset(da, 0, nin * sizeof *da), memset(db, 0, nin * sizeof *db);
        t.concat_bwd(&X.k, da, e.r, e.rows, e.C, 6, 0);
        t.concat_bwd(&X.k, db, e.r, e.rows, e.C2, 6, 3);
        gop_check(&e, e.x, nin, da, 1e-2f, "concat dx");
        gop_check(&e, e.x2, nin, db, 1e-2f, "concat dx2");
        e.op = OP_SOFTMAX, e.ycount = nin, e.y = fzero(&P, nin), e.r = frand(&P, nin, 77, -1, 1);
        gop_loss(&e);
        memset(dx, 0, nin * sizeof *dx);
        t.softmax_bwd(&X.k, dx, e.r, e.y, e.rows, e.C);
        gop_check(&e, e.x, nin, dx, 1e-3f, "softmax dx");
        ctx_close(&X);
        pool_free(&P);
    }
}

/* Every activation kind: values against the formulas (in double), and central differences
 * of the backward, with |x| >= 0.05 so no step crosses elu's or leaky_relu's kink at 0. */
static void test_act_grad(void **state)
{
    (void)state;
    static const mw_act_kind kinds[] = {MW_ACTK_SIGMOID,   MW_ACTK_TANH, MW_ACTK_GELU,
                                        MW_ACTK_GELU_TANH, MW_ACTK_SILU, MW_ACTK_ELU,
                                        MW_ACTK_LEAKY_RELU};
    const size_t n = 97;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        ctx X;
        ctx_open(&X, 0, 1);
        float *x = frand(&P, n, 81, 0.05f, 3.0f), *sign = frand(&P, n, 82, -1.0f, 1.0f);
        for (size_t i = 0; i < n; i++)
            x[i] = sign[i] < 0.0f ? -x[i] : x[i];
        for (size_t a = 0; a < sizeof kinds / sizeof kinds[0]; a++) {
            gop_env e = {.t = &t,
                         .k = &X.k,
                         .op = OP_ACT,
                         .x = x,
                         .ycount = n,
                         .act = kinds[a],
                         .alpha = kinds[a] == MW_ACTK_ELU ? 1.5f : 0.2f};
            e.y = fzero(&P, n), e.r = frand(&P, n, 83 + a, -1.0f, 1.0f);
            float *dx = fzero(&P, n);
            gop_loss(&e);
            for (size_t i = 0; i < n; i++) {
                double v = x[i], want = 0;
                switch (kinds[a]) {
                case MW_ACTK_SIGMOID:
                    want = 1.0 / (1.0 + exp(-v));
                    break;
                case MW_ACTK_TANH:
                    want = tanh(v);
                    break;
                case MW_ACTK_GELU:
                    want = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
                    break;
                case MW_ACTK_GELU_TANH:
                    want = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
                    break;
                case MW_ACTK_SILU:
                    want = v / (1.0 + exp(-v));
                    break;
                case MW_ACTK_ELU:
                    want = v > 0 ? v : 1.5 * (exp(v) - 1.0);
                    break;
                case MW_ACTK_LEAKY_RELU:
                    want = v >= 0 ? v : 0.2 * v;
                    break;
                }
                expect_near(e.y[i], want, 1e-6 + 1e-6 * fabs(want));
            }
            t.act_bwd(&X.k, dx, e.r, x, e.y, n, kinds[a], e.alpha);
            char what[48];
            snprintf(what, sizeof what, "act %d dx", (int)kinds[a]);
            gop_check(&e, x, n, dx, 1e-3f, what);
        }
        ctx_close(&X);
        pool_free(&P);
    }
}

/* Threads the fast graph ops run with against the reference: one, and more than the rows
 * or channel blocks of some shapes divide evenly into. */
static const int gop_threads[] = {1, 3};
#define N_GOP_THREADS (sizeof gop_threads / sizeof gop_threads[0])

/* got and ref bitwise equal (the zero signs too), printing the first difference. */
#define expect_same(got, ref, count)                                                               \
    do {                                                                                           \
        expect_close(got, ref, count, 0.0f, 0.0f);                                                 \
        assert_memory_equal(got, ref, (count) * sizeof(float));                                    \
    } while (0)

/* One BatchNormalization run: training forward, backward onto random dx, inference with
 * the reference's statistics (st_in), gamma and beta or neither. */
typedef struct {
    float *y, *st, *dx, *dg, *db, *yi;
} bn_out;

static void bn_run(pool *P, const mw_kernels *t, const mw_kctx *k, bn_out *o, const float *x,
                   const float *g, const float *b, const float *dy, const float *st_in, size_t rows,
                   int C)
{
    const size_t n = rows * C;
    o->y = fzero(P, n), o->st = fzero(P, 3 * (size_t)C), o->yi = fzero(P, n);
    o->dx = frand(P, n, 95, -1.0f, 1.0f), o->dg = frand(P, C, 96, -1.0f, 1.0f);
    o->db = frand(P, C, 97, -1.0f, 1.0f);
    t->bn_fwd_train(k, o->y, o->st, o->st + C, o->st + 2 * C, x, g, b, rows, C, 1e-3f);
    t->bn_bwd(k, o->dx, g ? o->dg : NULL, b ? o->db : NULL, dy, x, o->st, o->st + 2 * C, g, rows,
              C);
    st_in = st_in ? st_in : o->st;
    t->bn_fwd_infer(k, o->yi, x, g, b, st_in, st_in + C, rows, C, 1e-3f);
}

/* The fast BatchNormalization against the reference on odd shapes (one channel block, and
 * several: 67 channels), with and without gamma and beta: outputs, statistics, gradients
 * (accumulated onto non-zero values), inference. With 3 threads the fast path gives bitwise
 * the results of 1 thread (its sums are split by channel, each summed in row order). */
static void test_bn_cpu_vs_ref(void **state)
{
    (void)state;
    static const struct {
        size_t rows;
        int C;
    } shapes[] = {{37, 19}, {101, 67}, {5, 3}};
    mw_kernels ref, cpu;
    table(&ref, 0);
    table(&cpu, 1);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int affine = 1; affine >= 0; affine--) {
            pool P = {0};
            const size_t rows = shapes[si].rows, n = rows * shapes[si].C;
            const int C = shapes[si].C;
            float *x = frand(&P, n, 91, -2.0f, 3.0f), *dy = frand(&P, n, 94, -1.0f, 1.0f);
            float *g = affine ? frand(&P, C, 92, 0.5f, 1.5f) : NULL;
            float *b = affine ? frand(&P, C, 93, -1.0f, 1.0f) : NULL;
            ctx R;
            ctx_open(&R, 0, 1);
            bn_out o[1 + N_GOP_THREADS];
            bn_run(&P, &ref, &R.k, &o[0], x, g, b, dy, NULL, rows, C);
            for (size_t ti = 0; ti < N_GOP_THREADS; ti++) {
                ctx X;
                ctx_open(&X, 0, gop_threads[ti]);
                bn_out *c = &o[1 + ti];
                bn_run(&P, &cpu, &X.k, c, x, g, b, dy, o[0].st, rows, C);
                expect_close(c->y, o[0].y, n, 1e-5f, 1e-5f);
                expect_close(c->st, o[0].st, 3 * (size_t)C, 1e-6f, 1e-5f);
                expect_close(c->dx, o[0].dx, n, 1e-5f, 1e-4f);
                expect_close(c->dg, o[0].dg, C, 1e-5f, 1e-4f);
                expect_close(c->db, o[0].db, C, 1e-5f, 1e-4f);
                expect_close(c->yi, o[0].yi, n, 1e-5f, 1e-5f);
                expect_close(o[0].yi, o[0].y, n, 1e-5f, 1e-4f); /* the batch's own statistics */
                if (ti > 0) {
                    expect_same(c->y, o[1].y, n);
                    expect_same(c->st, o[1].st, 3 * (size_t)C);
                    expect_same(c->dx, o[1].dx, n);
                    expect_same(c->dg, o[1].dg, (size_t)C);
                    expect_same(c->db, o[1].db, (size_t)C);
                    expect_same(c->yi, o[1].yi, n);
                }
                ctx_close(&X);
            }
            ctx_close(&R);
            pool_free(&P);
        }
}

/* Average pooling: 'same' with strides (edge windows hold fewer cells), overlapping windows
 * (backward adds in window order), 'valid', a global average, more channels than the fast
 * path sums at once. */
static const struct {
    int H, W, C, PH, PW, SH, SW, same, N;
} avg_cases[] = {
    {9, 7, 19, 3, 3, 2, 2, 1, 3}, {9, 7, 19, 3, 3, 1, 1, 1, 2},  {8, 6, 19, 2, 2, 2, 2, 0, 3},
    {7, 7, 37, 7, 7, 1, 1, 0, 5}, {5, 4, 150, 2, 3, 1, 2, 1, 2},
};

/* The fast average pooling against the reference, 1 and 3 threads: forward (every output
 * written: it starts as SENTINEL) and backward (onto random dx) bitwise equal. N = 0 leaves
 * both untouched. */
static void test_avgpool_cpu_vs_ref(void **state)
{
    (void)state;
    mw_kernels ref, cpu;
    table(&ref, 0);
    table(&cpu, 1);
    for (size_t ci = 0; ci < sizeof avg_cases / sizeof *avg_cases; ci++)
        for (size_t ti = 0; ti < N_GOP_THREADS; ti++) {
            pool P = {0};
            mw_pool_geom g;
            assert_int_equal(mw_pool_geom_init(&g, avg_cases[ci].H, avg_cases[ci].W,
                                               avg_cases[ci].C, avg_cases[ci].PH, avg_cases[ci].PW,
                                               avg_cases[ci].SH, avg_cases[ci].SW,
                                               avg_cases[ci].same),
                             0);
            const int N = avg_cases[ci].N;
            const size_t nx = (size_t)N * g.H * g.W * g.C, ny = (size_t)N * g.OH * g.OW * g.C;
            float *x = frand(&P, nx, 101 + ci, -1.0f, 1.0f), *dy = frand(&P, ny, 111, -1, 1);
            float *y0 = fzero(&P, ny), *y1 = fzero(&P, ny);
            float *dx0 = frand(&P, nx, 121, -1.0f, 1.0f), *dx1 = fcopy(&P, dx0, nx);
            ctx R, X;
            ctx_open(&R, 0, 1);
            ctx_open(&X, 0, gop_threads[ti]);
            fill_const(y0, ny, SENTINEL), fill_const(y1, ny, SENTINEL);
            ref.avgpool_fwd(&R.k, y0, x, &g, N);
            cpu.avgpool_fwd(&X.k, y1, x, &g, N);
            expect_same(y1, y0, ny);
            ref.avgpool_bwd(&R.k, dx0, dy, &g, N);
            cpu.avgpool_bwd(&X.k, dx1, dy, &g, N);
            expect_same(dx1, dx0, nx);
            float *y2 = fcopy(&P, y1, ny), *dx2 = fcopy(&P, dx1, nx);
            cpu.avgpool_fwd(&X.k, y1, x, &g, 0);
            cpu.avgpool_bwd(&X.k, dx1, dy, &g, 0);
            assert_memory_equal(y1, y2, ny * sizeof *y1);
            assert_memory_equal(dx1, dx2, nx * sizeof *dx1);
            ctx_close(&R), ctx_close(&X);
            pool_free(&P);
        }
}

/* Zero padding (uneven sides, none, all sides) and Concatenate (three parts of 19, 5 and 1
 * channels into 25, the middle one at an offset), fast against the reference, 1 and 3
 * threads, bitwise: padding's forward writes every output (they start as SENTINEL), concat's
 * forward only its own channels (the others keep SENTINEL), both backwards accumulate. */
static void test_pad_concat_cpu_vs_ref(void **state)
{
    (void)state;
    static const int pads[][8] = {/* H, W, C, PT, PB, PL, PR, N */
                                  {5, 4, 19, 1, 2, 0, 3, 3},
                                  {7, 9, 3, 0, 0, 0, 0, 2},
                                  {6, 6, 16, 2, 2, 2, 2, 1}};
    mw_kernels ref, cpu;
    table(&ref, 0);
    table(&cpu, 1);
    for (size_t ti = 0; ti < N_GOP_THREADS; ti++) {
        ctx R, X;
        ctx_open(&R, 0, 1);
        ctx_open(&X, 0, gop_threads[ti]);
        for (size_t pi = 0; pi < sizeof pads / sizeof *pads; pi++) {
            pool P = {0};
            const int *p = pads[pi], H = p[0], W = p[1], C = p[2], N = p[7];
            const size_t nx = (size_t)N * H * W * C;
            const size_t ny = (size_t)N * (H + p[3] + p[4]) * (W + p[5] + p[6]) * C;
            float *x = frand(&P, nx, 131 + pi, -1.0f, 1.0f), *dy = frand(&P, ny, 141, -1, 1);
            float *y0 = fzero(&P, ny), *y1 = fzero(&P, ny);
            float *dx0 = frand(&P, nx, 151, -1.0f, 1.0f), *dx1 = fcopy(&P, dx0, nx);
            fill_const(y0, ny, SENTINEL), fill_const(y1, ny, SENTINEL);
            ref.pad2d_fwd(&R.k, y0, x, H, W, C, p[3], p[4], p[5], p[6], N);
            cpu.pad2d_fwd(&X.k, y1, x, H, W, C, p[3], p[4], p[5], p[6], N);
            expect_same(y1, y0, ny);
            ref.pad2d_bwd(&R.k, dx0, dy, H, W, C, p[3], p[4], p[5], p[6], N);
            cpu.pad2d_bwd(&X.k, dx1, dy, H, W, C, p[3], p[4], p[5], p[6], N);
            expect_same(dx1, dx0, nx);
            pool_free(&P);
        }
        pool P = {0};
        const size_t rows = 37;
        const int CX[3] = {19, 5, 1}, off[3] = {0, 19, 24}, CY = 25;
        float *y0 = fzero(&P, rows * CY), *y1 = fzero(&P, rows * CY);
        fill_const(y0, rows * CY, SENTINEL), fill_const(y1, rows * CY, SENTINEL);
        float *dy = frand(&P, rows * CY, 161, -1.0f, 1.0f);
        for (int j = 0; j < 3; j++) {
            const size_t nx = rows * CX[j];
            float *x = frand(&P, nx, 171 + j, -1.0f, 1.0f);
            float *dx0 = frand(&P, nx, 181 + j, -1.0f, 1.0f), *dx1 = fcopy(&P, dx0, nx);
            ref.concat_fwd(&R.k, y0, x, rows, CX[j], CY, off[j]);
            cpu.concat_fwd(&X.k, y1, x, rows, CX[j], CY, off[j]);
            expect_same(y1, y0, rows * CY);
            ref.concat_bwd(&R.k, dx0, dy, rows, CX[j], CY, off[j]);
            cpu.concat_bwd(&X.k, dx1, dy, rows, CX[j], CY, off[j]);
            expect_same(dx1, dx0, nx);
            for (size_t r = 0; r < rows; r++) /* the later parts' channels: not yet written */
                for (int c = off[j] + CX[j]; c < CY; c++)
                    assert_true(y1[r * CY + c] == SENTINEL);
        }
        ctx_close(&R), ctx_close(&X);
        pool_free(&P);
    }
}

/* Add (acc), Multiply (both gradients, each alone, and x * x whose two gradients are one
 * buffer), every activation kind (zeros of both signs, saturating values, more elements
 * than one block of the fast path) and the softmax layer (an odd shape, the logits' shape,
 * several blocks of rows; one row with a large offset), fast against the reference, 1 and 3
 * threads, bitwise. */
static void test_elementwise_cpu_vs_ref(void **state)
{
    (void)state;
    static const mw_act_kind kinds[] = {MW_ACTK_SIGMOID,   MW_ACTK_TANH, MW_ACTK_GELU,
                                        MW_ACTK_GELU_TANH, MW_ACTK_SILU, MW_ACTK_ELU,
                                        MW_ACTK_LEAKY_RELU};
    const size_t n = 2 * 4096 + 1037;
    mw_kernels ref, cpu;
    table(&ref, 0);
    table(&cpu, 1);
    for (size_t ti = 0; ti < N_GOP_THREADS; ti++) {
        pool P = {0};
        ctx R, X;
        ctx_open(&R, 0, 1);
        ctx_open(&X, 0, gop_threads[ti]);
        float *a = frand(&P, n, 191, -4.0f, 4.0f), *b = frand(&P, n, 192, -4.0f, 4.0f);
        float *dy = frand(&P, n, 193, -1.0f, 1.0f);
        for (size_t i = 0; i < n; i += 97)
            a[i] = (i / 97) % 3 == 0 ? 0.0f : (i / 97) % 3 == 1 ? -0.0f : 40.0f - (float)(i % 80);
        float *o0 = frand(&P, n, 194, -1.0f, 1.0f), *o1 = fcopy(&P, o0, n);
        ref.acc(&R.k, o0, a, n);
        cpu.acc(&X.k, o1, a, n);
        expect_same(o1, o0, n);
        ref.mul_fwd(&R.k, o0, a, b, n);
        cpu.mul_fwd(&X.k, o1, a, b, n);
        expect_same(o1, o0, n);
        float *d0 = frand(&P, n, 195, -1.0f, 1.0f), *d1 = fcopy(&P, d0, n);
        for (int mode = 0; mode < 4; mode++) { /* both, da alone, db alone, x * x */
            float *da0 = mode == 2 ? NULL : o0, *da1 = mode == 2 ? NULL : o1;
            float *db0 = mode == 1 ? NULL : mode == 3 ? o0 : d0;
            float *db1 = mode == 1 ? NULL : mode == 3 ? o1 : d1;
            const float *bb = mode == 3 ? a : b;
            ref.mul_bwd(&R.k, da0, db0, dy, a, bb, n);
            cpu.mul_bwd(&X.k, da1, db1, dy, a, bb, n);
            expect_same(o1, o0, n);
            expect_same(d1, d0, n);
        }
        for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++) {
            const float alpha = kinds[ki] == MW_ACTK_ELU ? 1.5f : 0.2f;
            float *y0 = fzero(&P, n), *y1 = fzero(&P, n);
            ref.act_fwd(&R.k, y0, a, n, kinds[ki], alpha);
            cpu.act_fwd(&X.k, y1, a, n, kinds[ki], alpha);
            expect_same(y1, y0, n);
            ref.act_bwd(&R.k, o0, dy, a, y0, n, kinds[ki], alpha);
            cpu.act_bwd(&X.k, o1, dy, a, y1, n, kinds[ki], alpha);
            expect_same(o1, o0, n);
        }
        static const size_t srows[] = {37, 64, 301}; /* 301: several blocks of rows */
        static const int sC[] = {19, 10, 7};
        for (int si = 0; si < 3; si++) {
            const size_t m = srows[si] * sC[si];
            float *x = fcopy(&P, a, m), *y0 = fzero(&P, m), *y1 = fzero(&P, m);
            for (int c = 0; c < sC[si]; c++)
                x[c] += 80.0f; /* a row far from 0: the max is subtracted first */
            ref.softmax_fwd(&R.k, y0, x, srows[si], sC[si]);
            cpu.softmax_fwd(&X.k, y1, x, srows[si], sC[si]);
            expect_same(y1, y0, m);
            ref.softmax_bwd(&R.k, o0, dy, y0, srows[si], sC[si]);
            cpu.softmax_bwd(&X.k, o1, dy, y1, srows[si], sC[si]);
            expect_same(o1, o0, n);
        }
        ctx_close(&R), ctx_close(&X);
        pool_free(&P);
    }
}

/* BatchNormalization's moving statistics (bn_stats_acc, bn_stats_update), both tables: the
 * float expressions of the contract, bitwise (the CPU's training results and checkpoints must
 * not change with them), next to the formula in double; acc adds onto what g holds, update
 * zeroes g, and count 0 touches nothing. */
static void test_bn_stats(void **state)
{
    (void)state;
    const size_t n = 37;
    const float w = 16.0f / 64.0f, mom = 0.99f;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        ctx X;
        ctx_open(&X, 0, 2);
        float *g = frand(&P, n, 71, -1.0f, 1.0f), *st = frand(&P, n, 72, 0.0f, 3.0f);
        float *p = frand(&P, n, 73, -2.0f, 2.0f), *g0 = fcopy(&P, g, n), *p0 = fcopy(&P, p, n);
        t.bn_stats_acc(&X.k, g, st, n, w);
        t.bn_stats_acc(&X.k, g, st, n, w); /* a second replica's statistics add on */
        float *want = fzero(&P, n);
        for (size_t i = 0; i < n; i++) {
            float a = g0[i] + w * st[i];
            want[i] = a + w * st[i];
            expect_near(g[i], g0[i] + 2.0 * w * st[i], 1e-6);
        }
        assert_memory_equal(g, want, n * sizeof *g);
        float *g1 = fcopy(&P, g, n);
        t.bn_stats_update(&X.k, p, g, n, mom);
        for (size_t i = 0; i < n; i++) {
            want[i] = p0[i] * mom + g1[i] * (1.0f - mom);
            expect_near(p[i], p0[i] * (double)mom + g1[i] * (1.0 - (double)mom), 1e-6);
            assert_true(g[i] == 0.0f);
        }
        assert_memory_equal(p, want, n * sizeof *p);
        float *p1 = fcopy(&P, p, n), *g2 = fcopy(&P, g1, n);
        t.bn_stats_acc(&X.k, g2, st, 0, w);
        t.bn_stats_update(&X.k, p, g2, 0, mom);
        assert_memory_equal(g2, g1, n * sizeof *g2);
        assert_memory_equal(p, p1, n * sizeof *p);
        ctx_close(&X);
        pool_free(&P);
    }
}

/* bfloat16 rounding (kernels/cast.h), bit patterns by hand: ties to even, a carry into the
 * exponent, overflow to infinity, NaNs that stay NaN (a signaling one would become infinity if
 * rounded as a number), subnormals; then the cpu twin against the reference over a million
 * random bit patterns, bitwise. */
static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_round_bf16(void **state)
{
    (void)state;
    static const uint32_t cases[][2] = {
        {0x3F800000u, 0x3F800000u}, /* 1 */
        {0x3F808000u, 0x3F800000u}, /* 1 + 2^-8: a tie, to the even 1 */
        {0x3F818000u, 0x3F820000u}, /* 1 + 3 2^-8: a tie, to the even 1 + 2^-6 */
        {0x3F808001u, 0x3F810000u}, /* just above the tie: up */
        {0x3F807FFFu, 0x3F800000u}, /* just below: down */
        {0x3FFF8000u, 0x40000000u}, /* a tie whose even neighbour carries into the exponent */
        {0xBF818000u, 0xBF820000u}, /* the sign does not change the rounding */
        {0x7F7FFFFFu, 0x7F800000u}, /* FLT_MAX: past bfloat16's largest, infinity */
        {0x7F7F7FFFu, 0x7F7F0000u}, /* bfloat16's largest stays */
        {0x7F800000u, 0x7F800000u}, /* inf */
        {0xFF800000u, 0xFF800000u}, /* -inf */
        {0x80000000u, 0x80000000u}, /* -0 */
        {0x7FC00001u, 0x7FC00000u}, /* a quiet NaN keeps its top payload */
        {0x7F800001u, 0x7FC00000u}, /* a signaling NaN stays NaN, quiet (not infinity) */
        {0xFFFFFFFFu, 0xFFFF0000u}, /* a negative NaN */
        {0x00008000u, 0x00000000u}, /* a subnormal tie, to the even 0 */
        {0x00018000u, 0x00020000u}, /* a subnormal tie, to the even 2 */
        {0x00000001u, 0x00000000u}, /* the smallest subnormal: down */
    };
    const size_t nc = sizeof cases / sizeof *cases;
    float got[sizeof cases / sizeof *cases], got_cpu[sizeof cases / sizeof *cases];
    for (size_t i = 0; i < nc; i++)
        got[i] = got_cpu[i] = of_bits(cases[i][0]);
    mw_kctx k = {.nthreads = 2};
    mw_round_bf16_ref(&k, got, nc);
    mw_round_bf16_cpu(&k, got_cpu, nc);
    for (size_t i = 0; i < nc; i++) {
        if (bits_of(got[i]) != cases[i][1] || bits_of(got_cpu[i]) != cases[i][1])
            fail_msg("round_bf16(0x%08X): ref 0x%08X, cpu 0x%08X, expected 0x%08X", cases[i][0],
                     bits_of(got[i]), bits_of(got_cpu[i]), cases[i][1]);
    }
    const size_t n = 1000003; /* odd: the vector loop's tail too */
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        a[i] = b[i] = of_bits((uint32_t)(x >> 16));
    }
    mw_round_bf16_ref(&k, a, n);
    mw_round_bf16_cpu(&k, b, n);
    for (size_t i = 0; i < n; i++)
        if (bits_of(a[i]) != bits_of(b[i]) || (bits_of(a[i]) & 0xFFFFu))
            fail_msg("round_bf16 element %zu: ref 0x%08X, cpu 0x%08X", i, bits_of(a[i]),
                     bits_of(b[i]));
    free(a);
    free(b);
}

/* float16 rounding against GCC's own conversion (_Float16: libgcc's or F16C's, round to
 * nearest even, IEEE's float16 with subnormals), over every 127th float32 bit pattern and the
 * edges by name; NaNs are compared as NaNs of the same sign (their payloads are ours: the
 * top bits kept, quiet, as round_bf16 keeps them). The fast CPU twin bitwise equal. */
static void test_round_f16(void **state)
{
    (void)state;
    static const uint32_t edges[] = {
        0x3F801000u, /* 1 + 2^-11: a tie, to the even 1 */
        0x3F803000u, /* 1 + 3 2^-11: a tie, to the even 1 + 2^-9 */
        0x477FE000u, /* 65504, the largest */
        0x477FEFFFu, /* just below the tie with 65536: 65504 */
        0x477FF000u, /* the tie: to the even 65536, infinity */
        0x38800000u, /* 2^-14, the smallest normal */
        0x387FFFFFu, /* just below: the subnormal step rounds it up to 2^-14 */
        0x33800000u, /* 2^-24, the smallest subnormal */
        0x33000000u, /* 2^-25: a tie with 0, to the even 0 */
        0x33000001u, /* just above: 2^-24 */
        0x33C00000u, /* 1.5 2^-24: a tie, to the even 2^-23 */
        0x80000001u, /* a float32 subnormal: -0 */
        0x7F800000u, 0xFF800000u, 0x7FC00001u, 0x7F800001u, 0xFFFFFFFFu,
    };
    const size_t ne = sizeof edges / sizeof *edges, stride = 127;
    const size_t n = ne + ((size_t)1 << 32) / stride + 1;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] = of_bits(i < ne ? edges[i] : (uint32_t)((i - ne) * stride));
    mw_kctx k = {.nthreads = 2};
    mw_round_f16_ref(&k, a, n);
    mw_round_f16_cpu(&k, b, n);
    for (size_t i = 0; i < n; i++) {
        const uint32_t in = i < ne ? edges[i] : (uint32_t)((i - ne) * stride);
        const volatile float x = of_bits(in);
        const float want = (float)(_Float16)x;
        const int same = isnan(want) ? isnan(a[i]) && signbit(a[i]) == signbit(want)
                                     : bits_of(a[i]) == bits_of(want);
        if (!same || bits_of(a[i]) != bits_of(b[i]))
            fail_msg("round_f16(0x%08X): ref 0x%08X, cpu 0x%08X, _Float16 0x%08X", in,
                     bits_of(a[i]), bits_of(b[i]), bits_of(want));
        if (isnan(a[i]) && (bits_of(a[i]) != ((in | 0x00400000u) & 0xFFFFE000u)))
            fail_msg("round_f16(0x%08X): NaN 0x%08X, expected its top payload, quiet", in,
                     bits_of(a[i]));
    }
    free(a);
    free(b);
}

/* mw_gemm_cpu with k->bf16 (the bfloat16 matmul of mixed_bfloat16) against sgemm on the same
 * bfloat16-valued operands, every transpose, beta 0 and 1, a ldc wider than N: each product
 * is exact in float32 on both sides, so they differ only by the order of the float32 sums,
 * within |error| <= 2 K u sum_k |a_ik b_kj| (u = 2^-24; the classic bound of a recursive
 * sum is (K - 1) u, doubled for the two orders). Skipped (visibly) without bf16 instructions. */
static void test_gemm_bf16(void **state)
{
    (void)state;
    if (!mw_kernels_cpu_has_bf16()) {
        print_message("gemm_bf16: no bfloat16 instructions here (oneDNN ISA '%s'): skipped\n",
                      mw_kernels_cpu_isa());
        skip();
    }
    const int M = 37, N = 19, K = 301, ldc = 23;
    float *A = malloc((size_t)M * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
    float *C = malloc((size_t)M * ldc * sizeof *C), *R = malloc((size_t)M * ldc * sizeof *R);
    assert_true(A && B && C && R);
    mw_rng r;
    mw_rng_seed(&r, 11, 0);
    for (int i = 0; i < M * K; i++)
        A[i] = mw_bf16_round(mw_rng_normal(&r));
    for (int i = 0; i < K * N; i++)
        B[i] = mw_bf16_round(mw_rng_normal(&r));
    const unsigned long before = mw_gemm_cpu_bf16_count();
    mw_kctx k = {.nthreads = 1, .bf16 = 1};
    for (int t = 0; t < 8; t++) {
        const char ta = t & 1 ? 'T' : 'N', tb = t & 2 ? 'T' : 'N';
        const float beta = t & 4 ? 1.0f : 0.0f;
        const int lda = ta == 'T' ? M : K, ldb = tb == 'T' ? K : N;
        for (int i = 0; i < M * ldc; i++)
            C[i] = R[i] = beta != 0.0f ? (float)(i % 7) - 3.0f : NAN; /* beta 0 ignores C */
        mw_gemm_cpu(&k, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
        mw_sgemm_cpu(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, R, ldc);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                /* beta 1 adds C's first value, ((i ldc + j) % 7) - 3, as one more term */
                double s = beta != 0.0f ? fabs((double)((i * ldc + j) % 7) - 3.0) : 0.0;
                for (int q = 0; q < K; q++) {
                    const float a = ta == 'T' ? A[(size_t)q * lda + i] : A[(size_t)i * lda + q];
                    const float b = tb == 'T' ? B[(size_t)j * ldb + q] : B[(size_t)q * ldb + j];
                    s += fabs((double)a * b);
                }
                const double tol = 2.0 * (K + 1) * 0x1p-24 * s;
                const double d = fabs((double)C[i * ldc + j] - R[i * ldc + j]);
                if (!(d <= tol))
                    fail_msg(
                        "gemm_bf16 %c%c beta %g: C[%d][%d] = %.9g, sgemm %.9g (|d| %.3g > %.3g)",
                        ta, tb, beta, i, j, C[i * ldc + j], R[i * ldc + j], d, tol);
            }
        for (int i = 0; i < M; i++) /* the columns past N are untouched */
            for (int j = N; j < ldc; j++)
                if (memcmp(&C[i * ldc + j], &R[i * ldc + j], sizeof *C) != 0)
                    fail_msg("gemm_bf16 wrote C[%d][%d] past N", i, j);
    }
    assert_int_equal(mw_gemm_cpu_bf16_count() - before, 8); /* the bfloat16 path ran each time */
    free(A), free(B), free(C), free(R);
}

/* The bfloat16 product run by several threads at once, as the CPU backend's threads run their
 * micro-batches: one shape (the tutorial CNN's second convolution, whose oneDNN kernel uses a
 * scratchpad), each thread its own operands, each result checked against sgemm. A scratchpad
 * shared by the threads (oneDNN's library mode) mixed their results: training diverged. */
static void test_gemm_bf16_threads(void **state)
{
    (void)state;
    if (!mw_kernels_cpu_has_bf16()) {
        print_message("gemm_bf16_threads: no bfloat16 instructions here: skipped\n");
        skip();
    }
    enum { T = 4, M = 1936, N = 64, K = 288, REPS = 6 };
    float *A = malloc((size_t)T * M * K * sizeof *A), *B = malloc((size_t)T * K * N * sizeof *B);
    float *C = malloc((size_t)T * M * N * sizeof *C), *R = malloc((size_t)T * M * N * sizeof *R);
    assert_true(A && B && C && R);
    mw_rng r;
    mw_rng_seed(&r, 12, 0);
    for (size_t i = 0; i < (size_t)T * M * K; i++)
        A[i] = mw_bf16_round(mw_rng_uniform(&r));
    for (size_t i = 0; i < (size_t)T * K * N; i++)
        B[i] = mw_bf16_round(mw_rng_uniform(&r) - 0.5f);
    for (int t = 0; t < T; t++)
        mw_sgemm_cpu('N', 'N', M, N, K, 1.0f, A + (size_t)t * M * K, K, B + (size_t)t * K * N, N,
                     0.0f, R + (size_t)t * M * N, N);
    int bad = 0;
    for (int rep = 0; rep < REPS; rep++) {
#pragma omp parallel for num_threads(T) schedule(static, 1) reduction(+ : bad)
        for (int t = 0; t < T; t++) {
            const mw_kctx k = {.nthreads = 1, .bf16 = 1};
            float *c = C + (size_t)t * M * N;
            mw_gemm_cpu(&k, 'N', 'N', M, N, K, 1.0f, A + (size_t)t * M * K, K,
                        B + (size_t)t * K * N, N, 0.0f, c, N);
            for (size_t i = 0; i < (size_t)M * N; i++) /* sums of K terms below 0.5 in size */
                bad += !(fabsf(c[i] - R[(size_t)t * M * N + i]) <= 2.0f * K * 0x1p-24f * 0.5f * K);
        }
    }
    if (bad)
        fail_msg("gemm_bf16 from %d threads at once: %d elements off sgemm's", T, bad);
    free(A), free(B), free(C), free(R);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_geom),
        cmocka_unit_test(test_pool_geom),
        cmocka_unit_test(test_conv_grad_ref),
        cmocka_unit_test(test_conv_grad_cpu),
        cmocka_unit_test(test_conv_accumulate),
        cmocka_unit_test(test_conv_cpu_vs_ref),
        cmocka_unit_test(test_conv_chunking),
        cmocka_unit_test(test_maxpool_grad_ref),
        cmocka_unit_test(test_maxpool_grad_cpu),
        cmocka_unit_test(test_maxpool_cpu_vs_ref),
        cmocka_unit_test(test_maxpool_definition),
        cmocka_unit_test(test_dense_grad_ref),
        cmocka_unit_test(test_dense_grad_cpu),
        cmocka_unit_test(test_dense_accumulate),
        cmocka_unit_test(test_dense_cpu_vs_ref),
        cmocka_unit_test(test_relu_grad),
        cmocka_unit_test(test_relu_cpu_vs_ref),
        cmocka_unit_test(test_xent),
        cmocka_unit_test(test_embed),
        cmocka_unit_test(test_masked_mean),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_layernorm_cpu_vs_ref),
        cmocka_unit_test(test_sine_pos),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_adam_by_hand),
        cmocka_unit_test(test_sgd_by_hand),
        cmocka_unit_test(test_regularize),
        cmocka_unit_test(test_optim_rules_cpu_vs_ref),
        cmocka_unit_test(test_rmsprop_adagrad_by_hand),
        cmocka_unit_test(test_adam_keras_order),
        cmocka_unit_test(test_empty_batch),
        cmocka_unit_test(test_conv_ws_capped),
        cmocka_unit_test(test_bn_grad),
        cmocka_unit_test(test_bn_sync),
        cmocka_unit_test(test_bn_sync_cpu_vs_ref),
        cmocka_unit_test(test_bn_cpu_vs_ref),
        cmocka_unit_test(test_graph_ops_grad),
        cmocka_unit_test(test_act_grad),
        cmocka_unit_test(test_bn_stats),
        cmocka_unit_test(test_avgpool_cpu_vs_ref),
        cmocka_unit_test(test_pad_concat_cpu_vs_ref),
        cmocka_unit_test(test_elementwise_cpu_vs_ref),
        cmocka_unit_test(test_round_bf16),
        cmocka_unit_test(test_round_f16),
        cmocka_unit_test(test_gemm_bf16),
        cmocka_unit_test(test_gemm_bf16_threads),
    };
    return cmocka_run_group_tests_name("kernels", tests, NULL, NULL);
}

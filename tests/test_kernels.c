/* Suite 'unit': every kernel of the reference table (kernels/ref) and the fast CPU table.
 * - Every backward, in both tables, passes a central-difference check in double precision
 *   against L = sum_i r_i y_i with a fixed random projection r (the analytic one: bwd(dy = r)).
 * - Backward accumulates (a second call adds again); ReLU and cross-entropy's work in place;
 *   the capped conv scratch; N = 0 touches nothing; Conv2D's groups (TF's conv/pool padding:
 *   tests/test_geom.c).
 * - The layer ops of Functional graphs (BatchNormalization, average pooling, zero padding,
 *   Multiply, Concatenate, the activations, softmax, the normalizations): values against
 *   formulas, every backward against central differences; BN's moving statistics bitwise.
 * - The fast CPU table against the reference: one loop over every entry it overrides, with its
 *   cases, shapes and tolerances (tests/kernel_check.c), and that loop's control. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/rng.h"
#include "kernels/cast.h"
#include "kernels/cpu/table.h"
#include "kernels/dropout.h"
#include "kernels/geom.h"
#include "kernels/ref/table.h"
#include "kernels/twins.h"
#include "tests/kernel_check.h"
#include "tests/kernel_test.h"
#include "tests/util.h"

/* ---- conv2d ---- */

typedef struct {
    const char *name;
    int H, W, C, O, KH, KW, SH, SW, same, N, G; /* G: groups */
} conv_case;

static const conv_case conv_cases[] = {
    {"valid 3x3/1 C=1", 6, 5, 1, 4, 3, 3, 1, 1, 0, 2, 1},
    {"valid 3x3/1 C=3", 5, 6, 3, 4, 3, 3, 1, 1, 0, 2, 1},
    {"same 3x3/1", 5, 4, 2, 3, 3, 3, 1, 1, 1, 2, 1},
    {"same 5x5/2 on 9x7", 9, 7, 2, 3, 5, 5, 2, 2, 1, 3, 1},
    {"same 3x3/2 on 8x6", 8, 6, 2, 3, 3, 3, 2, 2, 1, 2, 1},
    {"same 4x4/1 (pad 1 before, 2 after)", 5, 6, 2, 2, 4, 4, 1, 1, 1, 2, 1},
    {"valid 2x3/(2,1)", 7, 6, 2, 3, 2, 3, 2, 1, 0, 2, 1},
    {"pointwise 1x1", 4, 5, 3, 4, 1, 1, 1, 1, 0, 3, 1},
    {"1x1/2 (strided, im2col)", 5, 5, 3, 2, 1, 1, 2, 2, 0, 2, 1},
    {"same 5x5/1 C=4 (long rows)", 12, 10, 4, 6, 5, 5, 1, 1, 1, 2, 1},
    {"same 3x3/2, 2 groups", 9, 7, 4, 6, 3, 3, 2, 2, 1, 2, 2},
    {"pointwise, 4 groups", 4, 5, 8, 4, 1, 1, 1, 1, 0, 3, 4},
};
#define N_CONV (sizeof conv_cases / sizeof conv_cases[0])

static void conv_geom(mw_conv2d_geom *g, const conv_case *c)
{
    assert_int_equal(
        mw_conv2d_geom_init(g, c->H, c->W, c->C, c->O, c->KH, c->KW, c->SH, c->SW, c->same), 0);
    assert_int_equal(mw_conv2d_geom_group(g, c->G), 0);
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
        size_t nx = (size_t)N * g.H * g.W * g.C, nw = mw_conv2d_w_count(&g);
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
        t.conv2d_bwd(&C.k, dx, dw, db, r, x, w, &g, N, 0);
        conv_env e = {&t, &C.k, &g, N, y, x, w, b, r, ny};
        char what[160];
        snprintf(what, sizeof what, "%s conv %s dx", t.name, c->name);
        grad_check(conv_loss, &e, x, nx, dx, 1e-2f, 1, what);
        snprintf(what, sizeof what, "%s conv %s dw", t.name, c->name);
        grad_check(conv_loss, &e, w, nw, dw, 1e-2f, 2, what);
        snprintf(what, sizeof what, "%s conv %s db", t.name, c->name);
        grad_check(conv_loss, &e, b, g.O, db, 1e-2f, 3, what);
        /* dx = NULL (first layer): the same dw and db. */
        t.conv2d_bwd(&C.k, NULL, dw2, db2, r, x, w, &g, N, 0);
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
            size_t nx = (size_t)N * g.H * g.W * g.C, nw = mw_conv2d_w_count(&g);
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
            t.conv2d_bwd(&C.k, dx1, dw1, db1, dy, x, w, &g, N, 0);
            t.conv2d_bwd(&C.k, dx, dw, db, dy, x, w, &g, N, 0);
            t.conv2d_bwd(&C.k, dx, dw, db, dy, x, w, &g, N, 0);
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
    for (size_t ci = 0; ci < N_CONV; ci++) { /* the fast path runs them: tests/kernel_check.c */
        mw_conv2d_geom g;
        conv_geom(&g, &conv_cases[ci]);
        const size_t min = mw_conv2d_ws_min(&g);
        assert_int_equal(mw_conv2d_ws_capped(&g, 5, 2 * min + min / 2), 2 * min);
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

/* GroupNormalization: n=3 examples of S=4 positions of C=6 channels (values far from 0 mean),
 * in 2, 3 and 6 groups (6: instance normalization), affine or not: each gradient by central
 * differences of sum(r * y). */
typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    float *y, *stat;
    const float *x, *gamma, *beta, *r;
    int G;
} gn_env;

static double gn_loss(void *env)
{
    gn_env *e = env;
    e->t->groupnorm_fwd(e->k, e->y, e->stat, e->x, e->gamma, e->beta, 3, 4, 6, e->G, 1e-3f);
    return dot_r(e->r, e->y, 3 * 4 * 6);
}

static void test_groupnorm(void **state)
{
    (void)state;
    for (int G = 2; G <= 6; G += 1 + (G == 3) * 2)
        for (int affine = 1; affine >= 0; affine--) {
            mw_kernels t;
            table(&t, 1);
            pool P = {0};
            ctx c;
            ctx_open(&c, 0, 2);
            float *x = frand(&P, 72, 111, 2.0f, 4.0f), *dx = fzero(&P, 72);
            float *gamma = affine ? frand(&P, 6, 113, 0.5f, 1.5f) : NULL;
            float *beta = affine ? frand(&P, 6, 114, -0.5f, 0.5f) : NULL;
            float *dg = affine ? fzero(&P, 6) : NULL, *db = affine ? fzero(&P, 6) : NULL;
            gn_env e = {&t, &c.k,  fzero(&P, 72), fzero(&P, 2 * 3 * 6),
                        x,  gamma, beta,          frand(&P, 72, 112, -1.0f, 1.0f),
                        G};
            gn_loss(&e);
            t.groupnorm_bwd(&c.k, dx, dg, db, e.r, x, e.stat, gamma, 3, 4, 6, G);
            grad_check(gn_loss, &e, x, 72, dx, 1e-2f, 115, affine ? "groupnorm dx" : "gn dx, 1 0");
            for (int p = 0; affine && p < 2; p++)
                grad_check(gn_loss, &e, p ? beta : gamma, 6, p ? db : dg, 1e-2f, 116, "gn dg, db");
            ctx_close(&c);
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
        float yz[2] = {0.0f, -0.0f}, dz[2] = {1.0f, 1.0f};
        t.relu_bwd(&C.k, dz, dz, yz, 2);
        assert_true(dz[0] == 0.0f && dz[1] == 0.0f); /* zeros of both signs pass nothing */
        ctx_close(&C);
        pool_free(&P);
    }
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
        ctx_close(&C);
        pool_free(&P);
    }
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
            t.conv2d_bwd(&C.k, out, out2, out3, in, in, in, &g, 0, 0);
            t.conv2d_bwd(&C.k, NULL, out2, out3, in, in, in, &g, 0, 0);
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

/* ---- layer ops of Functional graphs ---- */

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
    float alpha; /* act's; OP_BN: > 0, the max_value of a ReLU fused after it (bn_relu_*) */
} gop_env;

static double gop_loss(void *env)
{
    gop_env *e = env;
    const mw_kernels *t = e->t;
    switch (e->op) {
    case OP_BN:
        if (e->alpha > 0.0f)
            t->bn_relu_fwd_train(e->k, e->y, e->st, e->st + e->C, e->st + 2 * e->C, e->x, e->g,
                                 e->b, e->rows, e->C, 1e-3f, e->alpha);
        else
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

/* e's backward (bn_bwd, or bn_relu_bwd with e->alpha > 0) into dx, dg, db. */
static void bn_grad(const gop_env *e, float *dx, float *dg, float *db, int set_dx)
{
    if (e->alpha > 0.0f)
        e->t->bn_relu_bwd(e->k, dx, dg, db, e->r, e->x, e->st, e->st + 2 * e->C, e->g, e->b,
                          e->rows, e->C, e->alpha, set_dx);
    else
        e->t->bn_bwd(e->k, dx, dg, db, e->r, e->x, e->st, e->st + 2 * e->C, e->g, e->rows, e->C,
                     set_dx);
}

/* BatchNormalization (training) backward: dx, dgamma, dbeta against central differences,
 * with and without gamma / beta; a second backward adds onto the first (accumulates). Fused
 * with a ReLU of max_value 1 (bn_relu_*), the same: no v of these inputs lies within 1e-2 of
 * a kink (0 or 1), where a step of h = 1e-3 could cross it. */
static void test_bn_grad(void **state)
{
    (void)state;
    const size_t rows = 10;
    const int C = 3;
    for (int v = 0; v < 4; v++) {
        const int cpu = v & 1;
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        const size_t n = rows * C;
        gop_env e = {.t = &t, .op = OP_BN, .rows = rows, .C = C, .ycount = n, .alpha = v / 2};
        e.y = fzero(&P, n), e.x = frand(&P, n, 61, -1.0f, 2.0f);
        e.g = frand(&P, C, 62, 0.5f, 1.5f), e.b = frand(&P, C, 63, -0.5f, 0.5f);
        e.st = fzero(&P, 3 * C), e.r = frand(&P, n, 64, -1.0f, 1.0f);
        ctx X;
        ctx_open(&X, 0, 1);
        e.k = &X.k;
        float *dx = fzero(&P, n), *dg = fzero(&P, C), *db = fzero(&P, C);
        gop_loss(&e);
        float *yi = fzero(&P, n); /* v: inference with the batch's own statistics */
        t.bn_fwd_infer(&X.k, yi, e.x, e.g, e.b, e.st, e.st + C, rows, C, 1e-3f);
        int below = 0, above = 0;                          /* the ReLU both zeroes and clips */
        for (size_t i = 0; i < n && e.alpha > 0.0f; i++) { /* away from the kinks 0 and 1 */
            assert_true(fabsf(yi[i]) > 1e-2f && fabsf(yi[i] - 1.0f) > 1e-2f);
            below += yi[i]<0.0f, above += yi[i]> 1.0f;
        }
        assert_true(e.alpha == 0.0f || (below > 0 && above > 0));
        bn_grad(&e, dx, dg, db, 0);
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
        /* inference with the batch's own statistics is the training forward */
        gop_loss(&e);
        if (e.alpha > 0.0f)
            t.relux_fwd(&X.k, yi, yi, n, e.alpha, 0.0f, 0.0f);
        expect_close(yi, e.y, n, 1e-5f, 1e-4f);
        float *dx2 = fcopy(&P, dx, n);
        bn_grad(&e, dx2, NULL, NULL, 0);
        for (size_t i = 0; i < n; i++)
            expect_near(dx2[i], 2.0 * dx[i], 1e-6);
        e.g = NULL, e.b = NULL, gop_loss(&e); /* center and scale off */
        for (size_t i = 0; i < n; i++) /* set_dx: dx written, its old (NaN) values never read */
            dx[i] = NAN;
        bn_grad(&e, dx, NULL, NULL, 1);
        gop_check(&e, e.x, n, dx, 1e-3f, "bn dx (no gamma, beta; written)");
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
        t.bn_bwd(&X.k, dx1, dg1, db1, e.r, e.x, st1, st1 + 2 * C, e.g, 12, C, 0);
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

/* Activation kind k of v in double (elu's alpha 1.5, leaky_relu's slope 0.2). */
static double act_formula(mw_act_kind k, double v)
{
    switch (k) {
    case MW_ACTK_SIGMOID:
        return 1.0 / (1.0 + exp(-v));
    case MW_ACTK_TANH:
        return tanh(v);
    case MW_ACTK_GELU:
        return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    case MW_ACTK_GELU_TANH:
        return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case MW_ACTK_SILU:
        return v / (1.0 + exp(-v));
    case MW_ACTK_ELU:
        return v > 0 ? v : 1.5 * (exp(v) - 1.0);
    case MW_ACTK_LEAKY_RELU:
        return v >= 0 ? v : 0.2 * v;
    case MW_ACTK_RELU6:
        return v < 0 ? 0 : v > 6 ? 6 : v;
    case MW_ACTK_HARD_SIGMOID: /* relu6(x + 3) / 6 */
        return fmin(fmax(v + 3, 0), 6) / 6;
    case MW_ACTK_HARD_SILU:
        return v * fmin(fmax(v + 3, 0), 6) / 6;
    default:
        return NAN;
    }
}

/* Every activation kind: values against the formulas (in double), and central differences
 * of the backward, with |x| >= 0.05 so no step crosses a kink at 0 (relu6's and the hard ones'
 * inputs 2.5 x: past their clamps at 6 and +-3, none within 0.1 of them). */
static void test_act_grad(void **state)
{
    (void)state;
    const size_t n = 97;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        ctx X;
        ctx_open(&X, 0, 1);
        float *x = frand(&P, n, 81, 0.05f, 3.0f), *sign = frand(&P, n, 82, -1.0f, 1.0f);
        float *x6 = fzero(&P, n);
        for (size_t i = 0; i < n; i++)
            x[i] = sign[i] < 0.0f ? -x[i] : x[i], x6[i] = 2.5f * x[i];
        for (int a = 0; a < MW_ACTK_COUNT; a++) {
            const mw_act_kind kind = (mw_act_kind)a;
            float *xa = kind == MW_ACTK_RELU6 || kind >= MW_ACTK_HARD_SIGMOID ? x6 : x;
            gop_env e = {.t = &t,
                         .k = &X.k,
                         .op = OP_ACT,
                         .x = xa,
                         .ycount = n,
                         .act = kind,
                         .alpha = kind == MW_ACTK_ELU ? 1.5f : 0.2f};
            e.y = fzero(&P, n), e.r = frand(&P, n, 83 + a, -1.0f, 1.0f);
            float *dx = fzero(&P, n);
            gop_loss(&e);
            for (size_t i = 0; i < n; i++)
                expect_near(e.y[i], act_formula(kind, xa[i]), 1e-6 * (1 + fabs(e.y[i])));
            t.act_bwd(&X.k, dx, e.r, xa, e.y, n, kind, e.alpha);
            char what[48];
            snprintf(what, sizeof what, "act %d dx", (int)kind);
            gop_check(&e, xa, n, dx, 1e-3f, what);
        }
        ctx_close(&X);
        pool_free(&P);
    }
}

/* add2 is its contract's zero, acc, acc (and zero, acc with b NULL), bitwise, on both tables:
 * signed zeros (0 + -0 is +0) and a sum that rounds. */
static void test_add2(void **state)
{
    (void)state;
    const size_t n = 1003;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        table(&t, cpu);
        pool P = {0};
        ctx X;
        ctx_open(&X, 0, 2);
        float *a = frand(&P, n, 75, -1.0f, 1.0f), *b = frand(&P, n, 76, -1.0f, 1.0f);
        for (size_t i = 0; i < n; i += 7)
            a[i] = i % 2 ? -0.0f : 0.0f, b[i] = i % 3 ? -0.0f : 1e-9f;
        for (int copy = 0; copy < 2; copy++) {
            float *y = frand(&P, n, 77, -1.0f, 1.0f), *want = fzero(&P, n);
            t.acc(&X.k, want, a, n);
            if (!copy)
                t.acc(&X.k, want, b, n);
            t.add2(&X.k, y, a, copy ? NULL : b, n);
            assert_memory_equal(y, want, n * sizeof *y);
        }
        ctx_close(&X);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_grad_ref),
        cmocka_unit_test(test_conv_grad_cpu),
        cmocka_unit_test(test_conv_accumulate),
        cmocka_unit_test(test_maxpool_grad_ref),
        cmocka_unit_test(test_maxpool_grad_cpu),
        cmocka_unit_test(test_maxpool_definition),
        cmocka_unit_test(test_dense_grad_ref),
        cmocka_unit_test(test_dense_grad_cpu),
        cmocka_unit_test(test_dense_accumulate),
        cmocka_unit_test(test_relu_grad),
        cmocka_unit_test(test_xent),
        cmocka_unit_test(test_embed),
        cmocka_unit_test(test_masked_mean),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_groupnorm),
        cmocka_unit_test(test_sine_pos),
        cmocka_unit_test(test_regularize),
        cmocka_unit_test(test_empty_batch),
        cmocka_unit_test(test_conv_ws_capped),
        cmocka_unit_test(test_bn_grad),
        cmocka_unit_test(test_bn_sync),
        cmocka_unit_test(test_graph_ops_grad),
        cmocka_unit_test(test_act_grad),
        cmocka_unit_test(test_bn_stats),
        cmocka_unit_test(test_add2),
        cmocka_unit_test(mw_test_kernels_fast_vs_ref),
        cmocka_unit_test(mw_test_kernels_fast_vs_ref_control),
    };
    return cmocka_run_group_tests_name("kernels", tests, NULL, NULL);
}

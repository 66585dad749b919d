/* The depthwise convolution, Conv2D's groups and its dilation, checked against definitions they
 * do not share code with:
 *   - the dilated geometry: output sizes and padding as TensorFlow and Keras compute them
 *     for the dilated extent (K - 1) * D + 1;
 *   - the reference depthwise twin against the reference Conv2D with the equivalent dense
 *     kernel: zero except w[kh][kw][c][c*M + m] (the block diagonal of a grouped
 *     convolution), dilated by spreading the taps D apart with zeros between. The zero products
 *     add +-0 and the non-zero ones come in the same order, so forward and backward agree
 *     bitwise; a control with one weight moved to a wrong channel shows the comparison fails;
 *   - Conv2D in G groups, the reference and the fast twin, against the reference Conv2D on the
 *     dense kernel that is zero outside the groups' blocks (input channel c feeds filter o only
 *     when c / (C/G) == o / (O/G)): the reference bitwise (the same non-zero products in the same
 *     order), the fast twin within the bound below; a weight moved to another group is seen;
 *   - the reference Conv2D with a dilation against the same Conv2D undilated on the spread
 *     kernel (bitwise), and the fast Conv2D (im2col + sgemm) against the reference on dilated
 *     shapes: sgemm sums K = 9 C <= 36 products of size <= 0.5 in another order, within
 *     1e-5 + 1e-4 |ref| (the bound tests/kernel_check.c argues).
 *   - set_dx: a backward that writes dx over NaNs equals the one that adds into zeros, on the
 *     reference and the fast twin, on the 1x1, im2col and depthwise paths.
 * The fast depthwise twin against the reference is tests/kernel_check.c's (cases dwconv2d_*). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/rng.h"
#include "kernels/cpu/table.h"
#include "kernels/geom.h"
#include "kernels/ref/table.h"
#include "tests/util.h"

static void test_dilated_geometry(void **state)
{
    (void)state;
    mw_conv2d_geom g;
    /* 9 rows, 3 taps 2 apart (a reach of 5), valid: 9 - 5 + 1 = 5 rows, no padding */
    assert_int_equal(mw_conv2d_geom_init(&g, 9, 9, 2, 4, 3, 3, 1, 1, 0), 0);
    assert_int_equal(mw_conv2d_geom_dilate(&g, 2, 2, 0), 0);
    assert_true(g.OH == 5 && g.OW == 5 && g.PT == 0 && g.DH == 2);
    /* same, stride 2: ceil(9 / 2) = 5 rows, (5 - 1) * 2 + 5 - 9 = 4 zeros, 2 before */
    assert_int_equal(mw_conv2d_geom_init(&g, 9, 9, 2, 4, 3, 3, 2, 2, 1), 0);
    assert_int_equal(mw_conv2d_geom_dilate(&g, 2, 2, 1), 0);
    assert_true(g.OH == 5 && g.PT == 2);
    /* 7 columns, 3 taps 3 apart (a reach of 7), same: 6 zeros, 3 before; rows undilated */
    assert_int_equal(mw_conv2d_geom_init(&g, 7, 7, 1, 1, 3, 3, 1, 1, 1), 0);
    assert_int_equal(mw_conv2d_geom_dilate(&g, 1, 3, 1), 0);
    assert_true(g.OW == 7 && g.PL == 3 && g.OH == 7 && g.PT == 1);
    /* a reach of 9 does not fit 8 valid columns; a rate below 1 is no dilation */
    assert_int_equal(mw_conv2d_geom_init(&g, 8, 8, 1, 1, 3, 3, 1, 1, 0), 0);
    assert_int_equal(mw_conv2d_geom_dilate(&g, 1, 4, 0), -1);
    assert_int_equal(mw_conv2d_geom_dilate(&g, 0, 1, 0), -1);
    /* undilated, the geometry is mw_conv2d_geom_init's */
    mw_conv2d_geom h;
    assert_int_equal(mw_conv2d_geom_init(&g, 9, 7, 2, 3, 5, 5, 2, 2, 1), 0);
    h = g;
    assert_int_equal(mw_conv2d_geom_dilate(&h, 1, 1, 1), 0);
    assert_memory_equal(&g, &h, sizeof g);
}

/* A depthwise case: H, W, C, M, KH, KW, SH, SW, same, DH, DW. */
static const int dw_cases[][11] = {
    {7, 6, 3, 1, 3, 3, 1, 1, 0, 1, 1},  {9, 8, 2, 2, 3, 3, 2, 2, 1, 2, 2},
    {8, 9, 4, 3, 3, 2, 1, 2, 1, 2, 3},  {6, 6, 5, 2, 1, 1, 2, 2, 0, 1, 1},
    {10, 7, 3, 1, 5, 3, 1, 1, 1, 1, 2},
};

/* n floats uniform in [-scale, scale]; scale 0: +0.0 (a gradient's start: the comparisons are
 * bitwise, and -0.0 + +0.0 is +0.0). */
static float *random_floats(size_t n, mw_rng *r, float scale)
{
    float *p = mw_alloc_aligned((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = scale != 0 ? scale * (2.0f * mw_rng_uniform(r) - 1.0f) : 0.0f;
    return p;
}

/* The dense kernel (KE_H, KE_W, C, O) of a depthwise kernel w (KH, KW, O): tap (kh, kw) at
 * (kh*DH, kw*DW), channel c to outputs c*M .. c*M + M - 1 only. wrong: one weight moved to the
 * next input channel (the control). */
static float *spread(const float *w, const mw_conv2d_geom *dw, const mw_conv2d_geom *dense,
                     int wrong)
{
    const int M = dw->O / dw->C;
    const size_t n = (size_t)dense->KH * dense->KW * dense->C * dense->O;
    float *e = mw_alloc_aligned(n * sizeof(float));
    memset(e, 0, n * sizeof(float));
    for (int kh = 0; kh < dw->KH; kh++)
        for (int kw = 0; kw < dw->KW; kw++)
            for (int o = 0; o < dw->O; o++) {
                int c = o / M;
                if (wrong && kh == 0 && kw == 0 && o == 0)
                    c = (c + 1) % dw->C;
                size_t at =
                    (((size_t)kh * dw->DH * dense->KW + (size_t)kw * dw->DW) * dense->C + c) *
                        dense->O +
                    o;
                e[at] = w[((size_t)kh * dw->KW + kw) * dw->O + o];
            }
    return e;
}

/* The dense geometry of the spread kernel: undilated, the same padding and output. */
static mw_conv2d_geom dense_of(const mw_conv2d_geom *g, int same)
{
    mw_conv2d_geom d;
    assert_int_equal(mw_conv2d_geom_init(&d, g->H, g->W, g->C, g->O, (g->KH - 1) * g->DH + 1,
                                         (g->KW - 1) * g->DW + 1, g->SH, g->SW, same),
                     0);
    assert_true(d.OH == g->OH && d.OW == g->OW && d.PT == g->PT && d.PL == g->PL);
    return d;
}

/* Case s: the depthwise reference against the dense reference; 1 when all agree bitwise. */
static int dw_vs_dense(int s, int wrong)
{
    const int *c = dw_cases[s], N = 2;
    mw_conv2d_geom g;
    assert_int_equal(
        mw_conv2d_geom_init(&g, c[0], c[1], c[2], c[2] * c[3], c[4], c[5], c[6], c[7], c[8]), 0);
    assert_int_equal(mw_conv2d_geom_dilate(&g, c[9], c[10], c[8]), 0);
    const mw_conv2d_geom d = dense_of(&g, c[8]);
    mw_rng r;
    mw_rng_seed(&r, 11, (uint64_t)s);
    const size_t nx = (size_t)N * g.H * g.W * g.C, ny = (size_t)N * g.OH * g.OW * g.O;
    const size_t nw = (size_t)g.KH * g.KW * g.O, ne = (size_t)d.KH * d.KW * d.C * d.O;
    float *x = random_floats(nx, &r, 1), *w = random_floats(nw, &r, 0.5f);
    float *b = random_floats(g.O, &r, 0.5f), *dy = random_floats(ny, &r, 1);
    float *e = spread(w, &g, &d, wrong);
    float *y[2], *dx[2], *dw[2], *db[2], *de = random_floats(ne, &r, 0);
    for (int i = 0; i < 2; i++) /* zeros: the gradients accumulate from 0 */
        y[i] = random_floats(ny, &r, 0), dx[i] = random_floats(nx, &r, 0),
        dw[i] = random_floats(nw, &r, 0), db[i] = random_floats(g.O, &r, 0);
    mw_kernels ref;
    mw_kernels_init_ref(&ref);
    const mw_kctx k = {.nthreads = 1};
    ref.dwconv2d_fwd(&k, y[0], x, w, b, &g, N);
    ref.conv2d_fwd(&k, y[1], x, e, b, &d, N);
    ref.dwconv2d_bwd(&k, dx[0], dw[0], db[0], dy, x, w, &g, N, 0);
    ref.conv2d_bwd(&k, dx[1], de, db[1], dy, x, e, &d, N, 0);
    /* the dense kernel's gradient read back at the depthwise taps */
    const int M = g.O / g.C;
    for (int kh = 0; kh < g.KH; kh++)
        for (int kw = 0; kw < g.KW; kw++)
            for (int o = 0; o < g.O; o++)
                dw[1][((size_t)kh * g.KW + kw) * g.O + o] =
                    de[(((size_t)kh * g.DH * d.KW + (size_t)kw * g.DW) * d.C + o / M) * d.O + o];
    const int same =
        !memcmp(y[0], y[1], ny * sizeof(float)) && !memcmp(dx[0], dx[1], nx * sizeof(float)) &&
        !memcmp(dw[0], dw[1], nw * sizeof(float)) && !memcmp(db[0], db[1], g.O * sizeof(float));
    free(x), free(w), free(b), free(dy), free(e), free(de);
    for (int i = 0; i < 2; i++)
        free(y[i]), free(dx[i]), free(dw[i]), free(db[i]);
    return same;
}

static void test_depthwise_is_block_diagonal_conv(void **state)
{
    (void)state;
    for (int s = 0; s < (int)(sizeof dw_cases / sizeof *dw_cases); s++)
        if (!dw_vs_dense(s, 0))
            fail_msg("depthwise case %d differs from its dense convolution", s);
    /* the control: one weight on the wrong input channel is seen */
    assert_false(dw_vs_dense(1, 1));
}

/* A grouped Conv2D case: H, W, C, O, KH, KW, SH, SW, same, G. */
static const int group_cases[][10] = {
    {9, 7, 4, 6, 3, 3, 2, 2, 1, 2},
    {6, 7, 6, 3, 3, 2, 1, 2, 0, 3},
    {5, 4, 8, 4, 1, 1, 1, 1, 0, 4},
    {7, 6, 12, 8, 3, 3, 1, 1, 1, 4},
};

/* Case s grouped (ref and fast) against the dense reference; wrong: one weight of the dense
 * kernel moved to the next group's input channels. 1 when the references agree bitwise (the
 * fast twin is held to 1e-5 + 1e-4 |ref| either way). */
static int grouped_vs_dense(int s, int wrong)
{
    const int *c = group_cases[s], N = 2;
    mw_conv2d_geom g, d;
    assert_int_equal(mw_conv2d_geom_init(&g, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]),
                     0);
    d = g;
    assert_int_equal(mw_conv2d_geom_group(&g, c[9]), 0);
    const int T = g.KH * g.KW, Cg = g.C / g.G, Og = g.O / g.G;
    mw_rng r;
    mw_rng_seed(&r, 13, (uint64_t)s);
    const size_t nx = (size_t)N * g.H * g.W * g.C, ny = (size_t)N * g.OH * g.OW * g.O;
    const size_t nw = mw_conv2d_w_count(&g), ne = mw_conv2d_w_count(&d);
    float *x = random_floats(nx, &r, 1), *w = random_floats(nw, &r, 0.5f);
    float *b = random_floats(g.O, &r, 0.5f), *dy = random_floats(ny, &r, 1);
    float *e = random_floats(ne, &r, 0), *de = random_floats(ne, &r, 0);
    for (int t = 0; t < T; t++)
        for (int ch = 0; ch < g.C; ch++)
            for (int o = ch / Cg * Og; o < (ch / Cg + 1) * Og; o++)
                e[((size_t)t * g.C + ch) * g.O + o] = w[((size_t)t * Cg + ch % Cg) * g.O + o];
    if (wrong) /* filter 0's first tap moved from channel 0 to channel Cg (group 1's) */
        e[(size_t)Cg * g.O] = e[0], e[0] = 0.0f;
    float *y[3], *dx[3], *dw[3], *db[3];
    for (int i = 0; i < 3; i++)
        y[i] = random_floats(ny, &r, 0), dx[i] = random_floats(nx, &r, 0),
        dw[i] = random_floats(nw, &r, 0), db[i] = random_floats(g.O, &r, 0);
    mw_kernels ref, cpu;
    mw_kernels_init_ref(&ref), mw_kernels_init_cpu(&cpu);
    const size_t ws_n = mw_conv2d_ws_count(&g, N);
    float *ws = mw_alloc_aligned(ws_n * sizeof(float));
    const mw_kctx k = {.nthreads = 2, .ws = ws, .ws_count = ws_n};
    ref.conv2d_fwd(&k, y[0], x, w, b, &g, N);
    ref.conv2d_fwd(&k, y[1], x, e, b, &d, N);
    cpu.conv2d_fwd(&k, y[2], x, w, b, &g, N);
    ref.conv2d_bwd(&k, dx[0], dw[0], db[0], dy, x, w, &g, N, 0);
    ref.conv2d_bwd(&k, dx[1], de, db[1], dy, x, e, &d, N, 0);
    cpu.conv2d_bwd(&k, dx[2], dw[2], db[2], dy, x, w, &g, N, 0);
    for (int t = 0; t < T; t++) /* the dense kernel's gradient read back at the groups' taps */
        for (int j = 0; j < Cg; j++)
            for (int o = 0; o < g.O; o++)
                dw[1][((size_t)t * Cg + j) * g.O + o] =
                    de[((size_t)t * g.C + o / Og * Cg + j) * g.O + o];
    expect_close(y[2], y[0], ny, 1e-5f, 1e-4f);
    expect_close(dx[2], dx[0], nx, 1e-5f, 1e-4f);
    expect_close(dw[2], dw[0], nw, 1e-5f, 1e-4f);
    expect_close(db[2], db[0], g.O, 1e-5f, 1e-4f);
    const int same =
        !memcmp(y[0], y[1], ny * sizeof(float)) && !memcmp(dx[0], dx[1], nx * sizeof(float)) &&
        !memcmp(dw[0], dw[1], nw * sizeof(float)) && !memcmp(db[0], db[1], g.O * sizeof(float));
    free(x), free(w), free(b), free(dy), free(e), free(de), free(ws);
    for (int i = 0; i < 3; i++)
        free(y[i]), free(dx[i]), free(dw[i]), free(db[i]);
    return same;
}

static void test_grouped_is_block_diagonal_conv(void **state)
{
    (void)state;
    mw_conv2d_geom g; /* groups: 1 from init, else a count dividing both C and O */
    assert_int_equal(mw_conv2d_geom_init(&g, 9, 7, 4, 6, 5, 5, 2, 2, 1), 0);
    assert_true(g.G == 1 && mw_conv2d_w_count(&g) == (size_t)5 * 5 * 4 * 6);
    assert_int_equal(mw_conv2d_geom_group(&g, 3), -1); /* not a divisor of C = 4 */
    assert_int_equal(mw_conv2d_geom_group(&g, 4), -1); /* nor of O = 6 */
    assert_int_equal(mw_conv2d_geom_group(&g, 0), -1);
    assert_int_equal(mw_conv2d_geom_group(&g, 2), 0);
    /* the kernel's values shrink by G, the scratch does not (a col row holds every group) */
    assert_true(mw_conv2d_w_count(&g) == (size_t)5 * 5 * 2 * 6 &&
                mw_conv2d_ws_min(&g) == (size_t)5 * 4 * 5 * 5 * 4);
    for (int s = 0; s < (int)(sizeof group_cases / sizeof *group_cases); s++)
        if (!grouped_vs_dense(s, 0))
            fail_msg("grouped case %d differs from its dense convolution", s);
    assert_false(grouped_vs_dense(0, 1)); /* the control */
}

/* A dilated Conv2D case: H, W, C, O, KH, KW, same, DH, DW (stride 1, as Keras requires). */
static const int dil_cases[][9] = {
    {9, 8, 3, 4, 3, 3, 0, 2, 2},
    {8, 8, 2, 5, 3, 2, 1, 2, 3},
    {7, 10, 4, 3, 2, 3, 1, 3, 1},
};

/* The dilated reference against the spread kernel undilated (bitwise), the fast twin against
 * the reference (1e-5 + 1e-4 |ref|). */
static void test_dilated_conv2d(void **state)
{
    (void)state;
    mw_kernels ref, cpu;
    mw_kernels_init_ref(&ref), mw_kernels_init_cpu(&cpu);
    for (int s = 0; s < (int)(sizeof dil_cases / sizeof *dil_cases); s++) {
        const int *c = dil_cases[s], N = 3;
        mw_conv2d_geom g;
        assert_int_equal(mw_conv2d_geom_init(&g, c[0], c[1], c[2], c[3], c[4], c[5], 1, 1, c[6]),
                         0);
        assert_int_equal(mw_conv2d_geom_dilate(&g, c[7], c[8], c[6]), 0);
        const mw_conv2d_geom d = dense_of(&g, c[6]);
        mw_rng r;
        mw_rng_seed(&r, 12, (uint64_t)s);
        const size_t nx = (size_t)N * g.H * g.W * g.C, ny = (size_t)N * g.OH * g.OW * g.O;
        const size_t nw = (size_t)g.KH * g.KW * g.C * g.O, ne = (size_t)d.KH * d.KW * d.C * d.O;
        float *x = random_floats(nx, &r, 1), *w = random_floats(nw, &r, 0.5f);
        float *dy = random_floats(ny, &r, 1), *e = random_floats(ne, &r, 0);
        for (int kh = 0; kh < g.KH; kh++)
            for (int kw = 0; kw < g.KW; kw++)
                memcpy(e + ((size_t)kh * g.DH * d.KW + (size_t)kw * g.DW) * d.C * d.O,
                       w + ((size_t)kh * g.KW + kw) * g.C * g.O, sizeof(float) * g.C * g.O);
        float *y[3], *dx[3], *dw[3];
        for (int i = 0; i < 3; i++)
            y[i] = random_floats(ny, &r, 0), dx[i] = random_floats(nx, &r, 0),
            dw[i] = random_floats(i == 1 ? ne : nw, &r, 0);
        const size_t ws_n = mw_conv2d_ws_count(&g, N);
        float *ws = mw_alloc_aligned(ws_n * sizeof(float));
        const mw_kctx k = {.nthreads = 2, .ws = ws, .ws_count = ws_n};
        ref.conv2d_fwd(&k, y[0], x, w, NULL, &g, N);
        ref.conv2d_fwd(&k, y[1], x, e, NULL, &d, N);
        cpu.conv2d_fwd(&k, y[2], x, w, NULL, &g, N);
        ref.conv2d_bwd(&k, dx[0], dw[0], NULL, dy, x, w, &g, N, 0);
        ref.conv2d_bwd(&k, dx[1], dw[1], NULL, dy, x, e, &d, N, 0);
        cpu.conv2d_bwd(&k, dx[2], dw[2], NULL, dy, x, w, &g, N, 0);
        assert_memory_equal(y[0], y[1], ny * sizeof(float));
        assert_memory_equal(dx[0], dx[1], nx * sizeof(float));
        for (int kh = 0; kh < g.KH; kh++)
            for (int kw = 0; kw < g.KW; kw++)
                assert_memory_equal(dw[0] + ((size_t)kh * g.KW + kw) * g.C * g.O,
                                    dw[1] +
                                        ((size_t)kh * g.DH * d.KW + (size_t)kw * g.DW) * d.C * d.O,
                                    sizeof(float) * g.C * g.O);
        expect_close(y[2], y[0], ny, 1e-5f, 1e-4f);
        expect_close(dx[2], dx[0], nx, 1e-5f, 1e-4f);
        expect_close(dw[2], dw[0], nw, 1e-5f, 1e-4f);
        free(x), free(w), free(dy), free(e), free(ws);
        for (int i = 0; i < 3; i++)
            free(y[i]), free(dx[i]), free(dw[i]);
    }
}

/* One backward of table t with dx written over NaNs (set_dx 1) against the same added into
 * zeros: equal (x + 0 = x; == takes -0 for +0), so no old value of dx was read. */
static void written_dx_matches(const mw_kernels *t, const mw_conv2d_geom *g, int N, int depthwise,
                               size_t ws_n)
{
    mw_rng r;
    mw_rng_seed(&r, 21, (uint64_t)N);
    const size_t nx = (size_t)N * g->H * g->W * g->C, ny = (size_t)N * g->OH * g->OW * g->O;
    const size_t nw = depthwise ? (size_t)g->KH * g->KW * g->O : mw_conv2d_w_count(g);
    float *x = random_floats(nx, &r, 1), *w = random_floats(nw, &r, 0.5f);
    float *dy = random_floats(ny, &r, 1), *dw = random_floats(nw, &r, 0);
    float *add = random_floats(nx, &r, 0), *set = random_floats(nx, &r, 0);
    float *ws = mw_alloc_aligned((ws_n ? ws_n : 1) * sizeof(float));
    const mw_kctx k = {.nthreads = 2, .ws = ws, .ws_count = ws_n};
    for (size_t i = 0; i < nx; i++)
        set[i] = NAN;
    for (int mode = 0; mode < 2; mode++)
        (depthwise ? t->dwconv2d_bwd : t->conv2d_bwd)(&k, mode ? set : add, dw, NULL, dy, x, w, g,
                                                      N, mode);
    size_t bad = 0;
    for (size_t i = 0; i < nx; i++)
        bad += !(set[i] == add[i]);
    assert_int_equal(bad, 0);
    free(x), free(w), free(dy), free(dw), free(add), free(set), free(ws);
}

/* set_dx on every path of both twins: the 1x1 convolution (sgemm with beta 0), the im2col one
 * in chunks of one image (each chunk zeroed before col2im adds), the depthwise rows. */
static void test_written_input_gradient(void **state)
{
    (void)state;
    mw_kernels tabs[2];
    mw_kernels_init_ref(&tabs[0]), mw_kernels_init_cpu(&tabs[1]);
    mw_conv2d_geom pw, im, dw;
    assert_int_equal(mw_conv2d_geom_init(&pw, 5, 4, 6, 7, 1, 1, 1, 1, 0), 0);
    assert_int_equal(mw_conv2d_geom_init(&im, 6, 5, 3, 4, 3, 3, 1, 1, 1), 0);
    assert_int_equal(mw_conv2d_geom_init(&dw, 7, 6, 5, 10, 3, 3, 2, 2, 1), 0);
    for (int t = 0; t < 2; t++) {
        written_dx_matches(&tabs[t], &pw, 3, 0, mw_conv2d_ws_count(&pw, 3));
        written_dx_matches(&tabs[t], &im, 3, 0, mw_conv2d_ws_min(&im));
        written_dx_matches(&tabs[t], &dw, 3, 1, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dilated_geometry),
        cmocka_unit_test(test_depthwise_is_block_diagonal_conv),
        cmocka_unit_test(test_grouped_is_block_diagonal_conv),
        cmocka_unit_test(test_dilated_conv2d),
        cmocka_unit_test(test_written_input_gradient),
    };
    return cmocka_run_group_tests_name("dwconv", tests, NULL, NULL);
}

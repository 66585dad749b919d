/* The fast CPU twins against the reference, driven by kernels/kernel_list.h (dav1d's checkasm is
 * the model). For each entry whose cpu table function is not the reference's, each case of the
 * entry's descriptor (the table at the end): the descriptor sets the scalars and the geometry;
 * every array the entry's list line names is allocated at the size the line gives and filled
 * with random values; the descriptor then makes valid what must be (labels, positive variances,
 * a forward's own argmax, statistics or probabilities); the reference runs on one copy, the fast
 * twin with 1 and with 3 threads on two others, and every array is compared afterwards: outputs
 * (overwritten or accumulated onto the same random start) and inputs (which must stay as they
 * were). The first bad element is printed with both values and the largest error.
 *
 * Tolerances, from float32 rounding (u = 2^-24, about 6e-8): a twin that performs the
 * reference's operations in the reference's order is held bitwise. Where the fast twin sums in
 * another order (sgemm, blocks of rows), a sum of n terms of size at most m can move by about
 * 2 n u m: the conv and dense cases keep n m below about 100 (at most 100 products of O(1)
 * terms per output, dense I <= 200 of weights <= 0.5, and dw, db summing N OH OW <= 600 products
 * with dy scaled to 8 / sqrt(N OH OW) as a mean loss would), so |err| <= 1e-5 + 1e-4 |ref| holds
 * with a margin of several times. BatchNormalization forms xhat in float where the reference
 * keeps double: a few ulps of y (1e-5 + 1e-5 |ref|), its backward sums rows (1e-4 relative);
 * the synchronized sums add R <= 101 products dy xhat of size <= 3 with xhat rounded to float,
 * R 3 u <= 2e-5.
 * Attention reorders sums of S <= 70 products of probabilities and values of size <= 1.5:
 * 2e-6 (1 + |ref|). */
#include "tests/kernel_check.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/rng.h"
#include "kernels/cast.h"
#include "kernels/cpu/table.h"
#include "kernels/geom.h"
#include "kernels/kernels.h"
#include "kernels/ref/table.h"
#include "tests/util.h"

/* ---- an entry's arguments, by the list's parameter names ---- */

/* Every pointer parameter name of the list: the arrays and the geometry and hyperparameters. */
/* clang-format off */
#define KPTRS(X)                                                                                   \
    X(y) X(x) X(w) X(b) X(g) X(dx) X(dw) X(db) X(dy) X(argmax) X(loss) X(prob) X(logits)           \
    X(labels) X(dlogits) X(p) X(out) X(dout) X(a) X(ids) X(table) X(gtable) X(in) X(stat)          \
    X(gamma) X(beta) X(dgamma) X(dbeta) X(o) X(q) X(kk) X(v) X(dq) X(dk) X(dv) X(mask) X(acc)      \
    X(mean) X(var) X(invstd) X(st) X(s) X(da) X(s1) X(s2) X(s3) X(h) X(bg) X(ds) X(z)
/* clang-format on */
#define KP_FIELD(n) void *n;
#define KP_ENUM(n) KP_##n,
#define KP_NAME(n) #n,
enum { KPTRS(KP_ENUM) NPTR };
static const char *const kp_names[] = {KPTRS(KP_NAME)};

/* Pointers are void * here: the call converts each to its parameter's type. A parameter name
 * the list adds makes the generated calls below fail to compile until it has a field. */
typedef struct {
    union {
        struct {
            KPTRS(KP_FIELD)
        };
        void *ptr[NPTR];
    };
    int N, I, O, K, n, T, D, V, width, P, H, W, C, S, G, PT, PB, PL, PR, CX, CY, off, mul;
    int SH, SW, bilinear; /* UpSampling2D */
    size_t rows, count, nbytes;
    float scale, eps, rate, momentum, alpha, max_wavelength, weight;
    float max_value, slope, threshold; /* relux */
    float offset;                      /* rmsnorm: gamma's (Gemma's 1) */
    const mw_rescale *r;               /* rescale (REF: not compared) */
    int centered;                      /* rmsnorm: the variance, not the mean of squares */
    int set_dx;                        /* relux_bwd, bn_bwd: dx written, not added into */
    int start, denom, half;            /* rope */
    double l1, l2, M;
    uint64_t seed, stream;
    mw_act_kind kind;
    float tol_abs, tol_rel; /* a case's own tolerance, when set: its fast twin's formula differs */
    /* the case's own */
    const char *op;    /* the entry */
    size_t ws;         /* the fast twin's scratch floats */
    const char *nulls; /* optional arrays passed as NULL, by name: "b dx" */
    const char *alias; /* "db=da b=a": db gets da's buffer, b a's */
    mw_conv2d_geom cg;
    mw_pool_geom pg;
    mw_attn_geom ag;
    mw_optim_hyper oh;
    char what[128];
} kargs;

/* f(x) for each argument, comma-separated (up to 14). */
#define KM_1(f, x) f(x)
#define KM_2(f, x, ...) f(x), KM_1(f, __VA_ARGS__)
#define KM_3(f, x, ...) f(x), KM_2(f, __VA_ARGS__)
#define KM_4(f, x, ...) f(x), KM_3(f, __VA_ARGS__)
#define KM_5(f, x, ...) f(x), KM_4(f, __VA_ARGS__)
#define KM_6(f, x, ...) f(x), KM_5(f, __VA_ARGS__)
#define KM_7(f, x, ...) f(x), KM_6(f, __VA_ARGS__)
#define KM_8(f, x, ...) f(x), KM_7(f, __VA_ARGS__)
#define KM_9(f, x, ...) f(x), KM_8(f, __VA_ARGS__)
#define KM_10(f, x, ...) f(x), KM_9(f, __VA_ARGS__)
#define KM_11(f, x, ...) f(x), KM_10(f, __VA_ARGS__)
#define KM_12(f, x, ...) f(x), KM_11(f, __VA_ARGS__)
#define KM_13(f, x, ...) f(x), KM_12(f, __VA_ARGS__)
#define KM_14(f, x, ...) f(x), KM_13(f, __VA_ARGS__)
#define KM_SEL(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, N, ...) KM_##N
#define KM(f, ...)                                                                                 \
    KM_SEL(__VA_ARGS__, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)(f, __VA_ARGS__)
#define KA(x) a->x
#define KVOID(x) (void)(x)

/* The arrays an entry's line names, as its arguments give them (probe_<op>). */
enum { K_F32, K_I32, K_U32, K_F64, K_BYTE };
#define KKIND(p)                                                                                   \
    _Generic((p), float *: K_F32, const float *: K_F32, int32_t *: K_I32,                          \
             const int32_t *: K_I32, uint32_t *: K_U32, const uint32_t *: K_U32, double *: K_F64,  \
             const double *: K_F64, default: K_BYTE)
typedef struct {
    const void *p;
    size_t count;
    int kind, optional;
} kspan;
static kspan spans[24];
static int nspans;

static void note(const void *p, size_t count, int kind, int optional)
{
    assert_true(nspans < 24);
    spans[nspans++] = (kspan){p, count, kind, optional};
}

static size_t kind_size(int kind)
{
    return kind == K_F64 ? sizeof(double) : kind == K_BYTE ? 1 : 4;
}

#define MW_A(p, c) note((const void *)(p), (size_t)(c), KKIND(p), 0);
#define MW_O(p, c) note((const void *)(p), (size_t)(c), KKIND(p), 1);
#define MW_BYTES(p, c) note((const void *)(p), (size_t)(c), K_BYTE, 0);
#define MW_ASSERT(cond, what)
#define MW_KERNEL(op, fast, params, args, arrays)                                                  \
    static void spans_##op(const mw_kctx *k, MW_UNPAREN params)                                    \
    {                                                                                              \
        (void)k, (void)(KM(KVOID, MW_UNPAREN args));                                               \
        arrays                                                                                     \
    }                                                                                              \
    static void probe_##op(const kargs *a)                                                         \
    {                                                                                              \
        nspans = 0;                                                                                \
        spans_##op(NULL, KM(KA, MW_UNPAREN args));                                                 \
    }                                                                                              \
    static void call_##op(const mw_kernels *t, const mw_kctx *k, const kargs *a)                   \
    {                                                                                              \
        t->op(k, KM(KA, MW_UNPAREN args));                                                         \
    }
#include "kernels/kernel_list.h"
#undef MW_KERNEL
#undef MW_A
#undef MW_O
#undef MW_BYTES
#undef MW_ASSERT

typedef struct {
    const char *op;
    void (*probe)(const kargs *a);
    void (*call)(const mw_kernels *t, const mw_kctx *k, const kargs *a);
    size_t off; /* of the entry in mw_kernels */
} kentry;

static const kentry entries[] = {
#define MW_KERNEL(op, fast, params, args, arrays)                                                  \
    {#op, probe_##op, call_##op, offsetof(mw_kernels, op)},
#include "kernels/kernel_list.h"
#undef MW_KERNEL
};

/* ---- the arrays of one case ---- */

typedef struct {
    void *mem[NPTR];
    size_t bytes[NPTR];
    int kind[NPTR];
} kbufs;

static int has_word(const char *list, const char *w)
{
    const size_t n = strlen(w);
    for (const char *s = list; s && (s = strstr(s, w)); s += n)
        if ((s == list || s[-1] == ' ') && (s[n] == '\0' || s[n] == ' ' || s[n] == '='))
            return 1;
    return 0;
}

static int kp_index(const char *name, size_t len)
{
    for (int j = 0; j < NPTR; j++)
        if (strlen(kp_names[j]) == len && !strncmp(kp_names[j], name, len))
            return j;
    fail_msg("no argument named %.*s", (int)len, name);
    return 0;
}

static void fill_random(void *p, size_t nbytes, int kind, uint64_t seed)
{
    mw_rng r;
    mw_rng_seed(&r, seed, 5);
    if (kind == K_F32)
        for (size_t i = 0; i < nbytes / 4; i++)
            ((float *)p)[i] = 2.0f * mw_rng_uniform(&r) - 1.0f;
    else if (kind == K_F64)
        for (size_t i = 0; i < nbytes / 8; i++)
            ((double *)p)[i] = 2.0 * mw_rng_uniform(&r) - 1.0;
    else
        for (size_t i = 0; i < nbytes; i++)
            ((unsigned char *)p)[i] = (unsigned char)mw_rng_u32(&r);
}

/* Allocate and fill every array the entry names (the others stay NULL): each pointer still
 * NULL after the setup gets a distinct dummy value the probe's spans are matched against. */
static void alloc_arrays(const kentry *e, kargs *a, kbufs *B, uint64_t seed)
{
    int dummy[NPTR] = {0};
    for (int j = 0; j < NPTR; j++)
        if (!a->ptr[j])
            a->ptr[j] = (void *)(uintptr_t)(4096 * (j + 1)), dummy[j] = 1;
    e->probe(a);
    memset(B, 0, sizeof *B);
    for (int i = 0; i < nspans; i++)
        for (int j = 0; j < NPTR; j++) {
            if (!dummy[j] || spans[i].p != a->ptr[j] || B->mem[j])
                continue;
            if (spans[i].optional && has_word(a->nulls, kp_names[j]))
                break;
            const size_t nb = spans[i].count * kind_size(spans[i].kind);
            B->mem[j] = malloc(nb ? nb : 1);
            assert_non_null(B->mem[j]);
            B->bytes[j] = nb, B->kind[j] = spans[i].kind;
            fill_random(B->mem[j], nb, spans[i].kind, seed * 64 + (uint64_t)j);
            a->ptr[j] = B->mem[j];
        }
    for (int j = 0; j < NPTR; j++)
        if (dummy[j] && !B->mem[j])
            a->ptr[j] = NULL;
}

/* c = a with copies of a's arrays, and the case's aliases applied. */
static void clone(const kargs *a, const kbufs *B, kargs *c, kbufs *CB)
{
    *c = *a;
    memset(CB, 0, sizeof *CB);
    for (int j = 0; j < NPTR; j++)
        if (B->mem[j]) {
            CB->mem[j] = malloc(B->bytes[j] ? B->bytes[j] : 1);
            assert_non_null(CB->mem[j]);
            memcpy(CB->mem[j], B->mem[j], B->bytes[j]);
            c->ptr[j] = CB->mem[j];
        }
    for (const char *s = a->alias; s && *s;) {
        const char *eq = strchr(s, '='), *end = strchr(s, ' ');
        end = end ? end : s + strlen(s);
        c->ptr[kp_index(s, (size_t)(eq - s))] = c->ptr[kp_index(eq + 1, (size_t)(end - eq - 1))];
        s = *end ? end + 1 : end;
    }
}

static void free_bufs(kbufs *B)
{
    for (int j = 0; j < NPTR; j++)
        free(B->mem[j]);
}

/* ---- comparing ---- */

typedef struct {
    const char *op;
    int (*setup)(kargs *a, int i, int phase); /* case i: 0 past the last; phase 1: contents */
    float atol, rtol;                         /* 0, 0: bitwise */
    int same_threads;                         /* the fast twin bitwise alike on 1 and 3 threads */
} kcase;

static double value_at(const void *p, int kind, size_t i)
{
    return kind == K_F64 ? ((const double *)p)[i] : ((const float *)p)[i];
}

/* The first disagreement found, for the failure message. */
static char kfail[512];

/* 0 when every array of got is within the tolerance of want's (bitwise for 0, 0 and for
 * integers); else 1, with kfail naming the first bad element, both values and the largest
 * error. */
static int compare(const kcase *c, int i, const kargs *a, const kbufs *B, const kargs *want,
                   const kargs *got, float atol, float rtol, const char *who)
{
    for (int j = 0; j < NPTR; j++) {
        if (!B->mem[j])
            continue;
        const int kind = B->kind[j], fl = kind == K_F32 || kind == K_F64;
        const size_t es = kind_size(kind), n = B->bytes[j] / es;
        size_t bad = 0, first = 0;
        double maxerr = 0.0;
        for (size_t e = 0; e < n; e++) {
            const char *pw = (const char *)want->ptr[j] + e * es;
            const char *pg = (const char *)got->ptr[j] + e * es;
            int ok = !memcmp(pw, pg, es);
            if (!ok && fl && (atol > 0.0f || rtol > 0.0f)) {
                const double w = value_at(want->ptr[j], kind, e),
                             v = value_at(got->ptr[j], kind, e);
                const double err = fabs(v - w);
                maxerr = err > maxerr || isnan(err) ? err : maxerr;
                ok = err <= atol + rtol * fabs(w);
            }
            if (!ok && !bad++)
                first = e;
        }
        if (bad && fl)
            snprintf(kfail, sizeof kfail,
                     "%s case %d (%s), %s: %s[%zu]: fast %.9g, reference %.9g; %zu of %zu off, "
                     "max |err| %.3g (allowed %g + %g |ref|)",
                     c->op, i, a->what, who, kp_names[j], first, value_at(got->ptr[j], kind, first),
                     value_at(want->ptr[j], kind, first), bad, n, maxerr, atol, rtol);
        else if (bad)
            snprintf(kfail, sizeof kfail, "%s case %d (%s), %s: %s[%zu] differs (%zu of %zu)",
                     c->op, i, a->what, who, kp_names[j], first, bad, n);
        if (bad)
            return 1;
    }
    return 0;
}

#define SENTINEL 12345.0f

/* The reference once, the fast twin on 1 and 3 threads (its scratch followed by a guard band
 * that no kernel may write). 0, or 1 with kfail saying what differs. */
static int run_case(const kcase *c, const kentry *e, int i, const kargs *a, const kbufs *B,
                    const mw_kernels *ref, const mw_kernels *cpu)
{
    kargs r, f[2];
    kbufs rb, fb[2];
    int bad = 0;
    clone(a, B, &r, &rb);
    const mw_kctx kr = {.nthreads = 1};
    e->call(ref, &kr, &r);
    for (int t = 0; t < 2; t++) {
        clone(a, B, &f[t], &fb[t]);
        const size_t guard = a->ws + 16;
        float *ws = mw_alloc_aligned((a->ws + guard) * sizeof(float));
        assert_non_null(ws);
        for (size_t q = 0; q < guard; q++)
            ws[a->ws + q] = SENTINEL;
        const mw_kctx kc = {.nthreads = t ? 3 : 1, .ws = ws, .ws_count = a->ws};
        e->call(cpu, &kc, &f[t]);
        for (size_t q = 0; q < guard && !bad; q++)
            if (ws[a->ws + q] != SENTINEL)
                bad = snprintf(kfail, sizeof kfail, "%s case %d (%s): scratch written past %zu",
                               c->op, i, a->what, a->ws) > 0;
        free(ws);
        const int own = a->tol_abs > 0.0f || a->tol_rel > 0.0f;
        bad = bad || compare(c, i, a, B, &r, &f[t], own ? a->tol_abs : c->atol,
                             own ? a->tol_rel : c->rtol, t ? "3 threads" : "1 thread");
    }
    if (c->same_threads)
        bad = bad || compare(c, i, a, B, &f[0], &f[1], 0.0f, 0.0f, "3 threads against 1");
    free_bufs(&rb), free_bufs(&fb[0]), free_bufs(&fb[1]);
    return bad;
}

/* ---- the cases: shapes and contents per entry ---- */

static void kscale(void *p, size_t n, float mul, float add)
{
    for (size_t i = 0; p && i < n; i++)
        ((float *)p)[i] = ((float *)p)[i] * mul + add;
}

/* A shuffled arithmetic sequence (no ties), spaced by step, centered on 0. */
static void fill_distinct(float *x, size_t n, uint64_t seed, float step)
{
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    assert_non_null(ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = (uint32_t)i;
    mw_rng r;
    mw_rng_seed(&r, seed, 3);
    mw_rng_shuffle(&r, ids, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        x[i] = ((float)ids[i] - (float)n / 2) * step;
    free(ids);
}

static float *scratch(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static mw_kernels ref_table(void)
{
    mw_kernels t;
    mw_kernels_init_ref(&t);
    return t;
}

/* Conv2D: odd shapes, padding and strides, groups; batches of 5 with scratch for one image,
 * two and a bit, the cap's two, and all; without bias / dx. */
static const int conv_shapes[][11] = {
    /* H, W, C, O, KH, KW, SH, SW, same, N, groups (0: 1) */
    {6, 5, 1, 4, 3, 3, 1, 1, 0, 2},       {5, 6, 3, 4, 3, 3, 1, 1, 0, 2},
    {5, 4, 2, 3, 3, 3, 1, 1, 1, 2},       {9, 7, 2, 3, 5, 5, 2, 2, 1, 3},
    {8, 6, 2, 3, 3, 3, 2, 2, 1, 2},       {5, 6, 2, 2, 4, 4, 1, 1, 1, 2},
    {7, 6, 2, 3, 2, 3, 2, 1, 0, 2},       {4, 5, 3, 4, 1, 1, 1, 1, 0, 3},
    {5, 5, 3, 2, 1, 1, 2, 2, 0, 2},       {12, 10, 4, 6, 5, 5, 1, 1, 1, 2},
    {9, 7, 4, 6, 3, 3, 2, 2, 1, 3, 2},    {6, 6, 6, 3, 3, 2, 1, 1, 0, 2, 3},
    {5, 4, 8, 4, 1, 1, 1, 1, 0, 3, 4},    {7, 7, 6, 6, 1, 1, 2, 2, 1, 2, 2},
    {10, 9, 32, 32, 3, 3, 1, 1, 1, 2, 8},
};

static int set_conv(kargs *a, int i, int phase)
{
    if (i >= (int)(sizeof conv_shapes / sizeof conv_shapes[0]) * 10)
        return 0;
    const int *s = conv_shapes[i / 10], v = i % 10 / 2;
    mw_conv2d_geom *g = &a->cg;
    if (phase == 0) {
        assert_int_equal(
            mw_conv2d_geom_init(g, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8]), 0);
        assert_int_equal(mw_conv2d_geom_group(g, s[10] ? s[10] : 1), 0);
        a->g = g, a->N = v == 0 ? s[9] : 5;
        const size_t min = mw_conv2d_ws_min(g);
        a->ws = v == 1   ? min
                : v == 2 ? 2 * min + 1
                : v == 4 ? mw_conv2d_ws_capped(g, 5, 2 * min + min / 2)
                         : mw_conv2d_ws_count(g, a->N);
        a->nulls = i % 2 ? "b dx" : "";
        /* the backward writes dx (not adds) with the least scratch (chunks) and with all */
        a->set_dx = i % 10 == 2 || i % 10 == 6;
        snprintf(a->what, sizeof a->what,
                 "%dx%dx%d k%dx%d/%d,%d same %d -> %d, groups %d, N %d, ws %zu%s%s", s[0], s[1],
                 s[2], s[4], s[5], s[6], s[7], s[8], s[3], g->G, a->N, a->ws,
                 i % 2 ? ", no b / dx" : "", a->set_dx ? ", set_dx" : "");
        return 1;
    }
    kscale(a->w, mw_conv2d_w_count(g), 0.5f, 0.0f);
    kscale(a->b, (size_t)g->O, 0.5f, 0.0f);
    kscale(a->dy, (size_t)a->N * g->OH * g->OW * g->O,
           fminf(1.0f, 8.0f / sqrtf((float)a->N * g->OH * g->OW)), 0.0f);
    return 1;
}

/* Depthwise Conv2D: multipliers 1 to 3, strides, dilations, both paddings, odd channel counts
 * around the fast twin's 16-channel blocks, kernels larger than a 'same' input (NASNet's 7x7 on
 * 2x2 maps); without bias / dx every other case. */
static const int dwconv_shapes[][12] = {
    /* H, W, C, M, KH, KW, SH, SW, same, DH, DW, N */
    {6, 5, 3, 1, 3, 3, 1, 1, 0, 1, 1, 2},  {7, 7, 4, 2, 3, 3, 2, 2, 1, 1, 1, 2},
    {9, 8, 2, 3, 3, 3, 1, 1, 1, 2, 2, 2},  {9, 9, 3, 2, 3, 3, 2, 2, 1, 2, 3, 2},
    {6, 7, 17, 1, 5, 5, 2, 1, 1, 1, 1, 2}, {8, 6, 33, 1, 3, 2, 1, 2, 0, 2, 1, 3},
    {5, 5, 1, 4, 1, 1, 1, 1, 0, 1, 1, 2},  {4, 6, 20, 2, 7, 7, 1, 1, 1, 1, 1, 2},
    {2, 2, 5, 1, 7, 7, 1, 1, 1, 1, 1, 3},  {1, 1, 3, 2, 5, 5, 1, 1, 1, 1, 1, 2},
};

static int set_dwconv(kargs *a, int i, int phase)
{
    if (i >= 10 * (strcmp(a->op, "dwconv2d_bwd") ? 2 : 3))
        return 0;
    a->set_dx = i >= 10 * 2; /* the backward then writes dx, each shape once more */
    i = a->set_dx ? 2 * (i - 10 * 2) : i;
    const int *s = dwconv_shapes[i / 2];
    mw_conv2d_geom *g = &a->cg;
    if (phase == 0) {
        assert_int_equal(
            mw_conv2d_geom_init(g, s[0], s[1], s[2], s[2] * s[3], s[4], s[5], s[6], s[7], s[8]), 0);
        assert_int_equal(mw_conv2d_geom_dilate(g, s[9], s[10], s[8]), 0);
        a->g = g, a->N = s[11];
        a->nulls = i % 2 ? "b dx db" : "";
        snprintf(a->what, sizeof a->what, "%dx%dx%d x%d k%dx%d/%d,%d d%d,%d same %d, N %d%s%s",
                 s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[9], s[10], s[8], a->N,
                 i % 2 ? ", no b / dx / db" : "", a->set_dx ? ", set_dx" : "");
        return 1;
    }
    kscale(a->w, (size_t)g->KH * g->KW * g->O, 0.5f, 0.0f);
    kscale(a->b, (size_t)g->O, 0.5f, 0.0f);
    kscale(a->dy, (size_t)a->N * g->OH * g->OW * g->O,
           fminf(1.0f, 8.0f / sqrtf((float)a->N * g->OH * g->OW)), 0.0f);
    return 1;
}

/* Conv2DTranspose: the transposed geometry (kernel below, equal to and above the stride, both
 * paddings, output_padding) with scratch for one image, two and a bit, and all. */
static const int conv_tr_shapes[][12] = {
    /* in_h, in_w, in_c, filters, KH, KW, SH, SW, same, oph, opw, N */
    {4, 3, 2, 3, 3, 3, 2, 2, 1, -1, -1, 2}, {3, 4, 3, 2, 2, 2, 2, 2, 0, -1, -1, 2},
    {5, 4, 2, 3, 3, 3, 1, 1, 1, -1, -1, 2}, {3, 3, 2, 2, 1, 2, 3, 2, 0, -1, -1, 2},
    {4, 5, 3, 4, 4, 3, 2, 3, 1, -1, -1, 3}, {3, 4, 2, 3, 3, 3, 2, 2, 0, 1, 0, 2},
    {4, 3, 2, 2, 3, 2, 3, 2, 1, 2, 1, 2},
};

static int set_conv_tr(kargs *a, int i, int phase)
{
    if (i >= 7 * 8)
        return 0;
    const int *s = conv_tr_shapes[i / 8], v = i % 8 / 2;
    mw_conv2d_geom *g = &a->cg;
    if (phase == 0) {
        assert_int_equal(mw_conv2d_tr_geom_init(g, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7],
                                                s[8], s[9], s[10]),
                         0);
        a->g = g, a->N = v == 0 ? s[11] : 5;
        const size_t min = mw_conv2d_ws_min(g);
        a->ws = v == 1 ? min : v == 2 ? 2 * min + 1 : mw_conv2d_ws_count(g, a->N);
        a->nulls = i % 2 ? "b dx" : "";
        snprintf(a->what, sizeof a->what,
                 "%dx%dx%d k%dx%d/%d,%d same %d op %d,%d -> %dx%dx%d, N %d", s[0], s[1], s[2], s[4],
                 s[5], s[6], s[7], s[8], s[9], s[10], g->H, g->W, s[3], a->N);
        return 1;
    }
    kscale(a->w, (size_t)g->KH * g->KW * g->C * g->O, 0.5f, 0.0f);
    kscale(a->b, (size_t)g->C, 0.5f, 0.0f);
    return 1;
}

/* MaxPooling2D: no ties (distinct inputs); the backward with its forward's argmax. */
static const int pool_shapes[][9] = {
    /* H, W, C, PH, PW, SH, SW, same, N */
    {6, 6, 3, 2, 2, 2, 2, 0, 2}, {7, 5, 2, 2, 2, 2, 2, 0, 2}, {7, 5, 2, 3, 3, 2, 2, 1, 2},
    {6, 5, 2, 3, 3, 1, 1, 0, 2}, {5, 7, 3, 2, 2, 2, 2, 1, 2}, {5, 4, 2, 3, 3, 1, 1, 1, 3},
    {5, 8, 1, 2, 3, 1, 2, 0, 2},
};

static int set_maxpool(kargs *a, int i, int phase)
{
    if (i >= 7 * 2)
        return 0;
    const int *s = pool_shapes[i / 2];
    mw_pool_geom *g = &a->pg;
    if (phase == 0) {
        assert_int_equal(mw_pool_geom_init(g, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]), 0);
        a->g = g, a->N = i % 2 ? 5 : s[8];
        snprintf(a->what, sizeof a->what, "%dx%dx%d pool %dx%d/%d,%d same %d, N %d", s[0], s[1],
                 s[2], s[3], s[4], s[5], s[6], s[7], a->N);
        return 1;
    }
    const size_t nx = (size_t)a->N * g->H * g->W * g->C, ny = (size_t)a->N * g->OH * g->OW * g->C;
    float *x = a->x ? a->x : scratch(nx);
    fill_distinct(x, nx, 700 + (uint64_t)i, 1e-3f);
    if (a->dx) { /* the backward: its forward's argmax */
        float *y = scratch(ny);
        const mw_kernels t = ref_table();
        t.maxpool_fwd(&(mw_kctx){.nthreads = 1}, y, a->argmax, x, g, a->N);
        free(y), free(x);
    }
    return 1;
}

/* Dense: odd and degenerate shapes; without bias; without dx. */
static int set_dense(kargs *a, int i, int phase)
{
    static const int s[][3] = {{3, 7, 5}, {1, 1, 1}, {13, 37, 11}, {32, 200, 10}, {5, 3, 64}};
    if (i >= 5 * 3)
        return 0;
    a->N = s[i / 3][0], a->I = s[i / 3][1], a->O = s[i / 3][2];
    if (phase == 0) {
        a->nulls = i % 3 == 1 ? "b db" : i % 3 == 2 ? "dx" : "";
        snprintf(a->what, sizeof a->what, "N %d, I %d, O %d%s", a->N, a->I, a->O,
                 i % 3 == 1   ? ", no bias"
                 : i % 3 == 2 ? ", no dx"
                              : "");
        return 1;
    }
    kscale(a->w, (size_t)a->I * a->O, 0.5f, 0.0f);
    kscale(a->b, (size_t)a->O, 0.5f, 0.0f);
    return 1;
}

/* Dense with its activation: every kind, and the ReLU unclipped in place, clipped at 6 in place
 * and unclipped into its own array, over the Dense shapes; without bias every other case. z
 * moves by dense_fwd's sgemm rounding (1e-5 + 1e-4 |z|) and y by that times f's slope, at most
 * 1.5 (elu's alpha): held to twice dense_fwd's tolerance. */
static int set_dense_act(kargs *a, int i, int phase)
{
    static const int s[][3] = {{3, 7, 5}, {1, 1, 1}, {13, 37, 11}, {32, 200, 10}, {5, 3, 64}};
    const int relu = i - MW_ACTK_COUNT; /* >= 0: the ReLU's three cases */
    if (relu >= 3)
        return 0;
    a->N = s[i % 5][0], a->I = s[i % 5][1], a->O = s[i % 5][2];
    a->kind = relu >= 0 ? MW_ACTK_RELU : (mw_act_kind)i;
    a->alpha = relu == 1 ? 6.0f : relu >= 0 ? INFINITY : a->kind == MW_ACTK_ELU ? 1.5f : 0.2f;
    if (phase == 0) {
        a->nulls = i % 2 ? "b" : "";
        a->alias = relu == 0 || relu == 1 ? "y=z" : "";
        snprintf(a->what, sizeof a->what, "N %d, I %d, O %d, kind %d, alpha %g%s%s", a->N, a->I,
                 a->O, (int)a->kind, (double)a->alpha, i % 2 ? ", no bias" : "",
                 relu == 0 || relu == 1 ? ", in place" : "");
        return 1;
    }
    kscale(a->w, (size_t)a->I * a->O, 0.5f, 0.0f);
    kscale(a->b, (size_t)a->O, 0.5f, 0.0f);
    return 1;
}

/* The tied (transposed) Dense: the same shapes, with and without dx. */
static int set_dense_t(kargs *a, int i, int phase)
{
    static const int s[][3] = {{3, 7, 5}, {1, 1, 1}, {13, 37, 11}, {32, 200, 10}, {5, 3, 64}};
    if (i >= 5 * 2)
        return 0;
    a->N = s[i / 2][0], a->I = s[i / 2][1], a->O = s[i / 2][2];
    if (phase == 0) {
        a->nulls = i % 2 ? "dx" : "";
        snprintf(a->what, sizeof a->what, "N %d, I %d, O %d%s", a->N, a->I, a->O,
                 i % 2 ? ", no dx" : "");
        return 1;
    }
    kscale(a->w, (size_t)a->I * a->O, 0.5f, 0.0f);
    return 1;
}

/* Elementwise counts: vector tails (odd, over two blocks of 4096), one element, none. */
static const size_t ew_counts[] = {2 * 4096 + 1037, 1, 0};

/* Zeros of both signs and large values every 97th element of an input in [-4, 4]. */
static void specials(void *p, size_t n)
{
    float *x = p;
    kscale(x, n, 4.0f, 0.0f);
    for (size_t i = 0; x && i < n; i += 97)
        x[i] = (i / 97) % 3 == 0 ? 0.0f : (i / 97) % 3 == 1 ? -0.0f : 40.0f - (float)(i % 80);
}

static int set_relu(kargs *a, int i, int phase)
{
    if (i >= 3)
        return 0;
    a->count = ew_counts[i];
    snprintf(a->what, sizeof a->what, "count %zu", a->count);
    if (phase == 1)
        specials(a->x, a->count), specials(a->y, a->count); /* relu_bwd's y: zeros pass nothing */
    return 1;
}

/* Keras' ReLU in full: ReLU6, leaky (the slope-only path), all three at once, a threshold
 * alone; the specials put inputs on 0, 1 and 6 (the kinks) and on both sides of them. The
 * backward both adds into dx and writes it (set_dx: over dx's random start, on both twins). */
static int set_relux(kargs *a, int i, int phase)
{
    static const float c[][3] = {
        {6.0f, 0.0f, 0.0f}, {INFINITY, 0.2f, 0.0f}, {6.0f, 0.1f, 1.0f}, {INFINITY, 0.0f, 0.5f}};
    if (i >= 4 * 3 * (strcmp(a->op, "relux_bwd") ? 1 : 2))
        return 0;
    a->set_dx = i >= 4 * 3, i %= 4 * 3;
    a->count = ew_counts[i % 3];
    a->max_value = c[i / 3][0], a->slope = c[i / 3][1], a->threshold = c[i / 3][2];
    snprintf(a->what, sizeof a->what, "max_value %g, slope %g, threshold %g, count %zu%s",
             (double)a->max_value, (double)a->slope, (double)a->threshold, a->count,
             a->set_dx ? ", set_dx" : "");
    if (phase == 1)
        specials(a->x, a->count);
    return 1;
}

/* Cross-entropy: the fast path's row chunks (37 rows), ignored labels (K), one class, a byte
 * vocabulary's classes. */
static int set_xent(kargs *a, int i, int phase)
{
    static const int s[][2] = {{37, 7}, {1, 1}, {0, 7}, {19, 259}}; /* 259: lanes and a tail */
    if (i >= 4)
        return 0;
    a->N = s[i][0], a->K = s[i][1], a->scale = 0.25f;
    snprintf(a->what, sizeof a->what, "N %d, K %d", a->N, a->K);
    if (phase == 1) {
        for (int n = 0; n < a->N; n++)
            ((int32_t *)a->labels)[n] = (n * 5) % (a->K + 1); /* K: an ignore_class label */
        kscale(a->logits, (size_t)a->N * a->K, 3.0f, 0.0f);
    }
    return 1;
}

/* LayerNormalization: rows of D, with and without gamma / beta; the backward with its
 * forward's statistics. */
static int set_layernorm(kargs *a, int i, int phase)
{
    static const int s[][2] = {{300, 100}, {1, 1}, {7, 33}};
    if (i >= 3 * 2)
        return 0;
    a->rows = (size_t)s[i / 2][0], a->D = s[i / 2][1], a->eps = 1e-5f;
    if (phase == 0) {
        a->nulls = i % 2 ? "gamma beta dgamma dbeta" : "";
        snprintf(a->what, sizeof a->what, "rows %zu, D %d%s", a->rows, a->D,
                 i % 2 ? ", no gamma / beta" : "");
        return 1;
    }
    const size_t nx = a->rows * a->D;
    kscale(a->x, nx, 2.5f, 0.5f);
    kscale(a->gamma, (size_t)a->D, 0.5f, 1.0f);
    kscale(a->beta, (size_t)a->D, 0.5f, 0.0f);
    if (a->stat && a->dy) {
        float *y = scratch(nx);
        const mw_kernels t = ref_table();
        t.layernorm_fwd(&(mw_kctx){.nthreads = 1}, y, a->stat, a->x, a->gamma, NULL, (int)a->rows,
                        a->D, a->eps);
        free(y);
    }
    return 1;
}

/* RMS normalization: rows of D, the mean of squares and the variance, gamma's offset 0 and 1;
 * the backward with its forward's statistics, with and without dgamma. */
static int set_rmsnorm(kargs *a, int i, int phase)
{
    static const int s[][2] = {{300, 100}, {1, 1}, {7, 33}};
    if (i >= 3 * 4)
        return 0;
    a->rows = (size_t)s[i / 4][0], a->D = s[i / 4][1], a->eps = 1e-6f;
    a->centered = i % 2, a->offset = (float)(i / 2 % 2);
    if (phase == 0) {
        a->nulls = i % 4 == 3 ? "dgamma" : "";
        snprintf(a->what, sizeof a->what, "rows %zu, D %d, centered %d, offset %g", a->rows, a->D,
                 a->centered, (double)a->offset);
        return 1;
    }
    const size_t nx = a->rows * a->D;
    kscale(a->x, nx, 2.5f, 0.5f);
    kscale(a->gamma, (size_t)a->D, 0.5f, 1.0f);
    if (a->stat && a->dy) {
        float *y = scratch(nx);
        const mw_kernels t = ref_table();
        t.rmsnorm_fwd(&(mw_kctx){.nthreads = 1}, y, a->stat, a->x, a->gamma, (int)a->rows, a->D,
                      a->eps, a->centered, a->offset);
        free(y);
    }
    return 1;
}

/* The residual Add fused with either norm (rms 0: LayerNormalization): the norms' shapes, each
 * with both Add inputs' gradients, one of them NULL (the model's input), and both the same buffer
 * (Add(x, x)); the backward with the forward's statistics of s. */
static int set_add_norm(kargs *a, int i, int phase, int rms)
{
    static const int s[][2] = {{300, 100}, {1, 1}, {7, 33}};
    static const char *const nulls[] = {"", "da", "db gamma beta dgamma dbeta", ""};
    if (i >= 3 * 4)
        return 0;
    a->rows = (size_t)s[i / 4][0], a->D = s[i / 4][1], a->eps = 1e-5f;
    a->centered = i % 2, a->offset = (float)(i / 2 % 2);
    if (phase == 0) {
        a->nulls = rms && i % 4 == 2 ? "db dgamma" : nulls[i % 4];
        a->alias = i % 4 == 3 ? "db=da" : "";
        snprintf(a->what, sizeof a->what, "rows %zu, D %d, case %d", a->rows, a->D, i % 4);
        return 1;
    }
    const size_t nx = a->rows * a->D;
    kscale(a->a, nx, 2.5f, 0.5f);
    kscale(a->b, nx, 1.5f, -0.25f);
    kscale(a->s, nx, 2.5f, 0.5f);
    kscale(a->gamma, (size_t)a->D, 0.5f, 1.0f);
    kscale(a->beta, (size_t)a->D, 0.5f, 0.0f);
    if (a->stat && a->dy) {
        float *y = scratch(nx);
        const mw_kernels t = ref_table();
        const mw_kctx k1 = {.nthreads = 1};
        if (rms)
            t.rmsnorm_fwd(&k1, y, a->stat, a->s, a->gamma, (int)a->rows, a->D, a->eps, a->centered,
                          a->offset);
        else
            t.layernorm_fwd(&k1, y, a->stat, a->s, a->gamma, NULL, (int)a->rows, a->D, a->eps);
        free(y);
    }
    return 1;
}

static int set_add_layernorm(kargs *a, int i, int phase)
{
    return set_add_norm(a, i, phase, 0);
}

static int set_add_rmsnorm(kargs *a, int i, int phase)
{
    return set_add_norm(a, i, phase, 1);
}

/* Attention: self and cross, causal, padding masks (a query row masked everywhere, both of
 * Keras' answers for it), dropout with example ids, and 70 causal steps (the fast twin's row
 * blocks, a partial one last); grouped-query attention (4 query heads on 2 or 1 key heads, 2 on
 * 1 with dropout); soft-capped scores (cap 1.5: |s| reaches 3.9, where tanh bends) and sliding
 * windows (2 without the causal mask: a row whose window sees only padded keys; 20 with it
 * over 70 steps), alone and together; the backward with its forward's probabilities. */
static const float att_qid[2 * 5] = {3, 1, 4, 1, 5, 9, 2, 6, 0, 0}; /* example 1: 2 padding */
static const float att_vid[2 * 6] = {2, 7, 1, 8, 2, 8, 1, 0, 3, 3, 0, 4};
static const uint32_t att_eids[2] = {7, 9};
static float att_q70[2 * 70]; /* 70 steps: example 1's last 10 are padding */

int mw_test_attn_geom(int i, mw_attn_geom *g)
{
    /* uniform: a row masked everywhere (example 1's padded query steps) is 1 / S, Keras 3.15's
     * without dropout; its output then reads every key, past the causal blocks' */
    static const struct {
        int T, S, causal, qmask, vmask;
        float rate;
        int uniform, H, kvh;
        float cap;
        int win;
    } s[] = {{5, 5, 0, 0, 0, 0.0f, 0, 2, 0, 0.0f, 0},    {5, 5, 1, 0, 0, 0.0f, 0, 2, 0, 0.0f, 0},
             {5, 5, 1, 1, 1, 0.0f, 0, 2, 0, 0.0f, 0},    {4, 6, 0, 0, 1, 0.0f, 0, 2, 0, 0.0f, 0},
             {5, 5, 1, 0, 0, 0.3f, 0, 2, 0, 0.0f, 0},    {70, 70, 1, 1, 1, 0.0f, 0, 2, 0, 0.0f, 0},
             {5, 5, 1, 1, 1, 0.0f, 1, 2, 0, 0.0f, 0},    {5, 5, 0, 1, 0, 0.0f, 1, 2, 0, 0.0f, 0},
             {70, 70, 1, 1, 1, 0.0f, 1, 2, 0, 0.0f, 0},  {5, 5, 1, 0, 1, 0.0f, 1, 4, 2, 0.0f, 0},
             {4, 6, 0, 0, 1, 0.0f, 0, 4, 1, 0.0f, 0},    {70, 70, 1, 1, 1, 0.0f, 1, 4, 2, 0.0f, 0},
             {5, 5, 1, 1, 1, 0.3f, 0, 2, 1, 0.0f, 0},    {5, 5, 1, 1, 1, 0.0f, 0, 2, 0, 1.5f, 0},
             {5, 5, 0, 0, 1, 0.0f, 0, 2, 0, 0.0f, 2},    {70, 70, 1, 1, 1, 0.0f, 0, 4, 2, 0.0f, 20},
             {70, 70, 1, 1, 1, 0.0f, 0, 4, 2, 1.5f, 20}, {4, 6, 0, 0, 1, 0.3f, 0, 2, 0, 1.5f, 3}};
    if (i >= (int)(sizeof s / sizeof *s))
        return 0;
    for (int j = 0; j < 2 * 70; j++)
        att_q70[j] = j >= 70 + 60 ? 0.0f : (float)(1 + j % 7);
    const int T = s[i].T, S = s[i].S;
    *g = (mw_attn_geom){.T = T,
                        .S = S,
                        .H = s[i].H,
                        .kv_heads = s[i].kvh,
                        .dk = 3,
                        .dv = 2,
                        .scale = (float)(1.0 / sqrt(3.0)),
                        .soft_cap = s[i].cap,
                        .causal = s[i].causal,
                        .window = s[i].win,
                        .qids = s[i].qmask ? (T == 70 ? att_q70 : att_qid) : NULL,
                        .vids = s[i].vmask ? (S == 70  ? att_q70
                                              : S == 5 ? att_qid
                                                       : att_vid)
                                           : NULL,
                        .empty_uniform = s[i].uniform,
                        .rate = s[i].rate,
                        .seed = 42,
                        .stream = 3,
                        .ids = s[i].rate > 0 ? att_eids : NULL};
    return 1;
}

static int set_attn(kargs *a, int i, int phase)
{
    if (!mw_test_attn_geom(i, &a->ag))
        return 0;
    const int T = a->ag.T, S = a->ag.S;
    a->g = &a->ag, a->n = 2, a->ws = (size_t)MW_ATTN_WS_SLOTS * T * S;
    snprintf(a->what, sizeof a->what,
             "T %d, S %d, causal %d, masks %d %d, rate %g, uniform %d, heads %d/%d, cap %g, "
             "window %d",
             T, S, a->ag.causal, a->ag.qids != NULL, a->ag.vids != NULL, (double)a->ag.rate,
             a->ag.empty_uniform, a->ag.H, mw_attn_kvh(&a->ag), (double)a->ag.soft_cap,
             a->ag.window);
    if (phase == 1) {
        const size_t nq = (size_t)a->n * T * a->ag.H * 3,
                     nk = (size_t)a->n * S * mw_attn_kvh(&a->ag) * 3;
        kscale(a->q, nq, 1.5f, 0.0f), kscale(a->kk, nk, 1.5f, 0.0f);
        if (a->dq) {
            float *o = scratch((size_t)a->n * T * a->ag.H * 2);
            const mw_kernels t = ref_table();
            t.attn_fwd(&(mw_kctx){.nthreads = 1}, o, a->p, a->q, a->kk, a->v, &a->ag, a->n);
            free(o);
        }
    }
    return 1;
}

/* Dropout: rates, example ids or none, one example of one element, none. */
static int set_dropout(kargs *a, int i, int phase)
{
    static const struct {
        int N, D;
        float rate;
        int ids;
    } s[] = {{37, 129, 0.3f, 1},
             {37, 129, 0.5f, 0},
             {37, 129, 0.0f, 1},
             {1, 1, 0.3f, 0},
             {0, 129, 0.3f, 1}};
    if (i >= 5)
        return 0;
    (void)phase;
    a->N = s[i].N, a->D = s[i].D, a->rate = s[i].rate, a->seed = 1234, a->stream = 5;
    a->count = (size_t)a->N * a->D;
    a->nulls = s[i].ids ? "" : "ids";
    snprintf(a->what, sizeof a->what, "N %d, D %d, rate %g%s", a->N, a->D, (double)a->rate,
             s[i].ids ? ", ids" : "");
    return 1;
}

/* BatchNormalization: channel blocks with leftovers, with and without gamma / beta. */
/* The last shape's x sits at 1e5 +- 0.01 (a variance 1e-14 of the mean's square): a variance
 * taken as the mean of x^2 less the squared mean would lose it to double rounding. */
static const int bn_shapes[][2] = {{37, 19}, {101, 67}, {5, 3}, {9, 2051}, {50, 7}};

#define BN_SHAPES ((int)(sizeof bn_shapes / sizeof bn_shapes[0]))

/* The shapes with and without gamma and beta; the backwards also writing dx (set_dx). Fused
 * with a ReLU (bn_relu_*): max_value 1 (inside the forward's range of v, and the backward's) on
 * even shapes, none on odd ones; the twins form v alike, so their masks agree bitwise. */
static int set_bn(kargs *a, int i, int phase)
{
    const int bwd = !strcmp(a->op, "bn_bwd") || !strcmp(a->op, "bn_relu_bwd");
    if (i >= BN_SHAPES * 2 * (bwd ? 2 : 1))
        return 0;
    a->set_dx = i >= BN_SHAPES * 2, i %= BN_SHAPES * 2;
    a->rows = (size_t)bn_shapes[i / 2][0], a->C = bn_shapes[i / 2][1], a->eps = 1e-3f;
    a->max_value = (i / 2) % 2 ? INFINITY : 1.0f;
    if (phase == 0) {
        a->nulls = i % 2 ? "gamma beta dgamma dbeta" : "";
        snprintf(a->what, sizeof a->what, "rows %zu, C %d%s%s%s", a->rows, a->C,
                 i % 2 ? ", no gamma / beta" : "", a->set_dx ? ", set_dx" : "",
                 strncmp(a->op, "bn_relu", 7) ? ""
                 : (i / 2) % 2                ? ", ReLU"
                                              : ", ReLU max 1");
        return 1;
    }
    if (i / 2 == BN_SHAPES - 1)
        kscale(a->x, a->rows * a->C, 0.01f, 1e5f);
    else
        kscale(a->x, a->rows * a->C, 2.5f, 0.5f);
    kscale(a->gamma, (size_t)a->C, 0.5f, 1.0f);
    kscale(a->var, (size_t)a->C, 0.5f, 0.5f);      /* inference: positive variances */
    kscale(a->invstd, (size_t)a->C, 0.75f, 1.25f); /* backward: positive */
    return 1;
}

/* Synchronized BatchNormalization: three replicas' rows (M = 3 rows); the sums' forward (dy
 * NULL) and backward (with and without this slice's dgamma, dbeta); the forward from the sums
 * of x. */
static int set_bn_sync(kargs *a, int i, int phase)
{
    if (i >= BN_SHAPES * 3)
        return 0;
    a->rows = (size_t)bn_shapes[i / 3][0], a->C = bn_shapes[i / 3][1], a->eps = 1e-3f;
    a->M = 3.0 * (double)a->rows;
    if (phase == 0) {
        a->nulls = i % 3 == 0 ? "dy mean invstd dgamma dbeta" : i % 3 == 2 ? "dgamma dbeta" : "";
        snprintf(a->what, sizeof a->what, "rows %zu, C %d, %s", a->rows, a->C,
                 i % 3 == 0   ? "forward"
                 : i % 3 == 1 ? "backward"
                              : "backward, no dgamma / dbeta");
        return 1;
    }
    kscale(a->x, a->rows * a->C, 2.5f, 0.5f);
    kscale(a->gamma, (size_t)a->C, 0.5f, 1.0f);
    kscale(a->invstd, (size_t)a->C, 0.75f, 1.25f);
    if (a->s && a->y && a->x) { /* bn_sync_fwd: s, the sums of x over 3 replicas */
        double *s = a->s;
        const float *x = a->x;
        for (int c = 0; c < a->C; c++) {
            s[c] = s[a->C + c] = 0.0;
            for (size_t r = 0; r < a->rows; r++)
                s[c] += 3.0 * x[r * a->C + c],
                    s[a->C + c] += 3.0 * x[r * a->C + c] * x[r * a->C + c];
        }
    }
    return 1;
}

/* The update rules: six hyperparameter sets (momentum, Nesterov, weight decay, AMSGrad,
 * clipping, centered, clipnorm's scale; the fast paths' plain ones: 0, 3 and 5), slots a rule
 * leaves unused NULL; 1031 elements, none. */
static int set_optim(kargs *a, int i, int phase)
{
    if (i >= 6 * 2)
        return 0;
    const int hi = i / 2;
    a->oh = (mw_optim_hyper){.lr = 0.01f,
                             .gscale = 1.0f,
                             .one_minus_beta1 = 0.1f,
                             .one_minus_beta2 = 0.001f,
                             .epsilon = 1e-7f,
                             .rho = 0.9f,
                             .beta2 = 0.999f,
                             .bias1 = 0.271f};
    mw_optim_hyper *h = &a->oh;
    if (hi == 1)
        h->momentum = 0.9f, h->nesterov = 1, h->weight_decay = 0.01f, h->decay_lr = 0.1f;
    else if (hi == 2)
        h->amsgrad = 1, h->clipvalue = 0.3f;
    else if (hi == 3)
        h->momentum = 0.5f, h->centered = 1, h->gscale = 0.5f;
    else if (hi == 4)
        h->weight_decay = 0.004f, h->decay_lr = 0.01f, h->epsilon = 0.1f;
    else if (hi == 5)
        h->momentum = 0.9f, h->nesterov = 1;
    a->h = h, a->count = i % 2 ? 0 : 1031;
    if (phase == 0) {
        const char *op = a->op;
        const int sgd = !strcmp(op, "sgd_step"), adagrad = !strcmp(op, "adagrad_step");
        const int rms = !strcmp(op, "rmsprop_step"), adam = !strcmp(op, "adam_step");
        const int no2 = sgd || adagrad || (rms && h->momentum == 0);
        const int no3 = sgd || adagrad || !strcmp(op, "adamax_step") || (adam && !h->amsgrad) ||
                        (rms && !h->centered);
        snprintf(a->what, sizeof a->what, "hyperparameters %d, count %zu, slots%s%s%s", hi,
                 a->count, sgd && h->momentum == 0 ? "" : " s1", no2 ? "" : " s2",
                 no3 ? "" : " s3");
        a->nulls = sgd && h->momentum == 0 ? "s1 s2 s3"
                   : no2 && no3            ? "s2 s3"
                   : no2                   ? "s2"
                   : no3                   ? "s3"
                                           : "";
        return 1;
    }
    kscale(a->s1, a->count, 0.025f, 0.075f); /* [0.05, 0.1] */
    kscale(a->s2, a->count, 0.05f, 0.05f);   /* [0, 0.1] */
    kscale(a->s3, a->count, 0.005f, 0.005f); /* [0, 0.01] */
    return 1;
}

/* AveragePooling2D: 'same' with strides (edge windows hold fewer cells), overlapping windows, a
 * global average, more channels than the fast path sums at once; an empty batch. */
static int set_avgpool(kargs *a, int i, int phase)
{
    static const int s[][9] = {/* H, W, C, PH, PW, SH, SW, same, N */
                               {9, 7, 19, 3, 3, 2, 2, 1, 3},  {9, 7, 19, 3, 3, 1, 1, 1, 2},
                               {8, 6, 19, 2, 2, 2, 2, 0, 3},  {7, 7, 37, 7, 7, 1, 1, 0, 5},
                               {5, 4, 150, 2, 3, 1, 2, 1, 2}, {9, 7, 19, 3, 3, 2, 2, 1, 0}};
    if (i >= 6)
        return 0;
    (void)phase;
    assert_int_equal(mw_pool_geom_init(&a->pg, s[i][0], s[i][1], s[i][2], s[i][3], s[i][4], s[i][5],
                                       s[i][6], s[i][7]),
                     0);
    a->g = &a->pg, a->N = s[i][8];
    snprintf(a->what, sizeof a->what, "%dx%dx%d pool %dx%d/%d,%d same %d, N %d", s[i][0], s[i][1],
             s[i][2], s[i][3], s[i][4], s[i][5], s[i][6], s[i][7], a->N);
    return 1;
}

/* ZeroPadding2D: uneven sides, none, all sides; an empty batch. */
static int set_pad(kargs *a, int i, int phase)
{
    static const int s[][8] = {/* H, W, C, PT, PB, PL, PR, N */
                               {5, 4, 19, 1, 2, 0, 3, 3},
                               {7, 9, 3, 0, 0, 0, 0, 2},
                               {6, 6, 16, 2, 2, 2, 2, 1},
                               {5, 4, 19, 1, 2, 0, 3, 0}};
    if (i >= 4)
        return 0;
    (void)phase;
    a->H = s[i][0], a->W = s[i][1], a->C = s[i][2], a->PT = s[i][3], a->PB = s[i][4];
    a->PL = s[i][5], a->PR = s[i][6], a->N = s[i][7];
    snprintf(a->what, sizeof a->what, "%dx%dx%d pad %d %d %d %d, N %d", a->H, a->W, a->C, a->PT,
             a->PB, a->PL, a->PR, a->N);
    return 1;
}

/* Concatenate: parts of 19, 5 and 1 channels into 25 (the middle one at an offset); no rows. */
static int set_concat(kargs *a, int i, int phase)
{
    static const int s[][3] = {{19, 0, 37}, {5, 19, 37}, {1, 24, 37}, {5, 19, 0}};
    if (i >= 4)
        return 0;
    (void)phase;
    a->CX = s[i][0], a->off = s[i][1], a->rows = (size_t)s[i][2], a->CY = 25;
    snprintf(a->what, sizeof a->what, "rows %zu, %d channels at %d of 25", a->rows, a->CX, a->off);
    return 1;
}

static int set_acc(kargs *a, int i, int phase)
{
    if (i >= 3)
        return 0;
    a->count = ew_counts[i];
    snprintf(a->what, sizeof a->what, "count %zu", a->count);
    if (phase == 1)
        specials(a->x, a->count);
    return 1;
}

/* zero: no byte, one, a part of a block, and blocks over threads with a ragged last one (the
 * fast twin splits at 256 KB); the array starts random, so a byte left is seen. */
static int set_zero(kargs *a, int i, int phase)
{
    static const size_t sizes[] = {0, 1, 4099, 3 * ((size_t)1 << 18) + 13};
    if (i >= (int)(sizeof sizes / sizeof *sizes))
        return 0;
    (void)phase;
    a->nbytes = sizes[i];
    snprintf(a->what, sizeof a->what, "%zu bytes", a->nbytes);
    return 1;
}

/* add2: the sum and the copy (b NULL), over the specials (signed zeros among them), and in place
 * (y is a). */
static int set_add2(kargs *a, int i, int phase)
{
    if (i >= 3 * 3)
        return 0;
    a->count = ew_counts[i % 3];
    a->nulls = i / 3 == 1 ? "b" : "";
    a->alias = i / 3 == 2 ? "y=a" : "";
    snprintf(a->what, sizeof a->what, "count %zu%s", a->count,
             i / 3 == 1   ? ", copy"
             : i / 3 == 2 ? ", y = a"
                          : "");
    if (phase == 1)
        specials(a->a, a->count), specials(a->b, a->count);
    return 1;
}

/* Multiply: both gradients, each alone, and x * x (one buffer for both inputs and both
 * gradients). */
static int set_mul(kargs *a, int i, int phase)
{
    static const char *const nulls[] = {"", "da", "db", ""};
    if (i >= 3 * 4)
        return 0;
    a->count = ew_counts[i / 4];
    if (phase == 0) {
        a->nulls = nulls[i % 4], a->alias = i % 4 == 3 ? "db=da b=a" : "";
        snprintf(a->what, sizeof a->what, "count %zu%s%s", a->count, i % 4 == 3 ? ", x * x" : "",
                 i % 4 == 1   ? ", no da"
                 : i % 4 == 2 ? ", no db"
                              : "");
        return 1;
    }
    specials(a->a, a->count), kscale(a->b, a->count, 4.0f, 0.0f);
    return 1;
}

/* Every activation kind (elu's alpha 1.5, leaky_relu's slope 0.2) on saturating values and
 * zeros of both signs. */
static int set_act(kargs *a, int i, int phase)
{
    if (i >= MW_ACTK_COUNT * 3)
        return 0;
    a->kind = (mw_act_kind)(i / 3), a->count = ew_counts[i % 3];
    a->alpha = a->kind == MW_ACTK_ELU ? 1.5f : 0.2f;
    if (a->kind == MW_ACTK_SILU) /* its own sigmoid: a few ulp of 1 in s; the slope's v (1 - s)
                                    scales them by |v| <= 40 */
        a->tol_abs = 2e-5f, a->tol_rel = 1e-6f;
    snprintf(a->what, sizeof a->what, "kind %d, count %zu", (int)a->kind, a->count);
    if (phase == 1)
        specials(a->x, a->count);
    return 1;
}

/* Softmax: an odd shape, the logits' shape, several blocks of rows, none; a row far from 0. */
static int set_softmax(kargs *a, int i, int phase)
{
    static const int s[][2] = {{37, 19}, {64, 10}, {301, 7}, {0, 5}};
    if (i >= 4)
        return 0;
    a->rows = (size_t)s[i][0], a->C = s[i][1];
    snprintf(a->what, sizeof a->what, "rows %zu, C %d", a->rows, a->C);
    if (phase == 1 && a->x && a->rows) {
        kscale(a->x, a->rows * a->C, 4.0f, 0.0f);
        kscale(a->x, (size_t)a->C, 1.0f, 80.0f); /* the max is subtracted first */
    }
    return 1;
}

/* RotaryEmbedding: the layer alone (width D), heads (width 4 of 12), a start past 0 with
 * another denominator and scale, one step of one pair; x in [-4, 4]; the first and the third
 * again in 16 bits (half 1: bfloat16, 2: float16, the input rounded to it). */
static int set_rope(kargs *a, int i, int phase)
{
    static const int s[][7] = {{5, 37, 16, 16, 0, 16, 0}, {3, 9, 12, 4, 0, 4, 0},
                               {2, 13, 8, 8, 7, 6, 0},    {1, 1, 2, 2, 0, 2, 0},
                               {5, 37, 16, 16, 0, 16, 1}, {2, 13, 8, 8, 7, 6, 2}};
    if (i >= 6)
        return 0;
    a->n = s[i][0], a->T = s[i][1], a->D = s[i][2], a->width = s[i][3];
    a->start = s[i][4], a->denom = s[i][5], a->half = s[i][6];
    a->max_wavelength = i == 2 || i == 5 ? 500.0f : 10000.0f;
    a->scale = i == 2 || i == 5 ? 2.5f : 1.0f;
    snprintf(a->what, sizeof a->what, "n %d, T %d, D %d, width %d, start %d, denom %d, half %d",
             a->n, a->T, a->D, a->width, a->start, a->denom, a->half);
    if (phase == 1) {
        float *x = a->x ? a->x : a->dy;
        const size_t cnt = (size_t)a->n * a->T * a->D;
        kscale(x, cnt, 4.0f, 0.0f);
        for (size_t e = 0; e < cnt && a->half; e++)
            x[e] = a->half == 1 ? mw_bf16_round(x[e]) : mw_f16_round(x[e]);
    }
    return 1;
}

/* The 16-bit roundings: random bit patterns (NaNs, infinities, subnormals among them). */
static int set_round(kargs *a, int i, int phase)
{
    static const size_t counts[] = {1000003, 1, 0};
    if (i >= 3)
        return 0;
    a->count = counts[i];
    snprintf(a->what, sizeof a->what, "count %zu", a->count);
    if (phase == 1) {
        uint32_t *u = a->p;
        uint64_t x = 88172645463325252ull;
        for (size_t j = 0; j < a->count; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            u[j] = (uint32_t)(x >> 16);
        }
    }
    return 1;
}

static const kcase cases[] = {
    {"conv2d_fwd", set_conv, 1e-5f, 1e-4f, 0},
    {"conv2d_bwd", set_conv, 1e-5f, 1e-4f, 0},
    {"dwconv2d_fwd", set_dwconv, 0.0f, 0.0f, 1},
    {"dwconv2d_bwd", set_dwconv, 1e-5f, 1e-4f, 1},
    {"conv2d_tr_fwd", set_conv_tr, 1e-5f, 1e-4f, 0},
    {"conv2d_tr_bwd", set_conv_tr, 1e-5f, 1e-4f, 0},
    {"maxpool_fwd", set_maxpool, 0.0f, 0.0f, 1},
    {"maxpool_bwd", set_maxpool, 1e-5f, 1e-4f, 0},
    {"dense_fwd", set_dense, 1e-5f, 1e-4f, 0},
    {"dense_bwd", set_dense, 1e-5f, 1e-4f, 0},
    {"dense_act_fwd", set_dense_act, 2e-5f, 2e-4f, 0},
    {"dense_t_fwd", set_dense_t, 1e-5f, 1e-4f, 0},
    {"dense_t_bwd", set_dense_t, 1e-5f, 1e-4f, 0},
    {"relu_fwd", set_relu, 0.0f, 0.0f, 1},
    {"relu_bwd", set_relu, 0.0f, 0.0f, 1},
    {"relux_fwd", set_relux, 0.0f, 0.0f, 1},
    {"relux_bwd", set_relux, 0.0f, 0.0f, 1},
    /* the forward's exp within 2 ulp of expf's, its sum in lanes: p a few ulp off, the loss (<= 20
       in its cases) one rounding of its log */
    {"xent_fwd", set_xent, 2e-6f, 1e-6f, 1},
    {"xent_bwd", set_xent, 0.0f, 0.0f, 1},
    /* the forward's double sums in lanes: the mean and rstd a float rounding apart at most, y
       within a few ulp of its |y| <= 10 */
    {"layernorm_fwd", set_layernorm, 2e-6f, 1e-6f, 1},
    {"layernorm_bwd", set_layernorm, 0.0f, 0.0f, 1},
    /* the statistic's and mean(g x)'s double sums in lanes: each a float rounding from the
       reference's at most (r, k), so y and dx within a few ulp of their |y|, |dx| <= 10 */
    {"rmsnorm_fwd", set_rmsnorm, 2e-6f, 1e-6f, 1},
    {"rmsnorm_bwd", set_rmsnorm, 2e-6f, 1e-6f, 1},
    /* the fused rows: the unfused twins' arithmetic, so the same tolerances */
    {"add_layernorm_fwd", set_add_layernorm, 2e-6f, 1e-6f, 1},
    {"add_layernorm_bwd", set_add_layernorm, 0.0f, 0.0f, 1},
    {"add_rmsnorm_fwd", set_add_rmsnorm, 2e-6f, 1e-6f, 1},
    {"add_rmsnorm_bwd", set_add_rmsnorm, 2e-6f, 1e-6f, 1},
    {"attn_fwd", set_attn, 2e-6f, 2e-6f, 0},
    {"attn_bwd", set_attn, 2e-6f, 2e-6f, 0},
    {"dropout_fwd", set_dropout, 0.0f, 0.0f, 1},
    {"dropout_bwd", set_dropout, 0.0f, 0.0f, 1},
    {"bn_fwd_train", set_bn, 0.0f, 0.0f, 1},
    {"bn_fwd_infer", set_bn, 0.0f, 0.0f, 1},
    {"bn_bwd", set_bn, 1e-5f, 1e-4f, 1},
    {"bn_relu_fwd_train", set_bn, 0.0f, 0.0f, 1},
    {"bn_relu_bwd", set_bn, 1e-5f, 1e-4f, 1},
    {"bn_sums", set_bn_sync, 2e-5f, 1e-5f, 1},
    {"bn_sync_fwd", set_bn_sync, 1e-5f, 1e-5f, 1},
    {"bn_sync_bwd", set_bn_sync, 1e-5f, 1e-4f, 1},
    {"avgpool_fwd", set_avgpool, 0.0f, 0.0f, 1},
    {"avgpool_bwd", set_avgpool, 0.0f, 0.0f, 1},
    {"pad2d_fwd", set_pad, 0.0f, 0.0f, 1},
    {"pad2d_bwd", set_pad, 0.0f, 0.0f, 1},
    {"acc", set_acc, 0.0f, 0.0f, 1},
    {"add2", set_add2, 0.0f, 0.0f, 1},
    {"zero", set_zero, 0.0f, 0.0f, 1},
    {"mul_fwd", set_mul, 0.0f, 0.0f, 1},
    {"mul_bwd", set_mul, 0.0f, 0.0f, 1},
    {"concat_fwd", set_concat, 0.0f, 0.0f, 1},
    {"concat_bwd", set_concat, 0.0f, 0.0f, 1},
    {"act_fwd", set_act, 0.0f, 0.0f, 1},
    {"act_bwd", set_act, 0.0f, 0.0f, 1},
    {"softmax_fwd", set_softmax, 0.0f, 0.0f, 1},
    {"softmax_bwd", set_softmax, 0.0f, 0.0f, 1},
    {"rope_fwd", set_rope, 0.0f, 0.0f, 1},
    {"rope_bwd", set_rope, 0.0f, 0.0f, 1},
    {"sgd_step", set_optim, 0.0f, 0.0f, 1},
    {"adam_step", set_optim, 0.0f, 0.0f, 1},
    {"rmsprop_step", set_optim, 0.0f, 0.0f, 1},
    {"adagrad_step", set_optim, 0.0f, 0.0f, 1},
    {"adamax_step", set_optim, 0.0f, 0.0f, 1},
    {"round_bf16", set_round, 0.0f, 0.0f, 1},
    {"round_f16", set_round, 0.0f, 0.0f, 1},
};

/* ---- the loop ---- */

static const kcase *case_of(const char *op)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (!strcmp(cases[i].op, op))
            return &cases[i];
    return NULL;
}

void mw_test_kernels_fast_vs_ref(void **state)
{
    (void)state;
    const mw_kernels ref = ref_table();
    mw_kernels cpu;
    mw_kernels_init_cpu(&cpu);
    int checked = 0;
    for (size_t ei = 0; ei < sizeof entries / sizeof *entries; ei++) {
        const kentry *e = &entries[ei];
        if (!memcmp((const char *)&cpu + e->off, (const char *)&ref + e->off, sizeof cpu.acc))
            continue; /* the cpu table keeps the reference */
        const kcase *c = case_of(e->op);
        if (!c)
            fail_msg("%s: the cpu table overrides it, but tests/kernel_check.c has no cases",
                     e->op);
        int i = 0;
        for (;; i++) {
            kargs a;
            memset(&a, 0, sizeof a);
            a.op = e->op;
            if (!c->setup(&a, i, 0))
                break;
            kbufs B;
            alloc_arrays(e, &a, &B, 1000 * ei + (uint64_t)i);
            c->setup(&a, i, 1);
            const int bad = run_case(c, e, i, &a, &B, &ref, &cpu);
            free_bufs(&B);
            if (bad)
                fail_msg("%s", kfail);
        }
        assert_true(i > 0);
        checked++;
    }
    /* every case names an entry the cpu table overrides */
    assert_int_equal(checked, (int)(sizeof cases / sizeof *cases));
}

/* A fast twin off by one ulp in one element: the loop's comparison names it. */
static void acc_off_by_one_ulp(const mw_kctx *k, float *y, const float *x, size_t count)
{
    const mw_kernels t = ref_table();
    t.acc(k, y, x, count);
    if (count > 4614)
        y[4614] = nextafterf(y[4614], INFINITY);
}

void mw_test_kernels_fast_vs_ref_control(void **state)
{
    (void)state;
    const mw_kernels ref = ref_table();
    mw_kernels wrong = ref;
    wrong.acc = acc_off_by_one_ulp;
    const kentry *e = entries;
    while (strcmp(e->op, "acc"))
        e++;
    const kcase *c = case_of("acc");
    kargs a;
    memset(&a, 0, sizeof a);
    a.op = e->op;
    assert_true(c->setup(&a, 0, 0));
    kbufs B;
    alloc_arrays(e, &a, &B, 1);
    c->setup(&a, 0, 1);
    assert_int_equal(run_case(c, e, 0, &a, &B, &ref, &wrong), 1);
    expect_contains(kfail, "acc case 0 (count 9229), 1 thread: y[4614]: fast ");
    expect_contains(kfail, "1 of 9229 off");
    free_bufs(&B);
}

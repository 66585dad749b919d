/* The layer ops of Functional graphs (BatchNormalization, pooling, padding, merges,
 * activations, softmax; kernels/kernel_list.h), reference against the fast CPU path with 1 and 2
 * threads, on ResNet-20's shapes: a batch of 64 at 28x28x16, 14x14x32 and 7x7x64 (its three
 * stages), the global average pooling at 7x7x64 and a softmax over 64 x 10.
 *
 *   bench_cpu_ops [reps=21] [op]      (op: only the ops whose name contains it)
 *
 * Every case first checks the fast path against the reference on the same inputs (bitwise,
 * or within 1e-5 relative for BatchNormalization: a benchmark of wrong results is
 * worthless), then times the three side by side, rep after rep in a rotating order (so drift
 * hits all alike), and prints the medians and the ratios ref / cpu. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/timer.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/table.h"
#include "kernels/geom.h"
#include "kernels/ref/table.h"
#include "kernels/twins.h"

/* Everything an op reads or writes; sized for the largest case. */
typedef struct {
    int N, H, W, C;
    mw_pool_geom pg;
    size_t rows, nx;
    float *x, *x2, *dy, *gamma, *beta;         /* inputs */
    float *y, *dx, *dx2, *st, *dgamma, *dbeta; /* outputs */
} bufs;

#define MAXF ((size_t)2 << 20) /* floats per buffer: 64 x 30 x 30 x 32 fits */

typedef void (*op_fn)(const mw_kernels *t, const mw_kctx *k, bufs *b);

static void bn_train(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->bn_fwd_train(k, b->y, b->st, b->st + b->C, b->st + 2 * b->C, b->x, b->gamma, b->beta,
                    b->rows, b->C, 1e-3f);
}

static void bn_infer(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->bn_fwd_infer(k, b->y, b->x, b->gamma, b->beta, b->x2, b->x2 + b->C, b->rows, b->C, 1e-3f);
}

static void bn_bwd(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->bn_bwd(k, b->dx, b->dgamma, b->dbeta, b->dy, b->x, b->x2, b->x2 + b->C, b->gamma, b->rows,
              b->C, 0);
}

static void avg_fwd(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->avgpool_fwd(k, b->y, b->x, &b->pg, b->N);
}

static void avg_bwd(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->avgpool_bwd(k, b->dx, b->dy, &b->pg, b->N);
}

static void pad_fwd(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->pad2d_fwd(k, b->y, b->x, b->H, b->W, b->C, 1, 1, 1, 1, b->N);
}

static void pad_bwd(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->pad2d_bwd(k, b->dx, b->dy, b->H, b->W, b->C, 1, 1, 1, 1, b->N);
}

static void acc(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->acc(k, b->dx, b->dy, b->nx);
}

static void mul_fwd(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->mul_fwd(k, b->y, b->x, b->x2, b->nx);
}

static void mul_bwd(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->mul_bwd(k, b->dx, b->dx2, b->dy, b->x, b->x2, b->nx);
}

/* two tensors of C channels into one of 2C */
static void cat_fwd(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->concat_fwd(k, b->y, b->x, b->rows, b->C, 2 * b->C, 0);
    t->concat_fwd(k, b->y, b->x2, b->rows, b->C, 2 * b->C, b->C);
}

static void cat_bwd(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->concat_bwd(k, b->dx, b->dy, b->rows, b->C, 2 * b->C, 0);
    t->concat_bwd(k, b->dx2, b->dy, b->rows, b->C, 2 * b->C, b->C);
}

#define ACT_OPS(name, kind)                                                                        \
    static void name##_fwd(const mw_kernels *t, const mw_kctx *k, bufs *b)                         \
    {                                                                                              \
        t->act_fwd(k, b->y, b->x, b->nx, kind, 0.2f);                                              \
    }                                                                                              \
    static void name##_bwd(const mw_kernels *t, const mw_kctx *k, bufs *b)                         \
    {                                                                                              \
        t->act_bwd(k, b->dx, b->dy, b->x, b->x2, b->nx, kind, 0.2f);                               \
    }
ACT_OPS(sigmoid, MW_ACTK_SIGMOID)
ACT_OPS(gelu, MW_ACTK_GELU)
ACT_OPS(leaky, MW_ACTK_LEAKY_RELU)

static void smax_fwd(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->softmax_fwd(k, b->y, b->x, b->rows, b->C);
}

static void smax_bwd(const mw_kernels *t, const mw_kctx *k, bufs *b)
{
    t->softmax_bwd(k, b->dx, b->dy, b->x2, b->rows, b->C);
}

/* shape: 0, 1, 2 the stages (64 x 28x28x16, 14x14x32, 7x7x64); 3 the logits (64 x 10);
 * pool: 0 none, 1 3x3 stride 2 'same', 2 global */
typedef struct {
    const char *name;
    op_fn fn;
    int shape, pool;
    float rtol; /* 0: bitwise */
} bench_case;

static const bench_case cases[] = {
    {"bn_fwd_train", bn_train, 0, 0, 1e-5f},
    {"bn_fwd_train", bn_train, 1, 0, 1e-5f},
    {"bn_fwd_train", bn_train, 2, 0, 1e-5f},
    {"bn_bwd", bn_bwd, 0, 0, 1e-5f},
    {"bn_bwd", bn_bwd, 1, 0, 1e-5f},
    {"bn_bwd", bn_bwd, 2, 0, 1e-5f},
    {"bn_fwd_infer", bn_infer, 0, 0, 1e-5f},
    {"acc (Add)", acc, 0, 0, 0},
    {"acc (Add)", acc, 1, 0, 0},
    {"acc (Add)", acc, 2, 0, 0},
    {"avgpool_fwd", avg_fwd, 2, 2, 0},
    {"avgpool_bwd", avg_bwd, 2, 2, 0},
    {"avgpool_fwd", avg_fwd, 0, 1, 0},
    {"avgpool_bwd", avg_bwd, 0, 1, 0},
    {"pad2d_fwd", pad_fwd, 0, 0, 0},
    {"pad2d_bwd", pad_bwd, 0, 0, 0},
    {"mul_fwd", mul_fwd, 0, 0, 0},
    {"mul_bwd", mul_bwd, 0, 0, 0},
    {"concat_fwd", cat_fwd, 0, 0, 0},
    {"concat_bwd", cat_bwd, 0, 0, 0},
    {"act_fwd sigmoid", sigmoid_fwd, 1, 0, 0},
    {"act_bwd sigmoid", sigmoid_bwd, 1, 0, 0},
    {"act_fwd gelu", gelu_fwd, 1, 0, 0},
    {"act_bwd gelu", gelu_bwd, 1, 0, 0},
    {"act_fwd leaky", leaky_fwd, 1, 0, 0},
    {"act_bwd leaky", leaky_bwd, 1, 0, 0},
    {"softmax_fwd", smax_fwd, 3, 0, 0},
    {"softmax_bwd", smax_bwd, 3, 0, 0},
};

static void fill(float *p, size_t count, unsigned seed, float lo, float hi)
{
    for (size_t i = 0; i < count; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = lo + (hi - lo) * (float)(seed >> 8) / (float)(1u << 24);
    }
}

/* Inputs from fixed seeds, outputs zeroed (so a validation run starts from the same state). */
static void reset(bufs *b)
{
    fill(b->x, MAXF, 1, -2.0f, 2.0f);
    fill(b->x2, MAXF, 2, 0.1f, 1.0f); /* also BN's mean / invstd and softmax's y: positive */
    fill(b->dy, MAXF, 3, -1.0f, 1.0f);
    fill(b->gamma, 1024, 4, 0.5f, 1.5f);
    fill(b->beta, 1024, 5, -0.5f, 0.5f);
    memset(b->y, 0, MAXF * sizeof(float));
    memset(b->dx, 0, MAXF * sizeof(float));
    memset(b->dx2, 0, MAXF * sizeof(float));
    memset(b->st, 0, 3 * 1024 * sizeof(float));
    memset(b->dgamma, 0, 1024 * sizeof(float));
    memset(b->dbeta, 0, 1024 * sizeof(float));
}

static void set_shape(bufs *b, const bench_case *c)
{
    static const int hw[] = {28, 14, 7, 1}, ch[] = {16, 32, 64, 10};
    b->N = 64, b->H = b->W = hw[c->shape], b->C = ch[c->shape];
    b->rows = (size_t)b->N * b->H * b->W, b->nx = b->rows * b->C;
    if (c->pool == 1)
        mw_pool_geom_init(&b->pg, b->H, b->W, b->C, 3, 3, 2, 2, 1);
    else
        mw_pool_geom_init(&b->pg, b->H, b->W, b->C, b->H, b->W, 1, 1, 0);
}

/* The outputs of one validation run, concatenated. */
static float *outputs(const bufs *b)
{
    float *o = malloc((3 * MAXF + 5 * 1024) * sizeof *o);
    if (!o)
        return NULL;
    memcpy(o, b->y, MAXF * sizeof *o);
    memcpy(o + MAXF, b->dx, MAXF * sizeof *o);
    memcpy(o + 2 * MAXF, b->dx2, MAXF * sizeof *o);
    memcpy(o + 3 * MAXF, b->st, 3 * 1024 * sizeof *o);
    memcpy(o + 3 * MAXF + 3 * 1024, b->dgamma, 1024 * sizeof *o);
    memcpy(o + 3 * MAXF + 4 * 1024, b->dbeta, 1024 * sizeof *o);
    return o;
}

/* 0 when the fast path (nt threads) gives the reference's outputs within c->rtol. */
static int validate(const bench_case *c, bufs *b, const mw_kernels *ref, const mw_kernels *cpu,
                    int nt)
{
    mw_kctx k1 = {.nthreads = 1}, kn = {.nthreads = nt};
    reset(b);
    c->fn(ref, &k1, b);
    float *want = outputs(b);
    reset(b);
    c->fn(cpu, &kn, b);
    float *got = outputs(b);
    int bad = !want || !got;
    for (size_t i = 0; !bad && i < 3 * MAXF + 5 * 1024; i++) {
        double err = fabs((double)got[i] - want[i]);
        if (c->rtol == 0.0f ? memcmp(&got[i], &want[i], sizeof *got) != 0
                            : !(err <= 1e-6 + c->rtol * fabs((double)want[i]))) {
            fprintf(stderr, "%s, %d thread(s): output %zu is %.9g, the reference's %.9g\n", c->name,
                    nt, i, got[i], want[i]);
            bad = 1;
        }
    }
    free(want), free(got);
    return bad;
}

/* Seconds per call of one table: calls repeated so one sample takes about 2 ms. */
static double sample(const bench_case *c, bufs *b, const mw_kernels *t, const mw_kctx *k, int iters)
{
    double t0 = mw_now();
    for (int i = 0; i < iters; i++)
        c->fn(t, k, b);
    return (mw_now() - t0) / iters;
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 21;
    if (reps < 3) {
        fprintf(stderr, "usage: bench_cpu_ops [reps >= 3] [op]\n");
        return 2;
    }
    mw_kernels ref, cpu;
    mw_kernels_init_ref(&ref);
    mw_kernels_init_cpu(&cpu);
    bufs b = {0};
    float **all[] = {&b.x, &b.x2, &b.dy, &b.y, &b.dx, &b.dx2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (!(*all[i] = mw_alloc_aligned(MAXF * sizeof(float))))
            return 1;
    b.gamma = malloc(1024 * 4), b.beta = malloc(1024 * 4), b.st = malloc(3 * 1024 * 4);
    b.dgamma = malloc(1024 * 4), b.dbeta = malloc(1024 * 4);
    if (!b.gamma || !b.beta || !b.st || !b.dgamma || !b.dbeta)
        return 1;
    double *t[3];
    for (int j = 0; j < 3; j++)
        if (!(t[j] = calloc((size_t)reps, sizeof(double))))
            return 1;
    printf("graph ops, reference vs the fast CPU path (%s), median of %d, microseconds per call\n",
           mw_kernels_cpu_blas(), reps);
    printf("%-16s %-13s %10s %10s %7s %10s %7s\n", "op", "shape", "ref", "cpu 1t", "ratio",
           "cpu 2t", "ratio");
    const mw_kctx k1 = {.nthreads = 1}, k2 = {.nthreads = 2};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const bench_case *c = &cases[ci];
        if (argc > 2 && !strstr(c->name, argv[2]))
            continue;
        set_shape(&b, c);
        if (validate(c, &b, &ref, &cpu, 1) || validate(c, &b, &ref, &cpu, 2))
            return 1;
        reset(&b);
        /* calls per sample: about 2 ms of the fast path with one thread */
        double once = sample(c, &b, &cpu, &k1, 1);
        int iters = once > 2e-3 ? 1 : (int)(2e-3 / (once > 1e-7 ? once : 1e-7));
        for (int r = 0; r < reps; r++) /* the order rotates: each follows each as often */
            for (int j = 0; j < 3; j++) {
                const int w = (r + j) % 3;
                t[w][r] = sample(c, &b, w ? &cpu : &ref, w == 2 ? &k2 : &k1, iters);
            }
        double m0 = mw_median(t[0], reps), m1 = mw_median(t[1], reps), m2 = mw_median(t[2], reps);
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%dx%dx%d", b.N, b.H, b.W, b.C);
        if (c->shape == 3)
            snprintf(shape, sizeof shape, "%dx%d", b.N, b.C);
        printf("%-16s %-13s %10.1f %10.1f %6.2fx %10.1f %6.2fx\n", c->name, shape, m0 * 1e6,
               m1 * 1e6, m0 / m1, m2 * 1e6, m0 / m2);
        fflush(stdout);
    }
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(*all[i]);
    free(b.gamma), free(b.beta), free(b.st), free(b.dgamma), free(b.dbeta);
    free(t[0]), free(t[1]), free(t[2]);
    return 0;
}

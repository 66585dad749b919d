/* How fast can ResNet50's convolutions run on this CPU at all? keras.applications' ResNet50
 * (v1: the stride on each stage's first 1x1) at SIZE x SIZE, every distinct convolution of one
 * training step on a batch, forward and backward (weights and bias; data too, except for the
 * first layer), one thread: the per-rank work of `mpirun -n 2` on two cores. Three engines side
 * by side, rep after rep in a rotating order (drift hits all alike):
 *   - mwtrain's fast CPU kernels (kernels/cpu/conv2d.c: im2col + sgemm, the bias rows and the
 *     bias gradient included), on the scratch the model gives them;
 *   - oneDNN's convolution primitives on NHWC tensors, the layout mwtrain keeps;
 *   - oneDNN's convolution primitives on the layouts oneDNN picks for itself (blocked channels),
 *     the reorders into and out of them NOT counted: a bound no NHWC program reaches.
 * The first two are checked against each other first (a benchmark of wrong results is
 * worthless): the forward, weight and data gradients within 1e-4 of their largest value (float32
 * sums of at most 18,432 products, whose rounding is about sqrt(terms) 2^-24 <= 1e-5 of it), the
 * bias gradient within 1e-4 of the largest sum of |dy| it adds up (its terms cancel).
 * Prints each layer's medians, the totals over the model (each shape times its count), and
 * last one line of numbers: the milliseconds per batch of each engine, the fastest engine per
 * layer, and the images per second of a step that were nothing but those convolutions.
 *
 *   bench_conv_engines [size=96] [reps=5] [batch=32] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "common/arena.h"
#include "common/timer.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/table.h"
#include "kernels/geom.h"

#define MAX_REPS 51
#define MAX_LAYERS 64
#define ENGINES 3

static const char *engine_name[ENGINES] = {"mwtrain", "oneDNN NHWC", "oneDNN blocked"};

typedef struct {
    mw_conv2d_geom g;
    int count; /* layers of this shape in the model */
    int first; /* the model's first layer: no data gradient */
} shape;

static void die_dnnl(dnnl_status_t s, const char *what)
{
    if (s == dnnl_success)
        return;
    fprintf(stderr, "bench_conv_engines: oneDNN failed in %s (status %d)\n", what, (int)s);
    exit(1);
}
#define DN(call) die_dnnl((call), #call)

/* ResNet50's convolutions at size x size (Keras' resnet.py: ZeroPadding 3, 7x7 stride 2 valid,
 * ZeroPadding 1, max pool 3 stride 2; four stages of bottleneck blocks), each distinct shape
 * once with its count. Returns the number of shapes. */
static int resnet50_shapes(shape *s, int size)
{
    int n = 0, H = size + 6;
    mw_conv2d_geom g;
    if (mw_conv2d_geom_init(&g, H, H, 3, 64, 7, 7, 2, 2, 0))
        return -1;
    s[n++] = (shape){g, 1, 1};
    H = (g.OH + 2 - 3) / 2 + 1;
    static const int filters[4] = {64, 128, 256, 512}, blocks[4] = {3, 4, 6, 3};
    int C = 64;
    for (int st = 0; st < 4; st++) {
        const int f = filters[st], S = st ? 2 : 1;
        for (int b = 0; b < blocks[st]; b++) {
            const int s0 = b ? 1 : S; /* the block's first 1x1 */
            mw_conv2d_geom l[4];
            int m = 0;
            if (mw_conv2d_geom_init(&l[m++], H, H, C, f, 1, 1, s0, s0, 0))
                return -1;
            const int h = l[0].OH;
            if (mw_conv2d_geom_init(&l[m++], h, h, f, f, 3, 3, 1, 1, 1) ||
                mw_conv2d_geom_init(&l[m++], h, h, f, 4 * f, 1, 1, 1, 1, 0))
                return -1;
            if (!b && mw_conv2d_geom_init(&l[m++], H, H, C, 4 * f, 1, 1, S, S, 0))
                return -1;
            for (int i = 0; i < m; i++) {
                int j = 0;
                while (j < n && memcmp(&s[j].g, &l[i], sizeof l[i]))
                    j++;
                if (j == n) {
                    if (n == MAX_LAYERS)
                        return -1;
                    s[n++] = (shape){l[i], 0, 0};
                }
                s[j].count++;
            }
            C = 4 * f, H = h;
        }
    }
    return n;
}

static float *filled(size_t n, unsigned seed)
{
    float *p = mw_alloc_aligned(n * sizeof(float) + 64);
    if (!p) {
        fprintf(stderr, "bench_conv_engines: out of memory\n");
        exit(1);
    }
    unsigned v = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        v = v * 1664525u + 1013904223u;
        p[i] = (float)((v >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

/* One oneDNN convolution (forward training with bias, backward data, backward weights and bias)
 * with its memories; blocked: the layouts oneDNN picks (format_tag_any), else NHWC / HWIO. */
typedef struct {
    dnnl_primitive_t fwd, bwd_d, bwd_w;
    dnnl_memory_t src, wei, bia, dst, dsrc, ddst, dwei, dbia;
} dn_conv;

static dnnl_memory_t dn_mem(dnnl_engine_t eng, const_dnnl_primitive_desc_t pd, dnnl_query_t q)
{
    dnnl_memory_t m;
    DN(dnnl_memory_create(&m, dnnl_primitive_desc_query_md(pd, q, 0), eng, DNNL_MEMORY_ALLOCATE));
    void *h;
    DN(dnnl_memory_get_data_handle(m, &h));
    size_t bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, q, 0));
    float *f = h;
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        f[i] = (float)(i % 13) * 0.05f - 0.3f;
    return m;
}

static void dn_conv_init(dn_conv *c, dnnl_engine_t eng, const mw_conv2d_geom *g, int N, int blocked)
{
    const dnnl_dims_t sd = {N, g->C, g->H, g->W}, wd = {g->O, g->C, g->KH, g->KW}, bd = {g->O},
                      dd = {N, g->O, g->OH, g->OW}, st = {g->SH, g->SW}, pl = {g->PT, g->PL},
                      pr = {(g->OH - 1) * g->SH + g->KH - g->H - g->PT,
                            (g->OW - 1) * g->SW + g->KW - g->W - g->PL};
    dnnl_memory_desc_t s, w, b, d;
    DN(dnnl_memory_desc_init_by_tag(&s, 4, sd, dnnl_f32,
                                    blocked ? dnnl_format_tag_any : dnnl_nhwc));
    DN(dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32,
                                    blocked ? dnnl_format_tag_any : dnnl_hwio));
    DN(dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_x));
    DN(dnnl_memory_desc_init_by_tag(&d, 4, dd, dnnl_f32,
                                    blocked ? dnnl_format_tag_any : dnnl_nhwc));
    dnnl_convolution_desc_t fd, bdd, bwd;
    DN(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &s,
                                          &w, &b, &d, st, pl, pr));
    DN(dnnl_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &s, &w, &d, st, pl,
                                                pr));
    DN(dnnl_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &s, &w, &b, &d,
                                                   st, pl, pr));
    dnnl_primitive_desc_t fpd, bdpd, bwpd;
    DN(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
    DN(dnnl_primitive_desc_create(&bdpd, &bdd, NULL, eng, fpd));
    DN(dnnl_primitive_desc_create(&bwpd, &bwd, NULL, eng, fpd));
    c->src = dn_mem(eng, fpd, dnnl_query_src_md);
    c->wei = dn_mem(eng, fpd, dnnl_query_weights_md);
    c->dst = dn_mem(eng, fpd, dnnl_query_dst_md);
    c->dsrc = dn_mem(eng, bdpd, dnnl_query_diff_src_md);
    c->ddst = dn_mem(eng, bwpd, dnnl_query_diff_dst_md);
    c->dwei = dn_mem(eng, bwpd, dnnl_query_diff_weights_md);
    DN(dnnl_memory_create(&c->bia, &b, eng, DNNL_MEMORY_ALLOCATE));
    DN(dnnl_memory_create(&c->dbia, &b, eng, DNNL_MEMORY_ALLOCATE));
    DN(dnnl_primitive_create(&c->fwd, fpd));
    DN(dnnl_primitive_create(&c->bwd_d, bdpd));
    DN(dnnl_primitive_create(&c->bwd_w, bwpd));
    DN(dnnl_primitive_desc_destroy(fpd));
    DN(dnnl_primitive_desc_destroy(bdpd));
    DN(dnnl_primitive_desc_destroy(bwpd));
}

static void dn_conv_free(dn_conv *c)
{
    dnnl_primitive_destroy(c->fwd), dnnl_primitive_destroy(c->bwd_d);
    dnnl_primitive_destroy(c->bwd_w);
    dnnl_memory_t *m[] = {&c->src,  &c->wei,  &c->bia,  &c->dst,
                          &c->dsrc, &c->ddst, &c->dwei, &c->dbia};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        dnnl_memory_destroy(*m[i]);
}

static void dn_conv_run(dn_conv *c, dnnl_stream_t str, int first)
{
    dnnl_exec_arg_t f[] = {{DNNL_ARG_SRC, c->src},
                           {DNNL_ARG_WEIGHTS, c->wei},
                           {DNNL_ARG_BIAS, c->bia},
                           {DNNL_ARG_DST, c->dst}};
    DN(dnnl_primitive_execute(c->fwd, str, 4, f));
    if (!first) {
        dnnl_exec_arg_t d[] = {
            {DNNL_ARG_DIFF_DST, c->ddst}, {DNNL_ARG_WEIGHTS, c->wei}, {DNNL_ARG_DIFF_SRC, c->dsrc}};
        DN(dnnl_primitive_execute(c->bwd_d, str, 3, d));
    }
    dnnl_exec_arg_t w[] = {{DNNL_ARG_SRC, c->src},
                           {DNNL_ARG_DIFF_DST, c->ddst},
                           {DNNL_ARG_DIFF_WEIGHTS, c->dwei},
                           {DNNL_ARG_DIFF_BIAS, c->dbia}};
    DN(dnnl_primitive_execute(c->bwd_w, str, 4, w));
    DN(dnnl_stream_wait(str));
}

static float *handle(dnnl_memory_t m)
{
    void *h;
    DN(dnnl_memory_get_data_handle(m, &h));
    return h;
}

/* max |a - b| over max |b|. */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

/* mwtrain's kernels against oneDNN NHWC on the same inputs. Returns 0 when they agree. */
static int check(const mw_kernels *cpu, const mw_kctx *k, dn_conv *c, dnnl_stream_t str,
                 const shape *s, int N)
{
    const mw_conv2d_geom *g = &s->g;
    const size_t nx = (size_t)N * g->H * g->W * g->C, ny = (size_t)N * g->OH * g->OW * g->O,
                 nw = (size_t)g->KH * g->KW * g->C * g->O;
    /* the same data in both (NHWC and HWIO are mwtrain's layouts) */
    float *x = handle(c->src), *w = handle(c->wei), *b = handle(c->bia), *dy = handle(c->ddst);
    float *xs = filled(nx, 1), *ws = filled(nw, 2), *bs = filled(g->O, 3), *dys = filled(ny, 4);
    memcpy(x, xs, nx * 4), memcpy(w, ws, nw * 4), memcpy(b, bs, g->O * 4), memcpy(dy, dys, ny * 4);
    float *y = filled(ny, 5), *dx = filled(nx, 6), *dw = filled(nw, 7), *db = filled(g->O, 8);
    memset(dw, 0, nw * sizeof *dw), memset(db, 0, g->O * sizeof *db); /* oneDNN's are written */
    cpu->conv2d_fwd(k, y, xs, ws, bs, g, N);
    cpu->conv2d_bwd(k, s->first ? NULL : dx, dw, db, dys, xs, ws, g, N, 1);
    dn_conv_run(c, str, s->first);
    /* db sums N OH OW terms of both signs to nearly nothing: its rounding is measured against
     * the sum of their magnitudes */
    double mag = 0, ddb = 0;
    for (int o = 0; o < g->O; o++) {
        double m = 0;
        for (size_t r = 0; r < ny / g->O; r++)
            m += fabs(dys[r * g->O + o]);
        mag = fmax(mag, m);
        ddb = fmax(ddb, fabs((double)db[o] - handle(c->dbia)[o]));
    }
    double e[4] = {rel_diff(y, handle(c->dst), ny), rel_diff(dw, handle(c->dwei), nw), ddb / mag,
                   s->first ? 0 : rel_diff(dx, handle(c->dsrc), nx)};
    int bad = 0;
    for (int i = 0; i < 4; i++)
        bad |= !(e[i] <= 1e-4);
    if (bad)
        printf("%dx%dx%d -> %d, %dx%d stride %d: mwtrain and oneDNN disagree (y %.1e, dw %.1e, db "
               "%.1e, dx %.1e)\n",
               g->H, g->W, g->C, g->O, g->KH, g->KW, g->SH, e[0], e[1], e[2], e[3]);
    free(xs), free(ws), free(bs), free(dys), free(y), free(dx), free(dw), free(db);
    return bad;
}

int main(int argc, char **argv)
{
    const int size = argc > 1 ? atoi(argv[1]) : 96, N = argc > 3 ? atoi(argv[3]) : 32;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
    shape s[MAX_LAYERS];
    const int ns = size >= 32 && N >= 1 ? resnet50_shapes(s, size) : -1;
    if (ns < 0) {
        fprintf(stderr, "usage: bench_conv_engines [size >= 32] [reps] [batch >= 1]\n");
        return 2;
    }
    mw_kernels_cpu_set_threads(1);
    mw_sgemm_select_from_env();
    mw_kernels cpu;
    mw_kernels_init_cpu(&cpu);
    dnnl_engine_t eng;
    dnnl_stream_t str;
    DN(dnnl_engine_create(&eng, dnnl_cpu, 0));
    DN(dnnl_stream_create(&str, eng, dnnl_stream_default_flags));
    printf("ResNet50 at %dx%d, batch %d, one thread, sgemm %s, medians of %d (ms, forward + "
           "backward)\n",
           size, size, N, mw_kernels_cpu_blas(), reps);
    printf("%-22s %5s %9s %12s %15s %s\n", "layer (H W C -> O)", "count", engine_name[0],
           engine_name[1], engine_name[2], "oneDNN's pick");
    double total[ENGINES] = {0}, best = 0, flops = 0;
    int bad = 0;
    for (int i = 0; i < ns; i++) {
        const mw_conv2d_geom *g = &s[i].g;
        const size_t nx = (size_t)N * g->H * g->W * g->C, ny = (size_t)N * g->OH * g->OW * g->O,
                     nw = (size_t)g->KH * g->KW * g->C * g->O;
        mw_kctx k = {.nthreads = 1, .ws_count = mw_conv2d_ws_count(g, N)};
        k.ws = mw_alloc_aligned(k.ws_count * sizeof(float) + 64);
        float *x = filled(nx, 1), *w = filled(nw, 2), *b = filled(g->O, 3), *dy = filled(ny, 4);
        float *y = filled(ny, 5), *dx = filled(nx, 6), *dw = filled(nw, 7), *db = filled(g->O, 8);
        if (!k.ws) {
            fprintf(stderr, "bench_conv_engines: out of memory\n");
            return 1;
        }
        dn_conv dn[2];
        dn_conv_init(&dn[0], eng, g, N, 0);
        dn_conv_init(&dn[1], eng, g, N, 1);
        bad |= check(&cpu, &k, &dn[0], str, &s[i], N);
        double t[ENGINES][MAX_REPS];
        for (int r = 0; r < reps + 1; r++) /* rep 0 warms up */
            for (int j = 0; j < ENGINES; j++) {
                const int e = (r + j) % ENGINES;
                double t0 = mw_now();
                if (e == 0) {
                    cpu.conv2d_fwd(&k, y, x, w, b, g, N);
                    cpu.conv2d_bwd(&k, s[i].first ? NULL : dx, dw, db, dy, x, w, g, N, 1);
                } else {
                    dn_conv_run(&dn[e - 1], str, s[i].first);
                }
                if (r)
                    t[e][r - 1] = mw_now() - t0;
            }
        double m[ENGINES], lo = INFINITY;
        for (int e = 0; e < ENGINES; e++) {
            m[e] = mw_median(t[e], reps);
            total[e] += m[e] * s[i].count;
            lo = fmin(lo, m[e]);
        }
        best += lo * s[i].count;
        flops += 2.0 * N * g->OH * g->OW * g->O * g->KH * g->KW * g->C * (s[i].first ? 2 : 3) *
                 s[i].count;
        const char *impl = "?";
        const_dnnl_primitive_desc_t pd;
        if (dnnl_primitive_get_primitive_desc(dn[1].fwd, &pd) == dnnl_success)
            dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        char name[40];
        snprintf(name, sizeof name, "%dx%dx%d->%d %dx%d/%d", g->H, g->W, g->C, g->O, g->KH, g->KW,
                 g->SH);
        printf("%-22s %5d %9.2f %12.2f %15.2f %s\n", name, s[i].count, 1e3 * m[0], 1e3 * m[1],
               1e3 * m[2], impl);
        dn_conv_free(&dn[0]), dn_conv_free(&dn[1]);
        free(k.ws), free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
    }
    printf("\nthe whole model (%.2f GFLOP per batch):\n", flops / 1e9);
    for (int e = 0; e < ENGINES; e++)
        printf("  %-15s %8.1f ms  %6.1f GFLOP/s  %6.1f images/s%s\n", engine_name[e],
               1e3 * total[e], flops / total[e] / 1e9, N / total[e],
               e == 2 ? " (reorders not counted)" : "");
    printf("  %-15s %8.1f ms  %6.1f GFLOP/s  %6.1f images/s\n", "fastest per layer", 1e3 * best,
           flops / best / 1e9, N / best);
    printf("bench_conv_engines mwtrain_ms=%.1f onednn_nhwc_ms=%.1f onednn_blocked_ms=%.1f "
           "best_ms=%.1f bound_images_per_s=%.2f\n",
           1e3 * total[0], 1e3 * total[1], 1e3 * total[2], 1e3 * best, N / best);
    dnnl_stream_destroy(str), dnnl_engine_destroy(eng);
    return bad;
}

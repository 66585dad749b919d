/* The residual Add and the normalization of its sum, as the model runs them unfused (Add: zero,
 * acc, acc; the norm's forward; backward: the norm's into the sum's gradient, then acc into each
 * Add input's) against the fused kernels (add_layernorm_*, add_rmsnorm_*: one pass over each
 * row), on the fast CPU table with 1 and 2 threads, at the language models' shapes: the Llama of
 * tests/bench/bench_llama.sh (RMS, 4,096 rows of 256) and the GPT of bench_lm.sh (LayerNorm,
 * 4,096 rows of 128).
 *
 *   bench_addnorm [reps=21]
 *
 * Checks first that the fused results equal the unfused bitwise (a benchmark of wrong results is
 * worthless), then times the two side by side, alternating, and prints the medians (ms) per
 * Add + norm pair, forward and backward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/timer.h"
#include "kernels/cpu/table.h"
#include "kernels/twins.h"

typedef struct {
    int rows, D, rms;
    float *a, *b, *s, *y, *st, *g, *be, *dy, *ds, *da, *db, *dg, *dbe;
} bufs;

/* Forward (dir 0) or backward (dir 1), fused or as the model's unfused layers. */
static void pair(const mw_kernels *t, const mw_kctx *k, bufs *p, int dir, int fused)
{
    const size_t n = (size_t)p->rows * p->D;
    if (!dir && fused) {
        if (p->rms)
            t->add_rmsnorm_fwd(k, p->s, p->y, p->st, p->a, p->b, p->g, p->rows, p->D, 1e-6f, 0,
                               0.0f);
        else
            t->add_layernorm_fwd(k, p->s, p->y, p->st, p->a, p->b, p->g, p->be, p->rows, p->D,
                                 1e-5f);
    } else if (!dir) {
        t->zero(k, p->s, n * sizeof(float));
        t->acc(k, p->s, p->a, n);
        t->acc(k, p->s, p->b, n);
        if (p->rms)
            t->rmsnorm_fwd(k, p->y, p->st, p->s, p->g, p->rows, p->D, 1e-6f, 0, 0.0f);
        else
            t->layernorm_fwd(k, p->y, p->st, p->s, p->g, p->be, p->rows, p->D, 1e-5f);
    } else if (fused) {
        if (p->rms)
            t->add_rmsnorm_bwd(k, p->da, p->db, p->dg, p->ds, p->dy, p->s, p->st, p->g, p->rows,
                               p->D, 0.0f);
        else
            t->add_layernorm_bwd(k, p->da, p->db, p->dg, p->dbe, p->ds, p->dy, p->s, p->st, p->g,
                                 p->rows, p->D);
    } else {
        if (p->rms)
            t->rmsnorm_bwd(k, p->ds, p->dg, p->dy, p->s, p->st, p->g, p->rows, p->D, 0.0f);
        else
            t->layernorm_bwd(k, p->ds, p->dg, p->dbe, p->dy, p->s, p->st, p->g, p->rows, p->D);
        t->acc(k, p->da, p->ds, n);
        t->acc(k, p->db, p->ds, n);
    }
}

static float *filled(size_t n, unsigned seed)
{
    float *p = mw_alloc_aligned(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((seed = seed * 1103515245u + 12345u) >> 8 & 0xffff) / 32768.0f - 1.0f;
    return p;
}

/* The outputs of one forward and backward, fused or not, from the same inputs: s, y, the
 * statistics, da, db and the parameters' gradients, concatenated into out. */
static void outputs(const mw_kernels *t, const mw_kctx *k, bufs *p, int fused, float *out)
{
    const size_t n = (size_t)p->rows * p->D;
    memset(p->da, 0, n * sizeof(float)), memset(p->db, 0, n * sizeof(float));
    memset(p->dg, 0, p->D * sizeof(float)), memset(p->dbe, 0, p->D * sizeof(float));
    float *ds0 = filled(n, 9);
    memcpy(p->ds, ds0, n * sizeof(float));
    free(ds0);
    pair(t, k, p, 0, fused);
    pair(t, k, p, 1, fused);
    const float *parts[] = {p->s, p->y, p->da, p->db, p->st, p->dg, p->dbe};
    const size_t len[] = {n, n, n, n, 2 * (size_t)p->rows, p->D, p->D};
    for (int j = 0; j < 7; j++, out += len[j - 1])
        memcpy(out, parts[j], len[j] * sizeof(float));
}

static int cmp(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median ms of reps runs of one direction, fused and unfused alternating, into ms[2]. */
static void timed(const mw_kernels *t, const mw_kctx *k, bufs *p, int dir, int reps, double ms[2])
{
    double s[2][101];
    for (int r = 0; r < reps; r++)
        for (int f = 0; f < 2; f++) {
            const int fused = (r + f) % 2;
            const double t0 = mw_now();
            pair(t, k, p, dir, fused);
            s[fused][r] = (mw_now() - t0) * 1e3;
        }
    for (int f = 0; f < 2; f++) {
        qsort(s[f], (size_t)reps, sizeof(double), cmp);
        ms[f] = s[f][reps / 2];
    }
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 && atoi(argv[1]) > 0 && atoi(argv[1]) <= 101 ? atoi(argv[1]) : 21;
    mw_kernels t;
    mw_kernels_init_cpu(&t);
    static const struct {
        const char *what;
        int rows, D, rms;
    } cases[] = {{"llama (RMS)", 4096, 256, 1}, {"gpt (LayerNorm)", 4096, 128, 0}};
    int bad = 0;
    for (int c = 0; c < 2; c++) {
        const size_t n = (size_t)cases[c].rows * cases[c].D, D = (size_t)cases[c].D;
        bufs p = {cases[c].rows, cases[c].D,    cases[c].rms,  filled(n, 1),
                  filled(n, 2),  filled(n, 3),  filled(n, 4),  filled(2 * (size_t)cases[c].rows, 5),
                  filled(D, 6),  filled(D, 7),  filled(n, 8),  filled(n, 9),
                  filled(n, 10), filled(n, 11), filled(D, 12), filled(D, 13)};
        const size_t total = 4 * n + 2 * (size_t)p.rows + 2 * D;
        float *want = malloc(total * sizeof(float)), *got = malloc(total * sizeof(float));
        for (int th = 1; th <= 2; th++) {
            const mw_kctx k = {.nthreads = th};
            outputs(&t, &k, &p, 0, want);
            outputs(&t, &k, &p, 1, got);
            if (memcmp(want, got, total * sizeof(float))) {
                printf("%s, %d thread(s): fused differs from unfused\n", cases[c].what, th);
                bad = 1;
                continue;
            }
            double f[2], b[2];
            timed(&t, &k, &p, 0, reps, f);
            timed(&t, &k, &p, 1, reps, b);
            printf("%-16s %d thread(s): forward unfused %.3f ms fused %.3f ms (%.2fx), backward "
                   "unfused %.3f ms fused %.3f ms (%.2fx)\n",
                   cases[c].what, th, f[0], f[1], f[0] / f[1], b[0], b[1], b[0] / b[1]);
        }
        float *all[] = {p.a,  p.b,  p.s,  p.y,  p.st,  p.g,  p.be, p.dy,
                        p.ds, p.da, p.db, p.dg, p.dbe, want, got};
        for (int j = 0; j < 15; j++)
            free(all[j]);
    }
    return bad;
}

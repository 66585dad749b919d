/* Where a training step's time goes: per-layer forward and backward of the
 * tutorial CNN on the fast CPU path, for the slice one thread runs, plus the
 * sgemm libraries side by side on the model's own matrix shapes.
 *
 *   bench_layers [batch-per-thread=32] [reps=50]
 *
 * Checks the fast path against the reference on one batch first (a benchmark
 * of wrong results is worthless), then times; prints medians. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/rng.h"
#include "common/timer.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/table.h"
#include "kernels/ref/table.h"
#include "worker/keras/keras.h"
#include "worker/model/model.h"
#include "worker/model/model_ws.h"
#include "worker/model/weights.h"

static const char *kind_name(mw_layer_kind k)
{
    static const char *names[] = {"Conv2D", "MaxPool2D", "Flatten", "Dense",
                                  "ReLU",   "Dropout",   "Identity"};
    return names[k];
}

/* Run layer i forward (dir 0) or backward (dir 1) once. */
static void run_layer(const mw_model *m, const mw_kernels *kt, const mw_kctx *k, mw_model_ws *ws,
                      float *grads, int i, int n, int dir)
{
    const mw_layer *l = &m->layers[i];
    const float *P = m->params.data;
    size_t outc = (size_t)n * l->out_h * l->out_w * l->out_c;
    float *dx = i > 0 ? ws->grad[i] : NULL;
    switch (l->kind) {
    case MW_LAYER_CONV2D:
        if (!dir)
            kt->conv2d_fwd(k, ws->act[i + 1], ws->act[i], P + l->w_off, P + l->b_off, &l->conv, n);
        else
            kt->conv2d_bwd(k, dx, grads + l->w_off, grads + l->b_off, ws->grad[i + 1], ws->act[i],
                           P + l->w_off, &l->conv, n, 0);
        break;
    case MW_LAYER_MAXPOOL:
        if (!dir)
            kt->maxpool_fwd(k, ws->act[i + 1], ws->buf[i], ws->act[i], &l->pool, n);
        else if (dx)
            kt->maxpool_bwd(k, dx, ws->grad[i + 1], ws->buf[i], &l->pool, n);
        break;
    case MW_LAYER_DENSE:
        if (!dir)
            kt->dense_fwd(k, ws->act[i + 1], ws->act[i], P + l->w_off, P + l->b_off, n, l->in_c,
                          l->out_c);
        else
            kt->dense_bwd(k, dx, grads + l->w_off, grads + l->b_off, ws->grad[i + 1], ws->act[i],
                          P + l->w_off, n, l->in_c, l->out_c);
        break;
    case MW_LAYER_RELU:
        if (!dir)
            kt->relu_fwd(k, ws->act[i + 1], ws->act[i], outc);
        else if (dx)
            kt->relu_bwd(k, dx, ws->grad[i + 1], ws->act[i + 1], outc);
        break;
    case MW_LAYER_DROPOUT: /* the benchmarks run inference: identity */
    case MW_LAYER_IDENTITY:
    case MW_LAYER_FLATTEN:
        break;
    default: /* graph layers: not in the benchmarked models */
        break;
    }
}

static void gemm_compare(void)
{
    static const struct {
        const char *what;
        char ta, tb;
        int M, N, K;
    } shapes[] = {
        {"conv2d fwd", 'N', 'N', 32 * 676, 32, 9},
        {"conv2d dW", 'T', 'N', 9, 32, 32 * 676},
        {"conv2d_1 fwd", 'N', 'N', 32 * 121, 64, 288},
        {"conv2d_1 dW", 'T', 'N', 288, 64, 32 * 121},
        {"conv2d_1 dcol", 'N', 'T', 32 * 121, 288, 64},
        {"dense fwd", 'N', 'N', 32, 64, 1600},
        {"dense dW", 'T', 'N', 1600, 64, 32},
    };
    printf("\nsgemm, one thread, the model's shapes (GFLOP/s, median of 30):\n");
    printf("%-14s %6s %6s %6s %10s %10s %7s\n", "op", "M", "N", "K", "OpenBLAS", "oneDNN", "ratio");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
        float *A = mw_alloc_aligned((size_t)M * K * 4), *B = mw_alloc_aligned((size_t)K * N * 4),
              *C = mw_alloc_aligned((size_t)M * N * 4);
        for (size_t i = 0; i < (size_t)M * K; i++)
            A[i] = (float)(i % 7) * 0.1f;
        for (size_t i = 0; i < (size_t)K * N; i++)
            B[i] = (float)(i % 5) * 0.1f;
        int lda = shapes[s].ta == 'N' ? K : M, ldb = shapes[s].tb == 'N' ? N : K;
        double gf[2];
        for (int lib = 0; lib < 2; lib++) {
            setenv("MW_GEMM", lib ? "onednn" : "openblas", 1);
            mw_sgemm_select_from_env();
            double t[30];
            for (int r = 0; r < 30; r++) {
                double t0 = mw_now();
                mw_sgemm_cpu(shapes[s].ta, shapes[s].tb, M, N, K, 1, A, lda, B, ldb, 0, C, N);
                t[r] = mw_now() - t0;
            }
            gf[lib] = 2.0 * M * N * K / mw_median(t, 30) / 1e9;
        }
        printf("%-14s %6d %6d %6d %10.1f %10.1f %6.2fx\n", shapes[s].what, M, N, K, gf[0], gf[1],
               gf[1] / gf[0]);
        free(A), free(B), free(C);
    }
    unsetenv("MW_GEMM");
    mw_sgemm_select_from_env();
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 32, reps = argc > 2 ? atoi(argv[2]) : 50;
    if (n < 1 || reps < 3) {
        fprintf(stderr, "usage: bench_layers [batch-per-thread >= 1] [reps >= 3]\n");
        return 2;
    }
    mw_kernels_cpu_set_threads(1);
    mw_kernels ref, cpu;
    mw_kernels_init_ref(&ref);
    mw_kernels_init_cpu(&cpu);
    mw_model m;
    if (mw_keras_build_tutorial(&m, 28, 28, 1, 10) || mw_model_finalize(&m, 1)) {
        fprintf(stderr, "model: %s\n", mw_err_msg());
        return 1;
    }
    mw_model_init_params(&m, 1);
    mw_model_ws ws;
    mw_model_ws_init(&ws);
    if (mw_model_ws_alloc(&ws, &m, n)) {
        fprintf(stderr, "%s\n", mw_err_msg());
        return 1;
    }
    mw_rng r;
    mw_rng_seed(&r, 3, 3);
    for (size_t i = 0; i < (size_t)n * 784; i++)
        ws.act[0][i] = mw_rng_uniform(&r);
    for (int i = 0; i < n; i++)
        ((int32_t *)ws.y)[i] = (int32_t)mw_rng_below(&r, 10);
    mw_kctx k = {.nthreads = 1, .ws = ws.scratch, .ws_count = ws.scratch_count};
    float *g1 = mw_alloc_aligned(m.params.count * 4), *g2 = mw_alloc_aligned(m.params.count * 4);

    /* validate: fast path == reference on this batch */
    mw_model_forward(&m, &ref, &k, &ws, n);
    mw_model_backward(&m, &ref, &k, &ws, g1, n, 1.0f / n);
    mw_model_forward(&m, &cpu, &k, &ws, n);
    mw_model_backward(&m, &cpu, &k, &ws, g2, n, 1.0f / n);
    double maxerr = 0, maxg = 0;
    for (size_t i = 0; i < m.params.count; i++) {
        maxerr = fmax(maxerr, fabs((double)g1[i] - g2[i]));
        maxg = fmax(maxg, fabs((double)g1[i]));
    }
    if (maxerr > 1e-4 * maxg) {
        fprintf(stderr, "fast path disagrees with the reference: max |dg| %.3g (max |g| %.3g)\n",
                maxerr, maxg);
        return 1;
    }

    int L = m.nlayers;
    double *tf = calloc((size_t)L * reps, sizeof *tf), *tb = calloc((size_t)L * reps, sizeof *tb);
    double *step = calloc((size_t)reps, sizeof *step);
    for (int rep = 0; rep < reps; rep++) {
        double s0 = mw_now();
        for (int i = 0; i < L; i++) {
            double t0 = mw_now();
            run_layer(&m, &cpu, &k, &ws, g2, i, n, 0);
            tf[i * reps + rep] = mw_now() - t0;
        }
        cpu.xent_fwd(&k, ws.loss, ws.prob, ws.act[L], (int32_t *)ws.y, n, m.nclasses);
        cpu.xent_bwd(&k, ws.grad[L], ws.prob, (int32_t *)ws.y, 1.0f / n, n, m.nclasses);
        for (int i = L - 1; i >= 0; i--) {
            double t0 = mw_now();
            run_layer(&m, &cpu, &k, &ws, g2, i, n, 1);
            tb[i * reps + rep] = mw_now() - t0;
        }
        step[rep] = mw_now() - s0;
    }
    double total = mw_median(step, reps);
    printf("per-layer time, fast CPU path (%s sgemm), 1 thread, batch %d, median of %d\n",
           mw_kernels_cpu_blas(), n, reps);
    printf("%-20s %-10s %10s %10s %7s\n", "layer", "type", "fwd us", "bwd us", "share");
    for (int i = 0; i < L; i++) {
        double f = mw_median(tf + (size_t)i * reps, reps),
               b = mw_median(tb + (size_t)i * reps, reps);
        printf("%-20s %-10s %10.1f %10.1f %6.1f%%\n", m.layers[i].name, kind_name(m.layers[i].kind),
               f * 1e6, b * 1e6, 100 * (f + b) / total);
    }
    printf("step (fwd+bwd, no optimizer): %.1f us = %.0f images/s per thread\n", total * 1e6,
           n / total);
    gemm_compare();
    free(tf), free(tb), free(step), free(g1), free(g2);
    mw_model_ws_free(&ws);
    mw_model_free(&m);
    return 0;
}

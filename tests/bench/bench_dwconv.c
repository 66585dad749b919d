/* The depthwise convolution's fast CPU kernel (kernels/cpu/dwconv2d.c) against its reference
 * twin, on MobileNetV2's inverted-residual shapes: a batch of 32 at 16x16 with 96 to 384
 * channels, 3x3, stride 1 and 2, 'same' padding, depth multiplier 1.
 *
 *   bench_dwconv [reps=5] [threads=2]
 *
 * Each case first checks the fast forward and backward against the reference on the same
 * inputs (forward bitwise, backward within 1e-5 + 1e-4 |ref|: a benchmark of wrong results is
 * worthless), then times both, rep after rep alternately (drift hits both alike), and prints
 * the medians, the fast kernel's memory traffic in GB/s (the bytes it must move at least:
 * x, y and w once forward; x, dy, dx and dw backward) and the ratio ref / cpu. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/timer.h"
#include "kernels/cpu/table.h"
#include "kernels/geom.h"
#include "kernels/ref/table.h"

#define MAX_REPS 101

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static float *filled(size_t n, unsigned seed)
{
    float *p = mw_alloc_aligned(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}

/* The largest |a - b| over |b| + 1e-5*10^4 scale, as 1e-5 + 1e-4 |ref| allows: <= 1 passes. */
static double worst(const float *a, const float *b, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1e-5 + 1e-4 * fabs((double)b[i]));
        w = e > w ? e : w;
    }
    return w;
}

/* One shape: check, then time. Returns 1 when the check fails. */
static int run_case(int N, int H, int C, int S, int reps, int threads)
{
    mw_conv2d_geom g;
    if (mw_conv2d_geom_init(&g, H, H, C, C, 3, 3, S, S, 1) != 0)
        return 1;
    mw_kernels ref, cpu;
    mw_kernels_init_ref(&ref), mw_kernels_init_cpu(&cpu);
    const size_t nx = (size_t)N * H * H * C, ny = (size_t)N * g.OH * g.OW * C, nw = 9 * C;
    float *x = filled(nx, 1), *w = filled(nw, 2), *b = filled(C, 3), *dy = filled(ny, 4);
    float *y[2], *dx[2], *dw[2], *db[2];
    for (int i = 0; i < 2; i++)
        y[i] = filled(ny, 5), dx[i] = filled(nx, 6), dw[i] = filled(nw, 7), db[i] = filled(C, 8);
    const mw_kctx k1 = {.nthreads = 1}, kn = {.nthreads = threads};
    ref.dwconv2d_fwd(&k1, y[0], x, w, b, &g, N);
    cpu.dwconv2d_fwd(&kn, y[1], x, w, b, &g, N);
    ref.dwconv2d_bwd(&k1, dx[0], dw[0], db[0], dy, x, w, &g, N, 0);
    cpu.dwconv2d_bwd(&kn, dx[1], dw[1], db[1], dy, x, w, &g, N, 0);
    const int bad = memcmp(y[0], y[1], ny * sizeof(float)) != 0 || worst(dx[1], dx[0], nx) > 1 ||
                    worst(dw[1], dw[0], nw) > 1 || worst(db[1], db[0], C) > 1;
    if (bad) {
        printf("C %d stride %d: the fast kernel disagrees with the reference\n", C, S);
        return 1;
    }
    double t[4][MAX_REPS];
    for (int r = 0; r < reps; r++) {
        double t0 = mw_now();
        ref.dwconv2d_fwd(&k1, y[0], x, w, b, &g, N);
        double t1 = mw_now();
        cpu.dwconv2d_fwd(&kn, y[1], x, w, b, &g, N);
        double t2 = mw_now();
        ref.dwconv2d_bwd(&k1, dx[0], dw[0], db[0], dy, x, w, &g, N, 0);
        double t3 = mw_now();
        cpu.dwconv2d_bwd(&kn, dx[1], dw[1], db[1], dy, x, w, &g, N, 0);
        double t4 = mw_now();
        t[0][r] = t1 - t0, t[1][r] = t2 - t1, t[2][r] = t3 - t2, t[3][r] = t4 - t3;
    }
    double m[4];
    for (int i = 0; i < 4; i++)
        m[i] = median(t[i], reps);
    const double fb = 4.0 * (nx + ny), bb = 4.0 * (2 * nx + ny);
    printf("%3d %2d  fwd ref %7.2f ms cpu %6.2f ms (%5.1f GB/s) x%5.1f   bwd ref %7.2f ms cpu "
           "%6.2f ms (%5.1f GB/s) x%5.1f\n",
           C, S, 1e3 * m[0], 1e3 * m[1], fb / m[1] / 1e9, m[0] / m[1], 1e3 * m[2], 1e3 * m[3],
           bb / m[3] / 1e9, m[2] / m[3]);
    free(x), free(w), free(b), free(dy);
    for (int i = 0; i < 2; i++)
        free(y[i]), free(dx[i]), free(dw[i]), free(db[i]);
    return 0;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5, threads = argc > 2 ? atoi(argv[2]) : 2;
    reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
    threads = threads < 1 ? 1 : threads;
    printf("depthwise 3x3 'same', N 32, 16x16, medians of %d; ref 1 thread, cpu %d\n  C  S\n", reps,
           threads);
    static const int chans[] = {96, 144, 192, 384};
    int bad = 0;
    for (int s = 1; s <= 2; s++)
        for (int i = 0; i < 4; i++)
            bad |= run_case(32, 16, chans[i], s, reps, threads);
    return bad;
}

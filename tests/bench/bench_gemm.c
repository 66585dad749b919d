/* The matrix library's ceiling on this machine: single-precision products through the fast CPU
 * path's sgemm (kernels/cpu/cpu.h: oneDNN where built, else the CBLAS) with a given number of
 * threads, on a large square product and on the causal LM's own shapes (tests/bench/bench_lm.sh:
 * batch 32 x context 128 rows, width 128, ff 512, vocabulary 256). Prints the GFLOP/s of each
 * (median of reps) and, last, `bench_gemm ceiling_gflops=<the best of them>`, the number
 * bench_lm.sh divides by.
 *
 *   bench_gemm [threads=2] [reps=20] */
#include <stdio.h>
#include <stdlib.h>

#include "common/arena.h"
#include "common/timer.h"
#include "kernels/cpu/gemm.h"
#include "tests/util.h"

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 20;
    static const struct {
        const char *what;
        int M, N, K;
        char ta, tb;
    } shapes[] = {{"square 1024", 1024, 1024, 1024, 'N', 'N'},
                  {"projection (4096 x 128) x (128 x 128)", 4096, 128, 128, 'N', 'N'},
                  {"feed-forward (4096 x 128) x (128 x 512)", 4096, 512, 128, 'N', 'N'},
                  {"feed-forward back (4096 x 512) x (512 x 128)", 4096, 128, 512, 'N', 'N'},
                  {"weight gradient (128 x 4096) x (4096 x 512)", 128, 512, 4096, 'T', 'N'},
                  {"head (4096 x 128) x (128 x 256)", 4096, 256, 128, 'N', 'N'}};
    mw_kernels_cpu_set_threads(threads);
    mw_sgemm_select_from_env();
    double best = 0;
    printf("sgemm (%s), %d thread(s), median of %d:\n", mw_kernels_cpu_blas(), threads, reps);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
        float *A = mw_alloc_aligned((size_t)M * K * sizeof(float));
        float *B = mw_alloc_aligned((size_t)K * N * sizeof(float));
        float *C = mw_alloc_aligned((size_t)M * N * sizeof(float));
        if (!A || !B || !C) {
            fprintf(stderr, "bench_gemm: out of memory\n");
            return 1;
        }
        mw_test_fill_uniform(A, (size_t)M * K, 1, -1, 1);
        mw_test_fill_uniform(B, (size_t)K * N, 2, -1, 1);
        double *t = calloc((size_t)reps, sizeof(double));
        const int lda = shapes[s].ta == 'T' ? M : K, ldb = shapes[s].tb == 'T' ? K : N;
        for (int r = -2; r < reps; r++) { /* two warm-up runs */
            const double t0 = mw_now();
            mw_sgemm_cpu(shapes[s].ta, shapes[s].tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
            if (r >= 0)
                t[r] = mw_now() - t0;
        }
        const double g = 2.0 * M * N * K / mw_median(t, reps) / 1e9;
        best = g > best ? g : best;
        printf("  %-48s %8.1f GFLOP/s\n", shapes[s].what, g);
        free(t);
        free(A), free(B), free(C);
    }
    printf("bench_gemm ceiling_gflops=%.1f threads=%d\n", best, threads);
    return 0;
}

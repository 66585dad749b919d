/* Internals shared by the fast CPU path's kernels (the matrix product is gemm.h). */
#ifndef MW_KERNELS_CPU_CPU_H
#define MW_KERNELS_CPU_CPU_H

#include "kernels/kernels.h"

/* Threads a kernel may use: the context's, at least 1. Called inside an
 * outer parallel region (batch-split training), OpenMP runs it on one. */
#define MW_NT(k) ((k)->nthreads > 0 ? (k)->nthreads : 1)

/* A vectorized loop's function compiled also for AVX2 and AVX-512, the widest the machine has
 * picked when the program loads (GCC's target_clones on x86-64 Linux; elsewhere nothing): the
 * build targets the baseline ISA's 4-float vectors (SiLU ran 5x faster on AVX-512). Without
 * -ffp-contract (C11 mode: off) no clone fuses a multiply-add, so an element-wise loop's results
 * are the baseline's, bitwise; an omp simd reduction's partial sums follow the vector width:
 * within float32 rounding of the baseline's, and the same on every run of one machine. */
/* Not under ThreadSanitizer: the loader calls a clone's resolver before TSan's runtime is up,
 * and the resolver's instrumentation crashes the program before main (even `--help`). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) &&       \
    !defined(__SANITIZE_THREAD__)
#define MW_WIDE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MW_WIDE_CLONES
#endif

/* The first of n items in span t of nt equal spans (span t is [LO(n, t, nt), LO(n, t + 1, nt))):
 * the static schedule of a loop whose body is a MW_WIDE_CLONES function over a span. */
#define MW_SPAN_LO(n, t, nt) ((size_t)(n) * (size_t)(t) / (size_t)(nt))

/* The row sums of the normalizations' fast twins: in double as the reference's, but in MW_LANES
 * partial sums (feature j into lane j % MW_LANES, the lanes added in order last), so that they
 * vectorize (a sequential double sum waits on each add: it was most of a row's time). The sum
 * differs from the sequential one by a few 2^-53 of it. */
enum { MW_LANES = 8 };

/* sum x[j] (sq 0) or sum (x[j] - m)^2 (sq 1), in double, in MW_LANES partial sums. */
static inline __attribute__((always_inline)) double mw_lane_sum(const float *x, int D, float m,
                                                                int sq)
{
    double a[MW_LANES] = {0};
    int j = 0;
    for (; j + MW_LANES <= D; j += MW_LANES)
        for (int q = 0; q < MW_LANES; q++) {
            const double d = (double)x[j + q] - (sq ? m : 0.0f);
            a[q] += sq ? d * d : d;
        }
    for (; j < D; j++) {
        const double d = (double)x[j] - (sq ? m : 0.0f);
        a[j % MW_LANES] += sq ? d * d : d;
    }
    double s = 0;
    for (int q = 0; q < MW_LANES; q++)
        s += a[q];
    return s;
}

#endif

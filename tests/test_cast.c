/* Suite 'unit': mixed precision's kernels. The 16-bit roundings (kernels/cast.h, the table's
 * round_bf16 and round_f16) against bit patterns by hand and GCC's own float16 conversion, the
 * fast CPU twin with them; and the bfloat16 matrix product of the fast CPU path (mw_gemm_cpu
 * with k->bf16) against sgemm, alone and from several threads at once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "kernels/cast.h"
#include "kernels/cpu/gemm.h"
#include "kernels/twins.h"
#include "tests/util.h"

/* bfloat16 rounding (kernels/cast.h), bit patterns by hand: ties to even, a carry into the
 * exponent, overflow to infinity, NaNs that stay NaN (a signaling one would become infinity if
 * rounded as a number), subnormals; then the cpu twin against the reference over a million
 * random bit patterns, bitwise. */
static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_round_bf16(void **state)
{
    (void)state;
    static const uint32_t cases[][2] = {
        {0x3F800000u, 0x3F800000u}, /* 1 */
        {0x3F808000u, 0x3F800000u}, /* 1 + 2^-8: a tie, to the even 1 */
        {0x3F818000u, 0x3F820000u}, /* 1 + 3 2^-8: a tie, to the even 1 + 2^-6 */
        {0x3F808001u, 0x3F810000u}, /* just above the tie: up */
        {0x3F807FFFu, 0x3F800000u}, /* just below: down */
        {0x3FFF8000u, 0x40000000u}, /* a tie whose even neighbour carries into the exponent */
        {0xBF818000u, 0xBF820000u}, /* the sign does not change the rounding */
        {0x7F7FFFFFu, 0x7F800000u}, /* FLT_MAX: past bfloat16's largest, infinity */
        {0x7F7F7FFFu, 0x7F7F0000u}, /* bfloat16's largest stays */
        {0x7F800000u, 0x7F800000u}, /* inf */
        {0xFF800000u, 0xFF800000u}, /* -inf */
        {0x80000000u, 0x80000000u}, /* -0 */
        {0x7FC00001u, 0x7FC00000u}, /* a quiet NaN keeps its top payload */
        {0x7F800001u, 0x7FC00000u}, /* a signaling NaN stays NaN, quiet (not infinity) */
        {0xFFFFFFFFu, 0xFFFF0000u}, /* a negative NaN */
        {0x00008000u, 0x00000000u}, /* a subnormal tie, to the even 0 */
        {0x00018000u, 0x00020000u}, /* a subnormal tie, to the even 2 */
        {0x00000001u, 0x00000000u}, /* the smallest subnormal: down */
    };
    const size_t nc = sizeof cases / sizeof *cases;
    float got[sizeof cases / sizeof *cases], got_cpu[sizeof cases / sizeof *cases];
    for (size_t i = 0; i < nc; i++)
        got[i] = got_cpu[i] = of_bits(cases[i][0]);
    mw_kctx k = {.nthreads = 2};
    mw_round_bf16_ref(&k, got, nc);
    mw_round_bf16_cpu(&k, got_cpu, nc);
    for (size_t i = 0; i < nc; i++) {
        if (bits_of(got[i]) != cases[i][1] || bits_of(got_cpu[i]) != cases[i][1])
            fail_msg("round_bf16(0x%08X): ref 0x%08X, cpu 0x%08X, expected 0x%08X", cases[i][0],
                     bits_of(got[i]), bits_of(got_cpu[i]), cases[i][1]);
    }
    const size_t n = 1000003; /* odd: the vector loop's tail too */
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        a[i] = b[i] = of_bits((uint32_t)(x >> 16));
    }
    mw_round_bf16_ref(&k, a, n);
    mw_round_bf16_cpu(&k, b, n);
    for (size_t i = 0; i < n; i++)
        if (bits_of(a[i]) != bits_of(b[i]) || (bits_of(a[i]) & 0xFFFFu))
            fail_msg("round_bf16 element %zu: ref 0x%08X, cpu 0x%08X", i, bits_of(a[i]),
                     bits_of(b[i]));
    free(a);
    free(b);
}

/* float16 rounding against GCC's own conversion (_Float16: libgcc's or F16C's, round to
 * nearest even, IEEE's float16 with subnormals), over every 127th float32 bit pattern and the
 * edges by name; NaNs are compared as NaNs of the same sign (their payloads are ours: the
 * top bits kept, quiet, as round_bf16 keeps them). The fast CPU twin bitwise equal. */
static void test_round_f16(void **state)
{
    (void)state;
    static const uint32_t edges[] = {
        0x3F801000u, /* 1 + 2^-11: a tie, to the even 1 */
        0x3F803000u, /* 1 + 3 2^-11: a tie, to the even 1 + 2^-9 */
        0x477FE000u, /* 65504, the largest */
        0x477FEFFFu, /* just below the tie with 65536: 65504 */
        0x477FF000u, /* the tie: to the even 65536, infinity */
        0x38800000u, /* 2^-14, the smallest normal */
        0x387FFFFFu, /* just below: the subnormal step rounds it up to 2^-14 */
        0x33800000u, /* 2^-24, the smallest subnormal */
        0x33000000u, /* 2^-25: a tie with 0, to the even 0 */
        0x33000001u, /* just above: 2^-24 */
        0x33C00000u, /* 1.5 2^-24: a tie, to the even 2^-23 */
        0x80000001u, /* a float32 subnormal: -0 */
        0x7F800000u, 0xFF800000u, 0x7FC00001u, 0x7F800001u, 0xFFFFFFFFu,
    };
    const size_t ne = sizeof edges / sizeof *edges, stride = 127;
    const size_t n = ne + ((size_t)1 << 32) / stride + 1;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] = of_bits(i < ne ? edges[i] : (uint32_t)((i - ne) * stride));
    mw_kctx k = {.nthreads = 2};
    mw_round_f16_ref(&k, a, n);
    mw_round_f16_cpu(&k, b, n);
    for (size_t i = 0; i < n; i++) {
        const uint32_t in = i < ne ? edges[i] : (uint32_t)((i - ne) * stride);
        const volatile float x = of_bits(in);
        const float want = (float)(_Float16)x;
        const int same = isnan(want) ? isnan(a[i]) && signbit(a[i]) == signbit(want)
                                     : bits_of(a[i]) == bits_of(want);
        if (!same || bits_of(a[i]) != bits_of(b[i]))
            fail_msg("round_f16(0x%08X): ref 0x%08X, cpu 0x%08X, _Float16 0x%08X", in,
                     bits_of(a[i]), bits_of(b[i]), bits_of(want));
        if (isnan(a[i]) && (bits_of(a[i]) != ((in | 0x00400000u) & 0xFFFFE000u)))
            fail_msg("round_f16(0x%08X): NaN 0x%08X, expected its top payload, quiet", in,
                     bits_of(a[i]));
    }
    free(a);
    free(b);
}

/* mw_gemm_cpu with k->bf16 (the bfloat16 matmul of mixed_bfloat16) against sgemm on the same
 * bfloat16-valued operands, every transpose, beta 0 and 1, a ldc wider than N: each product
 * is exact in float32 on both sides, so they differ only by the order of the float32 sums,
 * within |error| <= 2 K u sum_k |a_ik b_kj| (u = 2^-24; the classic bound of a recursive
 * sum is (K - 1) u, doubled for the two orders). Skipped (visibly) without bf16 instructions. */
static void test_gemm_bf16(void **state)
{
    (void)state;
    if (!mw_kernels_cpu_has_bf16()) {
        print_message("gemm_bf16: no bfloat16 instructions here (oneDNN ISA '%s'): skipped\n",
                      mw_kernels_cpu_isa());
        skip();
    }
    const int M = 37, N = 19, K = 301, ldc = 23;
    float *A = malloc((size_t)M * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
    float *C = malloc((size_t)M * ldc * sizeof *C), *R = malloc((size_t)M * ldc * sizeof *R);
    assert_true(A && B && C && R);
    mw_rng r;
    mw_rng_seed(&r, 11, 0);
    for (int i = 0; i < M * K; i++)
        A[i] = mw_bf16_round(mw_rng_normal(&r));
    for (int i = 0; i < K * N; i++)
        B[i] = mw_bf16_round(mw_rng_normal(&r));
    const unsigned long before = mw_gemm_cpu_bf16_count();
    mw_kctx k = {.nthreads = 1, .bf16 = 1};
    for (int t = 0; t < 8; t++) {
        const char ta = t & 1 ? 'T' : 'N', tb = t & 2 ? 'T' : 'N';
        const float beta = t & 4 ? 1.0f : 0.0f;
        const int lda = ta == 'T' ? M : K, ldb = tb == 'T' ? K : N;
        for (int i = 0; i < M * ldc; i++)
            C[i] = R[i] = beta != 0.0f ? (float)(i % 7) - 3.0f : NAN; /* beta 0 ignores C */
        mw_gemm_cpu(&k, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
        mw_sgemm_cpu(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, R, ldc);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                /* beta 1 adds C's first value, ((i ldc + j) % 7) - 3, as one more term */
                double s = beta != 0.0f ? fabs((double)((i * ldc + j) % 7) - 3.0) : 0.0;
                for (int q = 0; q < K; q++) {
                    const float a = ta == 'T' ? A[(size_t)q * lda + i] : A[(size_t)i * lda + q];
                    const float b = tb == 'T' ? B[(size_t)j * ldb + q] : B[(size_t)q * ldb + j];
                    s += fabs((double)a * b);
                }
                const double tol = 2.0 * (K + 1) * 0x1p-24 * s;
                const double d = fabs((double)C[i * ldc + j] - R[i * ldc + j]);
                if (!(d <= tol))
                    fail_msg(
                        "gemm_bf16 %c%c beta %g: C[%d][%d] = %.9g, sgemm %.9g (|d| %.3g > %.3g)",
                        ta, tb, beta, i, j, C[i * ldc + j], R[i * ldc + j], d, tol);
            }
        for (int i = 0; i < M; i++) /* the columns past N are untouched */
            for (int j = N; j < ldc; j++)
                if (memcmp(&C[i * ldc + j], &R[i * ldc + j], sizeof *C) != 0)
                    fail_msg("gemm_bf16 wrote C[%d][%d] past N", i, j);
    }
    assert_int_equal(mw_gemm_cpu_bf16_count() - before, 8); /* the bfloat16 path ran each time */
    free(A), free(B), free(C), free(R);
}

/* The bfloat16 product run by several threads at once, as the CPU backend's threads run their
 * micro-batches: one shape (the tutorial CNN's second convolution, whose oneDNN kernel uses a
 * scratchpad), each thread its own operands, each result checked against sgemm. A scratchpad
 * shared by the threads (oneDNN's library mode) mixed their results: training diverged. */
static void test_gemm_bf16_threads(void **state)
{
    (void)state;
    if (!mw_kernels_cpu_has_bf16()) {
        print_message("gemm_bf16_threads: no bfloat16 instructions here: skipped\n");
        skip();
    }
    enum { T = 4, M = 1936, N = 64, K = 288, REPS = 6 };
    float *A = malloc((size_t)T * M * K * sizeof *A), *B = malloc((size_t)T * K * N * sizeof *B);
    float *C = malloc((size_t)T * M * N * sizeof *C), *R = malloc((size_t)T * M * N * sizeof *R);
    assert_true(A && B && C && R);
    mw_rng r;
    mw_rng_seed(&r, 12, 0);
    for (size_t i = 0; i < (size_t)T * M * K; i++)
        A[i] = mw_bf16_round(mw_rng_uniform(&r));
    for (size_t i = 0; i < (size_t)T * K * N; i++)
        B[i] = mw_bf16_round(mw_rng_uniform(&r) - 0.5f);
    for (int t = 0; t < T; t++)
        mw_sgemm_cpu('N', 'N', M, N, K, 1.0f, A + (size_t)t * M * K, K, B + (size_t)t * K * N, N,
                     0.0f, R + (size_t)t * M * N, N);
    int bad = 0;
    for (int rep = 0; rep < REPS; rep++) {
#pragma omp parallel for num_threads(T) schedule(static, 1) reduction(+ : bad)
        for (int t = 0; t < T; t++) {
            const mw_kctx k = {.nthreads = 1, .bf16 = 1};
            float *c = C + (size_t)t * M * N;
            mw_gemm_cpu(&k, 'N', 'N', M, N, K, 1.0f, A + (size_t)t * M * K, K,
                        B + (size_t)t * K * N, N, 0.0f, c, N);
            for (size_t i = 0; i < (size_t)M * N; i++) /* sums of K terms below 0.5 in size */
                bad += !(fabsf(c[i] - R[(size_t)t * M * N + i]) <= 2.0f * K * 0x1p-24f * 0.5f * K);
        }
    }
    if (bad)
        fail_msg("gemm_bf16 from %d threads at once: %d elements off sgemm's", T, bad);
    free(A), free(B), free(C), free(R);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_bf16),
        cmocka_unit_test(test_round_f16),
        cmocka_unit_test(test_gemm_bf16),
        cmocka_unit_test(test_gemm_bf16_threads),
    };
    return cmocka_run_group_tests_name("cast", tests, NULL, NULL);
}

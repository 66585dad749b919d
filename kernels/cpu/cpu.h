/* Internals of the fast CPU path: the row-major sgemm it is built on. */
#ifndef MW_KERNELS_CPU_CPU_H
#define MW_KERNELS_CPU_CPU_H

#include "kernels/kernels.h"

/* C (M,N) = alpha * op(A) op(B) + beta * C, row-major; op = transpose when
 * ta/tb is 'T'. oneDNN's dnnl_sgemm when built with it (about 2x OpenBLAS on
 * AVX-512 machines, measured in tests/bench/bench_kernels), else CBLAS. */
/* (Re)read MW_GEMM: "openblas" selects OpenBLAS where oneDNN is built in. */
void mw_sgemm_select_from_env(void);
void mw_sgemm_cpu(char ta, char tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc);

/* The same product where k->bf16 says every element of A and B is a bfloat16 value: on a
 * CPU with bfloat16 instructions (mw_kernels_cpu_has_bf16), a oneDNN matmul on bfloat16
 * copies of A and B in their stored layout (the matmul reads a transposed one through
 * strides) with float32 output (each product exact, sums in float32 as
 * sgemm's, in another order); elsewhere, and for alpha != 1 or beta other than 0 and 1,
 * mw_sgemm_cpu. The copies are this call's own allocation (the exception to "kernels
 * allocate nothing": M K + K N halves, which malloc reuses from call to call); the matmul
 * primitives are made once per shape and kept. */
void mw_gemm_cpu(const mw_kctx *k, char ta, char tb, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* How many products mw_gemm_cpu has computed with bfloat16 instructions (tests: the fast path
 * ran). */
unsigned long mw_gemm_cpu_bf16_count(void);

/* Threads a kernel may use: the context's, at least 1. Called inside an
 * outer parallel region (batch-split training), OpenMP runs it on one. */
#define MW_NT(k) ((k)->nthreads > 0 ? (k)->nthreads : 1)

#endif

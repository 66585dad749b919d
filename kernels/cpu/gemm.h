/* The fast CPU path's matrix product (gemm.c): the row-major sgemm its kernels are built on,
 * the matrix library behind it and its thread setting. */
#ifndef MW_KERNELS_CPU_GEMM_H
#define MW_KERNELS_CPU_GEMM_H

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

/* Name of the matrix library behind the fast CPU path ("OpenBLAS", "oneDNN"). */
const char *mw_kernels_cpu_blas(void);
/* The instruction set oneDNN's kernels use here ("avx2", "avx512_core_bf16", ...; the CPU's
 * best unless ONEDNN_MAX_CPU_ISA caps it), or "" when oneDNN is not the matrix library.
 * Another ISA means other kernels, which sum in another order. */
const char *mw_kernels_cpu_isa(void);
/* 1 when oneDNN is the matrix library and its ISA has bfloat16 instructions (AVX512_BF16 or
 * AMX: avx512_core_bf16, avx512_core_amx), the CPUs where mixed_bfloat16 is offered. */
int mw_kernels_cpu_has_bf16(void);
/* Tell the matrix library how many threads it may use. */
void mw_kernels_cpu_set_threads(int n);

#endif

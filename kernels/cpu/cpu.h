/* Internals of the fast CPU path: the row-major sgemm it is built on. */
#ifndef MW_KERNELS_CPU_CPU_H
#define MW_KERNELS_CPU_CPU_H

/* C (M,N) = alpha * op(A) op(B) + beta * C, row-major; op = transpose when
 * ta/tb is 'T'. oneDNN's dnnl_sgemm when built with it (about 2x OpenBLAS on
 * AVX-512 machines, measured in tests/bench/bench_kernels), else CBLAS. */
/* (Re)read MW_GEMM: "openblas" selects OpenBLAS where oneDNN is built in. */
void mw_sgemm_select_from_env(void);
void mw_sgemm_cpu(char ta, char tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc);

/* Threads a kernel may use: the context's, at least 1. Called inside an
 * outer parallel region (batch-split training), OpenMP runs it on one. */
#define MW_NT(k) ((k)->nthreads > 0 ? (k)->nthreads : 1)

#endif

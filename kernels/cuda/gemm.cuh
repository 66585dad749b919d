/* The row-major GEMM, column-sum and bias helpers (gemm.cu) the conv and dense twins share. */
#ifndef MW_KERNELS_CUDA_GEMM_CUH
#define MW_KERNELS_CUDA_GEMM_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>

extern "C" {
#include "common/status.h"
#include "kernels/kernels.h"
}
#include "kernels/cuda/runtime.cuh"

/* Row-major GEMM on k's stream: C (M,N) = alpha op(A) op(B) + beta C, where
 * op(A) is (M,K) and op(B) is (K,N); ta/tb say whether A/B are stored
 * transposed; lda/ldb/ldc are row strides. half (mw_cuda_half): A and B hold bfloat16 or
 * float16 values, multiplied with cuBLAS' CUBLAS_COMPUTE_32F_FAST_16BF or _16F, 16-bit tensor
 * cores on those exact values with float32 sums. Returns MW_OK or MW_EDEVICE. */
mw_status mw_cuda_gemm_rm(mw_cuda_dev *d, int half, bool ta, bool tb, int M, int N, int K,
                          float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                          float *C, int ldc);

/* count row-major float32 GEMMs at once (cublasSgemmStridedBatched: float32, or TF32 tensor
 * cores under --tf32, the handle's math mode): product b is mw_cuda_gemm_rm's with A + b sa,
 * B + b sb and C + b sc (strides in floats); the products' C must not overlap. */
mw_status mw_cuda_gemm_rm_batched(mw_cuda_dev *d, bool ta, bool tb, int M, int N, int K,
                                  float alpha, const float *A, int lda, long long sa,
                                  const float *B, int ldb, long long sb, float beta, float *C,
                                  int ldc, long long sc, int count);

/* The column-major cuBLAS call that mw_cuda_gemm_rm makes (pure arithmetic,
 * split out so it can be checked on the host): C^T = op(B)^T op(A)^T. */
struct mw_cuda_gemm_cm {
    cublasOperation_t opa, opb;
    int m, n, k;
    const float *a;
    int lda;
    const float *b;
    int ldb;
    float *c;
    int ldc;
};
static inline mw_cuda_gemm_cm mw_cuda_gemm_rm_to_cm(bool ta, bool tb, int M, int N, int K,
                                                    const float *A, int lda, const float *B,
                                                    int ldb, float *C, int ldc)
{
    mw_cuda_gemm_cm g;
    g.opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    g.opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    g.m = N, g.n = M, g.k = K;
    g.a = B, g.lda = ldb;
    g.b = A, g.ldb = lda;
    g.c = C, g.ldc = ldc;
    return g;
}

/* Row-major D (N,O) = epilogue(x (N,I) w (I,O), b (O)) in one cuBLASLt call on d's stream:
 * epi CUBLASLT_EPILOGUE_BIAS (+ b), RELU_BIAS (max(x w + b, 0)), GELU_AUX_BIAS (gelu's tanh
 * form, x w + b kept in aux, (N,O) with O a multiple of 8), and the same without BIAS when b is
 * NULL; float32 sums (TF32 under --tf32), no workspace. *done false and MW_OK where cuBLASLt
 * offers no algorithm for it (the shape, the pointers' alignment): the caller computes it
 * unfused, and d->lt_unfused counts it. MW_EDEVICE on a failure. */
mw_status mw_cuda_gemm_lt(mw_cuda_dev *d, cublasLtEpilogue_t epi, float *D, float *aux,
                          const float *x, const float *w, const float *b, int N, int I, int O,
                          bool *done);

/* Release d's cuBLASLt choices and their descriptors (host objects; the context's close). */
void mw_cuda_lt_close(mw_cuda_dev *d);

/* sum[o] += sum over rows r < M of X[r*O + o] (X row-major (M,O)), with cuBLAS
 * gemv against the ones vector in fixed chunks: reproducible, no atomics. */
mw_status mw_cuda_colsum_add(mw_cuda_dev *d, float *sum, const float *X, size_t M, int O);
/* Y[r*O + o] = b[o] for r < M (row-major (M,O)). */
mw_status mw_cuda_bias_fill(mw_cuda_dev *d, float *Y, const float *b, size_t M, int O);

#endif

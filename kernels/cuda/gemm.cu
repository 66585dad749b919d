/* Matrix helpers the conv and dense twins share: row-major GEMM on cuBLAS
 * (which is column-major), reproducible column sums for bias gradients, and
 * the bias broadcast that starts a forward pass.
 *
 * Row-major (M,N) memory is column-major (N,M), so C = op(A) op(B) in row-major
 * is C^T = op(B)^T op(A)^T in column-major: swap the operands and M/N, keep the
 * transpose flags (mw_cuda_gemm_rm_to_cm in gemm.cuh). */
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/runtime.cuh"

mw_status mw_cuda_gemm_rm(mw_cuda_dev *d, int half, bool ta, bool tb, int M, int N, int K,
                          float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                          float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return MW_OK;
    if (K <= 0) { /* C = beta C; the callers only get here with beta = 1 */
        if (beta == 1.0f)
            return MW_OK;
        return mw_err(MW_EINTERNAL, "mw_cuda_gemm_rm: K = 0 with beta %g", (double)beta);
    }
    mw_cuda_gemm_cm g = mw_cuda_gemm_rm_to_cm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
    if (half) /* the operands hold 16-bit values: the conversion cuBLAS makes is exact */
        return MW_CUBLAS(cublasGemmEx(d->blas, g.opa, g.opb, g.m, g.n, g.k, &alpha, g.a, CUDA_R_32F,
                                      g.lda, g.b, CUDA_R_32F, g.ldb, &beta, g.c, CUDA_R_32F, g.ldc,
                                      half == MW_HALF_F16 ? CUBLAS_COMPUTE_32F_FAST_16F
                                                          : CUBLAS_COMPUTE_32F_FAST_16BF,
                                      CUBLAS_GEMM_DEFAULT));
    return MW_CUBLAS(cublasSgemm(d->blas, g.opa, g.opb, g.m, g.n, g.k, &alpha, g.a, g.lda, g.b,
                                 g.ldb, &beta, g.c, g.ldc));
}

mw_status mw_cuda_gemm_rm_batched(mw_cuda_dev *d, bool ta, bool tb, int M, int N, int K,
                                  float alpha, const float *A, int lda, long long sa,
                                  const float *B, int ldb, long long sb, float beta, float *C,
                                  int ldc, long long sc, int count)
{
    if (M <= 0 || N <= 0 || count <= 0)
        return MW_OK;
    if (K <= 0) /* C = beta C: as mw_cuda_gemm_rm */
        return beta == 1.0f ? MW_OK
                            : mw_err(MW_EINTERNAL, "mw_cuda_gemm_rm_batched: K = 0 with beta %g",
                                     (double)beta);
    mw_cuda_gemm_cm g = mw_cuda_gemm_rm_to_cm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
    /* the operands swap (C^T = op(B)^T op(A)^T): so do their strides */
    return MW_CUBLAS(cublasSgemmStridedBatched(d->blas, g.opa, g.opb, g.m, g.n, g.k, &alpha, g.a,
                                               g.lda, sb, g.b, g.ldb, sa, &beta, g.c, g.ldc, sc,
                                               count));
}

mw_status mw_cuda_colsum_add(mw_cuda_dev *d, float *sum, const float *X, size_t M, int O)
{
    const float one = 1.0f;
    /* Row-major X (rows, O) is column-major (O, rows) with ld O: sum += X^T_cm * ones. */
    for (size_t r0 = 0; r0 < M; r0 += MW_CUDA_ONES_COUNT) {
        size_t rows = M - r0 < MW_CUDA_ONES_COUNT ? M - r0 : MW_CUDA_ONES_COUNT;
        MW_TRY(MW_CUBLAS(cublasSgemv(d->blas, CUBLAS_OP_N, O, (int)rows, &one, X + r0 * O, O,
                                     d->ones, 1, &one, sum, 1)));
    }
    return MW_OK;
}

static __global__ void bias_fill_kernel(float *y, const float *b, size_t count, int O)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = b[i % (size_t)O];
}

mw_status mw_cuda_bias_fill(mw_cuda_dev *d, float *Y, const float *b, size_t M, int O)
{
    size_t count = M * (size_t)O;
    if (count == 0)
        return MW_OK;
    bias_fill_kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(Y, b, count, O);
    return mw_cuda_launched_("bias_fill_kernel", __FILE__, __LINE__);
}

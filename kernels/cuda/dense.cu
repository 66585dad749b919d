/* CUDA Dense: y = x W + b and its gradients, all on cuBLAS, and with its activation on
 * cuBLASLt (see kernel_list.h for the contracts; x (N,I), W (I,O), row-major like the
 * reference). */
#include <math.h>

#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}

extern "C" void mw_dense_fwd_cuda(const mw_kctx *k, float *y, const float *x, const float *w,
                                  const float *b, int N, int I, int O)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_dense_fwd_cuda");
    if (!d || N <= 0 || O <= 0)
        return;
    float beta = 0.0f;
    if (b) {
        MW_TRY_K(d, mw_cuda_bias_fill(d, y, b, (size_t)N, O));
        beta = 1.0f;
    }
    if (I > 0) {
        /* y (N,O) = x (N,I) w (I,O) + beta y */
        MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), false, false, N, O, I, 1.0f, x, I, w, O,
                                    beta, y, O));
    } else if (!b) {
        MW_CUDA_K(d, cudaMemsetAsync(y, 0, (size_t)N * O * sizeof(float), d->stream));
    }
    mw_cuda_end(d, "mw_dense_fwd_cuda");
}

/* Dense and its activation (kernel_list.h: dense_act_fwd). cuBLASLt computes the bias, and a
 * ReLU in place or the tanh GELU (keeping z as its auxiliary output), in the GEMM's epilogue: one
 * pass over the output instead of the bias fill, the GEMM's read and write of it, and the
 * activation's. Other activations take the bias from the epilogue and run their own kernel after
 * it; where cuBLASLt offers no algorithm (mw_cuda_gemm_lt) the two kernels run unfused. */
extern "C" void mw_dense_act_fwd_cuda(const mw_kctx *k, float *y, float *z, const float *x,
                                      const float *w, const float *b, int N, int I, int O,
                                      mw_act_kind kind, float alpha)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_dense_act_fwd_cuda");
    if (!d || N <= 0 || O <= 0)
        return;
    const size_t count = (size_t)N * O;
    bool done = false, act_done = false;
    if (!mw_cuda_half(k) && I > 0) {
        if (kind == MW_ACTK_RELU && alpha == INFINITY && y == z) {
            MW_TRY_K(d, mw_cuda_gemm_lt(d, b ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU,
                                        y, NULL, x, w, b, N, I, O, &done));
            act_done = done;
        } else if (kind == MW_ACTK_GELU_TANH && y != z && O % 8 == 0) {
            MW_TRY_K(d, mw_cuda_gemm_lt(
                            d, b ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX, y,
                            z, x, w, b, N, I, O, &done));
            act_done = done;
        } else if (b) {
            MW_TRY_K(d,
                     mw_cuda_gemm_lt(d, CUBLASLT_EPILOGUE_BIAS, z, NULL, x, w, b, N, I, O, &done));
        }
    }
    if (!done)
        mw_dense_fwd_cuda(k, z, x, w, b, N, I, O);
    if (!act_done) {
        if (kind == MW_ACTK_RELU)
            mw_relux_fwd_cuda(k, y, z, count, alpha, 0.0f, 0.0f);
        else
            mw_act_fwd_cuda(k, y, z, count, kind, alpha);
    }
    mw_cuda_end(d, "mw_dense_act_fwd_cuda");
}

extern "C" void mw_dense_bwd_cuda(const mw_kctx *k, float *dx, float *dw, float *db,
                                  const float *dy, const float *x, const float *w, int N, int I,
                                  int O)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_dense_bwd_cuda");
    if (!d || N <= 0 || O <= 0)
        return;
    if (db)
        MW_TRY_K(d, mw_cuda_colsum_add(d, db, dy, (size_t)N, O));
    if (I > 0) {
        /* dw (I,O) += x^T (I,N) dy (N,O) */
        MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), true, false, I, O, N, 1.0f, x, I, dy, O,
                                    1.0f, dw, O));
        /* dx (N,I) += dy (N,O) w^T (O,I) */
        if (dx)
            MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), false, true, N, I, O, 1.0f, dy, O, w, O,
                                        1.0f, dx, I));
    }
    mw_cuda_end(d, "mw_dense_bwd_cuda");
}

extern "C" void mw_dense_t_fwd_cuda(const mw_kctx *k, float *y, const float *x, const float *w,
                                    int N, int I, int O)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_dense_t_fwd_cuda");
    if (!d || N <= 0 || O <= 0)
        return;
    if (I > 0) {
        /* y (N,O) = x (N,I) w^T (I,O), w (O,I) */
        MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), false, true, N, O, I, 1.0f, x, I, w, I,
                                    0.0f, y, O));
    } else {
        MW_CUDA_K(d, cudaMemsetAsync(y, 0, (size_t)N * O * sizeof(float), d->stream));
    }
    mw_cuda_end(d, "mw_dense_t_fwd_cuda");
}

extern "C" void mw_dense_t_bwd_cuda(const mw_kctx *k, float *dx, float *dw, const float *dy,
                                    const float *x, const float *w, int N, int I, int O)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_dense_t_bwd_cuda");
    if (!d || N <= 0 || O <= 0 || I <= 0)
        return;
    /* dw (O,I) += dy^T (O,N) x (N,I) */
    MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), true, false, O, I, N, 1.0f, dy, O, x, I, 1.0f,
                                dw, I));
    /* dx (N,I) += dy (N,O) w (O,I) */
    if (dx)
        MW_TRY_K(d, mw_cuda_gemm_rm(d, mw_cuda_half(k), false, false, N, I, O, 1.0f, dy, O, w, I,
                                    1.0f, dx, I));
    mw_cuda_end(d, "mw_dense_t_bwd_cuda");
}

/* Matrix helpers the conv and dense twins share: row-major GEMM on cuBLAS
 * (which is column-major), reproducible column sums for bias gradients, and
 * the bias broadcast that starts a forward pass; and one GEMM with its epilogue (the bias, and
 * ReLU or GELU after it) on cuBLASLt.
 *
 * Row-major (M,N) memory is column-major (N,M), so C = op(A) op(B) in row-major
 * is C^T = op(B)^T op(A)^T in column-major: swap the operands and M/N, keep the
 * transpose flags (mw_cuda_gemm_rm_to_cm in gemm.cuh). */
#include <stdint.h>
#include <stdlib.h>

extern "C" {
#include "common/log.h"
}
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

/* ---- cuBLASLt: one GEMM and its epilogue ---- */

/* One shape's choice, kept per context: the heuristic takes tens of microseconds, and a step
 * asks for the same few shapes every time. The key holds the operands' common alignment, which
 * the heuristic reads from the pointers (cublasLt.h), and the math (TF32 or not). Its
 * descriptors are kept too (host objects: a call then sets only the bias and auxiliary
 * pointers), released when the entry is replaced or the context closes. */
typedef struct {
    int m, n, k, epi, align, tf32;
    int usable; /* 0: cuBLASLt offered no algorithm; the caller runs the unfused kernels */
    cublasLtMatmulAlgo_t algo;
    cublasLtMatmulDesc_t op; /* NULL until made */
    cublasLtMatrixLayout_t la, lb, lc;
} lt_choice;

#define LT_CHOICES 64
typedef struct {
    lt_choice c[LT_CHOICES];
    int count, next; /* next: the entry a new shape replaces once all are used */
} lt_cache;

/* The largest power of 2 (at most 256) dividing every address in bits. */
static unsigned lt_align(uintptr_t bits)
{
    bits |= 256;
    return (unsigned)(bits & (~bits + 1));
}

/* cuBLASLt's status where it declines a problem (the shape, alignment or epilogue): the caller
 * then runs unfused, not an error. */
static bool lt_declined(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE;
}

static const char *lt_epilogue_name(int epi)
{
    switch (epi) {
    case CUBLASLT_EPILOGUE_BIAS:
        return "BIAS";
    case CUBLASLT_EPILOGUE_RELU:
        return "RELU";
    case CUBLASLT_EPILOGUE_RELU_BIAS:
        return "RELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX:
        return "GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
        return "GELU_AUX_BIAS";
    default:
        return "another";
    }
}

static void lt_release(lt_choice *e)
{
    if (e->lc)
        cublasLtMatrixLayoutDestroy(e->lc);
    if (e->lb)
        cublasLtMatrixLayoutDestroy(e->lb);
    if (e->la)
        cublasLtMatrixLayoutDestroy(e->la);
    if (e->op)
        cublasLtMatmulDescDestroy(e->op);
    e->op = NULL, e->la = e->lb = e->lc = NULL;
}

void mw_cuda_lt_close(mw_cuda_dev *d)
{
    lt_cache *c = (lt_cache *)d->lt_cache;
    for (int i = 0; c && i < c->count; i++)
        lt_release(&c->c[i]);
    free(c);
    d->lt_cache = NULL;
}

static lt_choice *lt_find(mw_cuda_dev *d, const lt_choice *key, bool *fresh)
{
    lt_cache *c = (lt_cache *)d->lt_cache;
    if (!c && !(c = (lt_cache *)calloc(1, sizeof *c)))
        return NULL;
    d->lt_cache = c;
    for (int i = 0; i < c->count; i++) {
        const lt_choice *e = &c->c[i];
        if (e->m == key->m && e->n == key->n && e->k == key->k && e->epi == key->epi &&
            e->align == key->align && e->tf32 == key->tf32) {
            *fresh = false;
            return &c->c[i];
        }
    }
    int i = c->count < LT_CHOICES ? c->count++ : c->next++ % LT_CHOICES;
    lt_release(&c->c[i]);
    c->c[i] = *key;
    *fresh = true;
    return &c->c[i];
}

/* The heuristic's best algorithm for op on these layouts, with no workspace (so no split-K
 * reduction: the same sums every run) and the operands' real alignment. */
static mw_status lt_choose(mw_cuda_dev *d, lt_choice *e, cublasLtMatmulDesc_t op,
                           cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                           cublasLtMatrixLayout_t lc)
{
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t s = cublasLtMatmulPreferenceCreate(&pref);
    const uint64_t room = 0;
    const uint32_t align = (uint32_t)e->align;
    const cublasLtMatmulPreferenceAttributes_t at[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &room, sizeof room);
    for (size_t i = 0; i < sizeof at / sizeof *at && s == CUBLAS_STATUS_SUCCESS; i++)
        s = cublasLtMatmulPreferenceSetAttribute(pref, at[i], &align, sizeof align);
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(d->lt, op, la, lb, lc, lc, pref, 1, &r, &found);
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    e->usable = s == CUBLAS_STATUS_SUCCESS && found > 0 && r.state == CUBLAS_STATUS_SUCCESS;
    if (e->usable)
        e->algo = r.algo;
    else if (s == CUBLAS_STATUS_SUCCESS || lt_declined(s)) /* said once per shape and context */
        mw_log_info("CUDA device %d: cuBLASLt has no algorithm for Dense %d -> %d on %d rows with "
                    "epilogue %s (operands %d-byte aligned): the bias and the activation run "
                    "unfused",
                    d->device, e->k, e->m, e->n, lt_epilogue_name(e->epi), e->align);
    /* not a refusal: a failure (allocation, a bad handle) */
    return lt_declined(s) ? MW_OK
                          : mw_cublas_check_(s, "cuBLASLt's heuristic query", __FILE__, __LINE__);
}

mw_status mw_cuda_gemm_lt(mw_cuda_dev *d, cublasLtEpilogue_t epi, float *D, float *aux,
                          const float *x, const float *w, const float *b, int N, int I, int O,
                          bool *done)
{
    *done = false;
    if (!d->lt || N <= 0 || O <= 0 || I <= 0)
        return MW_OK;
    /* Row-major D (N,O) is column-major (O,N): D^T = w^T x^T, where row-major w (I,O) is
     * column-major (O,I) and x (N,I) is (I,N); the bias runs along D^T's rows, as cuBLASLt's. */
    const uintptr_t bits =
        (uintptr_t)D | (uintptr_t)aux | (uintptr_t)x | (uintptr_t)w | (uintptr_t)b;
    const lt_choice key = {O,    N,    I,    (int)epi, (int)lt_align(bits), d->tf32, 0, {},
                           NULL, NULL, NULL, NULL};
    const char *call = "cuBLASLt's descriptors";
    bool fresh = false;
    lt_choice *e = lt_find(d, &key, &fresh);
    if (!e)
        return mw_err(MW_ENOMEM, "cuBLASLt choices: out of host memory");
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (!e->op) { /* a new shape: its descriptors, kept with its choice */
        s = cublasLtMatmulDescCreate(
            &e->op, d->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                               sizeof epi);
        if (s == CUBLAS_STATUS_SUCCESS && aux) {
            const int64_t ld = O;
            s = cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                               sizeof ld);
        }
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatrixLayoutCreate(&e->la, CUDA_R_32F, O, I, O);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatrixLayoutCreate(&e->lb, CUDA_R_32F, I, N, I);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatrixLayoutCreate(&e->lc, CUDA_R_32F, O, N, O);
        if (s != CUBLAS_STATUS_SUCCESS) { /* asked again next time */
            lt_release(e);
            e->m = -1;
        }
    }
    /* the call's own pointers (the alignment they share is the key's) */
    if (s == CUBLAS_STATUS_SUCCESS && b)
        s = cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b);
    if (s == CUBLAS_STATUS_SUCCESS && aux)
        s = cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                           sizeof aux);
    mw_status rc = MW_OK;
    if (s == CUBLAS_STATUS_SUCCESS) {
        if (fresh)
            rc = lt_choose(d, e, e->op, e->la, e->lb, e->lc);
        if (rc == MW_OK && e->usable) {
            const float one = 1.0f, zero = 0.0f;
            call = "cublasLtMatmul";
            s = cublasLtMatmul(d->lt, e->op, &one, w, e->la, x, e->lb, &zero, D, e->lc, D, e->lc,
                               &e->algo, NULL, 0, d->stream);
            if (s == CUBLAS_STATUS_SUCCESS)
                *done = true;
            else if (lt_declined(s))
                e->usable = 0;
        }
    }
    if (rc == MW_OK && !lt_declined(s))
        rc = mw_cublas_check_(s, call, __FILE__, __LINE__);
    if (rc == MW_OK && !*done)
        d->lt_unfused++;
    return rc;
}

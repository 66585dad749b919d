/* Internal to kernels/cuda: the backend state behind mw_kctx.dev, the check
 * macros that turn CUDA and cuBLAS codes into mw_err(MW_EDEVICE, ...), launch
 * helpers, and the row-major GEMM / column-sum / bias helpers the conv and
 * dense twins share. Included only by the .cu files (CUDA types are fine here,
 * never in kernels/cuda/cuda.h). */
#ifndef MW_KERNELS_CUDA_DEV_CUH
#define MW_KERNELS_CUDA_DEV_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>

extern "C" {
#include "common/status.h"
#include "kernels/kernels.h"
}
#include "kernels/cuda/cuda.h"

/* Length of the all-ones vector column sums use (rows are summed in chunks of
 * this many, always in the same order, so the result is reproducible). */
#define MW_CUDA_ONES_COUNT (1 << 16)

/* What k->dev points at. */
struct mw_cuda_dev {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;              /* bound to stream */
    float *ones;                      /* MW_CUDA_ONES_COUNT ones, device */
    int sync_each;                    /* MW_CUDA_SYNC=1: wait after every kernel */
    void *dnn;                        /* cudnnHandle_t on stream (NULL: no cuDNN) */
    bool tf32;                        /* --tf32: tensor-core math allowed (mw_cuda_set_tf32) */
    cudaEvent_t marks[MW_CUDA_MARKS]; /* mw_cuda_mark */
    int marked[MW_CUDA_MARKS];        /* recorded at least once */
    cudaStream_t copy;                /* the copy stream (mw_cuda_upload_copy) */
    cudaEvent_t copy_marks[MW_CUDA_COPY_MARKS]; /* mw_cuda_copy_mark */
    int copy_marked[MW_CUDA_COPY_MARKS];
    cudaEvent_t idle; /* recorded by mw_cuda_wait_idle_ behind a stream's work */
    double timeout;   /* seconds a host wait may take (mw_cuda_set_timeout; 0: forever) */
    void *dnn_cache;  /* cudnn.cu's choices per convolution shape (NULL: none yet) */
    mw_status status; /* first failure on this context */
};

/* Wait on the host until stream s of d has done all it was given: an event behind its work,
 * polled (never blocking in CUDA) under d->timeout. Past it MW_ETIMEOUT "collective timeout:
 * <what> waited S s for CUDA device D (--collective-timeout T)", recorded on d: a device that
 * hangs ends the job instead of the host thread. */
mw_status mw_cuda_wait_idle_(mw_cuda_dev *d, cudaStream_t s, const char *what);
/* The polled wait for event e itself (recorded on one of d's streams). */
mw_status mw_cuda_wait_event_(mw_cuda_dev *d, cudaEvent_t e, double timeout, const char *what);

/* Translate a code into mw_err(MW_EDEVICE, "file:line: cudaXxx: reason");
 * return MW_OK or MW_EDEVICE. */
mw_status mw_cuda_check_(cudaError_t e, const char *call, const char *file, int line);
mw_status mw_cublas_check_(cublasStatus_t s, const char *call, const char *file, int line);
/* After a <<<>>> launch: cudaGetLastError, reported as "file:line: name<<<>>>: reason". */
mw_status mw_cuda_launched_(const char *name, const char *file, int line);

#define MW_CUDA(call) mw_cuda_check_((call), #call, __FILE__, __LINE__)
#define MW_CUBLAS(call) mw_cublas_check_((call), #call, __FILE__, __LINE__)

/* The state behind k with its device made current, or NULL when the op must
 * not run: k is not an open CUDA context (an error is recorded), or the
 * context already failed (nothing new is recorded). op names the kernel. */
mw_cuda_dev *mw_cuda_begin(const mw_kctx *k, const char *op);
/* Record rc as the context's failure if it is the first; return rc == MW_OK. */
bool mw_cuda_note(mw_cuda_dev *d, mw_status rc);
/* End of a kernel wrapper: with MW_CUDA_SYNC=1, wait and name op on failure. */
void mw_cuda_end(mw_cuda_dev *d, const char *op);

/* Inside a void kernel wrapper: record a failure on the context and return. */
#define MW_CUDA_K(d, call)                                                                         \
    do {                                                                                           \
        if (!mw_cuda_note((d), MW_CUDA(call)))                                                     \
            return;                                                                                \
    } while (0)
#define MW_CUBLAS_K(d, call)                                                                       \
    do {                                                                                           \
        if (!mw_cuda_note((d), MW_CUBLAS(call)))                                                   \
            return;                                                                                \
    } while (0)
#define MW_LAUNCHED_K(d, name)                                                                     \
    do {                                                                                           \
        if (!mw_cuda_note((d), mw_cuda_launched_((name), __FILE__, __LINE__)))                     \
            return;                                                                                \
    } while (0)
#define MW_TRY_K(d, expr)                                                                          \
    do {                                                                                           \
        if (!mw_cuda_note((d), (expr)))                                                            \
            return;                                                                                \
    } while (0)

/* Threads per block for element-wise kernels, and the grid for count items
 * with grid-stride loops (capped; count > 0). */
#define MW_CUDA_BLOCK 256
static inline unsigned mw_cuda_grid(size_t count)
{
    size_t g = (count + MW_CUDA_BLOCK - 1) / MW_CUDA_BLOCK;
    return (unsigned)(g < 65536 ? g : 65536);
}

/* Conv2D through cuDNN (cudnn.cu): the forward is true when the op was taken (enqueued, or
 * its failure recorded on d), false when cuDNN is absent, cannot take this shape within k's
 * scratch, or refused every candidate: then the caller runs im2col. Same contract as the
 * kernels. */
bool mw_cudnn_conv_fwd(mw_cuda_dev *d, const mw_kctx *k, float *y, const float *x, const float *w,
                       const float *b, const mw_conv2d_geom *g, int N);
/* The backward pass: done by cuDNN; im2col's entirely (nothing was enqueued but scratch
 * work); or im2col's for dw alone (cuDNN added dx, its filter pass had no candidate left). */
typedef enum { MW_CUDNN_DONE, MW_CUDNN_IM2COL, MW_CUDNN_IM2COL_DW } mw_cudnn_bwd_result;
mw_cudnn_bwd_result mw_cudnn_conv_bwd(mw_cuda_dev *d, const mw_kctx *k, float *dx, float *dw,
                                      const float *dy, const float *x, const float *w,
                                      const mw_conv2d_geom *g, int N);
/* d's cuDNN handle on its stream (d->dnn; none without cuDNN), and its release. */
mw_status mw_cudnn_open(mw_cuda_dev *d);
void mw_cudnn_close(mw_cuda_dev *d);

/* What a layer's matrix operands hold (mw_cuda_half of its context): float32, or bfloat16 or
 * float16 values (mixed precision, kernels/cast.h). */
enum { MW_HALF_NONE = 0, MW_HALF_BF16 = 1, MW_HALF_F16 = 2 };
static inline int mw_cuda_half(const mw_kctx *k)
{
    return k->bf16 ? MW_HALF_BF16 : k->f16 ? MW_HALF_F16 : MW_HALF_NONE;
}

/* Row-major GEMM on k's stream: C (M,N) = alpha op(A) op(B) + beta C, where
 * op(A) is (M,K) and op(B) is (K,N); ta/tb say whether A/B are stored
 * transposed; lda/ldb/ldc are row strides. half (mw_cuda_half): A and B hold bfloat16 or
 * float16 values, multiplied with cuBLAS' CUBLAS_COMPUTE_32F_FAST_16BF or _16F, 16-bit tensor
 * cores on those exact values with float32 sums. Returns MW_OK or MW_EDEVICE. */
mw_status mw_cuda_gemm_rm(mw_cuda_dev *d, int half, bool ta, bool tb, int M, int N, int K,
                          float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                          float *C, int ldc);

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

/* sum[o] += sum over rows r < M of X[r*O + o] (X row-major (M,O)), with cuBLAS
 * gemv against the ones vector in fixed chunks: reproducible, no atomics. */
mw_status mw_cuda_colsum_add(mw_cuda_dev *d, float *sum, const float *X, size_t M, int O);
/* Y[r*O + o] = b[o] for r < M (row-major (M,O)). */
mw_status mw_cuda_bias_fill(mw_cuda_dev *d, float *Y, const float *b, size_t M, int O);

/* == common/rng.c's mw_rng_hash(seed, stream, counter), on the device: a dropout mask keyed by
 * global example id must equal the host's bit for bit. */
__device__ static inline uint64_t mw_cuda_splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
__device__ static inline uint64_t mw_cuda_rng_hash(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return mw_cuda_splitmix64(mw_cuda_splitmix64(mw_cuda_splitmix64(seed) ^ stream) ^ counter);
}

/* A grid-stride loop over [0, count): one thread per element. */
#define MW_GRID_STRIDE(i, count)                                                                   \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (count);                    \
         i += (size_t)gridDim.x * blockDim.x)

/* Inside a void wrapper with k in scope: enqueue an element-wise kernel over count items. */
#define MW_EW_LAUNCH(op, kernel, count, ...)                                                       \
    do {                                                                                           \
        mw_cuda_dev *d = mw_cuda_begin(k, op);                                                     \
        if (!d || (count) == 0)                                                                    \
            return;                                                                                \
        kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, d->stream>>>(__VA_ARGS__);                 \
        MW_LAUNCHED_K(d, #kernel);                                                                 \
        mw_cuda_end(d, op);                                                                        \
    } while (0)

#endif

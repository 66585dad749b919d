/* The CUDA runtime's side for the .cu files (runtime.cu): the state behind mw_kctx.dev, the check
 * macros that turn CUDA and cuBLAS codes into mw_err(MW_EDEVICE, ...) and record them on the
 * context, the polled waits, and the begin/end of every kernel wrapper. */
#ifndef MW_KERNELS_CUDA_RUNTIME_CUH
#define MW_KERNELS_CUDA_RUNTIME_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>

extern "C" {
#include "common/status.h"
#include "kernels/kernels.h"
}
#include "kernels/cuda/dev.cuh"
#include "kernels/cuda/runtime.h"

/* Length of the all-ones vector column sums use (rows are summed in chunks of
 * this many, always in the same order, so the result is reproducible). */
#define MW_CUDA_ONES_COUNT (1 << 16)
/* Bytes of cuBLAS' workspace (context.cu sets it): what NVIDIA advises for Hopper, more than
 * earlier GPUs use. */
#define MW_CUDA_BLAS_WS ((size_t)32 << 20)

/* What k->dev points at. */
struct mw_cuda_dev {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;              /* bound to stream */
    void *blas_ws;                    /* its workspace, MW_CUDA_BLAS_WS bytes */
    float *ones;                      /* MW_CUDA_ONES_COUNT ones, device */
    int sync_each;                    /* MW_CUDA_SYNC=1: wait after every kernel */
    void *dnn;                        /* cudnnHandle_t on stream (NULL: no cuDNN) */
    bool tf32;                        /* --tf32: tensor-core math allowed (mw_cuda_set_tf32) */
    cudaEvent_t marks[MW_CUDA_MARKS]; /* mw_cuda_mark */
    int marked[MW_CUDA_MARKS];        /* recorded at least once */
    cudaStream_t copy;                /* the copy stream (mw_cuda_upload_copy) */
    cudaEvent_t copy_marks[MW_CUDA_COPY_MARKS]; /* mw_cuda_copy_mark */
    int copy_marked[MW_CUDA_COPY_MARKS];
    cudaStream_t reduce;    /* the all-reduce stream (mw_cuda_reduce_stream) */
    cudaEvent_t to_reduce;  /* recorded on stream, waited for by reduce */
    cudaEvent_t to_compute; /* recorded on reduce, waited for by stream */
    cudaEvent_t idle;       /* recorded by mw_cuda_wait_idle_ behind a stream's work */
    double timeout;         /* seconds a host wait may take (mw_cuda_set_timeout; 0: forever) */
    cudaEvent_t progress[MW_CUDA_PROGRESS]; /* ring of progress marks on stream */
    long prog_issued, prog_done;            /* recorded, and seen passed (mw_cuda_progress_) */
    unsigned long prog_calls;               /* mw_cuda_end calls, for MW_CUDA_PROGRESS_EVERY */
    void *dnn_cache;     /* cudnn.cu's choices per convolution shape (NULL: none yet) */
    cublasLtHandle_t lt; /* cuBLASLt, for the GEMMs with an epilogue (gemm.cu: mw_cuda_gemm_lt) */
    void *lt_cache;      /* gemm.cu's cuBLASLt choices per shape (NULL: none yet) */
    long lt_unfused;     /* epilogue GEMMs cuBLASLt offered no algorithm for, run unfused */
    uint64_t *seed_dev;  /* the step's dropout seed on the device (graph.cu: mw_cuda_step_seed) */
    uint64_t seed_host;  /* the value last written there */
    bool seed_set;       /* seed_dev holds seed_host (in stream order) */
    bool capturing;      /* between mw_cuda_capture_begin and _end: nothing enqueued runs */
    bool msg_before;     /* an error message was recorded before the capture began */
    mw_status status;    /* first failure on this context */
};

/* Where a dropout or attention kernel reads its seed: d's device word when the wrapper was given
 * the step's seed (mw_cuda_step_seed), so a CUDA graph replayed in a later step draws that step's
 * masks; NULL (the seed passed by value) for any other seed. */
static inline const uint64_t *mw_cuda_seed_at(const mw_cuda_dev *d, uint64_t seed)
{
    return d->seed_set && seed == d->seed_host ? d->seed_dev : NULL;
}

/* Wait on the host until stream s of d has done all it was given: an event behind its work,
 * polled (never blocking in CUDA) under d->timeout, counted from d's last progress. Past it
 * MW_ETIMEOUT "collective timeout: <what> waited S s for CUDA device D, I s since it last
 * finished a kernel (--collective-timeout T)", recorded on d: a device that hangs ends the job
 * instead of the host thread. */
mw_status mw_cuda_wait_idle_(mw_cuda_dev *d, cudaStream_t s, const char *what);
/* The polled wait for event e itself (recorded on one of d's streams). */
mw_status mw_cuda_wait_event_(mw_cuda_dev *d, cudaEvent_t e, double timeout, const char *what);
/* mw_cuda_progress on d: the progress marks of d's compute stream seen passed (queried now). */
long mw_cuda_progress_(mw_cuda_dev *d);

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
/* End of a kernel wrapper: every MW_CUDA_PROGRESS_EVERY-th call a progress mark behind the
 * kernel (runtime.h's mw_cuda_progress; none while capturing: a graph's launch records one);
 * with MW_CUDA_SYNC=1, wait and name op on failure. */
void mw_cuda_end(mw_cuda_dev *d, const char *op);
/* A progress mark behind what d's compute stream has so far. */
void mw_cuda_progress_mark_(mw_cuda_dev *d);

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

/* Inside a void wrapper holding d: enqueue a grid-stride kernel over count items on d's stream
 * (nothing when count is 0), a failed launch recorded on d and the wrapper returning. */
#define MW_LAUNCH_K(d, kernel, count, ...)                                                         \
    do {                                                                                           \
        if ((count) > 0) {                                                                         \
            kernel<<<mw_cuda_grid(count), MW_CUDA_BLOCK, 0, (d)->stream>>>(__VA_ARGS__);           \
            MW_LAUNCHED_K(d, #kernel);                                                             \
        }                                                                                          \
    } while (0)

/* Inside a void wrapper with k in scope: enqueue an element-wise kernel over count items. */
#define MW_EW_LAUNCH(op, kernel, count, ...)                                                       \
    do {                                                                                           \
        mw_cuda_dev *d = mw_cuda_begin(k, op);                                                     \
        if (!d || (count) == 0)                                                                    \
            return;                                                                                \
        MW_LAUNCH_K(d, kernel, count, __VA_ARGS__);                                                \
        mw_cuda_end(d, op);                                                                        \
    } while (0)

#endif

/* Opening and closing a CUDA context: the stream pair, cuBLAS and cuDNN handles, the ones
 * vector, marks and device scratch behind mw_kctx.dev. Above runtime.cu and cudnn.cu, which it
 * calls and which never call back, so the files' calls point one way. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cudnn.cuh"
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/cuda/context.h"
}

static __global__ void fill_kernel(float *p, size_t count, float v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

extern "C" void mw_cuda_ctx_close(mw_kctx *k)
{
    if (!k)
        return;
    mw_cuda_dev *d = (mw_cuda_dev *)k->dev;
    if (d) {
        /* Best effort: report failures but release everything regardless. */
        if (cudaSetDevice(d->device) == cudaSuccess) {
            /* a device that does not finish in time is left as it is: freeing memory it may
             * still use would block, and the process is about to end the job anyway */
            if ((d->stream && mw_cuda_wait_idle_(d, d->stream, "closing the context") != MW_OK) ||
                (d->copy && mw_cuda_wait_idle_(d, d->copy, "closing the context") != MW_OK) ||
                (d->reduce && mw_cuda_wait_idle_(d, d->reduce, "closing the context") != MW_OK)) {
                mw_cuda_lt_close(d); /* host memory only */
                free(d);
                memset(k, 0, sizeof *k);
                return;
            }
            if (d->blas)
                MW_CUBLAS(cublasDestroy(d->blas));
            if (d->lt)
                MW_CUBLAS(cublasLtDestroy(d->lt));
            mw_cuda_lt_close(d);
            mw_cudnn_close(d);
            MW_CUDA(cudaFree(d->ones));
            MW_CUDA(cudaFree(d->seed_dev));
            MW_CUDA(cudaFree(d->blas_ws));
            MW_CUDA(cudaFree(k->ws));
            for (int i = 0; i < MW_CUDA_MARKS; i++)
                if (d->marks[i])
                    MW_CUDA(cudaEventDestroy(d->marks[i]));
            for (int i = 0; i < MW_CUDA_COPY_MARKS; i++)
                if (d->copy_marks[i])
                    MW_CUDA(cudaEventDestroy(d->copy_marks[i]));
            for (int i = 0; i < MW_CUDA_PROGRESS; i++)
                if (d->progress[i])
                    MW_CUDA(cudaEventDestroy(d->progress[i]));
            cudaEvent_t evs[] = {d->idle, d->to_reduce, d->to_compute};
            for (size_t i = 0; i < sizeof evs / sizeof *evs; i++)
                if (evs[i])
                    MW_CUDA(cudaEventDestroy(evs[i]));
            if (d->reduce)
                MW_CUDA(cudaStreamDestroy(d->reduce));
            if (d->copy)
                MW_CUDA(cudaStreamDestroy(d->copy));
            if (d->stream)
                MW_CUDA(cudaStreamDestroy(d->stream));
        }
        free(d);
    }
    memset(k, 0, sizeof *k);
}

extern "C" mw_status mw_cuda_ctx_open(mw_kctx *k, int device)
{
    memset(k, 0, sizeof *k);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return mw_err(MW_EDEVICE, "no usable CUDA device: cudaGetDeviceCount: %s",
                      cudaGetErrorString(e));
    }
    if (n == 0)
        return mw_err(MW_EDEVICE, "no CUDA device found");
    if (device < 0 || device >= n)
        return mw_err(MW_EDEVICE, "CUDA device %d: only %d device%s (0..%d)", device, n,
                      n == 1 ? "" : "s", n - 1);

    mw_cuda_dev *d = (mw_cuda_dev *)calloc(1, sizeof *d);
    if (!d)
        return mw_err(MW_ENOMEM, "CUDA context: out of host memory");
    d->device = device;
    d->status = MW_OK;
    const char *env = getenv("MW_CUDA_SYNC");
    d->sync_each = env && *env && strcmp(env, "0") != 0;
    k->dev = d;
    k->nthreads = 1;

    mw_status rc;
    MW_TRY_GOTO(MW_CUDA(cudaSetDevice(device)), rc, fail);
    MW_TRY_GOTO(MW_CUDA(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking)), rc, fail);
    MW_TRY_GOTO(MW_CUDA(cudaStreamCreateWithFlags(&d->copy, cudaStreamNonBlocking)), rc, fail);
    MW_TRY_GOTO(MW_CUDA(cudaStreamCreateWithFlags(&d->reduce, cudaStreamNonBlocking)), rc, fail);
    MW_TRY_GOTO(MW_CUBLAS(cublasCreate(&d->blas)), rc, fail);
    MW_TRY_GOTO(MW_CUBLAS(cublasSetStream(d->blas, d->stream)), rc, fail);
    /* Plain FP32 (no TF32 tensor cores): results stay within float rounding
     * of the reference, and cuBLAS stays bitwise reproducible run to run. */
    MW_TRY_GOTO(MW_CUBLAS(cublasSetMathMode(d->blas, CUBLAS_DEFAULT_MATH)), rc, fail);
    /* cuBLAS' workspace is ours, set once (after cublasSetStream, which resets it): cuBLAS then
     * never allocates one in a step, which a captured graph (--cuda-graphs) could not hold */
    MW_TRY_GOTO(MW_CUDA(cudaMalloc(&d->blas_ws, MW_CUDA_BLAS_WS)), rc, fail);
    MW_TRY_GOTO(MW_CUBLAS(cublasSetWorkspace(d->blas, d->blas_ws, MW_CUDA_BLAS_WS)), rc, fail);
    MW_TRY_GOTO(MW_CUBLAS(cublasLtCreate(&d->lt)), rc, fail);
    MW_TRY_GOTO(MW_CUDA(cudaMalloc((void **)&d->ones, MW_CUDA_ONES_COUNT * sizeof(float))), rc,
                fail);
    fill_kernel<<<mw_cuda_grid(MW_CUDA_ONES_COUNT), MW_CUDA_BLOCK, 0, d->stream>>>(
        d->ones, MW_CUDA_ONES_COUNT, 1.0f);
    MW_TRY_GOTO(mw_cuda_launched_("fill_kernel", __FILE__, __LINE__), rc, fail);
    MW_TRY_GOTO(MW_CUDA(cudaMalloc((void **)&k->ws, MW_CUDA_WS_DEFAULT * sizeof(float))), rc, fail);
    MW_TRY_GOTO(MW_CUDA(cudaMalloc((void **)&d->seed_dev, sizeof *d->seed_dev)), rc, fail);
    for (int i = 0; i < MW_CUDA_MARKS; i++)
        MW_TRY_GOTO(MW_CUDA(cudaEventCreateWithFlags(&d->marks[i], cudaEventDisableTiming)), rc,
                    fail);
    for (int i = 0; i < MW_CUDA_COPY_MARKS; i++)
        MW_TRY_GOTO(MW_CUDA(cudaEventCreateWithFlags(&d->copy_marks[i], cudaEventDisableTiming)),
                    rc, fail);
    for (int i = 0; i < MW_CUDA_PROGRESS; i++)
        MW_TRY_GOTO(MW_CUDA(cudaEventCreateWithFlags(&d->progress[i], cudaEventDisableTiming)), rc,
                    fail);
    MW_TRY_GOTO(MW_CUDA(cudaEventCreateWithFlags(&d->idle, cudaEventDisableTiming)), rc, fail);
    MW_TRY_GOTO(MW_CUDA(cudaEventCreateWithFlags(&d->to_reduce, cudaEventDisableTiming)), rc, fail);
    MW_TRY_GOTO(MW_CUDA(cudaEventCreateWithFlags(&d->to_compute, cudaEventDisableTiming)), rc,
                fail);
    MW_TRY_GOTO(mw_cudnn_open(d), rc, fail);
    k->ws_count = MW_CUDA_WS_DEFAULT;
    MW_TRY_GOTO(MW_CUDA(cudaStreamSynchronize(d->stream)), rc, fail); /* no timeout set yet */
    return MW_OK;
fail:
    mw_cuda_ctx_close(k);
    return rc;
}
